package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"

	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/ha"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/bridge/internal/watch"
	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

var update = flag.Bool("update", false, "rewrite the golden files from the code's output")

// site writes a configuration like the shipped example, with every path
// in a temporary folder, and returns its path.
func site(t *testing.T, withServing bool) (cfgPath, dir string) {
	t.Helper()
	dir = t.TempDir()
	for _, d := range []string{"shared/projects", "state"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runtimes, err := filepath.Abs("../../../etc/strata/bridge/runtimes")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"bridge.jwt":       "token\n",
		"bridge-api.token": "api-token\n",
		"kubeconfig": `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`,
		"bridge.yaml": strings.NewReplacer("DIR", dir, "RUNTIMES", runtimes).Replace(`apiVersion: strata/v1
kind: BridgeConfig
slurm: {url: "http://127.0.0.1:1", user: strata-bridge, token_file: DIR/bridge.jwt, poll_interval: 30s}
kubernetes: {kubeconfig: DIR/kubeconfig}
policy: {serving_file: DIR/serving.json}
models:
  allowed_roots: [DIR/shared/projects]
  mount: {kind: hostPath, path: /shared, root: DIR/shared}
runtimes: {dir: RUNTIMES}
store: {path: DIR/state/bridge.db}
api: {token_file: DIR/bridge-api.token}
`),
	}
	if withServing {
		files["serving.json"] = `{"apiVersion": "strata/v1", "kind": "ServingQuotas", "tenants": [
  {"name": "acme", "namespace": "strata-acme", "gpus": 8, "replicas": 4, "projects": [{"name": "llm", "account": "acme-llm"}]}]}`
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "bridge.yaml"), dir
}

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(t.Context(), append([]string{"strata-bridge"}, args...), &out, &errb)
	return out.String() + errb.String(), err
}

func TestVerbs(t *testing.T) {
	good, _ := site(t, true)
	noServing, dir := site(t, false)
	tests := map[string]struct {
		args     []string
		wantCode int // cliexit code; 0 none
		want     []string
	}{
		"help teaches": {args: []string{"--help"},
			want: []string{"deploy", "list", "status", "rollback", "delete", "run", "check-config", "strata:serve=<name>", "strata-serve.yaml",
				"--apply", "Exit codes: 0 done, 1 error, 2 usage error", "3 refused by a check, 4 applied but not rolled out"}},
		"deploy help": {args: []string{"deploy", "--help"}, want: []string{"--job", "--name", "--apply", "strata-bridge deploy --job 4242 --apply"}},
		"check-config, good": {args: []string{"-c", good, "check-config"},
			want: []string{"serving.json: 1 tenants", good + " is valid (http://127.0.0.1:1 every 30s, field manager strata-bridge"}},
		"check-config, no serving.json": {args: []string{"-c", noServing, "check-config"}, wantCode: 1,
			want: []string{"1 problem:", "policy.serving_file: open " + filepath.Join(dir, "serving.json")}},
		"check-config, no file": {args: []string{"-c", "/nonexistent/bridge.yaml", "check-config"}, wantCode: 1,
			want: []string{"/nonexistent/bridge.yaml"}},
		"list, empty":       {args: []string{"-c", good, "list"}, want: []string{"no deployments"}},
		"list, empty, json": {args: []string{"-c", good, "--json", "list"}, want: []string{`"deployments": []`}},
		"deploy without job": {args: []string{"-c", good, "deploy"}, wantCode: cliexit.ExitUsage,
			want: []string{"deploy: missing JOB: give it as an argument or as --job (usage: strata-bridge deploy [options] JOB)"}},
		"deploy, job and --job differ": {args: []string{"-c", good, "deploy", "--job", "1", "2"}, wantCode: cliexit.ExitUsage,
			want: []string{`deploy: the JOB "2" and --job "1" disagree`}},
		"deploy, not a job id": {args: []string{"-c", good, "deploy", "x"}, wantCode: cliexit.ExitUsage, want: []string{`deploy: JOB "x"`}},
		"deploy, two jobs": {args: []string{"-c", good, "deploy", "1", "2"}, wantCode: cliexit.ExitUsage,
			want: []string{`deploy: unexpected argument "2": deploy takes 1 argument, JOB`}},
		"deploy, job as argument, missing config": {args: []string{"-c", "/nonexistent/bridge.yaml", "deploy", "4242", "--apply"}, wantCode: 1,
			want: []string{"/nonexistent/bridge.yaml"}},
		"status without name": {args: []string{"-c", good, "status"}, wantCode: cliexit.ExitUsage,
			want: []string{"status: missing NAME (usage: strata-bridge status [options] NAME)"}},
		"status, two names": {args: []string{"-c", good, "status", "a", "b"}, wantCode: cliexit.ExitUsage,
			want: []string{`status: unexpected argument "b": status takes 1 argument, NAME`}},
		"list, an argument": {args: []string{"-c", good, "list", "llama"}, wantCode: cliexit.ExitUsage,
			want: []string{`list: unexpected argument "llama": list takes no arguments (usage: strata-bridge list [options])`}},
		"check-config, file as argument": {args: []string{"check-config", good}, want: []string{good + " is valid ("}},
		"check-config, no file as argument": {args: []string{"check-config", "/nonexistent/bridge.yaml"}, wantCode: 1,
			want: []string{"/nonexistent/bridge.yaml"}},
		"check-config, file and --config differ": {args: []string{"-c", good, "check-config", noServing}, wantCode: cliexit.ExitUsage,
			want: []string{"disagree"}},
		"check-config, two files": {args: []string{"check-config", good, good}, wantCode: cliexit.ExitUsage,
			want: []string{"check-config takes at most 1 argument, [CONFIG]"}},
		"run, no file as argument": {args: []string{"run", "/nonexistent/bridge.yaml"}, wantCode: 1, want: []string{"/nonexistent/bridge.yaml"}},
		"run, two files":           {args: []string{"run", good, "x"}, wantCode: cliexit.ExitUsage, want: []string{`run: unexpected argument "x"`}},
		"unknown verb": {args: []string{"-c", good, "lsit"}, wantCode: cliexit.ExitUsage,
			want: []string{`unknown command "lsit": want one of deploy, list, status, rollback, delete, run, check-config`}},
		"status of nothing":  {args: []string{"-c", good, "status", "llama"}, wantCode: 1, want: []string{"deployment llama: not found", "strata-bridge list"}},
		"rollback, bad --to": {args: []string{"-c", good, "rollback", "llama", "--to", "v1"}, wantCode: 1, want: []string{`--to: version "v1": want job-<id>`}},
		"rollback of nothing is refused": {args: []string{"-c", good, "rollback", "llama"}, wantCode: exitRefused,
			want: []string{"refused by the version check", `there is no deployment named "llama"`}},
		"rollback, flags before the name": {args: []string{"-c", good, "rollback", "--to", "job-12", "--apply", "llama"}, wantCode: exitRefused,
			want: []string{`there is no deployment named "llama"`}},
		"rollback, --to= after the name": {args: []string{"-c", good, "rollback", "llama", "--to=job-x"}, wantCode: 1,
			want: []string{`--to: version "job-x"`}},
		"rollback, two names": {args: []string{"-c", good, "rollback", "a", "b"}, wantCode: cliexit.ExitUsage,
			want: []string{`rollback: unexpected argument "b": rollback takes 1 argument, NAME (usage: strata-bridge rollback [options] NAME)`}},
		"rollback, unknown flag": {args: []string{"-c", good, "rollback", "a", "--force"}, wantCode: cliexit.ExitUsage,
			want: []string{"rollback: flag provided but not defined: -force", "see strata-bridge rollback --help"}},
		"rollback, --to alone": {args: []string{"-c", good, "rollback", "a", "--to"}, wantCode: cliexit.ExitUsage,
			want: []string{"rollback: flag needs an argument: -to"}},
		"delete, two names": {args: []string{"-c", good, "delete", "a", "--apply", "b"}, wantCode: cliexit.ExitUsage,
			want: []string{`delete: unexpected argument "b"`}},
		"delete, unknown": {args: []string{"-c", good, "delete", "llama", "--apply"}, wantCode: 1, want: []string{`there is no deployment named "llama"`}},
		"bad log level":   {args: []string{"--log-level", "loud", "list"}, wantCode: 1, want: []string{"--log-level"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := runCLI(t, tc.args...)
			if code := cliexit.CodeOf(err); code != tc.wantCode {
				t.Errorf("exit code %d (%v), want %d\n%s", code, err, tc.wantCode, out)
			}
			if err != nil {
				out += err.Error()
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// slurmDown is slurmrestd failing, at the edge.
type slurmDown struct{}

func (slurmDown) Jobs(context.Context, time.Time) (slurmrest.JobList, error) {
	return slurmrest.JobList{}, errors.New("connection refused")
}

// The daemon's exposition: the strata_bridge_* families after one failed
// poll and one refused rollback, byte for byte against the golden file,
// and as promtool lints it. go test -update rewrites the golden file.
func TestMetricsGolden(t *testing.T) {
	ctx := t.Context()
	reg := registry()
	dm := deploy.NewMetrics(reg)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "bridge.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	kube, err := deploy.NewKube(&rest.Config{Host: "https://127.0.0.1:1"}, "strata-bridge")
	if err != nil {
		t.Fatal(err)
	}
	empty := &servingquota.File{APIVersion: servingquota.APIVersion, Kind: servingquota.Kind}
	dep, err := deploy.New(deploy.Config{Kube: kube, Store: st, Serving: func() *servingquota.File { return empty }, Metrics: dm})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watch.New(watch.Config{Slurm: slurmDown{}, Deployer: dep, Store: st, Metrics: watch.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Poll(ctx); err == nil {
		t.Fatal("poll with slurmrestd down did not fail")
	}
	var ref *deploy.Refusal
	if _, err := dep.Rollback(ctx, "nope", 0, deploy.Options{}); !errors.As(err, &ref) {
		t.Fatalf("rollback of nothing: %v", err)
	}
	// The lease, held on SQLite from the first renewal.
	lease := st.NewLease("test", 15*time.Second)
	co := ha.New(ha.Config{Lease: lease, Deployer: dep, Store: st, Metrics: ha.NewMetrics(reg)})
	var wg sync.WaitGroup
	co.Step(ctx, &wg)
	wg.Wait()
	if !co.Active() {
		t.Fatal("not active on SQLite after one renewal")
	}
	// The store open and slurmrestd reached (strata_bridge_database_connected and
	// strata_bridge_slurmrestd_connected 1).
	newDBWait("bridge.db", "http://slurmrestd:6820", reg, http.NotFoundHandler()).opened(http.NotFoundHandler())

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var keep []string
	for _, line := range strings.SplitAfter(string(body), "\n") {
		if strings.Contains(line, "strata_bridge_") {
			keep = append(keep, line)
		}
	}
	got := strings.Join(keep, "")
	const golden = "testdata/metrics.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("exposition differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (apt-get install prometheus): the lint is skipped")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(got)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestSecrets: check-config refuses a secret every user can read (the
// slurmrestd token, the API token, a kubeconfig with credentials and the
// key file it names) and warns about one another group can read, and
// about a listen address other hosts reach without TLS; run refuses to
// start with a refused secret.
func TestSecrets(t *testing.T) {
	tests := map[string]struct {
		file     string // in the site's folder
		mode     os.FileMode
		listen   string
		pg       bool // the store in PostgreSQL, its password in db.password
		empty    bool // the file is empty
		wantCode int
		want     []string
	}{
		"world-readable database password": {pg: true, file: "db.password", mode: 0o644, wantCode: 1,
			want: []string{"store.database_password_file: ", "db.password (mode 0644) is readable or writable by every user"}},
		"empty database password": {pg: true, file: "db.password", mode: 0o600, empty: true, wantCode: 1,
			want: []string{"store.database_password_file: "}},
		"postgres with every file 0600": {pg: true, want: []string{" is valid ("}},
		"world-readable slurmrestd token": {file: "bridge.jwt", mode: 0o644, wantCode: 1,
			want: []string{"slurm.token_file: ", "bridge.jwt (mode 0644) is readable or writable by every user of this host: chmod o-rwx"}},
		"world-readable API token": {file: "bridge-api.token", mode: 0o604, wantCode: 1, want: []string{"api.token_file: ", "(mode 0604)"}},
		"world-writable API token": {file: "bridge-api.token", mode: 0o602, wantCode: 1, want: []string{"api.token_file: "}},
		"world-readable kubeconfig with a token": {file: "kubeconfig", mode: 0o644, wantCode: 1,
			want: []string{"kubernetes.kubeconfig: ", "kubeconfig (mode 0644)"}},
		"world-readable key the kubeconfig names": {file: "client.key", mode: 0o644, wantCode: 1,
			want: []string{"kubernetes.kubeconfig ", "names ", "client.key, which: ", "(mode 0644)"}},
		"0600 everywhere": {want: []string{" is valid ("}},
		"no API token": {file: "bridge-api.token", mode: 0, wantCode: 1,
			want: []string{"api.token_file: ", "bridge-api.token does not exist: make it with head -c 32 /dev/urandom | base64 >"}},
		"every address": {listen: "0.0.0.0:9464",
			want: []string{"WARNING: listen 0.0.0.0:9464 is not a loopback address and the API has no TLS", " is valid ("}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfgPath, dir := site(t, true)
			key := filepath.Join(dir, "client.key")
			if err := os.WriteFile(key, []byte("key"), 0o600); err != nil {
				t.Fatal(err)
			}
			kc := strings.Replace(mustRead(t, filepath.Join(dir, "kubeconfig")), "{token: x}", "{token: x, client-key: "+key+"}", 1)
			if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte(kc), 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.listen != "" {
				if err := os.WriteFile(cfgPath, []byte(mustRead(t, cfgPath)+"listen: "+tc.listen+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.pg {
				cfg := strings.Replace(mustRead(t, cfgPath), "store: {path: "+dir+"/state/bridge.db}",
					"store: {path: "+dir+"/state/bridge.db, database: \"postgres://strata_bridge@127.0.0.1:1/strata_bridge\", database_password_file: "+
						dir+"/db.password}", 1)
				pw := "db-password\n"
				if tc.empty {
					pw = ""
				}
				if err := os.WriteFile(filepath.Join(dir, "db.password"), []byte(pw), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.file != "" && tc.mode == 0 {
				if err := os.Remove(filepath.Join(dir, tc.file)); err != nil {
					t.Fatal(err)
				}
			} else if tc.file != "" {
				if err := os.Chmod(filepath.Join(dir, tc.file), tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			out, err := runCLI(t, "-c", cfgPath, "check-config")
			if code := cliexit.CodeOf(err); code != tc.wantCode {
				t.Fatalf("check-config: exit code %d (%v), want %d\n%s", code, err, tc.wantCode, out)
			}
			if err != nil {
				out += err.Error()
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("check-config output lacks %q:\n%s", w, out)
				}
			}
			for _, secret := range []string{"api-token", "token\n", "db-password"} {
				if strings.Contains(out, secret) {
					t.Errorf("check-config quotes a secret:\n%s", out)
				}
			}
			if tc.wantCode == 0 {
				return
			}
			_, err = runCLI(t, "-c", cfgPath, "run")
			if err == nil || !strings.Contains(err.Error(), tc.want[0]) {
				t.Errorf("run = %v, want a refusal with %q", err, tc.want[0])
			}
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCheckConfigHostRoot: with models.host_root, check-config looks for
// the allowed roots where this host sees them (under host_root), as
// deploy reads models there; the same config without host_root is a
// problem, because /slurmside does not exist on this host.
func TestCheckConfigHostRoot(t *testing.T) {
	good, dir := site(t, true)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	slurmSide := "/strata-test-slurm-side-" + filepath.Base(dir)
	if err := os.MkdirAll(filepath.Join(dir, "hr", slurmSide, "projects"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer(
		"allowed_roots: ["+dir+"/shared/projects]", "allowed_roots: ["+slurmSide+"/projects]\n  host_root: HOSTROOT",
		"root: "+dir+"/shared}", "root: "+slurmSide+"}",
	).Replace(string(data))
	for _, tc := range []struct {
		name, hostRoot string
		wantCode       int
		want           string
	}{
		{"under host_root", filepath.Join(dir, "hr"), 0, " is valid ("},
		{"without host_root", "", 1, "models.allowed_roots[0]: " + slurmSide + "/projects is not a folder on this host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(cfg, "HOSTROOT", tc.hostRoot, 1)
			if tc.hostRoot == "" {
				text = strings.Replace(cfg, "\n  host_root: HOSTROOT", "", 1)
			}
			path := filepath.Join(dir, tc.name+".yaml")
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := runCLI(t, "-c", path, "check-config")
			if code := cliexit.CodeOf(err); code != tc.wantCode {
				t.Fatalf("exit code %d (%v), want %d\n%s\nconfig:\n%s", code, err, tc.wantCode, out, text)
			}
			if err != nil {
				out += err.Error()
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}
