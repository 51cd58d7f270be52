package explain_test

import (
	"reflect"
	"testing"

	"github.com/strata-hpc/strata/internal/explain"
)

// TestPreparedWhy: one Prepared explains every job of the example as Job
// does, used from many goroutines at once.
func TestPreparedWhy(t *testing.T) {
	in := exampleInput(t)
	p := explain.Prepare(in)
	pending := 0
	done := make(chan struct{})
	for i := range in.Live.Jobs {
		j := &in.Live.Jobs[i]
		r, err := explain.Job(in, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Why != nil {
			pending++
		}
		go func() {
			defer func() { done <- struct{}{} }()
			if got := p.Why(j); !reflect.DeepEqual(got, r.Why) {
				t.Errorf("job %d: Prepared.Why = %+v, Job.Why = %+v", j.ID, got, r.Why)
			}
		}()
	}
	for range in.Live.Jobs {
		<-done
	}
	if pending == 0 {
		t.Fatal("the example has no pending job")
	}
}
