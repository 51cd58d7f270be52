package controller_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
)

// TestCycleGauges: after a cycle the running GPU jobs are counted by
// reclaim phase, their GPUs by partition and tenant, and the pending jobs
// by tenant and reason; a failed job list and a missing agent are counted
// as errors.
func TestCycleGauges(t *testing.T) {
	b := newBed(t, "26.05", cancelRules, 0)
	rec := b.record("jobs")
	var resp map[string]any
	if err := json.Unmarshal(rec.Response, &resp); err != nil {
		t.Fatal(err)
	}
	jobs := resp["jobs"].([]any)
	var pending map[string]any
	if err := json.Unmarshal(mustJSON(t, jobs[0]), &pending); err != nil {
		t.Fatal(err)
	}
	pending["job_id"] = 3
	pending["job_state"] = []string{"PENDING"}
	pending["state_reason"] = "QOSGrpGRES"
	pending["nodes"] = ""
	pending["gres_detail"] = []string{}
	resp["jobs"] = []any{jobs[0], pending}
	rec.Response = mustJSON(t, resp)
	path := "/slurm/" + b.slurm.Info().Parser + "/jobs/"
	b.srv.Handle(http.MethodGet, path, slurmresttest.Reply(rec))

	b.mustTick() // job 1 idle: warned
	m := b.metrics
	for phase, want := range map[string]float64{"warned": 1, "observed": 0, "signalled": 0, "cancelled": 0} {
		if got := value(t, m.Jobs.WithLabelValues(phase)); got != want {
			t.Errorf("jobs{phase=%s} = %v, want %v", phase, got, want)
		}
	}
	if n := series(t, m.Registry, "strata_reclaim_allocated_gpus"); n != 1 {
		t.Errorf("%d allocated_gpus series, want 1", n)
	}
	if got := value(t, m.AllocatedGPUs.WithLabelValues("gpu", "research")); got < 1 {
		t.Errorf("allocated_gpus{partition=gpu,tenant=research} = %v, want the job's GPUs", got)
	}
	if got := value(t, m.Pending.WithLabelValues("research", "QOSGrpGRES")); got != 1 {
		t.Errorf("pending_jobs{tenant=research,reason=QOSGrpGRES} = %v, want 1", got)
	}
	if got := value(t, m.SlurmErrors) + value(t, m.SourceErrors) + value(t, m.AgentErrors); got != 0 {
		t.Errorf("errors counted in a good cycle: %v", got)
	}

	b.srv.Handle(http.MethodGet, path, failWith(http.StatusInternalServerError))
	if _, err := b.tick(); err == nil {
		t.Fatal("cycle with slurmrestd failing: no error")
	}
	if got := value(t, m.SlurmErrors); got != 1 {
		t.Errorf("slurm_errors_total = %v, want 1", got)
	}
	if got := value(t, m.Jobs.WithLabelValues("warned")); got != 1 {
		t.Errorf("jobs{phase=warned} = %v after a failed list, want the last good cycle's 1", got)
	}
	b.srv.Handle(http.MethodGet, path, slurmresttest.Reply(rec))

	b.agentURL = func(string) string { return "http://127.0.0.1:1" }
	b.ctl = b.newController()
	if _, err := b.tick(); err == nil {
		t.Fatal("cycle without agents: no error")
	}
	if got := value(t, m.SourceErrors); got != 1 {
		t.Errorf("source_errors_total = %v, want 1", got)
	}
	if got := value(t, m.AgentErrors); got < 1 {
		t.Errorf("agent_errors_total = %v, want the node counted", got)
	}
}

func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetCounter().GetValue()
}

func series(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}

// TestJobInfo: strata_reclaim_job_info has one series per running GPU
// job, labelled with its id, tenant, account and partition; a job that
// stops running loses its series, and one whose account changed keeps
// one series, with the new labels.
func TestJobInfo(t *testing.T) {
	b := newBed(t, "26.05", cancelRules, 100) // busy: no action
	rec := b.record("jobs")
	var resp map[string]any
	if err := json.Unmarshal(rec.Response, &resp); err != nil {
		t.Fatal(err)
	}
	jobs := resp["jobs"].([]any)
	var first, second map[string]any
	if err := json.Unmarshal(mustJSON(t, jobs[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(mustJSON(t, jobs[0]), &second); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprint(first["job_id"])
	partition := fmt.Sprint(first["partition"])
	second["job_id"] = 7
	second["account"] = "elsewhere"
	path := "/slurm/" + b.slurm.Info().Parser + "/jobs/"
	reply := func(jobs ...any) {
		resp["jobs"] = jobs
		rec.Response = mustJSON(t, resp)
		b.srv.Handle(http.MethodGet, path, slurmresttest.Reply(rec))
	}

	reply(first, second)
	b.mustTick()
	want := []string{
		"hpc_job=" + id + " tenant=research account=testbed partition=" + partition,
		"hpc_job=7 tenant=elsewhere account=elsewhere partition=" + partition,
	}
	if d := cmp.Diff(want, jobInfo(t, b.metrics.Registry)); d != "" {
		t.Errorf("job info after two running jobs (-want +got):\n%s", d)
	}

	first["account"] = "elsewhere"
	reply(first)
	b.mustTick()
	want = []string{"hpc_job=" + id + " tenant=elsewhere account=elsewhere partition=" + partition}
	if d := cmp.Diff(want, jobInfo(t, b.metrics.Registry)); d != "" {
		t.Errorf("job info after job 7 ended and the first moved account (-want +got):\n%s", d)
	}
}

// jobInfo lists the series of strata_reclaim_job_info as their labels,
// sorted; each must have the value 1.
func jobInfo(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fams {
		if f.GetName() != "strata_reclaim_job_info" {
			continue
		}
		for _, m := range f.GetMetric() {
			if v := m.GetGauge().GetValue(); v != 1 {
				t.Errorf("job info series with value %v, want 1", v)
			}
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out = append(out, fmt.Sprintf("hpc_job=%s tenant=%s account=%s partition=%s", l["hpc_job"], l["tenant"], l["account"], l["partition"]))
		}
	}
	slices.Sort(out)
	return out
}
