//go:build integration

// The Prometheus collector against a real Prometheus (Debian's package
// prometheus) that scrapes two replayed dcgm-exporters on loopback:
//
//	go test -race -count=1 -tags integration -run Prometheus ./reclaimd/internal/collect/

package collect_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/promtest"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// replayExporter serves a recorded dcgm-exporter exposition at /metrics,
// as dcgm-exporter does.
func replayExporter(t *testing.T, file string) *httptest.Server {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return serveExposition(t, body)
}

// serveExposition serves body at /metrics.
func serveExposition(t *testing.T, body []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestPrometheusRealServer(t *testing.T) {
	bin := promtest.Bin(t)
	gpu1 := replayExporter(t, "dcgm-exporter-gpu1.prom")
	gpu2 := replayExporter(t, "dcgm-exporter-gpu2.prom")
	host := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	// One job, as a site scrapes dcgm-exporter; the node label gives the
	// Slurm node name a second way, and the instance is relabelled to
	// "node:9400", so the three NodeLabel settings can be checked.
	scrape := fmt.Sprintf(`  - job_name: dcgm
    static_configs:
      - targets: [%q]
        labels: {node: gpu1}
      - targets: [%q]
        labels: {node: gpu2}
    relabel_configs:
      - source_labels: [node]
        target_label: instance
        replacement: "${1}:9400"
`, host(gpu1), host(gpu2))
	base := promtest.Start(t, bin, scrape)

	// Wait until each target has been scraped at least 8 times.
	deadline := time.Now().Add(45 * time.Second)
	for {
		v, err := promtest.Instant(base, `count_over_time(up{job="dcgm"}[1m]) >= 8 and up == 1`)
		if err == nil && len(v) == 2 {
			break
		}
		if time.Now().After(deadline) {
			v, err := promtest.Instant(base, `up`)
			t.Fatalf("prometheus did not scrape both replayed exporters 8 times in 45s (up = %v, %v)", v, err)
		}
		time.Sleep(250 * time.Millisecond)
	}

	for name, nodeLabel := range map[string]string{"Hostname": "", "node": "node", "instance": "instance"} {
		t.Run(name, func(t *testing.T) {
			p := &collect.Prometheus{URL: base, Step: time.Second, Window: 30 * time.Second, NodeLabel: nodeLabel}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			before := time.Now()
			// gpu10.rack-2 has a regex character for the query to escape.
			nodes := []string{"gpu2", "gpu9", "gpu1", "gpu10.rack-2"}
			res, err := p.Collect(ctx, nodes)
			if err != nil {
				t.Fatalf("Collect() = %v\nquery: %s", err, p.Query(nodes))
			}
			if res.Interval != time.Second {
				t.Errorf("Interval = %v, want 1s", res.Interval)
			}
			if age := before.Sub(res.Newest); res.Newest.IsZero() || age > 5*time.Second {
				t.Errorf("Newest = %v, %v before the query; want a sample from the last seconds", res.Newest, age)
			}
			if why := res.Failed["gpu9"]; !strings.Contains(why, "no DCGM series for node gpu9") {
				t.Errorf("Failed[gpu9] = %q, want no DCGM series", why)
			}
			if len(res.Failed) != 2 || res.Failed["gpu10.rack-2"] == "" {
				t.Errorf("Failed = %v, want gpu9 and gpu10.rack-2", res.Failed)
			}
			type want struct{ util, mem, fb float64 }
			wants := map[decide.GPUKey]want{
				{Node: "gpu1", Index: 0}: {0, 0, 62248},
				{Node: "gpu1", Index: 1}: {0, 0, 62248},
				{Node: "gpu2", Index: 0}: {97, 62.4518, 71732},
				{Node: "gpu2", Index: 1}: {88, 41.2906, 71732},
			}
			if len(res.Windows) != len(wants) {
				t.Errorf("Windows has %d GPUs, want %d: %v", len(res.Windows), len(wants), keys(res.Windows))
			}
			for key, w := range wants {
				// The newest samples, whole: decide.WindowTail of them.
				n, samples := recentOf(res, key)
				if n < 5 {
					t.Errorf("%s: %d samples, want several (at least 5 of the 30s window)", key, n)
					continue
				}
				t.Logf("%s: %d samples, the newest %d from %s to %s", key, n, len(samples),
					samples[0].At.Format(time.TimeOnly), samples[len(samples)-1].At.Format(time.TimeOnly))
				for i, s := range samples {
					if s.UtilPercent != w.util || !near(s.MemActivityPercent, w.mem) || s.MemUsedMiB != w.fb {
						t.Errorf("%s sample %d = %+v, want util %v, memory activity %v%%, %v MiB", key, i, s, w.util, w.mem, w.fb)
						break
					}
					if i > 0 && !s.At.After(samples[i-1].At) {
						t.Errorf("%s: samples not in time order at %d", key, i)
					}
				}
			}
		})
	}
}

// recentOf returns how many samples the collector holds of a GPU (none:
// it has no window) and its newest ones, whole (decide.WindowTail at
// most).
func recentOf(res collect.Result, key decide.GPUKey) (int, []decide.Sample) {
	w, ok := res.Windows[key]
	if !ok {
		return 0, nil
	}
	_, ss := w.Recent()
	return w.Len(), ss
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func keys[V any](m map[decide.GPUKey]V) []string {
	var out []string
	for k := range m {
		out = append(out, k.String())
	}
	return out
}

// TestPrometheusRealServerJobsAndMIG: a real Prometheus scraping a
// replayed dcgm-exporter with its HPC job mapping on (gpu1) and one with
// a GPU in MIG mode (gpu2): the query reclaimd sends gives gpu1's job
// labels as its map (GPU 3's two jobs, including one Slurm does not run)
// and gpu2's MIG devices as GPUs of their own, under Slurm's index, with
// their graphics engines' activity as utilisation.
func TestPrometheusRealServerJobsAndMIG(t *testing.T) {
	bin := promtest.Bin(t)
	jobs := replayExporter(t, "dcgm-exporter-hpc-job.prom")
	mig, err := os.ReadFile(filepath.Join("testdata", "dcgm-exporter-mig.prom"))
	if err != nil {
		t.Fatal(err)
	}
	migSrv := serveExposition(t, []byte(strings.ReplaceAll(string(mig), `Hostname="gpu1"`, `Hostname="gpu2"`)))
	host := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	base := promtest.Start(t, bin, fmt.Sprintf(`  - job_name: dcgm
    static_configs:
      - targets: [%q, %q]
`, host(jobs), host(migSrv)))
	deadline := time.Now().Add(45 * time.Second)
	for {
		v, err := promtest.Instant(base, `count_over_time(up{job="dcgm"}[1m]) >= 4 and up == 1`)
		if err == nil && len(v) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus did not scrape both replayed exporters 4 times in 45s (%v, %v)", v, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	p := &collect.Prometheus{URL: base, Step: time.Second, Window: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := p.Collect(ctx, []string{"gpu1", "gpu2"})
	if err != nil {
		t.Fatalf("Collect() = %v\nquery: %s", err, p.Query([]string{"gpu1", "gpu2"}))
	}
	k := func(node string, i int) decide.GPUKey { return decide.GPUKey{Node: node, Index: i} }
	wantHolders := map[decide.GPUKey][]int64{k("gpu1", 0): {2}, k("gpu1", 1): {2}, k("gpu1", 2): {1}, k("gpu1", 3): {1, 4711}}
	if fmt.Sprint(res.Holders) != fmt.Sprint(wantHolders) || res.MapFrom != collect.MapFromDCGM {
		t.Errorf("Holders = %v (from %v), want %v from dcgm-exporter's labels", res.Holders, res.MapFrom, wantHolders)
	}
	for key, util := range map[decide.GPUKey]float64{k("gpu2", 0): 0, k("gpu2", 1): 91.2043, k("gpu2", 2): 97, k("gpu1", 0): 95} {
		n, ss := recentOf(res, key)
		if n < 3 {
			t.Errorf("%s: %d samples, want several", key, n)
			continue
		}
		if got := ss[len(ss)-1].UtilPercent; got < util-1e-6 || got > util+1e-6 {
			t.Errorf("%s: utilisation %v, want %v", key, got, util)
		}
	}
	if _, ok := res.Windows[k("gpu2", 3)]; ok || len(res.Failed) != 0 {
		t.Errorf("gpu2 has a GPU 3 (%v) or a node failed (%v): want its MIG GPU judged only as its two MIG devices", ok, res.Failed)
	}
}
