//go:build integration

// The Prometheus collector against a real Prometheus (Debian's package
// prometheus) that scrapes two replayed dcgm-exporters on loopback:
//
//	go test -race -count=1 -tags integration -run Prometheus ./reclaimd/internal/collect/

package collect_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// httpClient asks the Prometheus under test; loopback answers fast.
var httpClient = &http.Client{Timeout: 5 * time.Second}

// replayExporter serves a recorded dcgm-exporter exposition at /metrics,
// as dcgm-exporter does.
func replayExporter(t *testing.T, file string) *httptest.Server {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
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

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startPrometheus runs the prometheus binary on a free loopback port with
// the given scrape config, and returns its base URL once it is ready. It
// kills it when the test ends, and prints its log if the test failed.
func startPrometheus(t *testing.T, bin, scrapeConfigs string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	yml := "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n" + scrapeConfigs
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "prometheus.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(bin,
		"--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=info")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("prometheus.yml:\n%s\nprometheus log:\n%s", yml, b)
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("prometheus exited before it was ready: %v", err)
		default:
		}
		if resp, err := httpClient.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus at %s not ready after 30s", base)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// instantQuery runs an instant query and returns its vector's values.
func instantQuery(base, q string) ([]float64, error) {
	resp, err := httpClient.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return nil, err
	}
	if ans.Status != "success" {
		return nil, errors.New(ans.Error)
	}
	var out []float64
	for _, r := range ans.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func TestPrometheusRealServer(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("the prometheus binary is not on PATH: install Debian's package prometheus (make deps installs it)")
	}
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
	base := startPrometheus(t, bin, scrape)

	// Wait until each target has been scraped at least 8 times.
	deadline := time.Now().Add(45 * time.Second)
	for {
		v, err := instantQuery(base, `count_over_time(up{job="dcgm"}[1m]) >= 8 and up == 1`)
		if err == nil && len(v) == 2 {
			break
		}
		if time.Now().After(deadline) {
			v, err := instantQuery(base, `up`)
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
			if len(res.Samples) != len(wants) {
				t.Errorf("Samples has %d GPUs, want %d: %v", len(res.Samples), len(wants), keys(res.Samples))
			}
			for key, w := range wants {
				samples := res.Samples[key]
				if len(samples) < 5 {
					t.Errorf("%s: %d samples, want several (at least 5 of the 30s window)", key, len(samples))
					continue
				}
				t.Logf("%s: %d samples from %s to %s", key, len(samples),
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

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func keys(m map[decide.GPUKey][]decide.Sample) []string {
	var out []string
	for k := range m {
		out = append(out, k.String())
	}
	return out
}
