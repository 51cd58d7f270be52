//go:build integration

package dashboards_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	promql "github.com/prometheus/prometheus/promql/parser"

	"github.com/strata-hpc/strata/internal/dashboards"
	"github.com/strata-hpc/strata/internal/testbed"
)

// TargetsVar names more running daemons to scrape, as job=host:port
// separated by spaces (a bridge on the Kubernetes test bed, a reclaimd
// controller with live agents): their panels must then return data too.
const TargetsVar = "STRATA_DASHBOARD_TARGETS"

// TestQueriesOnPrometheus runs every panel query on a real Prometheus
// (Debian's package) that scrapes the Slurm 26.05 test bed's slurmctld, a
// reclaimd controller on that bed, a reclaimd agent replaying a recording,
// and the daemons of STRATA_DASHBOARD_TARGETS. Each query must be
// accepted; each whose every metric some target exports must return
// data. Queries on metrics no target has (dcgm-exporter, node_exporter,
// kube-state-metrics, the recovery counters before their first event) are
// logged, not failed.
func TestQueriesOnPrometheus(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus is not installed (make deps installs Debian's prometheus package)")
		}
		t.Skip("prometheus is not installed (apt-get install prometheus): the dashboard queries are not run")
	}
	var bed *testbed.Bed
	for _, b := range testbed.All(t) {
		if b.MetricsURL != "" {
			bed = b
		}
	}
	if bed == nil {
		t.Skip("no test bed serves slurmctld's OpenMetrics (Slurm 26.05 does; 24.11 has no metrics plugin)")
	}
	// A GPU job, so the allocation panels have something to show.
	job := bed.Sbatch(t, bed.Users[0], "--gres=gpu:2", "--wrap", "sleep 300")
	t.Cleanup(func() { _ = bed.Client(t).Cancel(testbed.Context(t), job) })
	dir := t.TempDir()
	reclaimd := filepath.Join(dir, "reclaimd")
	if out, err := exec.Command("go", "build", "-o", reclaimd, "../../reclaimd/cmd/reclaimd").CombinedOutput(); err != nil {
		t.Fatalf("build reclaimd: %v\n%s", err, out)
	}

	agentAddr, ctlAddr, promAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	replay, err := filepath.Abs("../../reclaimd/internal/source/testdata/two-gpus.csv")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs("../../etc/strata/reclaim-rules.json")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"agent.token": "dashboard test agent secret\n",
		"tenants.json": `{"apiVersion": "strata/v1", "kind": "TenantMap", "cluster": "` + bed.Cluster + `", "admins": [],
  "tenants": [{"name": "testbed", "account": "` + bed.Account + `", "admins": [], "projects": []}]}`,
		"agent.yaml": `apiVersion: strata/v1
kind: ReclaimdConfig
slurm:
  url: http://127.0.0.1:1
  token_file: /nonexistent
agent:
  listen: ` + agentAddr + `
  node: gpu01
  interval: 1s
  window: 2h
  token_file: ` + filepath.Join(dir, "agent.token") + `
  replay: ` + replay + "\n",
		// The controller's agents are never reached ({node} names no
		// host here): its cycles count the missing samples.
		"controller.yaml": `apiVersion: strata/v1
kind: ReclaimdConfig
listen: ` + ctlAddr + `
state_file: ` + filepath.Join(dir, "reclaimd.db") + `
interval: 5s
rules_file: ` + rules + `
tenants_file: ` + filepath.Join(dir, "tenants.json") + `
slurm:
  url: ` + bed.URL + `
  user: ` + bed.AdminUser + `
  token_file: ` + bed.TokenFile + `
agents:
  url_template: http://127.0.0.1:1/{node}
  timeout: 1s
  token_file: ` + filepath.Join(dir, "agent.token") + "\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start(t, dir, "agent", reclaimd, "--config", filepath.Join(dir, "agent.yaml"), "agent")
	start(t, dir, "controller", reclaimd, "--config", filepath.Join(dir, "controller.yaml"), "run")

	mu, err := url.Parse(bed.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	// The daemons of STRATA_DASHBOARD_TARGETS join this test's own.
	targets := map[string][]string{"strata-reclaimd": {ctlAddr}, "strata-reclaimd-agent": {agentAddr}}
	nTargets := 2
	for _, kv := range strings.Fields(os.Getenv(TargetsVar)) {
		job, addr, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("%s: %q is not job=host:port", TargetsVar, kv)
		}
		targets[job] = append(targets[job], addr)
		nTargets++
	}
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n")
	for job, addrs := range targets {
		quoted := make([]string, len(addrs))
		for i, a := range addrs {
			quoted[i] = strconv.Quote(a)
		}
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs: [{targets: [%s]}]\n", job, strings.Join(quoted, ", "))
	}
	for _, p := range []string{"nodes", "partitions", "jobs", "jobs-users-accts", "scheduler"} {
		fmt.Fprintf(&cfg, "  - job_name: slurmctld-%s\n    metrics_path: %s/%s\n    static_configs: [{targets: [%q]}]\n",
			p, mu.Path, p, mu.Host)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, dir, "prometheus", prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+promAddr)

	api := "http://" + promAddr + "/api/v1/"
	// Every target up and scraped a few times (rates need two samples).
	deadline := time.Now().Add(90 * time.Second)
	for {
		var up []result
		err := query(api, "up", &up)
		n := 0
		for _, r := range up {
			if r.Value[1] == "1" {
				n++
			}
		}
		if err == nil && n == nTargets+5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every target is up after 90 s (%v): %v\n%s", err, up, logsOf(dir))
		}
		time.Sleep(time.Second)
	}
	time.Sleep(12 * time.Second) // two controller cycles

	var names []string
	if err := get(api+"label/__name__/values", &names); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	p := promql.NewParser(promql.Options{})
	withData := 0
	for _, l := range dashboards.Queries() {
		expr, err := p.ParseExpr(l.Query.PromQL())
		if err != nil {
			t.Errorf("%s, %q: %v", l.Board, l.Panel, err)
			continue
		}
		var res []result
		if err := query(api, l.Query.PromQL(), &res); err != nil {
			t.Errorf("%s, %q: Prometheus refuses %s: %v", l.Board, l.Panel, l.Query.Expr, err)
			continue
		}
		// A selector no target matches (a metric no daemon here exports,
		// a counter before its first event, a job not scraped) leaves the
		// query unchecked for data.
		var missing []string
		for _, sel := range selectors(expr) {
			var n []result
			if !have[sel.Name] {
				missing = append(missing, sel.Name)
			} else if err := query(api, "count("+sel.String()+")", &n); err != nil || len(n) == 0 {
				missing = append(missing, sel.String())
			}
		}
		switch {
		case len(missing) > 0:
			t.Logf("%s, %q: not checked for data, no target has %s", l.Board, l.Panel, strings.Join(missing, ", "))
		case len(res) == 0:
			t.Errorf("%s, %q: %s returns no data, though its metrics are scraped", l.Board, l.Panel, l.Query.PromQL())
		default:
			withData++
		}
	}
	if withData < 20 {
		t.Errorf("only %d queries returned data", withData)
	}
}

func selectors(expr promql.Expr) []*promql.VectorSelector {
	var out []*promql.VectorSelector
	promql.Inspect(expr, func(n promql.Node, _ []promql.Node) error {
		if vs, ok := n.(*promql.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

type result struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func query(api, q string, out *[]result) error {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := get(api+"query?query="+url.QueryEscape(q), &data); err != nil {
		return err
	}
	if data.ResultType != "vector" {
		return fmt.Errorf("result type %s, want vector", data.ResultType)
	}
	return json.Unmarshal(data.Result, out)
}

func get(u string, data any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: %w", body, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s", env.Error)
	}
	return json.Unmarshal(env.Data, data)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs a daemon for the test, its output in dir/name.log.
func start(t *testing.T, dir, name, bin string, args ...string) {
	t.Helper()
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log.Close()
	})
}

func logsOf(dir string) string {
	var b strings.Builder
	for _, name := range []string{"agent", "controller", "prometheus"} {
		f, err := os.Open(filepath.Join(dir, name+".log"))
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "--- %s\n", name)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
		}
		f.Close()
	}
	return b.String()
}
