package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

var releases = []string{"26.05", "24.11"}

// TestLadder: an idle job is warned, signalled and requeued, one cycle
// each, every action recorded as an intent first and done after, the job
// marked before each and its owner told; then the job is left alone.
func TestLadder(t *testing.T) {
	for _, release := range releases {
		t.Run("slurm-"+release, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, release, requeueRules, 0)
			var got []string
			for range 6 {
				got = append(got, b.mustTick()...)
				// Between the cycles: an intent is never left open.
				if n := b.pending(); n != 0 {
					t.Fatalf("%d open intents after a cycle", n)
				}
			}
			if diff := cmp.Diff([]string{"warn", "signal", "requeue"}, got); diff != "" {
				t.Fatalf("actions (-want +got):\n%s\nlog:\n%s", diff, b.logs.String())
			}
			if diff := cmp.Diff([]string{"warn:done", "signal:done", "requeue:done"}, b.outcomes(jobID)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			requeue := "requeue "
			if release == "24.11" {
				requeue = "scontrol requeue 1" // no REST requeue before v0.0.45
			}
			if diff := cmp.Diff([]string{"mark", "mark", "signal signal=SIGUSR1&flags=BATCH_JOB", "mark", requeue}, b.verbs()); diff != "" {
				t.Errorf("requests that change the job (-want +got):\n%s", diff)
			}
			for _, a := range b.actions() {
				if m, ok := strings.CutPrefix(a, "mark "); ok && !strings.HasPrefix(m, "strata: ") {
					t.Errorf("admin comment %q is not marked as Strata's", m)
				}
			}
			if diff := cmp.Diff([]string{"warn", "signal", "requeue"}, b.noticesSent()); diff != "" {
				t.Errorf("notices (-want +got):\n%s", diff)
			}
			recs, err := b.st.Job(t.Context(), jobID)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if r.Tenant != "research" || r.User != "alice" || r.Account != "testbed" || r.Rule != "test" || r.DoneAt == nil ||
					len(r.GPUs) != 2 || !strings.Contains(r.Reason, "2 of 2 GPUs idle") {
					t.Errorf("record %+v: want tenant research, user alice, rule test, 2 idle GPUs, finished", r)
				}
			}
			if v := counter(t, b.metrics.Actions.WithLabelValues("research", "requeue", "done")); v != 1 {
				t.Errorf("requeues done = %v, want 1", v)
			}
			// The job had 2 GPUs and 10 minutes to run; requeued 110 s
			// after its start (on the first sample after the signal's
			// wait), it gave back 2 × 490 GPU-seconds.
			if v := counter(t, b.metrics.ReclaimedGPUSeconds.WithLabelValues("research", "test")); v != 980 {
				t.Errorf("reclaimed GPU-seconds = %v, want 980", v)
			}
			if st := b.ctl.LastStatus(); !st.SlurmOK || !st.Source || st.Jobs != 1 || st.Error != "" {
				t.Errorf("status = %+v", st)
			}
		})
	}
}

// TestCancel: under a rule that cancels, the idle job is warned, then
// cancelled with DELETE /job/1, once.
func TestCancel(t *testing.T) {
	for _, release := range releases {
		t.Run("slurm-"+release, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, release, cancelRules, 0)
			var got []string
			for range 4 {
				got = append(got, b.mustTick()...)
			}
			if diff := cmp.Diff([]string{"warn", "cancel"}, got); diff != "" {
				t.Fatalf("actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"warn:done", "cancel:done"}, b.outcomes(jobID)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"mark", "mark", "cancel"}, b.verbs()); diff != "" {
				t.Errorf("requests that change the job (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBusyJobUntouched: a job whose GPUs are busy gets no action, no
// record, no request that changes it; its state is kept as observed.
func TestBusyJobUntouched(t *testing.T) {
	b := newBed(t, "26.05", requeueRules, 90)
	for range 4 {
		if got := b.mustTick(); len(got) != 0 {
			t.Fatalf("actions on a busy job: %v", got)
		}
	}
	if got := b.outcomes(jobID); len(got) != 0 {
		t.Errorf("records of a busy job: %v", got)
	}
	if got := b.actions(); len(got) != 0 {
		t.Errorf("requests that change a busy job: %v", got)
	}
	states, err := b.st.States(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var st decide.JobState
	if err := json.Unmarshal(states[jobID], &st); err != nil || st.Phase != decide.Observed {
		t.Errorf("state = %s (%v), want observed", states[jobID], err)
	}
}

// TestDryRun: in dry-run mode the ladder runs and every decision is
// recorded as a dry run, but nothing reaches Slurm or the job's owner.
func TestDryRun(t *testing.T) {
	b := newBed(t, "26.05", dryRunRules, 0)
	var got []string
	for range 4 {
		got = append(got, b.mustTick()...)
	}
	if diff := cmp.Diff([]string{"warn", "cancel"}, got); diff != "" {
		t.Fatalf("decided (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"warn:dry-run", "cancel:dry-run"}, b.outcomes(jobID)); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if got := b.actions(); len(got) != 0 {
		t.Errorf("requests that change the job in a dry run: %v", got)
	}
	if got := b.noticesSent(); len(got) != 0 {
		t.Errorf("notices in a dry run: %v", got)
	}
	if b.pending() != 0 {
		t.Errorf("a dry run left open intents")
	}
	if v := counter(t, b.metrics.Actions.WithLabelValues("research", "cancel", "dry-run")); v != 1 {
		t.Errorf("dry-run cancels counted = %v, want 1", v)
	}
}

// TestRecover: reclaimd crashed between recording an intent and its
// outcome. After the restart every open intent is settled exactly once:
// recorded done when its effect is visible in Slurm, carried out when the
// job is still the same run and the action can be checked, abandoned
// otherwise; a second restart finds nothing to do.
func TestRecover(t *testing.T) {
	requeued := func(j map[string]any) {
		j["restart_cnt"] = 1
		j["job_state"] = []any{"PENDING", "REQUEUED"}
		j["start_time"] = map[string]any{"set": true, "infinite": false, "number": 0}
	}
	cancelled := func(j map[string]any) { j["job_state"] = []any{"CANCELLED"} }
	for name, tc := range map[string]struct {
		id       int64
		kind     string
		otherRun bool                   // the intent was for an earlier run of the job
		job      func(j map[string]any) // the job as Slurm shows it after the restart; nil: as captured
		want     string                 // the record's outcome
		wantDo   []string               // the requests that change the job
	}{
		"requeue that happened":  {kind: "requeue", job: requeued, want: store.StatusDone},
		"requeue that did not":   {kind: "requeue", want: store.StatusDone, wantDo: []string{"mark", "requeue "}},
		"requeue of another run": {kind: "requeue", otherRun: true, want: store.StatusAbandoned},
		"requeue-hold that did not": {kind: "requeue-hold", want: store.StatusDone,
			wantDo: []string{"mark", "requeue Hold=true"}},
		"cancel that happened": {kind: "cancel", job: cancelled, want: store.StatusDone},
		"cancel that did not":  {kind: "cancel", want: store.StatusDone, wantDo: []string{"mark", "cancel"}},
		"cancel of an ended job": {kind: "cancel", job: func(j map[string]any) { j["job_state"] = []any{"COMPLETED"} },
			want: store.StatusAbandoned},
		// A signal or a notice cannot be checked, so it is never repeated.
		"signal":  {kind: "signal", want: store.StatusAbandoned},
		"warn":    {kind: "warn", want: store.StatusAbandoned},
		"notify":  {kind: "notify", want: store.StatusAbandoned},
		"recover": {kind: "recover", want: store.StatusAbandoned},
		// job-missing.json: slurmrestd's 404 for job 999999.
		"job gone": {id: 999999, kind: "requeue", want: store.StatusAbandoned},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, "26.05", requeueRules, 0)
			if tc.job != nil {
				b.jobAs(tc.job)
			}
			id := tc.id
			if id == 0 {
				id = jobID
			}
			start := b.start
			if tc.otherRun {
				start = start.Add(-time.Hour)
			}
			rid := b.intent(id, tc.kind, start)
			b.restart()
			if err := b.ctl.Recover(t.Context()); err != nil {
				t.Fatal(err)
			}
			recs, err := b.st.Job(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 || recs[0].ID != rid || recs[0].Status != tc.want || recs[0].DoneAt == nil {
				t.Fatalf("records = %v (%+v), want the intent %d, %s", b.outcomes(id), recs, rid, tc.want)
			}
			if diff := cmp.Diff(tc.wantDo, b.verbs()); diff != "" {
				t.Errorf("requests that change the job (-want +got):\n%s", diff)
			}
			b.restart()
			if err := b.ctl.Recover(t.Context()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantDo, b.verbs()); diff != "" {
				t.Errorf("after a second restart, requests that change the job (-want +got):\n%s", diff)
			}
			if again, _ := b.st.Job(t.Context(), id); len(again) != 1 || again[0].Status != tc.want {
				t.Errorf("after a second restart: records %+v", again)
			}
		})
	}
}

// TestRecoverSlurmDown: when slurmrestd cannot say where a job stands,
// recovery stops with the error and leaves the intent open; the next
// recovery, with slurmrestd back, settles it once.
func TestRecoverSlurmDown(t *testing.T) {
	for name, fail := range map[string]func(b *bed){
		"HTTP 500":           func(b *bed) { b.srv.Handle(http.MethodGet, b.jobPath(), failWith(http.StatusInternalServerError)) },
		"connection refused": func(b *bed) { b.refuse.Store(true) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, "26.05", requeueRules, 0)
			b.intent(jobID, "cancel", time.Time{})
			b.restart()
			fail(b)
			if err := b.ctl.Recover(t.Context()); err == nil {
				t.Fatal("Recover with slurmrestd failing: no error")
			}
			if b.pending() != 1 {
				t.Fatalf("open intents = %d after a failed recovery, want 1", b.pending())
			}
			if got := b.actions(); len(got) != 0 {
				t.Fatalf("requests that change the job: %v", got)
			}
			b.refuse.Store(false)
			b.srv.Handle(http.MethodGet, b.jobPath(), slurmresttest.Reply(b.job))
			b.restart()
			if err := b.ctl.Recover(t.Context()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"cancel:done"}, b.outcomes(jobID)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"mark", "cancel"}, b.verbs()); diff != "" {
				t.Errorf("requests that change the job (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSlurmFailsOnJobList: a cycle whose job list fails acts on nothing,
// records nothing, keeps the stored states, and says why in its status;
// the next cycle goes on where the ladder was.
func TestSlurmFailsOnJobList(t *testing.T) {
	for name, fail := range map[string]func(b *bed) func(){
		"HTTP 500": func(b *bed) func() {
			path := "/slurm/" + b.slurm.Info().Parser + "/jobs/"
			b.srv.Handle(http.MethodGet, path, failWith(http.StatusInternalServerError))
			return func() { b.srv.Handle(http.MethodGet, path, nil) }
		},
		"connection refused": func(b *bed) func() {
			b.refuse.Store(true)
			return func() { b.refuse.Store(false) }
		},
		"connection dropped": func(b *bed) func() {
			path := "/slurm/" + b.slurm.Info().Parser + "/jobs/"
			b.srv.Handle(http.MethodGet, path, slurmresttest.Drop())
			return func() { b.srv.Handle(http.MethodGet, path, nil) }
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, "26.05", cancelRules, 0)
			if got := b.mustTick(); !cmp.Equal(got, []string{"warn"}) {
				t.Fatalf("first cycle: %v, want warn", got)
			}
			before, err := b.st.States(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			restore := fail(b)
			for range 2 { // past the warning: a good cycle would cancel
				d, err := b.tick()
				if err == nil || !strings.Contains(err.Error(), "slurmrestd") || len(d.Actions) != 0 {
					t.Fatalf("cycle with the job list failing: err %v, actions %v; want a slurmrestd error and no action", err, kinds(d))
				}
			}
			if st := b.ctl.LastStatus(); st.SlurmOK || !strings.Contains(st.Error, "slurmrestd") {
				t.Errorf("status = %+v, want slurmrestd failing", st)
			}
			after, err := b.st.States(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("states changed by cycles that read no jobs (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"warn:done"}, b.outcomes(jobID)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			restore()
			if got := b.mustTick(); !cmp.Equal(got, []string{"cancel"}) {
				t.Errorf("cycle after slurmrestd is back: %v, want cancel", got)
			}
			if diff := cmp.Diff([]string{"mark", "mark", "cancel"}, b.verbs()); diff != "" {
				t.Errorf("requests that change the job (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSlurmFailsOnAction: slurmrestd fails while the action is carried
// out. The action is sent at most once in that cycle, its record says
// failed or abandoned, never done, the job keeps the state it had so the
// next cycle decides again, and once slurmrestd answers the action is done
// exactly once.
func TestSlurmFailsOnAction(t *testing.T) {
	const signal = "signal signal=SIGUSR1&flags=BATCH_JOB"
	for name, tc := range map[string]struct {
		rules  string
		before []string     // the actions decided before slurmrestd fails
		fail   func(b *bed) // makes slurmrestd fail from the next request on
		want   string       // the record of the action that failed
		wantDo []string     // the requests that change the job, the failed ones included
	}{
		"cancel answered 500": {rules: cancelRules, before: []string{"warn"}, want: "cancel:failed",
			fail:   func(b *bed) { b.srv.Handle(http.MethodDelete, b.jobPath(), failWith(http.StatusInternalServerError)) },
			wantDo: []string{"mark", "mark", "cancel", "mark", "cancel"}},
		"cancel's connection dropped": {rules: cancelRules, before: []string{"warn"}, want: "cancel:failed",
			fail:   func(b *bed) { b.srv.Handle(http.MethodDelete, b.jobPath(), slurmresttest.Drop()) },
			wantDo: []string{"mark", "mark", "cancel", "mark", "cancel"}},
		"mark answered 500": {rules: cancelRules, before: []string{"warn"}, want: "cancel:failed",
			fail:   func(b *bed) { b.srv.Handle(http.MethodPost, b.jobPath(), failWith(http.StatusInternalServerError)) },
			wantDo: []string{"mark", "mark", "mark", "cancel"}},
		"re-read answered 500": {rules: cancelRules, before: []string{"warn"}, want: "cancel:abandoned",
			fail:   func(b *bed) { b.srv.Handle(http.MethodGet, b.jobPath(), failWith(http.StatusInternalServerError)) },
			wantDo: []string{"mark", "mark", "cancel"}},
		"refused after the re-read": {rules: cancelRules, before: []string{"warn"}, want: "cancel:failed",
			fail: func(b *bed) {
				// slurmrestd goes away between the re-read and the mark.
				reread := slurmresttest.Reply(b.job)
				b.srv.Handle(http.MethodGet, b.jobPath(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b.refuse.Store(true)
					reread.ServeHTTP(w, r)
				}))
			},
			wantDo: []string{"mark", "mark", "cancel"}},
		"signal answered 500": {rules: requeueRules, before: []string{"warn"}, want: "signal:failed",
			fail:   func(b *bed) { b.srv.Handle(http.MethodDelete, b.jobPath(), failWith(http.StatusInternalServerError)) },
			wantDo: []string{"mark", "mark", signal, "mark", signal}},
		"requeue answered 500": {rules: requeueRules, before: []string{"warn", "signal"}, want: "requeue:failed",
			fail:   func(b *bed) { b.srv.Handle(http.MethodGet, b.requeuePath(), failWith(http.StatusInternalServerError)) },
			wantDo: []string{"mark", "mark", signal, "mark", "requeue ", "mark", "requeue "}},
		"requeue's connection dropped": {rules: requeueRules, before: []string{"warn", "signal"}, want: "requeue:failed",
			fail:   func(b *bed) { b.srv.Handle(http.MethodGet, b.requeuePath(), slurmresttest.Drop()) },
			wantDo: []string{"mark", "mark", signal, "mark", "requeue ", "mark", "requeue "}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, "26.05", tc.rules, 0)
			end, _, _ := strings.Cut(tc.want, ":")
			var got []string
			for range 10 {
				if len(got) == len(tc.before) {
					break
				}
				got = append(got, b.mustTick()...)
			}
			if diff := cmp.Diff(tc.before, got); diff != "" {
				t.Fatalf("actions before the failure (-want +got):\n%s", diff)
			}
			// After a signal the requeue waits for a sample taken after
			// the signal's wait: one cycle without action.
			if got[len(got)-1] == "signal" {
				if got := b.mustTick(); len(got) != 0 {
					t.Fatalf("actions in the cycle the signal's wait ends: %v", got)
				}
			}
			prior := b.outcomes(jobID)

			tc.fail(b)
			d, err := b.tick()
			if err != nil {
				t.Fatalf("the failing cycle: %v", err)
			}
			if diff := cmp.Diff([]string{end}, kinds(d)); diff != "" {
				t.Fatalf("the failing cycle's actions (-want +got):\n%s\nlog:\n%s", diff, b.logs.String())
			}
			wantRecs := append(append([]string{}, prior...), tc.want)
			if diff := cmp.Diff(wantRecs, b.outcomes(jobID)); diff != "" {
				t.Errorf("records after the failure (-want +got):\n%s", diff)
			}
			if b.pending() != 0 {
				t.Errorf("open intents after a failed action")
			}

			// slurmrestd answers again: the next cycle decides the action
			// again (the job kept its state), and it is done, once.
			b.refuse.Store(false)
			b.srv.Handle(http.MethodDelete, b.jobPath(), nil)
			b.srv.Handle(http.MethodGet, b.requeuePath(), nil)
			b.pinRecords()
			if diff := cmp.Diff([]string{end}, b.mustTick()); diff != "" {
				t.Fatalf("the cycle once slurmrestd is back (-want +got):\n%s\nlog:\n%s", diff, b.logs.String())
			}
			if diff := cmp.Diff(append(wantRecs, end+":done"), b.outcomes(jobID)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDo, b.verbs()); diff != "" {
				t.Errorf("requests that change the job (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSourceDown: with the node agent unreachable the controller acts on
// nothing, reports the metrics source failing, and /healthz says so.
func TestSourceDown(t *testing.T) {
	b := newBed(t, "26.05", cancelRules, 0)
	b.agentURL = func(string) string { return "http://127.0.0.1:1" }
	b.ctl = b.newController()
	for range 3 {
		d, err := b.tick()
		if err == nil || !strings.Contains(err.Error(), "metrics") || len(d.Actions) != 0 {
			t.Fatalf("cycle without agents: err %v, actions %v", err, kinds(d))
		}
	}
	if st := b.ctl.LastStatus(); st.Source || !st.SlurmOK {
		t.Errorf("status = %+v, want source failing, Slurm fine", st)
	}
	srv := httptest.NewServer(withToken(b.ctl.Handler(time.Minute)))
	defer srv.Close()
	code, body := get(t, srv.URL+"/healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no node agent answered") {
		t.Errorf("GET /healthz = %d %s, want 503 naming the agents", code, body)
	}
	if got := b.actions(); len(got) != 0 {
		t.Errorf("requests that change the job: %v", got)
	}
}

// TestStoreFails: when the store cannot record an intent the action is
// not carried out.
func TestStoreFails(t *testing.T) {
	b := newBed(t, "26.05", cancelRules, 0)
	if err := b.st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.tick(); err == nil {
		t.Fatal("cycle with the store closed: no error")
	}
	if got := b.actions(); len(got) != 0 {
		t.Errorf("requests that change the job with no store: %v", got)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return r.StatusCode, string(body)
}

// TestAPI: the API explains the job's decisions and the controller's
// health; bad requests get a 400 that says what is wanted.
func TestAPI(t *testing.T) {
	b := newBed(t, "26.05", cancelRules, 0)
	srv := httptest.NewServer(withToken(b.ctl.Handler(time.Minute)))
	defer srv.Close()
	if code, body := get(t, srv.URL+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no cycle yet") {
		t.Errorf("GET /healthz before a cycle = %d %s", code, body)
	}
	for range 4 {
		b.mustTick()
	}
	code, body := get(t, fmt.Sprintf("%s/v1/jobs/%d/reclaim", srv.URL, jobID))
	var jr controller.JobReclaim
	if err := json.Unmarshal([]byte(body), &jr); err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/jobs/1/reclaim = %d %s (%v)", code, body, err)
	}
	var outs []string
	for _, r := range jr.Records {
		outs = append(outs, r.Kind+":"+r.Status)
	}
	if diff := cmp.Diff([]string{"warn:done", "cancel:done"}, outs); diff != "" || jr.State == nil || jr.State.Phase != decide.Cancelled {
		t.Errorf("GET /v1/jobs/1/reclaim: records (-want +got):\n%s\nstate %+v", diff, jr.State)
	}
	code, body = get(t, srv.URL+"/v1/decisions?since="+b.start.UTC().Format(time.RFC3339)+"&limit=1")
	var ds struct {
		Decisions []store.Record `json:"decisions"`
	}
	if err := json.Unmarshal([]byte(body), &ds); err != nil || code != http.StatusOK || len(ds.Decisions) != 1 {
		t.Errorf("GET /v1/decisions?limit=1 = %d %s", code, body)
	}
	code, body = get(t, fmt.Sprintf("%s/v1/decisions?since=%d", srv.URL, b.clock().Add(time.Hour).Unix()))
	if code != http.StatusOK || !strings.Contains(body, `"decisions": []`) {
		t.Errorf("GET /v1/decisions?since=<later> = %d %s, want an empty list", code, body)
	}
	if code, body := get(t, srv.URL+"/healthz"); code != http.StatusOK || !strings.Contains(body, `"slurm_ok": true`) {
		t.Errorf("GET /healthz = %d %s", code, body)
	}
	if code, body := get(t, srv.URL+"/metrics"); code != http.StatusOK || !strings.Contains(body, `strata_reclaim_actions_total{action="cancel",result="done",tenant="research"} 1`) {
		t.Errorf("GET /metrics = %d, want the cancel counted:\n%s", code, body)
	}
	for path, want := range map[string]struct {
		code int
		text string
	}{
		"/v1/jobs/x/reclaim":    {http.StatusBadRequest, `job id \"x\" is not a number`},
		"/v1/jobs/42/reclaim":   {http.StatusNotFound, "never judged it idle"},
		"/v1/decisions?since=x": {http.StatusBadRequest, "want RFC 3339"},
	} {
		if code, body := get(t, srv.URL+path); code != want.code || !strings.Contains(body, want.text) {
			t.Errorf("GET %s = %d %s, want %d with %q", path, code, body, want.code, want.text)
		}
	}
	// A controller whose last cycle is older than staleAfter is unhealthy.
	b.setClock(b.clock().Add(2 * time.Minute))
	if code, body := get(t, srv.URL+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "older than") {
		t.Errorf("GET /healthz with an old cycle = %d %s", code, body)
	}
}

// TestRun: Run settles open intents first, then cycles until its context
// ends.
func TestRun(t *testing.T) {
	b := newBed(t, "26.05", cancelRules, 0)
	b.intent(jobID, "signal", time.Time{})
	b.restart()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.ctl.Run(ctx, time.Hour) }()
	deadline := time.Now().Add(10 * time.Second)
	for b.ctl.LastStatus().At.IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("no cycle in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	if diff := cmp.Diff([]string{"signal:abandoned", "warn:done"}, b.outcomes(jobID)); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

// TestNewNeedsItsParts: a controller without Slurm, a collector, a store
// or rules is refused.
func TestNewNeedsItsParts(t *testing.T) {
	if _, err := controller.New(controller.Config{}); err == nil || !strings.Contains(err.Error(), "required") {
		t.Errorf("New(empty) = %v, want an error naming what is required", err)
	}
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestCancelRefusedBySlurm: slurmrestd answers a cancel that slurmctld
// refused with HTTP 200, no "errors" and the refusal in the job's entry of
// "status". The cancel is a failure, with Slurm's reason in the record and
// the log, not an action done.
func TestCancelRefusedBySlurm(t *testing.T) {
	for _, release := range releases {
		t.Run("slurm-"+release, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, release, cancelRules, 0)
			var got []string
			for range 4 {
				if len(got) == 1 {
					break
				}
				got = append(got, b.mustTick()...)
			}
			if diff := cmp.Diff([]string{"warn"}, got); diff != "" {
				t.Fatalf("actions before the cancel (-want +got):\n%s", diff)
			}
			cancel, ok := b.srv.Record("cancel")
			if !ok {
				t.Fatal("no cancel record")
			}
			var body map[string]json.RawMessage
			if err := json.Unmarshal(cancel.Response, &body); err != nil {
				t.Fatal(err)
			}
			body["status"] = json.RawMessage(`[{"error":{"string":"Access/permission denied","code":2002,"message":""},` +
				`"step_id":"1","job_id":{"set":true,"infinite":false,"number":1}}]`)
			cancel.Response, _ = json.Marshal(body)
			b.srv.Handle(http.MethodDelete, b.jobPath(), slurmresttest.Reply(cancel))
			if _, err := b.tick(); err != nil {
				t.Fatalf("the cycle of the refused cancel: %v", err)
			}
			if diff := cmp.Diff([]string{"warn:done", "cancel:failed"}, b.outcomes(jobID)); diff != "" {
				t.Fatalf("records (-want +got):\n%s", diff)
			}
			recs, err := b.st.Job(t.Context(), jobID)
			if err != nil {
				t.Fatal(err)
			}
			const reason = "cancel job 1: Slurm refused it: job 1: Access/permission denied (slurm error 2002)"
			if last := recs[len(recs)-1]; last.Error != reason {
				t.Errorf("the failed cancel's record says %q, want %q", last.Error, reason)
			}
			if logs := b.logs.String(); !strings.Contains(logs, "reclaim action failed") || !strings.Contains(logs, "Access/permission denied") {
				t.Errorf("the log does not report the refusal:\n%s", logs)
			}
		})
	}
}
