package agent

import (
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/source"
)

// metricsNode is a node of three GPUs in the replay format, recorded twice
// 10 s apart (so the replay is over 20 s after its start): GPU 0 busy on
// Hopper (SM activity known), GPU 1 idle, GPU 2 in MIG mode (no
// utilisation).
const metricsNode = "offset_seconds,gpu,model,util,mem_activity,sm_active,mem_used_mib,mem_total_mib,mig,jobs\n" +
	"0,0,NVIDIA H100 80GB HBM3,97,42,61.5,30500,81559,false,1001\n" +
	"0,1,NVIDIA H100 80GB HBM3,0,0,,0,81559,false,\n" +
	"0,2,NVIDIA H100 80GB HBM3,,,,1024,81559,true,1002\n" +
	"10,0,NVIDIA H100 80GB HBM3,97,42,61.5,30500,81559,false,1001\n" +
	"10,1,NVIDIA H100 80GB HBM3,0,0,,0,81559,false,\n" +
	"10,2,NVIDIA H100 80GB HBM3,,,,1024,81559,true,1002\n"

func metricsAgent(t *testing.T) (*Agent, *clock) {
	t.Helper()
	rec, err := source.ParseRecording("metrics.csv", strings.NewReader(metricsNode))
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: t0}
	a, err := New(Config{
		Node: "gpu01", Source: source.NewReplay(rec, t0, false), Procs: ProcFS{Root: t.TempDir()},
		Logger: discard(), Now: c.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, c
}

func scrape(t *testing.T, a *Agent) string {
	t.Helper()
	resp := get(t, a.Handler(), http.MethodGet, "/metrics")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	return string(readAll(t, resp.Body))
}

// The exposition after one good and one failed round, byte for byte, and
// as promtool lints it.
func TestMetricsGolden(t *testing.T) {
	a, c := metricsAgent(t)
	if err := a.SampleOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Minute)
	if err := a.SampleOnce(t.Context()); !errors.Is(err, source.ErrReplayEnded) {
		t.Fatalf("SampleOnce() after the replay's end = %v, want ErrReplayEnded", err)
	}
	c.Add(-time.Minute + 10*time.Second) // back within StaleAfter of the good round
	got := scrape(t, a)
	golden(t, "metrics.golden", []byte(got))

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found, so the exposition is not linted: apt-get install prometheus (Debian) provides it")
	}
	cmd := exec.CommandContext(t.Context(), promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(got)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// Gauges of GPUs whose latest sample is stale are withdrawn; the counters
// and the last sample's time stay.
func TestMetricsWithdrawStaleGPUs(t *testing.T) {
	a, c := metricsAgent(t)
	if err := a.SampleOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.Add(31 * time.Second)
	got := scrape(t, a)
	if strings.Contains(got, "strata_reclaim_agent_gpu_") {
		t.Errorf("stale GPU gauges still exported:\n%s", got)
	}
	for _, want := range []string{
		"strata_reclaim_agent_samples_total 1\n",
		"strata_reclaim_agent_last_sample_timestamp_seconds 1.7723664e+09\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("exposition lacks %q:\n%s", want, got)
		}
	}
}

// Job ids must never become labels: one series per job would grow without
// bound.
func TestMetricsLabelsBounded(t *testing.T) {
	a, _ := metricsAgent(t)
	if err := a.SampleOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(scrape(t, a)) {
		if !strings.HasPrefix(line, "strata_reclaim_agent_gpu_") {
			continue
		}
		labels := line[strings.Index(line, "{")+1 : strings.Index(line, "}")]
		if !strings.HasPrefix(labels, `gpu="`) || strings.Count(labels, "=") != 2 || !strings.Contains(labels, `,model="`) {
			t.Errorf("labels of %q: want gpu and model only", strings.TrimSpace(line))
		}
	}
}
