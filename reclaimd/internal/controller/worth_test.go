package controller_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strata-hpc/strata/internal/reclaimapi"
	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
)

// serveJobs answers every later job listing with the captured job edited
// by edit and the extra jobs (each the captured job changed by its own
// edit), as slurmrestd lists them after the reclaim.
func (b *bed) serveJobs(edit func(job map[string]any), extra ...func(job map[string]any)) {
	b.t.Helper()
	rec := b.record("jobs")
	var resp map[string]any
	if err := json.Unmarshal(rec.Response, &resp); err != nil {
		b.t.Fatal(err)
	}
	orig := resp["jobs"].([]any)[0].(map[string]any)
	clone := func() map[string]any {
		var j map[string]any
		raw, _ := json.Marshal(orig)
		_ = json.Unmarshal(raw, &j)
		return j
	}
	first := clone()
	edit(first)
	jobs := []any{first}
	for _, e := range extra {
		j := clone()
		e(j)
		jobs = append(jobs, j)
	}
	resp["jobs"] = jobs
	// A newer last_update each time: the client reads a changed list.
	lu := resp["last_update"].(map[string]any)
	lu["number"] = float64(b.clock().Unix())
	var err error
	if rec.Response, err = json.Marshal(resp); err != nil {
		b.t.Fatal(err)
	}
	b.srv.Handle(http.MethodGet, "/slurm/"+b.slurm.Info().Parser+"/jobs/", slurmresttest.Reply(rec))
}

func slurmTime(t time.Time) map[string]any {
	return map[string]any{"set": true, "infinite": false, "number": float64(t.Unix())}
}

// TestWorthObserved: after the requeue of the idle job (2 GPUs, gpu1:0-1),
// two waiting jobs of two tenants start on its GPUs; the controller
// records each as handed its GPU, counts the time they ran there until the
// requeued job's time-limit end, and serves both figures.
func TestWorthObserved(t *testing.T) {
	for _, release := range releases {
		t.Run("slurm-"+release, func(t *testing.T) {
			t.Parallel()
			b := newBed(t, release, requeueRules, 0)
			tm, err := tenantmap.Parse([]byte(`{"apiVersion": "strata/v1", "kind": "TenantMap", "cluster": "testbed", "admins": [],
				"tenants": [{"name": "research", "account": "testbed", "admins": [], "projects": []},
				            {"name": "vision", "account": "cv", "admins": [], "projects": []}]}`))
			if err != nil {
				t.Fatal(err)
			}
			b.tenants = tm
			// The cycles run between Slurm's whole seconds, as they do.
			b.setClock(b.clock().Add(300 * time.Millisecond))
			var got []string
			for range 6 {
				got = append(got, b.mustTick()...)
			}
			if diff := cmp.Diff([]string{"warn", "signal", "requeue"}, got); diff != "" {
				t.Fatalf("actions (-want +got):\n%s", diff)
			}
			recs, err := b.st.Job(t.Context(), jobID)
			if err != nil || len(recs) != 3 || recs[2].DoneAt == nil {
				t.Fatalf("records %+v, %v", recs, err)
			}
			acted := *recs[2].DoneAt
			limitEnd := b.start.Add(10 * time.Minute) // the captured job's limit
			// Job 2 (research) starts on gpu1:0 20 s after the requeue, to
			// the second.
			s2 := acted.Truncate(time.Second).Add(20 * time.Second)
			// Job 3 starts in the very second of the requeue, as Slurm
			// starts a waiting job at once (its start reads as before the
			// action, which has milliseconds).
			s3 := acted.Truncate(time.Second)
			pending := func(j map[string]any) { j["job_state"] = []any{"PENDING"}; j["gres_detail"] = []any{} }
			job := func(id int, account string, start time.Time, gpu string) func(map[string]any) {
				return func(j map[string]any) {
					j["job_id"] = float64(id)
					j["account"] = account
					j["start_time"] = slurmTime(start)
					j["end_time"] = slurmTime(start.Add(10 * time.Minute))
					j["gres_detail"] = []any{"gpu:h100:1(IDX:" + gpu + ")"}
				}
			}
			b.setClock(s2.Add(5 * time.Second))
			b.serveJobs(pending, job(2, "testbed", s2, "0"), job(3, "cv", s3, "1"))
			b.mustTick()
			// Job 2 ends 100 s after its start; job 3 runs on.
			e2 := s2.Add(100 * time.Second)
			b.setClock(e2.Add(5 * time.Second))
			b.serveJobs(pending, func(j map[string]any) {
				job(2, "testbed", s2, "0")(j)
				j["job_state"] = []any{"COMPLETED"}
				j["end_time"] = slurmTime(e2)
				j["gres_detail"] = []any{} // as slurmrestd lists a finished job
			}, job(3, "cv", s3, "1"))
			b.mustTick()
			// Past the requeued job's limit end: job 3 is counted to it.
			b.setClock(limitEnd.Add(time.Minute))
			b.serveJobs(pending, job(3, "cv", s3, "1"))
			b.mustTick()

			w, err := b.st.Worth(t.Context(), time.Time{}, 0, b.clock())
			if err != nil {
				t.Fatal(err)
			}
			if len(w.Reclaims) != 1 {
				t.Fatalf("reclaims %+v: want the one requeue", w.Reclaims)
			}
			r := w.Reclaims[0]
			bound := 2 * limitEnd.Sub(acted).Seconds()
			want := []reclaimapi.Handover{
				{JobID: 2, Tenant: "research", Account: "testbed", GPU: reclaimapi.GPU{Node: jobNode, Index: 0}, Start: s2.UTC(), End: timePtr(e2.UTC()),
					CountedUntil: e2.UTC(), GPUSeconds: 100, StartGainSeconds: limitEnd.Sub(s2).Seconds()},
				{JobID: 3, Tenant: "vision", Account: "cv", GPU: reclaimapi.GPU{Node: jobNode, Index: 1}, Start: s3.UTC(),
					CountedUntil: limitEnd.UTC(), GPUSeconds: limitEnd.Sub(s3).Seconds(), StartGainSeconds: limitEnd.Sub(s3).Seconds()},
			}
			if diff := cmp.Diff(want, r.HandedTo); diff != "" {
				t.Errorf("handed to (-want +got):\n%s", diff)
			}
			observed := 100 + limitEnd.Sub(s3).Seconds()
			if r.BoundGPUSeconds != bound || r.ObservedGPUSeconds != observed || !r.Final || r.Rule != "test" || r.Tenant != "research" {
				t.Errorf("reclaim %+v: want bound %v, observed %v, final, rule test, tenant research", r, bound, observed)
			}
			if v := counter(t, b.metrics.ObservedGPUSeconds.WithLabelValues("research", "test")); v != observed {
				t.Errorf("observed GPU-seconds metric = %v, want %v", v, observed)
			}
			if v := counter(t, b.metrics.ReclaimedGPUSeconds.WithLabelValues("research", "test")); v != bound {
				t.Errorf("bound GPU-seconds metric = %v, want %v", v, bound)
			}
			// A restart counts nothing twice: the store keeps what was
			// counted.
			b.restart()
			b.mustTick()
			if v := counter(t, b.metrics.ObservedGPUSeconds.WithLabelValues("research", "test")); v != observed {
				t.Errorf("observed GPU-seconds metric after a restart = %v, want %v", v, observed)
			}
			if release == "26.05" {
				lintExposition(t, b.metrics)
			}
			if w.Totals[0].Beneficiaries != 2 || w.Totals[0].ObservedGPUSeconds != observed || w.Totals[0].BoundGPUSeconds != bound {
				t.Errorf("totals %+v", w.Totals)
			}
		})
	}
}

func timePtr(t time.Time) *time.Time { return &t }

// lintExposition runs promtool check metrics over the controller's
// exposition, with the bound and observed series in it.
func lintExposition(t *testing.T, m *controller.Metrics) {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, name := range []string{"strata_reclaim_observed_gpu_seconds_total{rule=", "strata_reclaim_reclaimed_gpu_seconds_total{rule="} {
		if !strings.Contains(body, name) {
			t.Errorf("the exposition has no %s…", name)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not found, so the exposition is not linted: apt-get install prometheus (Debian) provides it")
		return
	}
	cmd := exec.CommandContext(t.Context(), promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
