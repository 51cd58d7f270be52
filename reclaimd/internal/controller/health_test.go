package controller_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-hpc/strata/reclaimd/internal/agent"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/source"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// healthNodes are the captured test bed's nodes, all in partition gpu.
var healthNodes = []string{"gpu1", "gpu2", "gpu3", "gpu4"}

// healthBed is a bed with node health on: one real agent per node, each
// replaying busy GPUs (nothing is idle, so no job is acted on) with a
// fault file beside it, and slurmrestd's nodes answered from the captured
// list as a slurmctld changes them: a drain adds DRAIN and the reason, a
// resume takes them away.
type healthBed struct {
	*bed
	agents map[string]*agent.Agent
	faults map[string]string // node -> its fault file

	nodesMu sync.Mutex
	state   map[string][]string // node -> Slurm state
	reason  map[string]string
	updates []string // "gpu3 DRAIN strata: ..." in order
	check   string   // the health command's verdict file: "pass" passes
}

func newHealthBed(t *testing.T, release string, share float64) *healthBed {
	t.Helper()
	return newHealthBedWith(t, release, share, requeueRules, func(node string, gpu int) bool { return node == jobNode && gpu < 2 })
}

// newHealthBedWith is newHealthBed under rules, the agents showing job 1's
// processes on the GPUs holds says.
func newHealthBedWith(t *testing.T, release string, share float64, rules string, holds func(node string, gpu int) bool) *healthBed {
	t.Helper()
	hb := &healthBed{bed: newBed(t, release, rules, 90), agents: map[string]*agent.Agent{}, faults: map[string]string{},
		state: map[string][]string{}, reason: map[string]string{}}
	b := hb.bed
	dir := t.TempDir()
	// The health command: passes when its verdict file says pass, and
	// says which node it checked.
	hb.check = filepath.Join(dir, "verdict")
	script := filepath.Join(dir, "check")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"checked $1\"\n[ \"$(cat "+hb.check+" 2>/dev/null)\" = pass ]\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b.health = &controller.Health{FatalXids: controller.DefaultFatalXids,
		DrainOn:         []source.FaultKind{source.FaultECC, source.FaultRetiredPages, source.FaultRowRemap},
		MaxDrainedShare: share, MaxFaultAge: 24 * time.Hour, Check: []string{script, "{node}"},
		CheckInterval: time.Minute, CheckTimeout: 10 * time.Second}

	nodes := b.record("nodes")
	var list map[string]any
	if err := json.Unmarshal(nodes.Response, &list); err != nil {
		t.Fatal(err)
	}
	for _, n := range list["nodes"].([]any) {
		m := n.(map[string]any)
		name := m["name"].(string)
		for _, s := range m["state"].([]any) {
			hb.state[name] = append(hb.state[name], s.(string))
		}
	}
	parser := b.slurm.Info().Parser
	b.srv.Handle(http.MethodGet, "/slurm/"+parser+"/nodes/", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hb.nodesMu.Lock()
		for _, n := range list["nodes"].([]any) {
			m := n.(map[string]any)
			m["state"], m["reason"] = hb.state[m["name"].(string)], hb.reason[m["name"].(string)]
		}
		body, err := json.Marshal(list)
		hb.nodesMu.Unlock()
		if err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	envelope := b.record("cancel").Response
	for _, name := range healthNodes {
		b.srv.Handle(http.MethodPost, "/slurm/"+parser+"/node/"+name, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var u struct {
				State  []string `json:"state"`
				Reason string   `json:"reason"`
			}
			if err := json.Unmarshal(body, &u); err != nil {
				t.Errorf("node update %s: %v", body, err)
			}
			hb.nodesMu.Lock()
			hb.updates = append(hb.updates, strings.TrimSpace(name+" "+strings.Join(u.State, "+")+" "+u.Reason))
			switch {
			case slices.Equal(u.State, []string{"DRAIN"}):
				hb.state[name], hb.reason[name] = append(hb.state[name], "DRAIN"), u.Reason
			case slices.Equal(u.State, []string{"RESUME"}):
				hb.state[name] = slices.DeleteFunc(hb.state[name], func(s string) bool { return s == "DRAIN" })
				hb.reason[name] = ""
			}
			hb.nodesMu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(envelope)
		}))
	}

	// One agent per node, job 1 on the GPUs holds says.
	urls := map[string]string{}
	for _, name := range healthNodes {
		var csv strings.Builder
		csv.WriteString("offset_seconds,gpu,util,mem_activity,mem_used_mib,jobs\n")
		for off := 0; off <= 10; off += 10 {
			for g := range 8 {
				jobs := ""
				if holds(name, g) {
					jobs = "1"
				}
				fmt.Fprintf(&csv, "%d,%d,90,45,2048,%s\n", off, g, jobs)
			}
		}
		rec, err := source.ParseRecording(name, strings.NewReader(csv.String()))
		if err != nil {
			t.Fatal(err)
		}
		hb.faults[name] = filepath.Join(dir, name+"-faults.csv")
		a, err := agent.New(agent.Config{Node: name, Source: source.NewReplay(rec, time.Time{}, true),
			Faults: &source.FaultFile{Path: hb.faults[name]}, Interval: 10 * time.Second, Window: 5 * time.Minute, Now: b.clock,
			Procs: agent.ProcFS{Root: t.TempDir()}, Logger: slog.New(slog.DiscardHandler), Secret: agentSecret})
		if err != nil {
			t.Fatal(err)
		}
		hb.agents[name] = a
		srv := httptest.NewServer(a.Handler())
		t.Cleanup(srv.Close)
		urls[name] = srv.URL
		if err := a.SampleOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	b.agentURL = func(node string) string { return urls[node] }
	b.ctl = b.newController()
	return hb
}

// inject appends fault lines to a node's fault file.
func (hb *healthBed) inject(node, lines string) {
	hb.t.Helper()
	f, err := os.OpenFile(hb.faults[node], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		hb.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(lines); err != nil {
		hb.t.Fatal(err)
	}
}

// tick moves the clock on 10 s, every agent samples, a cycle runs and the
// health checks it started end.
func (hb *healthBed) tick() {
	hb.t.Helper()
	hb.setClock(hb.clock().Add(10 * time.Second))
	for _, a := range hb.agents {
		if err := a.SampleOnce(hb.t.Context()); err != nil {
			hb.t.Fatal(err)
		}
	}
	if _, err := hb.ctl.Cycle(hb.t.Context()); err != nil {
		hb.t.Fatalf("cycle: %v\nlog:\n%s", err, hb.logs.String())
	}
	hb.ctl.WaitHealthChecks()
}

func (hb *healthBed) nodeUpdates() []string {
	hb.nodesMu.Lock()
	defer hb.nodesMu.Unlock()
	return slices.Clone(hb.updates)
}

func (hb *healthBed) setSlurmNode(name string, state []string, reason string) {
	hb.nodesMu.Lock()
	defer hb.nodesMu.Unlock()
	hb.state[name], hb.reason[name] = state, reason
}

func (hb *healthBed) adminNotices() []string {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	var out []string
	for _, n := range hb.notices {
		if n.Admin {
			out = append(out, n.Action+" "+n.Node+" "+n.Reason)
		}
	}
	return out
}

func (hb *healthBed) nodeState(name string) store.NodeHealth {
	hb.t.Helper()
	all, err := hb.st.NodeHealth(hb.t.Context())
	if err != nil {
		hb.t.Fatal(err)
	}
	return all[name]
}

const xid79Reason = "strata: Xid 79 on GPU 3 (GPU fell off the bus)"

// An Xid 79 on GPU 3 of gpu3 drains gpu3 with its reason, as an intent
// done, a metric and a notice; an Xid that means an application error
// drains nothing; no job is touched; the API shows it; an admin who
// resumes the node takes it back.
func TestHealthXid79Drains(t *testing.T) {
	for _, release := range releases {
		t.Run(release, func(t *testing.T) {
			hb := newHealthBed(t, release, 0.25)
			hb.tick()
			hb.inject("gpu3", "3,xid,79\n")
			hb.inject("gpu2", "0,xid,13\n")
			hb.tick()
			if diff := cmp.Diff([]string{"gpu3 DRAIN " + xid79Reason}, hb.nodeUpdates()); diff != "" {
				t.Errorf("node updates (-want +got):\n%s", diff)
			}
			if got := hb.actions(); len(got) != 0 {
				t.Errorf("job actions %v: the jobs must be untouched", got)
			}
			if st := hb.nodeState("gpu3"); !st.Drained || st.Reason != xid79Reason || st.DrainedAt == nil {
				t.Errorf("gpu3's health = %+v", st)
			}
			recs, err := hb.st.NodeRecords(t.Context(), "gpu3")
			if err != nil || len(recs) != 1 || recs[0].Kind != controller.KindDrain || recs[0].Status != store.StatusDone ||
				recs[0].Reason != xid79Reason {
				t.Errorf("gpu3's records = %+v, %v", recs, err)
			}
			m := hb.metrics
			if v := counter(t, m.Drains.WithLabelValues("xid_79")); v != 1 {
				t.Errorf("drains{xid_79} = %v", v)
			}
			if v := gauge(t, m.NodesDrained.WithLabelValues("gpu")); v != 1 {
				t.Errorf("nodes drained{gpu} = %v", v)
			}
			if v := counter(t, m.GPUFaults.WithLabelValues("xid", "13")); v != 1 {
				t.Errorf("gpu faults{xid,13} = %v", v)
			}
			if diff := cmp.Diff([]string{controller.NoticeDrained + " gpu3 " + xid79Reason}, hb.adminNotices()); diff != "" {
				t.Errorf("admin notices (-want +got):\n%s", diff)
			}
			faults, err := hb.ctl.FaultsBetween(t.Context(), "gpu3", hb.start, hb.clock().Add(time.Second))
			if err != nil || len(faults) != 1 || faults[0].GPU != 3 || faults[0].Code != 79 || faults[0].Kind != "xid" {
				t.Errorf("FaultsBetween(gpu3) = %+v, %v", faults, err)
			}

			// The API.
			srv := httptest.NewServer(withToken(hb.ctl.Handler(time.Hour)))
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/v1/nodes/health?node=gpu3")
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Nodes []controller.NodeHealthEntry `json:"nodes"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || len(doc.Nodes) != 1 {
				t.Fatalf("GET /v1/nodes/health?node=gpu3: %+v, %v", doc, err)
			}
			resp.Body.Close()
			e := doc.Nodes[0]
			if !e.DrainedByStrata || e.StrataReason != xid79Reason || e.Reason != xid79Reason || !slices.Contains(e.State, "DRAIN") ||
				len(e.Faults) != 1 || e.Faults[0].Code != 79 || !slices.Equal(e.Partitions, []string{"gpu"}) {
				t.Errorf("gpu3's health entry = %+v", e)
			}

			// The same fault again (a whole snapshot after an agent restart
			// repeats it) drains nothing more; an admin resumes the node.
			hb.tick()
			hb.setSlurmNode("gpu3", []string{"IDLE"}, "")
			hb.tick()
			if st := hb.nodeState("gpu3"); st.Drained {
				t.Errorf("gpu3 resumed by an admin is still Strata's: %+v", st)
			}
			if got := hb.nodeUpdates(); len(got) != 1 {
				t.Errorf("node updates %v after the admin's resume: want the one drain", got)
			}
			if v := gauge(t, m.NodesDrained.WithLabelValues("gpu")); v != 0 {
				t.Errorf("nodes drained{gpu} = %v after the admin's resume", v)
			}
		})
	}
}

// Xids on three of four nodes with a cap of 25 %: one node drained, the
// other two held back with the cap metric and one notice each, once, and
// nothing else.
func TestHealthDrainCap(t *testing.T) {
	for _, release := range releases {
		t.Run(release, func(t *testing.T) {
			hb := newHealthBed(t, release, 0.25)
			hb.tick()
			for _, n := range []string{"gpu2", "gpu3", "gpu4"} {
				hb.inject(n, "3,xid,79\n")
			}
			hb.tick()
			hb.tick()
			if diff := cmp.Diff([]string{"gpu2 DRAIN " + xid79Reason}, hb.nodeUpdates()); diff != "" {
				t.Errorf("node updates (-want +got):\n%s", diff)
			}
			if got := hb.actions(); len(got) != 0 {
				t.Errorf("job actions %v", got)
			}
			if v := counter(t, hb.metrics.DrainCapHit.WithLabelValues("gpu")); v != 2 {
				t.Errorf("drain cap hit{gpu} = %v, want 2 (gpu3 and gpu4, once each)", v)
			}
			notices := hb.adminNotices()
			var capHits []string
			for _, n := range notices {
				if strings.HasPrefix(n, controller.NoticeCapHit) {
					capHits = append(capHits, strings.Fields(n)[1])
				}
			}
			if !slices.Equal(capHits, []string{"gpu3", "gpu4"}) || len(notices) != 3 {
				t.Errorf("admin notices %q: want gpu2 drained and the cap hit for gpu3 and gpu4", notices)
			}
			for _, n := range []string{"gpu3", "gpu4"} {
				if st := hb.nodeState(n); st.Drained {
					t.Errorf("%s drained past the cap", n)
				}
			}
		})
	}
}

// A drained node's health check runs once its jobs have ended: a failed
// check keeps it drained, and the next passing one resumes it.
func TestHealthCheckResumes(t *testing.T) {
	hb := newHealthBed(t, "26.05", 0.25)
	hb.tick()
	hb.inject("gpu1", "0,ecc_uncorrectable\n") // gpu1 runs the job
	hb.tick()
	if got := hb.nodeUpdates(); len(got) != 1 || !strings.HasPrefix(got[0], "gpu1 DRAIN strata: uncorrectable ECC error on GPU 0") {
		t.Fatalf("node updates %v", got)
	}
	hb.tick()
	if st := hb.nodeState("gpu1"); st.CheckAt != nil {
		t.Errorf("gpu1 checked while its job runs (MIXED): %+v", st)
	}
	hb.setSlurmNode("gpu1", []string{"IDLE", "DRAIN"}, hb.nodeState("gpu1").Reason) // the job ended
	if err := os.WriteFile(hb.check, []byte("fail\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hb.tick() // the check runs, and fails
	hb.tick()
	st := hb.nodeState("gpu1")
	if !st.Drained || st.CheckOK == nil || *st.CheckOK || !strings.Contains(st.CheckOutput, "checked gpu1") {
		t.Fatalf("after a failed check: %+v", st)
	}
	if got := hb.nodeUpdates(); len(got) != 1 {
		t.Errorf("node updates %v after a failed check: want the drain alone", got)
	}
	if v := counter(t, hb.metrics.HealthChecks.WithLabelValues("fail")); v != 1 {
		t.Errorf("health checks{fail} = %v", v)
	}
	if err := os.WriteFile(hb.check, []byte("pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 6 { // check_interval 1m: the next check
		hb.tick()
	}
	if got := hb.nodeUpdates(); len(got) != 2 || got[1] != "gpu1 RESUME" {
		t.Fatalf("node updates %v: want the drain and a resume", got)
	}
	if st := hb.nodeState("gpu1"); st.Drained || st.ResumedAt == nil {
		t.Errorf("after the resume: %+v", st)
	}
	if v := counter(t, hb.metrics.Resumes); v != 1 {
		t.Errorf("resumes = %v", v)
	}
	if v := counter(t, hb.metrics.HealthChecks.WithLabelValues("pass")); v != 1 {
		t.Errorf("health checks{pass} = %v", v)
	}
	notices := hb.adminNotices()
	if len(notices) != 2 || !strings.HasPrefix(notices[1], controller.NoticeResumed+" gpu1 ") {
		t.Errorf("admin notices %q", notices)
	}
	// The same fault, still in the agent's memory, does not drain again.
	hb.tick()
	if got := hb.nodeUpdates(); len(got) != 2 {
		t.Errorf("node updates %v after the resume", got)
	}
}

// A crash between a drain's intent and its outcome is settled exactly
// once: a drain Slurm shows is done and not repeated; one it does not
// show is abandoned, and the next cycle drains once.
func TestHealthCrashBetweenIntentAndDrain(t *testing.T) {
	hb := newHealthBed(t, "26.05", 0.5)
	ctx := t.Context()
	hb.tick()
	faults, err := hb.st.AddFaults(ctx, []store.Fault{
		{Node: "gpu3", GPU: 3, Kind: "xid", Code: 79, At: hb.clock()},
		{Node: "gpu4", GPU: 3, Kind: "xid", Code: 79, At: hb.clock()}}, hb.clock())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range faults {
		ev, _ := json.Marshal(map[string]any{"fault": f})
		if _, err := hb.st.Intent(ctx, store.Record{Node: f.Node, Kind: controller.KindDrain, Reason: xid79Reason, Evidence: ev,
			DecidedAt: hb.clock()}); err != nil {
			t.Fatal(err)
		}
	}
	// gpu3's drain reached slurmctld before the crash; gpu4's did not.
	hb.setSlurmNode("gpu3", []string{"IDLE", "DRAIN"}, xid79Reason)
	hb.restart()
	if err := hb.ctl.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if n := hb.pending(); n != 0 {
		t.Fatalf("%d intents open after Recover", n)
	}
	outcome := func(node string) []string {
		recs, err := hb.st.NodeRecords(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range recs {
			out = append(out, r.Kind+":"+r.Status)
		}
		return out
	}
	if got := outcome("gpu3"); !slices.Equal(got, []string{"drain:done"}) {
		t.Errorf("gpu3's records %v", got)
	}
	if got := outcome("gpu4"); !slices.Equal(got, []string{"drain:abandoned"}) {
		t.Errorf("gpu4's records %v", got)
	}
	if !hb.nodeState("gpu3").Drained {
		t.Error("gpu3, found drained, is not Strata's")
	}
	hb.tick()
	hb.tick()
	if diff := cmp.Diff([]string{"gpu4 DRAIN " + xid79Reason}, hb.nodeUpdates()); diff != "" {
		t.Errorf("node updates after the restart (-want +got):\n%s", diff)
	}
	if got := outcome("gpu4"); !slices.Equal(got, []string{"drain:abandoned", "drain:done"}) {
		t.Errorf("gpu4's records %v", got)
	}
}

// The health command fails with no verdict and Slurm keeps the node
// drained: it stays drained, checked again each interval.
func TestHealthCheckFailsStaysDrained(t *testing.T) {
	hb := newHealthBed(t, "24.11", 0.25)
	hb.tick()
	hb.inject("gpu4", "5,row_remap_failure\n")
	hb.tick()
	for range 13 {
		hb.tick()
	}
	if got := hb.nodeUpdates(); len(got) != 1 {
		t.Errorf("node updates %v: want the drain alone", got)
	}
	if v := counter(t, hb.metrics.HealthChecks.WithLabelValues("fail")); v < 2 {
		t.Errorf("health checks{fail} = %v: want one a minute", v)
	}
	if st := hb.nodeState("gpu4"); !st.Drained || st.Reason != "strata: row remap failure on GPU 5 (service needed)" {
		t.Errorf("gpu4 = %+v", st)
	}
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// A health command that does not end in time is a timeout, not a pass:
// the node stays drained.
func TestHealthCheckTimeout(t *testing.T) {
	hb := newHealthBed(t, "26.05", 0.25)
	hb.health.Check, hb.health.CheckTimeout = []string{"sh", "-c", "echo started; exec sleep 30", "{node}"}, 200*time.Millisecond
	hb.tick()
	hb.inject("gpu2", "1,xid,48\n")
	hb.tick()
	hb.tick()
	if v := counter(t, hb.metrics.HealthChecks.WithLabelValues("timeout")); v != 1 {
		t.Errorf("health checks{timeout} = %v", v)
	}
	st := hb.nodeState("gpu2")
	if !st.Drained || st.CheckOK == nil || *st.CheckOK || !strings.Contains(st.CheckOutput, "no answer within 200ms") {
		t.Errorf("gpu2 = %+v", st)
	}
	if got := hb.nodeUpdates(); len(got) != 1 || got[0] != "gpu2 DRAIN strata: Xid 48 on GPU 1 (double-bit ECC error)" {
		t.Errorf("node updates %v", got)
	}
}
