package web

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
)

// finishedWindow holds the beds' finished jobs (the core's clock is
// 2026-11-29 20:24 UTC).
const finishedWindow = "from=2026-11-23&to=2026-11-29"

// setFinished gives the beds' slurmdbd finished jobs: mem's two-GPU job
// of an hour, gmem's, vmem's (acme's vision), and mem's job 910101 once
// it has left the snapshot.
func setFinished(beds map[string]*clustertest.Bed) {
	const now = 1795983872
	beds["gpu1"].SetFinished(
		clustertest.Finished{ID: 930001, User: "mem", Account: "acme-llm", Name: "llm-done", Submit: now - 7300, Start: now - 7200, End: now - 3600, GPUs: 2},
		clustertest.Finished{ID: 930002, User: "gmem", Account: "globex-rl", Name: "globex-done", State: "FAILED", Submit: now - 4000, Start: now - 3900, End: now - 1800, GPUs: 4},
		clustertest.Finished{ID: 930003, User: "vmem", Account: "acme-vision", Name: "vision-done", Submit: now - 4000, Start: now - 3600, End: now - 600, GPUs: 1},
	)
	beds["gpu2"].SetFinished(
		clustertest.Finished{ID: 940001, User: "mem", Account: "acme-llm", Name: "llm-gpu2", Submit: now - 2000, Start: now - 1800, End: now - 900, GPUs: 1},
	)
}

// TestFinishedPage: the finished jobs page lists the caller's own jobs
// of the window from both clusters' slurmdbd with their GPU-hours, each
// linked to its page; "all I may see" widens it to what rbac lets them
// read, never further; the project filter narrows it; a window the core
// would refuse is said so, in Korean too.
func TestFinishedPage(t *testing.T) {
	b, beds := coreBed(t)
	setFinished(beds)
	alice := b.client(t)
	b.signIn(t, alice, "mem")
	resp, page := get(t, alice, b.srv.URL+"/jobs/finished?"+finishedWindow)
	for _, want := range []string{`href="/jobs/gpu1/930001"`, `href="/jobs/gpu2/940001"`, "llm-done", ">2.00<", ">0.25<", "1:00",
		"2 jobs, 2.25 GPU-hours", `aria-current="page">Finished`} {
		if !strings.Contains(page, want) {
			t.Errorf("alice's finished jobs lack %q", want)
		}
	}
	if resp.StatusCode != http.StatusOK || strings.Contains(page, "globex-done") || strings.Contains(page, "vision-done") {
		t.Errorf("alice's finished jobs: %s, or another's job shown", resp.Status)
	}
	_, page = get(t, alice, b.srv.URL+"/jobs/finished?all=1&"+finishedWindow)
	if strings.Contains(page, "globex-done") || strings.Contains(page, "vision-done") {
		t.Errorf("alice's 'all' shows another project's job")
	}
	_, page = get(t, alice, b.srv.URL+"/jobs/finished?project=vision&"+finishedWindow)
	if strings.Contains(page, "930001") || !strings.Contains(page, i18n.For("en", "").T("finished.none")) {
		t.Errorf("alice's vision filter shows jobs")
	}
	resp, page = get(t, alice, b.srv.URL+"/jobs/finished?from=2026-12-29&to=2026-11-29")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "31 days") {
		t.Errorf("a backwards window: %s", resp.Status)
	}
	req, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/jobs/finished?"+finishedWindow, nil)
	req.Header.Set("Accept-Language", "ko")
	r, err := alice.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ko, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusOK || !strings.Contains(string(ko), i18n.For("ko", "").T("finished.title")) || !strings.Contains(string(ko), "GPU 2.25시간") {
		t.Errorf("the Korean page: %s", r.Status)
	}

	// bob (gmem) sees none of alice's finished jobs, whatever he asks.
	bob := b.client(t)
	b.signIn(t, bob, "gmem")
	for _, p := range []string{"/jobs/finished?" + finishedWindow, "/jobs/finished?all=1&" + finishedWindow,
		"/jobs/finished?project=llm&all=1&" + finishedWindow, "/jobs/gpu1/930001", "/jobs/gpu2/940001"} {
		resp, body := get(t, bob, b.srv.URL+p)
		for _, mark := range []string{"930001", "940001", "llm-done", "llm-gpu2"} {
			if strings.Contains(body, mark) {
				t.Errorf("bob's %s (%s) holds alice's %q", p, resp.Status, mark)
			}
		}
	}
	if _, body := get(t, bob, b.srv.URL+"/jobs/finished?"+finishedWindow); !strings.Contains(body, "globex-done") {
		t.Errorf("bob's finished jobs lack his own")
	}
	// acme's admin sees the tenant's with "all".
	ta := b.client(t)
	b.signIn(t, ta, "tadmin")
	if _, body := get(t, ta, b.srv.URL+"/jobs/finished?all=1&"+finishedWindow); !strings.Contains(body, "vision-done") ||
		!strings.Contains(body, "llm-done") || strings.Contains(body, "globex-done") {
		t.Errorf("acme's admin's finished jobs are not acme's")
	}

	// A finished job's page, past the snapshot: from slurmdbd, with its
	// GPU-hours.
	resp, page = get(t, alice, b.srv.URL+"/jobs/gpu1/930001")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "llm-done") || !strings.Contains(page, "COMPLETED") ||
		!strings.Contains(page, "<dd>2</dd>") || strings.Contains(page, "/confirm/") || !strings.Contains(page, i18n.For("en", "").T("job.gpu.gone")) {
		t.Errorf("alice's finished job page: %s", resp.Status)
	}
	if resp, _ := get(t, bob, b.srv.URL+"/jobs/gpu1/930001"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob's view of alice's finished job: %s", resp.Status)
	}
}
