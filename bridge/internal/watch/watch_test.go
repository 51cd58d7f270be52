package watch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/sqlite"
	"github.com/strata-hpc/strata/internal/sqlite/sqlitetest"
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
// an apiserver that answers only /readyz (see apiserver): a job that
// asked nothing and a job whose account is not in serving.json are
// judged before anything else touches it (the integration test deploys
// for real).
func watcher(t *testing.T, slurm Slurm) (*Watcher, *store.Store, *prometheus.Registry) {
	t.Helper()
	return watcherAt(t, slurm, filepath.Join(t.TempDir(), "bridge.db"), t.TempDir())
}

// apiserver stands in for kube-apiserver at the network edge: /readyz
// answers ok while ready is true, 503 as a real one does while etcd is
// away; anything else is a 404.
func apiserver(t *testing.T, ready *atomic.Bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if !ready.Load() {
			http.Error(w, "[-]etcd failed: reason withheld\nreadyz check failed", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// watcherAt is watcher with the store's file and the host root (where
// this host sees the Slurm side's "/") given: a second watcher over the
// same store is the daemon after a restart.
func watcherAt(t *testing.T, slurm Slurm, db, hostRoot string) (*Watcher, *store.Store, *prometheus.Registry) {
	t.Helper()
	ready := &atomic.Bool{}
	ready.Store(true)
	return watcherOn(t, slurm, db, hostRoot, apiserver(t, ready))
}

// fastStore waits for another process's lock briefly, so that a test of a
// locked database takes well under a second.
var fastStore = store.Options{BusyTimeout: 20 * time.Millisecond, Retry: sqlite.Retry{Attempts: 10, Wait: 10 * time.Millisecond, MaxWait: 20 * time.Millisecond}}

func watcherOn(t *testing.T, slurm Slurm, db, hostRoot, kubeURL string) (*Watcher, *store.Store, *prometheus.Registry) {
	t.Helper()
	st, err := store.OpenOptions(t.Context(), db, fastStore)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	kube, err := deploy.NewKube(&rest.Config{Host: kubeURL}, "strata-bridge")
	if err != nil {
		t.Fatal(err)
	}
	serving := &servingquota.File{APIVersion: servingquota.APIVersion, Kind: servingquota.Kind, Tenants: []servingquota.Tenant{
		{Name: "acme", Namespace: "strata-acme", GPUs: 8, Replicas: 4, Projects: []servingquota.Project{{Name: "llm", Account: "acme-llm"}}}}}
	dep, err := deploy.New(deploy.Config{Kube: kube, Store: st, Serving: func() *servingquota.File { return serving }, HostRoot: hostRoot})
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

// Jobs whose strata-serve.yaml is hostile (a FIFO, a link to /dev/zero, a
// link to the bridge's token) are each refused at once, and the cycle
// goes on to the next job; the refusals are stored, so the bridge
// restarted over the same store judges none of them again (before, the
// FIFO froze the loop for ever and /dev/zero crashed every restart).
func TestPollPastHostileFiles(t *testing.T) {
	ctx := t.Context()
	host := t.TempDir()
	const token = "eyJhbGciOi-the-bridge-token"
	if err := os.MkdirAll(filepath.Join(host, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "etc", "token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	uid := int64(os.Getuid())
	var jobs []slurmrest.Job
	for i, mk := range []func(p string) error{
		func(p string) error { return syscall.Mkfifo(p, 0o644) },
		func(p string) error { return os.Symlink("/dev/zero", p) },
		func(p string) error { return os.Symlink(filepath.Join(host, "etc", "token"), p) },
		nil, // a job that asked nothing, judged after the others
	} {
		id := int64(21 + i)
		dir := fmt.Sprintf("/jobs/%d", id)
		if err := os.MkdirAll(filepath.Join(host, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if mk != nil {
			if err := mk(filepath.Join(host, dir, "strata-serve.yaml")); err != nil {
				t.Fatal(err)
			}
		}
		jobs = append(jobs, slurmrest.Job{ID: id, UserID: uid, State: slurmrest.JobState{"COMPLETED"}, Account: "acme-llm", WorkDir: dir,
			EndTime: t0.Add(time.Duration(i) * time.Second)})
	}
	list := slurmrest.JobList{Jobs: jobs, Updated: t0}
	db := filepath.Join(t.TempDir(), "bridge.db")
	w, st, reg := watcherAt(t, &answers{replies: []reply{{list: list}}}, db, host)

	var (
		status Status
		err    error
		done   = make(chan struct{})
	)
	go func() { status, err = w.Poll(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the poll still blocks after 20s")
	}
	if err != nil || status.Selected != 4 {
		t.Fatalf("poll = %+v, %v; want 4 jobs judged", status, err)
	}
	for id, want := range map[int64]string{21: "named pipe", 22: "symbolic link", 23: "symbolic link"} {
		seen, err := st.Seen(ctx, id)
		if err != nil || seen.Outcome != VerdictRefused || !seen.Done || !strings.Contains(seen.Message, want) {
			t.Errorf("job %d: verdict %+v, %v; want refused and settled, saying %q", id, seen, err, want)
		}
		if strings.Contains(seen.Message, token) {
			t.Errorf("job %d's verdict quotes the token: %q", id, seen.Message)
		}
	}
	if seen, err := st.Seen(ctx, 24); err != nil || seen.Outcome != VerdictNotRequested {
		t.Errorf("job 24 after the hostile ones: verdict %+v, %v; want not-requested", seen, err)
	}
	if got := value(t, reg, "strata_bridge_jobs_judged_total", "verdict", VerdictRefused); got != 3 {
		t.Errorf("refused verdicts = %v, want 3", got)
	}
	st.Close()

	restarted, _, _ := watcherAt(t, &answers{replies: []reply{{list: list}}}, db, host)
	if status, err := restarted.Poll(ctx); err != nil || status.Selected != 0 {
		t.Errorf("poll after a restart = %+v, %v; want nothing judged again", status, err)
	}
}

// While the apiserver is not ready (or not there) a cycle deploys
// nothing, spends no attempt, and fails the status (so /healthz does);
// once it is back, the job waiting is judged.
func TestPollWaitsForKubernetes(t *testing.T) {
	ctx := t.Context()
	j := slurmrest.Job{ID: 31, UserID: int64(os.Getuid()), State: slurmrest.JobState{"COMPLETED"}, Account: "acme-llm", WorkDir: "/jobs/31"}
	list := slurmrest.JobList{Jobs: []slurmrest.Job{j}, Updated: t0}
	ready := &atomic.Bool{}
	w, st, _ := watcherOn(t, &answers{replies: []reply{{list: list}, {list: list}}}, filepath.Join(t.TempDir(), "bridge.db"), t.TempDir(), apiserver(t, ready))

	status, err := w.Poll(ctx)
	if err == nil || status.OK || !strings.Contains(status.Error, "kubernetes apiserver not ready") {
		t.Fatalf("poll with the apiserver not ready = %+v, %v; want a failed cycle naming Kubernetes", status, err)
	}
	if w.Status().OK {
		t.Errorf("status after the failed cycle is OK: /healthz would say 200")
	}
	if _, err := st.Seen(ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("job %d was judged while Kubernetes was down: %v", j.ID, err)
	}

	ready.Store(true)
	status, err = w.Poll(ctx)
	if err != nil || !status.OK || status.Selected != 1 {
		t.Fatalf("poll with the apiserver back = %+v, %v; want job %d judged", status, err, j.ID)
	}
	if seen, err := st.Seen(ctx, j.ID); err != nil || seen.Outcome != VerdictNotRequested {
		t.Errorf("job %d: %+v, %v; want not-requested", j.ID, seen, err)
	}
}

// An apiserver that is not there at all fails the cycle the same way.
func TestPollKubernetesUnreachable(t *testing.T) {
	list := slurmrest.JobList{Updated: t0}
	w, _, _ := watcherOn(t, &answers{replies: []reply{{list: list}}}, filepath.Join(t.TempDir(), "bridge.db"), t.TempDir(), "https://127.0.0.1:1")
	if status, err := w.Poll(t.Context()); err == nil || status.OK || !strings.Contains(status.Error, "kubernetes") {
		t.Errorf("poll with no apiserver = %+v, %v; want a failed cycle naming Kubernetes", status, err)
	}
}

// With the database locked by another process past every retry, a
// refusal is neither recorded nor settled: the cycle fails, and once the
// lock is gone the next cycle records the refusal, its event included.
func TestPollWithTheDatabaseLocked(t *testing.T) {
	ctx := t.Context()
	stranger := slurmrest.Job{ID: 51, State: slurmrest.JobState{"COMPLETED"}, Account: "testbed", Comment: "strata:serve=llama", WorkDir: "/jobs/51"}
	list := slurmrest.JobList{Jobs: []slurmrest.Job{stranger}, Updated: t0}
	db := filepath.Join(t.TempDir(), "bridge.db")
	w, st, _ := watcherAt(t, &answers{replies: []reply{{list: list}, {list: list}}}, db, t.TempDir())

	release := sqlitetest.Lock(t, db)
	status, err := w.Poll(ctx)
	if err == nil || status.OK || !strings.Contains(status.Error, "database locked by another process") {
		t.Errorf("poll with the database locked = %+v, %v; want a failed cycle saying the database is locked", status, err)
	}
	release()
	if _, err := st.Seen(ctx, 51); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("job 51 was settled while nothing could be recorded: %v", err)
	}

	if status, err := w.Poll(ctx); err != nil || status.Selected != 1 {
		t.Fatalf("poll after the lock = %+v, %v", status, err)
	}
	if seen, err := st.Seen(ctx, 51); err != nil || seen.Outcome != VerdictRefused || !seen.Done {
		t.Errorf("job 51 after the lock: %+v, %v; want refused and settled", seen, err)
	}
	ev, err := st.Events(ctx, "llama")
	if err != nil || len(ev) != 1 || ev[0].Outcome != "refused" || ev[0].JobID != 51 {
		t.Errorf("events of llama: %+v, %v; want the one refusal", ev, err)
	}
}

// A standby's cycle asks slurmrestd nothing and judges nothing, and its
// status says standby (healthy); once active, it lists every job (no
// update_time: the active bridge may have seen anything meanwhile).
func TestPollOnStandby(t *testing.T) {
	ctx := t.Context()
	j := slurmrest.Job{ID: 61, UserID: int64(os.Getuid()), State: slurmrest.JobState{"COMPLETED"}, Account: "acme-llm", WorkDir: "/jobs/61"}
	slurm := &answers{replies: []reply{{list: slurmrest.JobList{Jobs: []slurmrest.Job{j}, Updated: t0}}, {list: slurmrest.JobList{Updated: t0}}}}
	w, st, _ := watcher(t, slurm)
	active := &atomic.Bool{}
	w.cfg.Active = active.Load
	active.Store(true)
	if _, err := w.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	active.Store(false)
	status, err := w.Poll(ctx)
	if err != nil || !status.OK || !status.Standby || status.Jobs != 0 {
		t.Errorf("standby poll = %+v, %v; want OK, standby, nothing read", status, err)
	}
	if len(slurm.since) != 1 {
		t.Errorf("slurmrestd asked %d times; want once (the standby asks nothing)", len(slurm.since))
	}
	active.Store(true)
	if _, err := w.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if len(slurm.since) != 2 || !slurm.since[1].IsZero() {
		t.Errorf("since of the first poll after the take-over: %v; want none (every job)", slurm.since)
	}
	if seen, err := st.Seen(ctx, j.ID); err != nil || seen.Attempts != 1 {
		t.Errorf("job %d: %+v, %v; want judged once", j.ID, seen, err)
	}
}
