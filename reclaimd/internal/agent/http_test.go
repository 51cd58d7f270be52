package agent

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/strata-hpc/strata/reclaimd/internal/source"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest(method, path, nil))
	return rr.Result()
}

// The snapshot of the NVML mock after two samples, byte for byte: the
// controller decodes this document, so its shape changes only on purpose.
func TestSnapshotJSON(t *testing.T) {
	a, c := nvmlAgent(t, nil)
	for range 2 {
		if err := a.SampleOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.Add(10 * time.Second)
	}
	resp := get(t, a.Handler(), http.MethodGet, "/v1/snapshot")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/snapshot: %s, Content-Type %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	body := readAll(t, resp.Body)
	var indented bytes.Buffer
	if err := json.Indent(&indented, body, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, body)
	}
	golden(t, "snapshot.golden.json", indented.Bytes())

	// The keys the controller reads, asserted by name as well.
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	keys := func(m any) []string { return slices.Sorted(maps.Keys(m.(map[string]any))) }
	wantTop := []string{"after", "cursor", "faults", "full", "gpus", "interval_seconds", "last_error", "last_sample_at", "max_samples", "node",
		"source_ok", "started_at", "taken_at", "version", "window_seconds"}
	if got := keys(doc); !slices.Equal(got, wantTop) {
		t.Errorf("top-level keys %v, want %v", got, wantTop)
	}
	gpu := doc["gpus"].([]any)[0]
	if got, want := keys(gpu), []string{"index", "mem_total_mib", "mig", "model", "samples", "uuid"}; !slices.Equal(got, want) {
		t.Errorf("GPU keys %v, want %v", got, want)
	}
	sample := gpu.(map[string]any)["samples"].([]any)[0]
	wantSample := []string{"at", "job_ids", "mem_activity", "mem_used_mib", "nvlink_rx_kbs", "nvlink_tx_kbs",
		"pcie_rx_kbs", "pcie_tx_kbs", "processes", "sm_active", "unattributed_processes", "util"}
	if got := keys(sample); !slices.Equal(got, wantSample) {
		t.Errorf("sample keys %v, want %v", got, wantSample)
	}
	if sample.(map[string]any)["sm_active"] != nil {
		t.Errorf("sm_active of an A100 = %v, want null", sample.(map[string]any)["sm_active"])
	}

	var back Snapshot
	if err := json.Unmarshal(body, &back); err != nil || len(back.GPUs) != 2 || len(back.GPUs[1].Samples[0].MIGInstances) != 2 {
		t.Errorf("Snapshot does not read back: %v %+v", err, back)
	}
}

func TestSnapshotBeforeFirstSample(t *testing.T) {
	a, _ := replayAgent(t, false)
	resp := get(t, a.Handler(), http.MethodGet, "/v1/snapshot")
	defer resp.Body.Close()
	want := `{"node":"gpu01","taken_at":"2026-03-01T12:00:00Z","interval_seconds":10,"window_seconds":60,` +
		`"source_ok":false,"last_error":"","last_sample_at":null,"gpus":[],"version":2,"cursor":"dgrfgbt3myo0.0","full":true,` +
		`"after":"","max_samples":7,"started_at":null,"faults":[]}` + "\n"
	if got := string(readAll(t, resp.Body)); got != want {
		t.Errorf("GET /v1/snapshot before any sample:\n%s\nwant\n%s", got, want)
	}
}

func TestHandlerRoutes(t *testing.T) {
	a, _ := replayAgent(t, false)
	h := a.Handler()
	tests := map[string]struct {
		method, path string
		want         int
	}{
		"snapshot":          {http.MethodGet, "/v1/snapshot", http.StatusOK},
		"snapshot HEAD":     {http.MethodHead, "/v1/snapshot", http.StatusOK},
		"snapshot POST":     {http.MethodPost, "/v1/snapshot", http.StatusMethodNotAllowed},
		"metrics":           {http.MethodGet, "/metrics", http.StatusOK},
		"health, no sample": {http.MethodGet, "/healthz", http.StatusServiceUnavailable},
		"unknown path":      {http.MethodGet, "/v1/snapshots", http.StatusNotFound},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			resp := get(t, h, tt.method, tt.path)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s %s: %d, want %d", tt.method, tt.path, resp.StatusCode, tt.want)
			}
		})
	}
}

// flaky makes GPU 0 of an NVML mock lose its utilisation while failing is
// set.
func flaky(s *server.Server, failing *atomic.Bool) {
	dev := s.Devices[0].(*server.Device)
	util := dev.GetUtilizationRatesFunc
	dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		if failing.Load() {
			return gonvml.Utilization{}, gonvml.ERROR_GPU_IS_LOST
		}
		return util()
	}
}

func TestHealthz(t *testing.T) {
	var failing atomic.Bool
	s := nvmlServer()
	flaky(s, &failing)
	src, err := source.NewNVML(s)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var logs bytes.Buffer
	c := &clock{t: t0}
	a, err := New(Config{Node: "dgx01", Source: src, Procs: nvmlProcs(t), Now: c.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: dropTime}))})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Handler()
	check := func(step string, wantCode int, wantBody string) {
		t.Helper()
		resp := get(t, h, http.MethodGet, "/healthz")
		defer resp.Body.Close()
		body := string(readAll(t, resp.Body))
		if resp.StatusCode != wantCode || body != wantBody+"\n" {
			t.Errorf("%s: GET /healthz = %d %q, want %d %q", step, resp.StatusCode, body, wantCode, wantBody)
		}
	}
	sample := func() { _ = a.SampleOnce(t.Context()) }

	check("before the first sample", 503, "no sample yet")
	sample()
	check("after a good sample", 200, "ok: 2 GPUs sampled at 2026-03-01T12:00:00Z")
	c.Add(30 * time.Second)
	check("30 s later", 200, "ok: 2 GPUs sampled at 2026-03-01T12:00:00Z")
	c.Add(time.Second)
	check("31 s later", 503, "stale: the last sample, at 2026-03-01T12:00:00Z, is 31s old (stale after 30s); is the sampling loop stuck?")

	failing.Store(true)
	sample()
	sample()
	check("source failing", 503, "sampling failed at 2026-03-01T12:00:31Z: get utilisation of GPU 0 (GPU-00000000-0000-0000-0000-000000000000): ERROR_GPU_IS_LOST")
	failing.Store(false)
	sample()
	check("recovered", 200, "ok: 2 GPUs sampled at 2026-03-01T12:00:31Z")

	wantLogs := `level=WARN msg="sample failed" node=dgx01 error="get utilisation of GPU 0 (GPU-00000000-0000-0000-0000-000000000000): ERROR_GPU_IS_LOST"` + "\n" +
		`level=INFO msg="sample recovered" node=dgx01 gpus=2` + "\n"
	if logs.String() != wantLogs {
		t.Errorf("logs (one line per change of state):\n%s\nwant\n%s", logs.String(), wantLogs)
	}
	if s := a.Snapshot(); s.LastError != "" || !s.SourceOK {
		t.Errorf("snapshot after recovery: %+v", a.Snapshot())
	}
}

// dropTime leaves the time out of log lines, so that tests can compare them.
func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
