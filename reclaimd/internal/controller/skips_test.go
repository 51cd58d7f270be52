package controller_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// TestSkipsVisible: a job whose samples stop is not judged, and says so:
// counted by reason, explained by GET /v1/jobs/{id}/reclaim, and once the
// rule has judged nothing for a whole window, a log line names the rule
// and the reason.
func TestSkipsVisible(t *testing.T) {
	b := newBed(t, "26.05", requeueRules, 90) // busy: judged, no action
	srv := httptest.NewServer(b.ctl.Handler(time.Hour))
	defer srv.Close()
	b.mustTick()
	if v := counter(t, b.metrics.Skipped.WithLabelValues("busy")); v != 1 {
		t.Errorf("skipped{reason=busy} = %v, want 1", v)
	}
	// The agent stops sampling: after two intervals the samples are stale.
	for range 10 {
		b.setClock(b.clock().Add(10 * time.Second))
		if _, err := b.ctl.Cycle(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if v := counter(t, b.metrics.Skipped.WithLabelValues("stale_data")); v < 8 {
		t.Errorf("skipped{reason=stale_data} = %v, want 8 or more", v)
	}
	code, body := get(t, fmt.Sprintf("%s/v1/jobs/%d/reclaim", srv.URL, jobID))
	var jr controller.JobReclaim
	if err := json.Unmarshal([]byte(body), &jr); err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/jobs/1/reclaim = %d %s (%v)", code, body, err)
	}
	if jr.Skipped == nil || jr.Skipped.Reason != decide.SkipStaleData || jr.Skipped.Judged || !strings.Contains(jr.Skipped.Detail, "gpu1:0: no samples") {
		t.Errorf("skipped = %+v, want stale data, not judged, naming the GPU", jr.Skipped)
	}
	logs := b.logs.String()
	if !strings.Contains(logs, `msg="a rule has judged no job for a whole window" rule=test window=1m0s jobs=1 reason="stale data"`) {
		t.Errorf("no log line for the rule that judged nothing:\n%s", logs)
	}
	if n := strings.Count(logs, "a rule has judged no job"); n != 1 {
		t.Errorf("%d drought log lines in 100 s of a 1m window, want 1", n)
	}
	if code, body := get(t, srv.URL+"/metrics"); !strings.Contains(body, `strata_reclaim_skipped_total{reason="stale_data"}`) {
		t.Errorf("GET /metrics = %d, lacks the skip counter:\n%s", code, body)
	}
}
