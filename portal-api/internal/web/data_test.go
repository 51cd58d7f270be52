package web

import (
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
)

func ptr[T any](v T) *T { return &v }

// TestDataPagesRender draws the data pages from the API's own values in
// both languages: what a researcher and an operator need is on them, a
// job's name cannot become markup, and no catalogue key shows bare.
func TestDataPagesRender(t *testing.T) {
	r, err := ParseTemplates(assetsTemplates())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	job := api.Job{Cluster: "gpu1", Id: 41, Name: `<img src=x onerror=alert(1)>`, State: "PENDING", Class: "train", Tenant: "acme", Project: "llm",
		Account: "acme-llm", User: "alice", Gpus: []string{}, TimeLeftSeconds: ptr(int64(5400)),
		Reason: &api.Reason{Slurm: "QOSGrpGRES", Text: ptr("project llm uses 8 of its 8 GPUs; this job asks for 4"), PolicyLine: ptr("policy.yaml:12")}}
	limited := job
	limited.Id = 43
	limited.Reason = &api.Reason{Slurm: "QOSGrpGRES", Text: ptr("project llm uses 8 of its 8 GPUs; this job asks for 4"),
		Limit: &api.ReasonLimit{Kind: "project", Level: "llm", Name: "gpus", Unit: "GPUs", Used: ptr(8.0), Limit: ptr(8.0), Asked: ptr(4.0)}}
	running := job
	running.Id, running.State, running.Reason, running.Gpus = 42, "RUNNING", nil, []string{"gpu1:0", "gpu1:1"}
	h := &Handler{pages: r}
	use := api.JobGpuUse{JobId: 42, Mean: api.GpuSeries{Gpu: "mean", Points: []api.GpuPoint{{Time: start, Util: 40}, {Time: start.Add(time.Minute), Util: 80}}}}
	ov := api.Overview{Clusters: []api.ClusterOverview{{Cluster: "gpu1", GpusTotal: ptr(16), GpusAllocated: 10, Running: 3, Pending: 2,
		GpuUse:           &api.GpuUseNow{InUse: 8, Idle: 2, IdleGpus: &[]api.IdleGpu{{Gpu: "gpu2:3", JobId: 77, User: ptr("bob"), Util: 1}}},
		Tenants:          []api.TenantOverview{{Tenant: "acme", Running: 3, Pending: 2, GpusAllocated: 10, TopReasons: []api.ReasonCount{{Reason: "Priority", Count: 2}}}},
		NodesUnavailable: &[]api.UnavailableNode{{Name: "gpu9", State: []string{"DRAIN"}, Reason: ptr("strata: xid 79")}},
		Recovery: &api.RecoveryOverview{Available: true, Last24h: &api.RecoveryWindow{ReclaimActions: 3, GpuHoursReclaimed: 12.5,
			GpuHoursObserved: ptr(4.25), StartGainHours: ptr(6.0)}}}}}
	for _, lang := range []string{"en", "ko"} {
		l := i18n.For(lang, "")
		v := visitor{l: l, sess: sessOf("alice"), lang: lang}
		chart, samples := h.chart(v, use)
		pages := map[string]struct {
			data any
			want []string
		}{
			"jobs": {jobsData{Rows: []jobRow{{Job: job, Why: why(l, job.Reason), TimeLeft: "1:30", Position: 3},
				{Job: limited, Why: why(l, limited.Reason)}, {Job: running, GPUs: 2, TimeLeft: "1:30"}}},
				[]string{`href="/jobs/gpu1/41"`, "project llm uses 8 of its 8 GPUs", map[string]string{
					"en": "project llm uses 8 of its 8 GPUs; this job asks for 4.",
					"ko": "프로젝트 llm: GPU 한도 8 중 8 사용 중이며, 이 작업은 4을(를) 요청합니다.",
				}[lang], l.T("jobs.position", 3), "1:30", `data-refresh="/jobs?fragment=1"`}},
			"job": {jobData{Job: running, GPUs: 2, TimeLeft: "1:30", Chart: chart, Samples: samples, Output: "epoch 3 loss 0.21", Actions: Actions,
				Reclaim: []reclaimRow{{At: "2026-12-01T09:30:00Z", Action: "warn", Reason: "idle 2 of 2 GPUs for 30m", Outcome: "done"}}},
				[]string{"<svg", `role="img"`, l.T("chart.title", "42"), "epoch 3 loss 0.21", `href="/jobs/gpu1/42/confirm/cancel"`,
					`href="/jobs/gpu1/42/confirm/requeue"`, "gpu1:1", l.T("job.heading", "gpu1", "42"), "idle 2 of 2 GPUs for 30m"}},
			"confirm": {confirmData{Job: running, Action: api.Hold}, []string{`action="/jobs/gpu1/42/hold"`, `name="confirm" value="yes"`, l.T("job.action.hold")}},
			"operator": {operatorData{Overview: ov}, []string{"gpu2:3", "bob", "strata: xid 79", "Priority (2)", ">16<", `data-refresh="/operator?fragment=1"`,
				l.T("operator.reclaim_observed", "4.3", 12.5, "6")}},
		}
		for name, pg := range pages {
			rec := httptest.NewRecorder()
			if err := r.Render(rec, 200, name, Page{L: l, User: "alice", TitleKey: "home.title", Data: pg.data}); err != nil {
				t.Fatalf("%s/%s: %v", lang, name, err)
			}
			body := rec.Body.String()
			for _, w := range pg.want {
				if !strings.Contains(body, w) {
					t.Errorf("%s/%s lacks %q", lang, name, w)
				}
			}
			if strings.Contains(body, "<img src=x") {
				t.Errorf("%s/%s: a job's name became markup", lang, name)
			}
			if m := regexp.MustCompile(`>\s*(?:jobs|job|chart|operator|home)\.[a-z_.]+\s*<`).FindString(body); m != "" {
				t.Errorf("%s/%s shows a bare key %q", lang, name, m)
			}
		}
	}
	// Keys the templates build: every action's label and question.
	for _, a := range Actions {
		for _, k := range []string{"job.action." + string(a), "job.confirm." + string(a)} {
			if !i18n.Has(k) {
				t.Errorf("the catalogue lacks %s", k)
			}
		}
	}
}
