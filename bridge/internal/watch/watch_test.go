package watch

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func job(id int64, state string, exit int, end time.Duration) slurmrest.Job {
	return slurmrest.Job{ID: id, State: slurmrest.JobState{state}, ExitCode: exit, EndTime: t0.Add(end)}
}

func ids(jobs []slurmrest.Job) []int64 {
	out := []int64{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func TestSelect(t *testing.T) {
	tests := map[string]struct {
		jobs    []slurmrest.Job
		settled map[int64]bool
		want    []int64
	}{
		"only completed with exit 0": {
			jobs: []slurmrest.Job{job(1, "COMPLETED", 0, 0), job(2, "FAILED", 1, 0), job(3, "RUNNING", 0, 0), job(4, "COMPLETED", 2, 0),
				job(5, "CANCELLED", 0, 0), job(6, "TIMEOUT", 0, 0), job(7, "PENDING", 0, 0)},
			want: []int64{1},
		},
		"settled jobs are not judged again": {
			jobs:    []slurmrest.Job{job(1, "COMPLETED", 0, 0), job(2, "COMPLETED", 0, time.Second)},
			settled: map[int64]bool{1: true},
			want:    []int64{2},
		},
		"oldest end first, then id": {
			jobs: []slurmrest.Job{job(9, "COMPLETED", 0, 2*time.Minute), job(8, "COMPLETED", 0, time.Minute), job(3, "COMPLETED", 0, 2*time.Minute),
				job(4, "COMPLETED", 0, 0)},
			want: []int64{4, 8, 3, 9},
		},
		"nothing": {jobs: nil, want: []int64{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ids(Select(tc.jobs, tc.settled))); diff != "" {
				t.Errorf("selected (-want +got):\n%s", diff)
			}
		})
	}
}

// slurmrestd at the edge: answers in turn, each a job list or an error;
// the since each call asked with is recorded.
type answers struct {
	replies []reply
	since   []time.Time
}

type reply struct {
	list slurmrest.JobList
	err  error
}

func (a *answers) Jobs(_ context.Context, since time.Time) (slurmrest.JobList, error) {
	a.since = append(a.since, since)
	r := a.replies[0]
	a.replies = a.replies[1:]
	return r.list, r.err
}

// watcher builds a watcher over a real store and deployer; the cluster is
// unreachable, which these cycles never reach: a job that asked nothing
// and a job whose account is not in serving.json are judged before
// anything touches it (the integration test deploys for real).
func watcher(t *testing.T, slurm Slurm) (*Watcher, *store.Store, *prometheus.Registry) {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "bridge.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	kube, err := deploy.NewKube(&rest.Config{Host: "https://127.0.0.1:1"}, "strata-bridge")
	if err != nil {
		t.Fatal(err)
	}
	serving := &servingquota.File{APIVersion: servingquota.APIVersion, Kind: servingquota.Kind, Tenants: []servingquota.Tenant{
		{Name: "acme", Namespace: "strata-acme", GPUs: 8, Replicas: 4, Projects: []servingquota.Project{{Name: "llm", Account: "acme-llm"}}}}}
	dep, err := deploy.New(deploy.Config{Kube: kube, Store: st, Serving: func() *servingquota.File { return serving }, HostRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	now := t0
	w, err := New(Config{Slurm: slurm, Deployer: dep, Store: st, Interval: time.Second, Metrics: m, Now: func() time.Time { now = now.Add(time.Second); return now }})
	if err != nil {
		t.Fatal(err)
	}
	return w, st, reg
}

// value reads one sample of a gathered metric: the one whose labels
// include the given name=value pairs.
func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// A cycle judges each new completed job once: one that asked nothing, one
// refused (its account is not in the policy); a failed slurmrestd skips
// the cycle and says so; an unchanged answer keeps the list and judges
// nothing again.
func TestPoll(t *testing.T) {
	ctx := t.Context()
	updated := t0.Add(-time.Minute)
	plain := slurmrest.Job{ID: 11, State: slurmrest.JobState{"COMPLETED"}, Account: "acme-llm", WorkDir: "/jobs/11"}
	stranger := slurmrest.Job{ID: 12, State: slurmrest.JobState{"COMPLETED"}, Account: "testbed", Comment: "strata:serve=llama", WorkDir: "/jobs/12"}
	failed := slurmrest.Job{ID: 13, State: slurmrest.JobState{"FAILED"}, ExitCode: 1, Comment: "strata:serve=llama", WorkDir: "/jobs/13"}
	later := slurmrest.Job{ID: 14, State: slurmrest.JobState{"COMPLETED"}, Account: "acme-llm", WorkDir: "/jobs/14"}
	slurm := &answers{replies: []reply{
		{list: slurmrest.JobList{Jobs: []slurmrest.Job{plain, stranger, failed}, Updated: updated}},
		{err: errors.New("slurmrestd: 502 Bad Gateway")},
		{list: slurmrest.JobList{Unchanged: true, Updated: updated}},
		{list: slurmrest.JobList{Jobs: []slurmrest.Job{plain, stranger, failed, later}, Updated: updated.Add(time.Second)}},
	}}
	w, st, reg := watcher(t, slurm)

	st1, err := w.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Status{At: t0.Add(time.Second), OK: true, Jobs: 3, Selected: 2}); st1 != want {
		t.Errorf("first poll = %+v, want %+v", st1, want)
	}
	for id, want := range map[int64]string{11: VerdictNotRequested, 12: VerdictRefused} {
		seen, err := st.Seen(ctx, id)
		if err != nil || seen.Outcome != want || !seen.Done {
			t.Errorf("job %d: verdict %+v, %v; want %s, settled", id, seen, err, want)
		}
	}
	if seen, _ := st.Seen(ctx, 12); !strings.Contains(seen.Message, `account "testbed" is not in serving.json`) {
		t.Errorf("job 12's verdict does not say why: %q", seen.Message)
	}
	if _, err := st.Seen(ctx, 13); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the failed job 13 was judged: %v", err)
	}

	st2, err := w.Poll(ctx)
	if err == nil || st2.OK || !strings.Contains(st2.Error, "502 Bad Gateway") {
		t.Errorf("poll with slurmrestd failing = %+v, %v; want a failed, skipped cycle", st2, err)
	}
	if got := value(t, reg, "strata_bridge_poll_errors_total"); got != 1 {
		t.Errorf("poll errors = %v, want 1", got)
	}
	if got := value(t, reg, "strata_bridge_last_poll_timestamp_seconds"); got != float64(t0.Add(time.Second).Unix()) {
		t.Errorf("last poll = %v, want the first poll's time (the failed one does not count)", got)
	}

	st3, err := w.Poll(ctx)
	if err != nil || st3.Jobs != 3 || st3.Selected != 0 {
		t.Errorf("poll with no change = %+v, %v; want the 3 jobs kept and none judged again", st3, err)
	}
	st4, err := w.Poll(ctx)
	if err != nil || st4.Jobs != 4 || st4.Selected != 1 {
		t.Errorf("poll with a new job = %+v, %v; want only job 14 judged", st4, err)
	}
	if want := []time.Time{{}, updated, updated, updated}; !cmp.Equal(want, slurm.since) {
		t.Errorf("since asked = %v, want %v (the failed poll does not move it)", slurm.since, want)
	}
	if got := value(t, reg, "strata_bridge_jobs_judged_total", "verdict", VerdictNotRequested); got != 2 {
		t.Errorf("not-requested verdicts = %v, want 2 (jobs 11 and 14)", got)
	}
	if got := value(t, reg, "strata_bridge_jobs_judged_total", "verdict", VerdictRefused); got != 1 {
		t.Errorf("refused verdicts = %v, want 1", got)
	}
}
