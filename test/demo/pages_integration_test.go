//go:build integration

package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/browsertest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// TestPagesStep runs the demo's last step, pages.sh, as demo.sh runs it:
// strata-portal-api serve over the Slurm 26.05 test bed with the demo
// policy's tenant map (strata-policy render; nothing in Slurm changes),
// then every page checked in headless Chromium for alice and for the
// operator, screenshots kept, and the URL and two fresh one-time links
// printed, each of which signs in.
func TestPagesStep(t *testing.T) {
	if browsertest.Path() == "" {
		browsertest.Tab(t) // skips, or fails under CI=true
	}
	var bed *testbed.Bed
	for _, b := range testbed.All(t) {
		if b.Cluster == "s2605" {
			bed = b
		}
	}
	if bed == nil {
		t.Skip("no Slurm 26.05 test bed (cluster s2605) in " + testbed.EnvVar)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	for _, pkg := range []string{"./portal-api/cmd/strata-portal-api", "./policy/cmd/strata-policy", "./test/demo"} {
		out := filepath.Join(bin, filepath.Base(pkg))
		if pkg == "./test/demo" {
			out = filepath.Join(bin, "strata-demo")
		}
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = "../.."
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	if b, err := exec.Command(filepath.Join(bin, "strata-policy"), "--log-level", "warn", "render", "--policy", "policy.yaml",
		"--output-dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("strata-policy render: %v\n%s", err, b)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := filepath.Join(dir, "portal-api.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `apiVersion: strata/v1
kind: PortalConfig
listen: %[1]s
database: %[2]s/portal.db
pages:
  public_url: http://%[1]s
clusters:
  - name: %[3]s
    slurmrestd_url: %[4]s
    jwt_key_file: %[5]s
    poll_user: %[6]s
    tenants_file: %[2]s/tenants.json
    poll_interval: 2s
    stale_after: 10s
`, addr, dir, bed.Cluster, bed.URL, bed.JWTKey, bed.AdminUser), 0o644); err != nil {
		t.Fatal(err)
	}
	serve := exec.Command(filepath.Join(bin, "strata-portal-api"), "--config", cfg, "serve")
	logf, _ := os.Create(filepath.Join(dir, "daemon.log"))
	serve.Stdout, serve.Stderr = logf, logf
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait() })
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if i > 100 {
			b, _ := os.ReadFile(filepath.Join(dir, "daemon.log"))
			t.Fatalf("strata-portal-api serve did not listen on %s: %s", addr, b)
		}
		time.Sleep(100 * time.Millisecond)
	}

	shots := filepath.Join(browsertest.ArtifactDir(t, "demo-pages"))
	cmd := exec.Command("bash", "pages.sh", cfg, shots)
	cmd.Env = append(os.Environ(), "BIN="+bin)
	out, err := cmd.CombinedOutput()
	t.Logf("pages.sh:\n%s", out)
	if err != nil {
		t.Fatalf("pages.sh: %v", err)
	}
	for _, want := range []string{"alice-home-en.png", "alice-submit-ko.png", "root-operator-ko.png", "root-operator_nodes_s2605-en.png"} {
		if _, err := os.Stat(filepath.Join(shots, want)); err != nil {
			t.Errorf("no screenshot %s: %v", want, err)
		}
	}
	if !strings.Contains(string(out), "The pages are running at http://"+addr) {
		t.Errorf("pages.sh did not print the pages' URL")
	}
	links := regexp.MustCompile(`(?m)^ +(alice|root) \(.*\): +(http://\S+/signin/link\?t=\S+)$`).FindAllStringSubmatch(string(out), -1)
	if len(links) != 2 {
		t.Fatalf("pages.sh printed %d sign-in links, want alice's and root's", len(links))
	}
	// The printed links are fresh: the check spent its own.
	var v visits
	for _, m := range links {
		if err := v.Set(m[1] + " " + m[2] + " /"); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkPages(t.Context(), v, t.TempDir(), os.Stderr); err != nil {
		t.Errorf("a printed link does not sign in: %v", err)
	}
}
