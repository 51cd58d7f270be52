//go:build integration

package dashboards_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	promql "github.com/prometheus/prometheus/promql/parser"

	"github.com/strata-hpc/strata/internal/dashboards"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// TargetsVar names more running daemons to scrape, as job=host:port
// separated by spaces (a bridge on the Kubernetes test bed, a reclaimd
// controller with live agents): their panels must then return data too.
const TargetsVar = "STRATA_DASHBOARD_TARGETS"

// TestQueriesOnPrometheus runs every panel query on a real Prometheus
// (Debian's package) that scrapes the Slurm 26.05 test bed's slurmctld, a
// reclaimd controller on that bed, a reclaimd agent replaying a recording,
// a dcgm-exporter per node of the bed (testdata/dcgm-exporter.prom, with
// hpc_job from the mapping files the slurm-plugins prolog writes for the
// test's GPU job) and the daemons of STRATA_DASHBOARD_TARGETS. Each query
// must be accepted; each whose every metric some target exports must
// return data, and every query on a job's GPUs must. Queries on metrics no
// target has (node_exporter, kube-state-metrics, the recovery counters
// before their first event) are logged, not failed. After the epilog, the
// job's GPUs lose their hpc_job.
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
	running := testbed.WaitJob(t, bed.Client(t), job, 2*time.Minute, "running on its GPUs",
		func(j slurmrest.Job) bool { return j.Running() && len(j.GPUs) > 0 })
	dir := t.TempDir()
	// The job's GPUs mapped as slurmd's prolog maps them on each node, and
	// a dcgm-exporter on every node of the bed that reads the mapping.
	mapDir := filepath.Join(dir, "dcgm-job-map")
	mapJob(t, "dcgm-job-map-prolog.sh", mapDir, running)
	var dcgm []string
	for _, node := range bed.Nodes {
		dcgm = append(dcgm, dcgmExporter(t, node, bed.GPUsPerNode, filepath.Join(mapDir, node)))
	}
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
		"api.token":   "dashboard test API token\n",
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
api: {token_file: ` + filepath.Join(dir, "api.token") + `}
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
	targets := map[string][]string{"strata-reclaimd": {ctlAddr}, "strata-reclaimd-agent": {agentAddr}, "dcgm-exporter": dcgm}
	nTargets := 2 + len(dcgm)
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

	// The join the GPU panels make: dcgm-exporter's series of the job's
	// GPUs, and reclaimd's series of the job with its tenant.
	id := strconv.FormatInt(job, 10)
	var jobGPUs, info []result
	if err := query(api, `DCGM_FI_DEV_GPU_UTIL{hpc_job="`+id+`"}`, &jobGPUs); err != nil || len(jobGPUs) != len(running.GPUs) {
		t.Errorf("dcgm-exporter has %d GPU series of job %s (%v), want its %d GPUs %v", len(jobGPUs), id, err, len(running.GPUs), running.GPUs)
	}
	if err := query(api, `strata_reclaim_job_info{hpc_job="`+id+`"}`, &info); err != nil || len(info) != 1 ||
		info[0].Metric["tenant"] != "testbed" || info[0].Metric["account"] != bed.Account {
		t.Errorf("strata_reclaim_job_info of job %s: %v (%v), want one series of tenant testbed, account %s\n%s", id, info, err, bed.Account, logsOf(dir))
	}

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
		case len(missing) > 0 && strings.Contains(l.Query.Expr, "hpc_job"):
			t.Errorf("%s, %q: %s is not checked for data, no target has %s", l.Board, l.Panel, l.Query.Expr, strings.Join(missing, ", "))
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

	// The epilog takes the job out of the mapping: at the next scrapes its
	// GPUs' series have no hpc_job, and Prometheus marks the old ones stale.
	mapJob(t, "dcgm-job-map-epilog.sh", mapDir, running)
	deadline = time.Now().Add(10 * time.Second)
	for {
		var left []result
		err := query(api, `DCGM_FI_DEV_GPU_UTIL{hpc_job="`+id+`"}`, &left)
		if err == nil && len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("job %s still labels GPUs 10 s after its epilog: %v (%v)", id, left, err)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// mapJob runs the slurm-plugins prolog or epilog for the job on each of
// its nodes as slurmd would (its variables, no PATH), each node's mapping
// in dir/<node>.
func mapJob(t *testing.T, script, dir string, j slurmrest.Job) {
	t.Helper()
	gpus := map[string][]string{}
	for _, g := range j.GPUs {
		gpus[g.Node] = append(gpus[g.Node], strconv.Itoa(g.Index))
	}
	for node, idx := range gpus {
		cmd := exec.Command(filepath.Join("..", "..", "slurm-plugins", script))
		cmd.Env = []string{"STRATA_DCGM_JOB_MAP_DIR=" + filepath.Join(dir, node), "SLURM_JOB_ID=" + strconv.FormatInt(j.ID, 10),
			"SLURM_JOB_GPUS=" + strings.Join(idx, ","), "CUDA_VISIBLE_DEVICES=" + strings.Join(idx, ","),
			"SLURM_JOB_USER=" + j.User, "SLURM_JOB_ACCOUNT=" + j.Account, "SLURMD_NODENAME=" + node}
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Fatalf("%s on %s: %v\n%s", script, node, err, out)
		}
	}
}

var gpuLabel = regexp.MustCompile(`\{gpu="([0-9]+)"`)

// dcgmExporter serves testdata/dcgm-exporter.prom as the node's
// dcgm-exporter with --hpc-job-mapping-dir mapDir: its first gpus GPUs,
// Hostname the node, and, read at each scrape as dcgm-exporter's HPC
// mapper reads it (NVIDIA/dcgm-exporter's
// internal/pkg/transformation/hpc.go), one copy of a GPU's line per job
// id in the file named by the GPU's index, with hpc_job after the other
// labels. It returns its address.
func dcgmExporter(t *testing.T, node string, gpus int, mapDir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "dcgm-exporter.prom"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if m := gpuLabel.FindStringSubmatch(l); m != nil {
			if i, _ := strconv.Atoi(m[1]); i >= gpus {
				continue
			}
		}
		lines = append(lines, strings.ReplaceAll(l, `Hostname="gpu01"`, `Hostname="`+node+`"`))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		jobs := map[string][]string{}
		entries, _ := os.ReadDir(mapDir) // no directory yet: no job
		for _, e := range entries {
			if _, err := strconv.Atoi(e.Name()); err != nil || e.IsDir() {
				continue
			}
			b, err := os.ReadFile(filepath.Join(mapDir, e.Name()))
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			jobs[e.Name()] = strings.Fields(string(b))
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		var b strings.Builder
		for _, l := range lines {
			m := gpuLabel.FindStringSubmatch(l)
			if m == nil || len(jobs[m[1]]) == 0 {
				b.WriteString(l + "\n")
				continue
			}
			end := strings.LastIndex(l, "}")
			for _, j := range jobs[m[1]] {
				b.WriteString(l[:end] + `,hpc_job="` + j + `"` + l[end:] + "\n")
			}
		}
		_, _ = io.WriteString(w, b.String())
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
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
