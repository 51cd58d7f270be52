// Package promtest runs a real Prometheus (Debian's package prometheus)
// on loopback for tests: started on a free port with the scrape
// configuration a test gives, killed when the test ends, its log printed
// when the test failed.
package promtest

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Client asks the Prometheus under test; loopback answers fast.
var Client = &http.Client{Timeout: 5 * time.Second}

// Bin is the prometheus binary, or skips the test when it is not on PATH.
func Bin(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("the prometheus binary is not on PATH: install Debian's package prometheus (make deps installs it)")
	}
	return bin
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs bin on a free loopback port, scraping every second with the
// given scrape_configs entries (YAML indented by two spaces), and returns
// its base URL once it is ready.
func Start(t testing.TB, bin, scrapeConfigs string) string {
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
		if err := <-exited; err != nil {
			t.Logf("prometheus stopped: %v", err) // killed, as meant
		}
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
		if resp, err := Client.Get(base + "/-/ready"); err == nil {
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

// Instant runs an instant query and returns its vector's values.
func Instant(base, q string) ([]float64, error) {
	resp, err := Client.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
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

// WaitScrapes waits until query (such as `count_over_time(up{job="x"}[1m]) >= 5`)
// returns want series, for at most timeout.
func WaitScrapes(t testing.TB, base, query string, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v, err := Instant(base, query)
		if err == nil && len(v) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: %s gave %v (%v), want %d series, after %s", query, v, err, want, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
