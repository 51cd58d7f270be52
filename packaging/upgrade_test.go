//go:build integration

package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestUpgradeKeepsRendered: a site installs strata-policy and
// strata-reclaimd, renders its policy, and upgrades to packages whose
// example reclaim rules changed, with no one to answer a question (dpkg -i
// without input, as unattended-upgrades and configuration management run
// it). The upgrade passes and the rendered files stay as render wrote them:
// no package owns a rendered path, so dpkg has no conffile to ask about.
// (When reclaim-rules.json was both a conffile and rendered, this upgrade
// stopped at "end of file on stdin at conffile prompt" and left the
// package half-configured.)
func TestUpgradeKeepsRendered(t *testing.T) {
	c := newChroot(t)
	repo := repoRoot(t)
	bin := twoBinaries(t, repo)
	nfpm := nfpmTool(t, repo)
	newVersion := upgradeVersion

	// The new packages' tree: the repository's files, with a changed example.
	tree := t.TempDir()
	for _, p := range []string{"packaging", "etc", "slurm-plugins", "LICENSE"} {
		run(t, "", "cp", "-a", filepath.Join(repo, p), filepath.Join(tree, p))
	}
	example := filepath.Join(tree, "etc/strata/reclaim-rules.json")
	b, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(b), "{", "{\n  \"_comment\": \"the example of a later release\",", 1)
	if changed == string(b) {
		t.Fatal("could not change the example")
	}
	if err := os.WriteFile(example, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	parts := []string{"strata-policy", "strata-reclaimd"}
	oldDebs := pack(t, nfpm, repo, bin, oldVersion, parts)
	newDebs := pack(t, nfpm, tree, bin, newVersion, parts)

	out := c.must(append([]string{"dpkg", "-i"}, c.copyIn("old", oldDebs)...)...)
	t.Logf("dpkg -i (%s):\n%s", oldVersion, out)
	out = c.must("strata-policy", "render")
	t.Logf("strata-policy render:\n%s", out)
	renderedPaths := []string{"/etc/strata/rendered/reclaim-rules.json", "/etc/strata/rendered/tenants.json", "/etc/slurm/strata/policy.lua"}
	before := map[string]string{}
	for _, p := range renderedPaths {
		before[p] = c.must("cat", p)
	}

	// No input: a conffile question fails the upgrade.
	out, err = c.exec(append([]string{"dpkg", "-i"}, c.copyIn("new", newDebs)...)...)
	if err != nil {
		t.Fatalf("the upgrade to a changed example did not pass without a question: %v\n%s", err, out)
	}
	t.Logf("dpkg -i (upgrade to %s):\n%s", newVersion, out)
	if strings.Contains(out, "Configuration file") {
		t.Errorf("dpkg spoke of a configuration file:\n%s", out)
	}
	for _, part := range parts {
		if s := c.must("dpkg-query", "-W", "-f", "${Status} ${Version}", part); !strings.HasPrefix(s, "install ok installed "+newVersion) {
			t.Errorf("%s after the upgrade: %q, want installed at %s", part, s, newVersion)
		}
	}
	for _, p := range renderedPaths {
		if got := c.must("cat", p); got != before[p] {
			t.Errorf("the upgrade changed %s, which render wrote", p)
		}
	}
	if got := c.must("cat", "/usr/share/strata/examples/reclaim-rules.json"); got != changed {
		t.Errorf("the example after the upgrade is not the new one:\n%s", got)
	}
	// No package owns a rendered path.
	for _, p := range renderedPaths {
		if out, err := c.exec("dpkg", "-S", p); err == nil {
			t.Errorf("a package owns %s: %s", p, out)
		}
	}
	// The next render after the upgrade works and changes nothing.
	c.must("strata-policy", "render")
	for _, p := range renderedPaths {
		if got := c.must("cat", p); got != before[p] {
			t.Errorf("a render after the upgrade changed %s", p)
		}
	}
}

// twoBinaries returns a folder with strata-policy and reclaimd: those of
// STRATA_PACKAGES when set, else built here (no other part's).
func twoBinaries(t *testing.T, repo string) string {
	t.Helper()
	return binariesOf(t, repo, "strata-policy", "reclaimd")
}

// commands are the packaged binaries' main packages and whether they are
// built with cgo.
var commands = map[string]struct {
	pkg string
	cgo bool
}{
	"topogen":           {"./topogen/cmd/topogen", true},
	"strata-policy":     {"./policy/cmd/strata-policy", false},
	"reclaimd":          {"./reclaimd/cmd/reclaimd", true},
	"strata-bridge":     {"./bridge/cmd/strata-bridge", true},
	"strata-portal-api": {"./portal-api/cmd/strata-portal-api", true},
}

// binariesOf returns a folder with the named binaries: those of
// STRATA_PACKAGES when set, else built here (those alone).
func binariesOf(t *testing.T, repo string, names ...string) string {
	t.Helper()
	if d := os.Getenv("STRATA_PACKAGES"); d != "" {
		return filepath.Join(d, "bin")
	}
	bin := t.TempDir()
	for _, name := range names {
		c, ok := commands[name]
		if !ok {
			t.Fatalf("no main package known for %s", name)
		}
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin+"/", c.pkg)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+map[bool]string{false: "0", true: "1"}[c.cgo])
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", c.pkg, err, out)
		}
	}
	return bin
}

// docsOf returns the folder of the man pages and completion the packages
// ship: make packages' (beside STRATA_PACKAGES' binaries), or written here
// by the gen-docs verb of each binary in bin from tree's examples, as make
// packages writes them.
func docsOf(t *testing.T, tree, bin string) string {
	t.Helper()
	if d := os.Getenv("STRATA_PACKAGES"); d != "" {
		return filepath.Join(d, "doc")
	}
	doc := t.TempDir()
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			continue
		}
		out := filepath.Join(doc, b)
		run(t, tree, filepath.Join(bin, b), "gen-docs", "--out", out, "--examples", "etc/strata")
		pages, _ := filepath.Glob(filepath.Join(out, "*.[158]"))
		run(t, "", "gzip", append([]string{"-9n"}, pages...)...)
	}
	return doc
}

// nfpmTool returns the pinned nfpm: STRATA_NFPM, or the one make installs
// into ./bin.
func nfpmTool(t *testing.T, repo string) string {
	t.Helper()
	if p := os.Getenv("STRATA_NFPM"); p != "" {
		return p
	}
	find := func() string {
		m, _ := filepath.Glob(filepath.Join(repo, "bin", "nfpm-v*"))
		if len(m) == 0 {
			return ""
		}
		return m[len(m)-1]
	}
	if p := find(); p != "" {
		return p
	}
	run(t, "", "make", "-C", repo, "--no-print-directory", "tools")
	if p := find(); p != "" {
		return p
	}
	unavailable(t, "no nfpm in %s/bin after make tools (or set STRATA_NFPM)", repo)
	return ""
}

// pack builds the debs of parts from the tree at version and returns them.
func pack(t *testing.T, nfpm, tree, bin, version string, parts []string) []string {
	t.Helper()
	dist := t.TempDir()
	doc := docsOf(t, tree, bin)
	var debs []string
	for _, part := range parts {
		cmd := exec.Command(nfpm, "package", "--config", "packaging/nfpm/"+part+".yaml", "--packager", "deb", "--target", dist+"/")
		cmd.Dir = tree
		cmd.Env = append(os.Environ(), "STRATA_PKG_VERSION="+version, "STRATA_PKG_RELEASE=1",
			"STRATA_PKG_ARCH="+runtime.GOARCH, "STRATA_PKG_BIN="+bin, "STRATA_PKG_DOC="+doc)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nfpm %s: %v\n%s", part, err, out)
		}
		debs = append(debs, findPackage(t, dist, part, "deb"))
	}
	return debs
}
