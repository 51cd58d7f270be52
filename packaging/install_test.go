//go:build integration

package packaging

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The install tests need root (dpkg in a chroot), a Debian root made by the
// Slurm test bed's `build` and the packages of `make packages`:
//
//	STRATA_PACKAGES     the folder `make packages` wrote (its DIST, with bin/);
//	                    unset: the test runs `make packages` into a temporary folder
//	STRATA_DEBIAN_ROOT  a root tarball; unset: the newest cached test-bed root
//	                    (/var/cache/strata/testbed/root-*.tar.zst)
//
// Without root or a Debian root they skip, saying why; under CI=true they fail.

// glibcFloor is the newest glibc the binaries may need: EL8's (make
// packages links the cgo ones against it with Zig; Debian 12 has 2.36).
const glibcFloor = "2.28"

// static are the binaries make packages links statically: they name no
// shared library and no loader.
var static = map[string]bool{"strata-bridge": true}

// oldVersion sorts before any version version.sh gives (0.0.0~git1.<hash>
// and up): the package an upgrade starts from.
const oldVersion = "0.0.0~git0.old"

// wantFile is one installed path: mode, owner, group; config marks a
// conffile.
type wantFile struct {
	mode         fs.FileMode
	owner, group string
	config       bool
}

func bin() wantFile          { return wantFile{mode: 0o755, owner: "root", group: "root"} }
func data() wantFile         { return wantFile{mode: 0o644, owner: "root", group: "root"} }
func conf(g string) wantFile { return wantFile{mode: 0o640, owner: "root", group: g, config: true} }

// installed is every file each package installs (directories of /usr aside).
var installed = map[string]map[string]wantFile{
	"strata-topogen": {
		"/usr/bin/topogen":                        bin(),
		"/usr/lib/systemd/system/topogen.service": data(),
		"/usr/lib/systemd/system/topogen.timer":   data(),
		"/usr/lib/tmpfiles.d/strata-topogen.conf": data(),
		"/etc/strata/topogen.yaml":                conf("root"),
	},
	"strata-policy": {
		"/usr/bin/strata-policy":                         bin(),
		"/usr/share/strata/slurm/job_submit.lua":         data(),
		"/usr/share/strata/slurm/dcgm-job-map-prolog.sh": bin(),
		"/usr/share/strata/slurm/dcgm-job-map-epilog.sh": bin(),
		"/usr/share/strata/slurm/strata-oci-run":         bin(),
		"/usr/share/strata/slurm/oci.conf":               data(),
		"/etc/strata/policy.yaml":                        conf("root"),
	},
	"strata-reclaimd": {
		"/usr/bin/reclaimd":                              bin(),
		"/usr/lib/systemd/system/reclaimd.service":       data(),
		"/usr/lib/systemd/system/reclaimd-agent.service": data(),
		"/usr/lib/sysusers.d/strata-reclaimd.conf":       data(),
		"/etc/strata/reclaimd.yaml":                      conf("strata-reclaimd"),
		"/usr/share/strata/examples/reclaim-rules.json":  data(),
		"/etc/strata/reclaimd-mail.tmpl":                 conf("strata-reclaimd"),
	},
	"strata-bridge": {
		"/usr/bin/strata-bridge":                        bin(),
		"/usr/lib/systemd/system/strata-bridge.service": data(),
		"/usr/lib/sysusers.d/strata-bridge.conf":        data(),
		"/etc/strata/bridge.yaml":                       conf("strata-bridge"),
		"/etc/strata/bridge/runtimes/generic.yaml":      conf("strata-bridge"),
		"/etc/strata/bridge/runtimes/triton.yaml":       conf("strata-bridge"),
		"/etc/strata/bridge/runtimes/vllm.yaml":         conf("strata-bridge"),
	},
	"strata-portal-api": {
		"/usr/bin/strata-portal-api":                        bin(),
		"/usr/lib/systemd/system/strata-portal-api.service": data(),
		"/usr/lib/sysusers.d/strata-portal-api.conf":        data(),
		"/usr/lib/tmpfiles.d/strata-portal-api.conf":        data(),
		"/etc/strata/portal-api.yaml":                       conf("strata-portal-api"),
		"/etc/strata/templates/ddp-train.yaml":              conf("strata-portal-api"),
		"/etc/strata/templates/evaluate.yaml":               conf("strata-portal-api"),
		"/etc/strata/templates/finetune.yaml":               conf("strata-portal-api"),
		"/etc/strata/templates/jupyterlab.yaml":             conf("strata-portal-api"),
		"/etc/strata/templates/preprocess.yaml":             conf("strata-portal-api"),
		"/etc/strata/templates/terminal.yaml":               conf("strata-portal-api"),
		"/etc/strata/templates/vscode.yaml":                 conf("strata-portal-api"),
	},
}

// manPages are each package's binary, its man section and its
// configuration file's page: the man pages and completion it installs.
var manPages = map[string]struct {
	binary  string
	section int
	config  string
}{
	"strata-topogen":    {"topogen", 1, "topogen.yaml"},
	"strata-policy":     {"strata-policy", 1, "policy.yaml"},
	"strata-reclaimd":   {"reclaimd", 8, "reclaimd.yaml"},
	"strata-bridge":     {"strata-bridge", 8, "bridge.yaml"},
	"strata-portal-api": {"strata-portal-api", 8, "portal-api.yaml"},
}

// zshDeb and zshRPM are where Debian's and Fedora's zsh look for
// completion functions.
const (
	zshDeb = "/usr/share/zsh/vendor-completions/"
	zshRPM = "/usr/share/zsh/site-functions/"
)

func init() {
	for part, m := range manPages {
		installed[part][fmt.Sprintf("/usr/share/man/man%d/%s.%d.gz", m.section, m.binary, m.section)] = data()
		installed[part]["/usr/share/man/man5/"+m.config+".5.gz"] = data()
		installed[part]["/usr/share/bash-completion/completions/"+m.binary] = data()
		installed[part][zshDeb+"_"+m.binary] = data()
	}
}

// dirs are the folders the packages make, with their modes and owners.
var dirs = map[string]wantFile{
	"/etc/strata":                 {mode: 0o755, owner: "root", group: "root"},
	"/etc/strata/bridge":          {mode: 0o750, owner: "root", group: "strata-bridge"},
	"/etc/strata/bridge/runtimes": {mode: 0o750, owner: "root", group: "strata-bridge"},
	"/etc/strata/templates":       {mode: 0o750, owner: "root", group: "strata-portal-api"},
	"/var/lib/strata/topogen":     {mode: 0o750, owner: "root", group: "root"},                           // tmpfiles.d
	"/var/lib/strata/portal-api":  {mode: 0o750, owner: "strata-portal-api", group: "strata-portal-api"}, // tmpfiles.d
	// The secrets the postinsts make (no package owns them).
	"/etc/strata/reclaimd-agent.token": {mode: 0o640, owner: "root", group: "strata-reclaimd"},
	"/etc/strata/reclaimd-api.token":   {mode: 0o640, owner: "root", group: "strata-reclaimd"},
	"/etc/strata/bridge-api.token":     {mode: 0o640, owner: "root", group: "strata-bridge"},
	"/etc/strata/portal-session.key":   {mode: 0o640, owner: "root", group: "strata-portal-api"},
}

// units are the systemd units the packages install.
var units = []string{"topogen.service", "topogen.timer", "reclaimd.service", "reclaimd-agent.service", "strata-bridge.service", "strata-portal-api.service"}

// unavailable skips the test, or fails it under CI, where everything the
// install tests need is installed by .ci/run and make.
func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// packagesDir returns the folder holding the packages of `make packages`
// (and bin/, the binaries in them), building them when none was given.
func packagesDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("STRATA_PACKAGES"); d != "" {
		return d
	}
	d := t.TempDir()
	t.Logf("STRATA_PACKAGES is not set: make packages DIST=%s", d)
	run(t, "", "make", "-C", repoRoot(t), "--no-print-directory", "packages", "DIST="+d)
	return d
}

// findPackage returns the one package of part in dir of format deb or rpm.
func findPackage(t *testing.T, dir, part, format string) string {
	t.Helper()
	pattern := map[string]string{"deb": part + "_*.deb", "rpm": part + "-[0-9]*.rpm"}[format]
	m, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(m) != 1 {
		t.Fatalf("want one %s package of %s in %s, found %d: run make packages", format, part, dir, len(m))
	}
	return m[0]
}

// run runs a command on this host and returns its output; a failure
// fails the test.
func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// chroot is a fresh copy of a Debian root with /proc mounted, as on a
// real host.
type chroot struct {
	t    *testing.T
	root string
}

// newChroot unpacks the test bed's cached root into a new folder (never
// the cache itself) and removes it at the end, once /proc is unmounted.
func newChroot(t *testing.T) *chroot {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "the install tests need root: dpkg installs into a chroot (run make test as root)")
	}
	tarball := os.Getenv("STRATA_DEBIAN_ROOT")
	if tarball == "" {
		m, _ := filepath.Glob("/var/cache/strata/testbed/root-*.tar.zst")
		sort.Strings(m) // root-2411 before root-2605: the last is the newest Debian
		if len(m) == 0 {
			unavailable(t, "no Debian root: none cached in /var/cache/strata/testbed (test/testbed/slurm/testbed.sh build makes one) and STRATA_DEBIAN_ROOT is not set")
		}
		tarball = m[len(m)-1]
	}
	for _, tool := range []string{"tar", "zstd", "chroot"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(t, "%s is not installed (make deps)", tool)
		}
	}
	dir, err := os.MkdirTemp("", "strata-install-")
	if err != nil {
		t.Fatal(err)
	}
	c := &chroot{t: t, root: filepath.Join(dir, "root")}
	if err := os.Mkdir(c.root, 0o755); err != nil {
		t.Fatal(err)
	}
	proc := filepath.Join(c.root, "proc")
	t.Cleanup(func() {
		if err := syscall.Unmount(proc, 0); err != nil && err != syscall.EINVAL {
			if err := syscall.Unmount(proc, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v; %s is left for you to remove", proc, err, dir)
				return
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	t.Logf("unpacking %s into %s", tarball, c.root)
	run(t, "", "tar", "--numeric-owner", "--xattrs", "-I", "zstd", "-xpf", tarball, "-C", c.root)
	if err := os.MkdirAll(proc, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("proc", proc, "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		t.Fatalf("mount %s: %v", proc, err)
	}
	return c
}

// exec runs a command in the chroot with a clean environment, no input
// (so that any prompt fails) and returns its output and error.
func (c *chroot) exec(args ...string) (string, error) {
	cmd := exec.Command("chroot", append([]string{c.root}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/root"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// must runs a command in the chroot; a failure fails the test.
func (c *chroot) must(args ...string) string {
	c.t.Helper()
	out, err := c.exec(args...)
	if err != nil {
		c.t.Fatalf("in the chroot: %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// as runs a command in the chroot as a user, with the user's groups.
func (c *chroot) as(user string, args ...string) (string, error) {
	return c.exec(append([]string{"setpriv", "--reuid", user, "--regid", user, "--init-groups"}, args...)...)
}

// copyIn copies host files into the chroot's /tmp/<sub>/ and returns
// their paths inside it.
func (c *chroot) copyIn(sub string, files []string) []string {
	c.t.Helper()
	dir := filepath.Join(c.root, "tmp", sub)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	var in []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			c.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			c.t.Fatal(err)
		}
		in = append(in, "/tmp/"+sub+"/"+filepath.Base(f))
	}
	return in
}

// stat returns mode, owner and group of paths in the chroot; a missing
// path is left out.
func (c *chroot) stat(paths []string) map[string]wantFile {
	c.t.Helper()
	out, _ := c.exec(append([]string{"stat", "-c", "%n|%a|%U|%G"}, paths...)...) // missing paths only print to stderr
	got := map[string]wantFile{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		if len(f) != 4 {
			continue
		}
		m, err := strconv.ParseUint(f[1], 8, 32)
		if err != nil {
			continue
		}
		got[f[0]] = wantFile{mode: fs.FileMode(m), owner: f[2], group: f[3]}
	}
	return got
}

// checkFiles compares every installed file and folder with the tables.
func (c *chroot) checkFiles(when string) {
	c.t.Helper()
	want := map[string]wantFile{}
	for _, files := range installed {
		for p, w := range files {
			w.config = false
			want[p] = w
		}
	}
	for p, w := range dirs {
		want[p] = w
	}
	var paths []string
	for p := range want {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	got := c.stat(paths)
	for _, p := range paths {
		g, ok := got[p]
		switch {
		case !ok:
			c.t.Errorf("%s: %s is missing", when, p)
		case g != want[p]:
			c.t.Errorf("%s: %s is %o %s:%s, want %o %s:%s", when, p, g.mode, g.owner, g.group, want[p].mode, want[p].owner, want[p].group)
		}
	}
}

// checkUsers checks the daemons' users, their own groups and their
// membership of the shared group strata.
func (c *chroot) checkUsers() {
	c.t.Helper()
	for _, u := range daemonParts {
		pw := strings.Split(strings.TrimSpace(c.must("getent", "passwd", u)), ":")
		if len(pw) != 7 {
			c.t.Errorf("getent passwd %s: %q", u, pw)
			continue
		}
		if uid, _ := strconv.Atoi(pw[2]); uid == 0 || uid >= 1000 {
			c.t.Errorf("%s has uid %d, want a system user (1-999)", u, uid)
		}
		if home, shell := pw[5], pw[6]; home != "/var/lib/strata/"+strings.TrimPrefix(u, "strata-") || !strings.HasSuffix(shell, "nologin") {
			c.t.Errorf("%s: home %s, shell %s; want /var/lib/strata/<part> and nologin", u, home, shell)
		}
		groups := strings.Fields(c.must("id", "-nG", u))
		sort.Strings(groups)
		if want := []string{"strata", u}; strings.Join(groups, " ") != strings.Join(want, " ") {
			c.t.Errorf("%s is in groups %v, want %v", u, groups, want)
		}
	}
}

// TestInstall installs an older version of every deb, upgrades to the
// packages of make packages with the admin's changes in the configuration,
// runs every binary and checks every unit, then removes the packages.
func TestInstall(t *testing.T) {
	c := newChroot(t)
	dist := packagesDir(t)
	repo := repoRoot(t)

	var debs []string
	for _, part := range parts {
		debs = append(debs, findPackage(t, dist, part, "deb"))
	}
	newVersion := strings.TrimSpace(run(t, "", "dpkg-deb", "-f", debs[0], "Version"))

	// The same binaries packed with a lower version: the upgrade's start.
	old := t.TempDir()
	run(t, "", "make", "-C", repo, "--no-print-directory", "packages-nfpm", "DIST="+old,
		"PKG_BIN="+filepath.Join(dist, "bin"), "PKG_VERSION="+oldVersion, "PKG_FORMATS=deb")
	var oldDebs []string
	for _, part := range parts {
		oldDebs = append(oldDebs, findPackage(t, old, part, "deb"))
	}
	oldFull := strings.TrimSpace(run(t, "", "dpkg-deb", "-f", oldDebs[0], "Version"))
	if err := exec.Command("dpkg", "--compare-versions", oldFull, "lt", newVersion).Run(); err != nil {
		t.Fatalf("the older package %s does not sort before %s", oldFull, newVersion)
	}

	// A minimal root (debootstrap's minbase, a container image) tells dpkg
	// to leave out /usr/share/man; a host has the man pages.
	c.must("sh", "-c", `for f in /etc/dpkg/dpkg.cfg.d/*; do [ -f "$f" ] && sed -i -E '\|^path-exclude[= ]+/usr/share/man|d' "$f"; done; true`)

	// Install: dpkg -i as root would, no input, so a prompt fails it.
	out := c.must(append([]string{"dpkg", "-i"}, c.copyIn("old", oldDebs)...)...)
	t.Logf("dpkg -i (%s):\n%s", oldFull, out)
	c.checkFiles("after install")
	c.checkUsers()
	// Each daemon's user reads its own configuration, and no other's.
	own := map[string]string{
		"strata-reclaimd":   "/etc/strata/reclaimd.yaml",
		"strata-bridge":     "/etc/strata/bridge.yaml",
		"strata-portal-api": "/etc/strata/portal-api.yaml",
	}
	for user, file := range own {
		if out, err := c.as(user, "cat", file); err != nil {
			t.Errorf("%s cannot read %s: %v\n%s", user, file, err, out)
		}
		for other, otherFile := range own {
			if other == user {
				continue
			}
			if _, err := c.as(user, "cat", otherFile); err == nil {
				t.Errorf("%s reads %s, %s's configuration", user, otherFile, other)
			}
		}
	}
	if out, err := c.as("strata-portal-api", "cat", "/etc/strata/templates/jupyterlab.yaml"); err != nil {
		t.Errorf("strata-portal-api cannot read its templates: %v\n%s", err, out)
	}

	// The admin edits two configurations, and one's mode.
	edited := map[string]string{}
	for _, f := range []string{"/etc/strata/reclaimd.yaml", "/etc/strata/bridge.yaml"} {
		p := filepath.Join(c.root, f)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		edited[f] = string(b) + "# changed by the site\n"
		if err := os.WriteFile(p, []byte(edited[f]), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(c.root, "etc/strata/reclaimd.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Upgrade: the edited files stay as they are, without a prompt; with
	// systemd running (a systemctl that records its calls stands in for
	// it in the chroot), every unit is try-restarted, none started.
	calls := c.fakeSystemd()
	out = c.must(append([]string{"dpkg", "-i"}, c.copyIn("new", debs)...)...)
	if got := calls(); !slices.Equal(unitCalls(got), unitCalls(upgradeCalls)) {
		t.Errorf("the upgrade ran systemctl:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(upgradeCalls, "\n  "))
	}
	t.Logf("dpkg -i (upgrade to %s):\n%s", newVersion, out)
	for _, part := range parts {
		if v := c.must("dpkg-query", "-W", "-f", "${Version}", part); v != newVersion {
			t.Errorf("%s is at %s after the upgrade, want %s", part, v, newVersion)
		}
	}
	for f, want := range edited {
		b, err := os.ReadFile(filepath.Join(c.root, f))
		if err != nil || string(b) != want {
			t.Errorf("the upgrade did not keep the site's %s (err %v)", f, err)
		}
	}
	if g := c.stat([]string{"/etc/strata/reclaimd.yaml"})["/etc/strata/reclaimd.yaml"]; g.mode != 0o600 || g.group != "strata-reclaimd" {
		t.Errorf("the upgrade changed the site's mode of reclaimd.yaml: %o %s:%s, want 600 root:strata-reclaimd", g.mode, g.owner, g.group)
	}
	if err := os.Chmod(filepath.Join(c.root, "etc/strata/reclaimd.yaml"), 0o640); err != nil {
		t.Fatal(err)
	}
	c.checkFiles("after the upgrade")
	c.checkUsers()
	for part, files := range installed {
		var conffiles []string
		for _, line := range strings.Split(c.must("dpkg-query", "-W", "-f", "${Conffiles}", part), "\n") {
			if f := strings.Fields(line); len(f) >= 2 {
				conffiles = append(conffiles, f[0])
			}
		}
		var want []string
		for p, w := range files {
			if w.config {
				want = append(want, p)
			}
		}
		sort.Strings(conffiles)
		sort.Strings(want)
		if strings.Join(conffiles, " ") != strings.Join(want, " ") {
			t.Errorf("%s conffiles %v, want %v", part, conffiles, want)
		}
	}

	t.Run("binaries", func(t *testing.T) { testBinaries(t, c) })
	t.Run("glibc", func(t *testing.T) { testGlibc(t, c) })
	t.Run("units", func(t *testing.T) { testUnits(t, c) })
	t.Run("docs", func(t *testing.T) { testDocs(t, c) })

	// Remove: the programs go, the configuration and users stay; every
	// unit is stopped and disabled first.
	calls = c.fakeSystemd()
	c.must(append([]string{"dpkg", "-r"}, parts...)...)
	if got := calls(); !slices.Equal(unitCalls(got), unitCalls(removeCalls)) {
		t.Errorf("dpkg -r ran systemctl:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(removeCalls, "\n  "))
	}
	var gone []string
	for _, files := range installed {
		for p, w := range files {
			if !w.config {
				gone = append(gone, p)
			}
		}
	}
	for p := range c.stat(gone) {
		t.Errorf("%s is still there after dpkg -r", p)
	}
	for _, files := range installed {
		for p, w := range files {
			if !w.config {
				continue
			}
			if _, err := os.Stat(filepath.Join(c.root, p)); err != nil {
				t.Errorf("dpkg -r removed the configuration %s: %v", p, err)
			}
		}
	}
	for f, want := range edited {
		if b, err := os.ReadFile(filepath.Join(c.root, f)); err != nil || string(b) != want {
			t.Errorf("dpkg -r did not keep the site's %s (err %v)", f, err)
		}
	}
	for _, part := range parts {
		if s := c.must("dpkg-query", "-W", "-f", "${Status}", part); s != "deinstall ok config-files" {
			t.Errorf("%s after dpkg -r: %q, want deinstall ok config-files", part, s)
		}
	}
	c.checkUsers()
}

// upgradeCalls and removeCalls are the systemctl commands an upgrade and
// a removal of every package run, in any order (and daemon-reload, as
// often as it likes).
var (
	upgradeCalls = []string{
		"daemon-reload", "try-restart topogen.timer",
		"daemon-reload", "try-restart reclaimd.service reclaimd-agent.service",
		"daemon-reload", "try-restart strata-bridge.service",
		"daemon-reload", "try-restart strata-portal-api.service",
	}
	removeCalls = []string{
		"--no-reload disable --now topogen.timer topogen.service",
		"--no-reload disable --now reclaimd.service reclaimd-agent.service",
		"--no-reload disable --now strata-bridge.service",
		"--no-reload disable --now strata-portal-api.service",
		"daemon-reload", "daemon-reload", "daemon-reload", "daemon-reload",
	}
)

// unitCalls are the calls that act on units (daemon-reload, which every
// scriptlet of the old and the new package may run, aside), sorted.
func unitCalls(calls []string) []string {
	var out []string
	for _, c := range calls {
		if c != "daemon-reload" {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// fakeSystemd makes the chroot look as if systemd ran (/run/systemd/system)
// with a systemctl that records its calls; the returned function gives the
// calls made since and puts the real systemctl back.
func (c *chroot) fakeSystemd() func() []string {
	c.t.Helper()
	c.must("sh", "-ec", `mkdir -p /run/systemd/system
mv /usr/bin/systemctl /usr/bin/systemctl.real
printf '#!/bin/sh\necho "$*" >> /tmp/systemctl.calls\n' > /usr/bin/systemctl
chmod 0755 /usr/bin/systemctl
rm -f /tmp/systemctl.calls`)
	return func() []string {
		c.t.Helper()
		out := c.must("sh", "-ec", `mv /usr/bin/systemctl.real /usr/bin/systemctl
rmdir /run/systemd/system
cat /tmp/systemctl.calls 2>/dev/null || true`)
		var calls []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l != "" {
				calls = append(calls, l)
			}
		}
		return calls
	}
}

// binaries are the programs the packages install in /usr/bin.
var binaries = []string{"topogen", "strata-policy", "reclaimd", "strata-bridge", "strata-portal-api"}

// testBinaries runs every binary's --version (--help where a binary has no
// --version yet) and check-config on the installed examples, each daemon's
// as its own user.
func testBinaries(t *testing.T, c *chroot) {
	for _, b := range binaries {
		out, err := c.exec(b, "--version")
		if strings.Contains(out, "flag provided but not defined") {
			t.Logf("%s has no --version yet: --help instead", b)
			out, err = c.exec(b, "--help")
		}
		if err != nil || strings.TrimSpace(out) == "" {
			t.Errorf("%s --version: %v\n%s", b, err, out)
			continue
		}
		t.Logf("%s: %s", b, firstLine(out))
	}

	// What a site adds before the daemons check out: the contracts
	// rendered from the installed policy where the packaged configs read
	// them (the serving contract for the bridge, the tenant map for
	// reclaimd, made readable by the group strata of both alone, which the
	// next render keeps), the shared file system, a kubeconfig, the slurmrestd token
	// and the API token, with the group and mode the configs have; for the
	// portal, each cluster of its example its jwt key and tenant map, and
	// gpu1's job policy and reclaimd's API token.
	c.must("sh", "-ec", `mkdir -p /tmp/render /shared/projects /shared/tenants
strata-policy render
chgrp strata /etc/strata/rendered/serving.json /etc/strata/rendered/tenants.json
chmod 0640 /etc/strata/rendered/serving.json /etc/strata/rendered/tenants.json
strata-policy render
test "$(stat -L -c %a:%G /etc/strata/rendered/tenants.json)" = 640:strata
cat > /etc/strata/bridge.kubeconfig <<'EOF'
apiVersion: v1
kind: Config
clusters: [{name: k, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
current-context: c
EOF
echo token > /etc/strata/bridge.jwt
chgrp strata-bridge /etc/strata/bridge.kubeconfig /etc/strata/bridge.jwt
chmod 0640 /etc/strata/bridge.kubeconfig /etc/strata/bridge.jwt
for c in gpu1 gpu2; do
	install -d -m 0750 -g strata-portal-api /etc/strata/clusters /etc/strata/clusters/$c
	head -c 32 /dev/urandom > /etc/strata/clusters/$c/jwt_hs256.key
	chgrp strata-portal-api /etc/strata/clusters/$c/jwt_hs256.key
	chmod 0640 /etc/strata/clusters/$c/jwt_hs256.key
	# Each cluster's own map: the example policy's, named for the cluster
	# (the portal refuses a tenants.json of another cluster).
	sed 's/"cluster": *"gpu"/"cluster": "'$c'"/' /etc/strata/rendered/tenants.json > /etc/strata/clusters/$c/tenants.json
	grep -q '"cluster": "'$c'"' /etc/strata/clusters/$c/tenants.json
	chgrp strata-portal-api /etc/strata/clusters/$c/tenants.json
	chmod 0640 /etc/strata/clusters/$c/tenants.json
done
install -m 0640 -g strata-portal-api /etc/slurm/strata/jobpolicy.json /etc/strata/clusters/gpu1/jobpolicy.json
install -m 0640 -g strata-portal-api /etc/strata/bridge-api.token /etc/strata/clusters/gpu1/bridge-api.token
install -m 0640 -g strata-portal-api /etc/strata/reclaimd-api.token /etc/strata/clusters/gpu1/reclaimd-api.token`)

	checks := []struct {
		user string
		args []string
	}{
		{"root", []string{"topogen", "check-config"}},
		{"root", []string{"strata-policy", "check"}},
		{"strata-reclaimd", []string{"reclaimd", "check-config"}},
		{"strata-bridge", []string{"strata-bridge", "check-config"}},
		{"strata-portal-api", []string{"strata-portal-api", "check-config"}},
	}
	for _, ch := range checks {
		var out string
		var err error
		if ch.user == "root" {
			out, err = c.exec(ch.args...)
		} else {
			out, err = c.as(ch.user, ch.args...)
		}
		if err != nil {
			t.Errorf("%s (as %s): %v\n%s", strings.Join(ch.args, " "), ch.user, err, out)
			continue
		}
		t.Logf("%s (as %s): %s", strings.Join(ch.args, " "), ch.user, firstLine(out))
	}
}

// testDocs checks that each installed man page and completion file is
// what the installed binary writes of itself (gen-docs), so the packages
// never ship pages of another build, that man renders each page without a
// warning, and that every verb --help lists is in the man page.
func testDocs(t *testing.T, c *chroot) {
	must := func(args ...string) string {
		t.Helper()
		out, err := c.exec(args...)
		if err != nil {
			t.Errorf("in the chroot: %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	_, noMan := c.exec("sh", "-c", "command -v man")
	for part, m := range manPages {
		dir := "/tmp/docs/" + m.binary
		must(m.binary, "gen-docs", "--out", dir, "--examples", "/etc/strata")
		page := fmt.Sprintf("/usr/share/man/man%d/%s.%d.gz", m.section, m.binary, m.section)
		pairs := map[string]string{ // installed -> freshly written
			page: fmt.Sprintf("%s/%s.%d", dir, m.binary, m.section),
			"/usr/share/bash-completion/completions/" + m.binary: dir + "/" + m.binary + ".bash",
			zshDeb + "_" + m.binary:                              dir + "/_" + m.binary,
		}
		for inst, fresh := range pairs {
			got := must("sh", "-c", `case "$1" in *.gz) zcat "$1" ;; *) cat "$1" ;; esac`, "sh", inst)
			if want := must("cat", fresh); got != want {
				t.Errorf("%s: %s is not what %s gen-docs writes (%s): the package carries another build's docs", part, inst, m.binary, fresh)
			}
		}
		for _, p := range []string{page, "/usr/share/man/man5/" + m.config + ".5.gz"} {
			if noMan != nil {
				t.Logf("man is not installed in the root: %s not rendered", p)
				continue
			}
			out, err := c.exec("sh", "-c", `MANWIDTH=100 man --warnings -l "$1" 2>&1 >/dev/null`, "sh", p)
			if err != nil || strings.TrimSpace(out) != "" {
				t.Errorf("man -l %s: %v\n%s", p, err, out)
			}
		}
		help := must(m.binary, "--help")
		man := must("sh", "-c", `zcat "$1"`, "sh", page)
		inCommands := false
		for _, line := range strings.Split(help, "\n") {
			switch {
			case strings.HasPrefix(line, "COMMANDS:"):
				inCommands = true
			case inCommands && (line == "" || !strings.HasPrefix(line, "   ")):
				inCommands = false
			case inCommands:
				verb := strings.TrimSuffix(strings.Fields(line)[0], ",")
				// md2man makes each verb a heading: .SH run (.SH create, ... with aliases).
				if verb != "help" && !strings.Contains(man, "\n.SH "+verb+"\n") && !strings.Contains(man, "\n.SH "+verb+",") {
					t.Errorf("%s --help lists %s, which %s lacks", m.binary, verb, page)
				}
			}
		}
	}
}

// testGlibc fails when a packaged binary needs a glibc newer than EL8's,
// or when one built static names a shared library or a loader.
func testGlibc(t *testing.T, c *chroot) {
	for _, b := range binaries {
		path := filepath.Join(c.root, "usr/bin", b)
		if static[b] {
			libs, interp, err := dynamicNeeds(path)
			switch {
			case err != nil:
				t.Errorf("%s: %v", b, err)
			case len(libs) > 0 || interp != "":
				t.Errorf("%s is built static, but it needs %q and the loader %q (make packages: -static-pie)", b, libs, interp)
			}
		}
		newest, err := newestGlibc(path)
		if err != nil {
			t.Errorf("%s: %v", b, err)
			continue
		}
		if newest == "" {
			t.Logf("%s needs no glibc (no cgo, or static)", b)
			continue
		}
		if versionLess(glibcFloor, newest) {
			t.Errorf("%s needs GLIBC_%s, newer than EL8's %s: make packages builds the cgo binaries with Zig against glibc %s (packaging/README.md)", b, newest, glibcFloor, glibcFloor)
		}
		t.Logf("%s needs glibc %s", b, newest)
	}
}

// dynamicNeeds returns the shared libraries (DT_NEEDED) a binary names and
// its loader (PT_INTERP, "" for none).
func dynamicNeeds(path string) ([]string, string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, "", err
	}
	interp := ""
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return nil, "", err
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	return libs, interp, nil
}

// newestGlibc returns the newest GLIBC_x.y symbol version the binary
// imports; "" for a binary that imports none.
func newestGlibc(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	syms, err := f.ImportedSymbols()
	if err != nil {
		return "", nil // no dynamic symbols: static
	}
	newest := ""
	for _, s := range syms {
		v, ok := strings.CutPrefix(s.Version, "GLIBC_")
		if ok && (newest == "" || versionLess(newest, v)) {
			newest = v
		}
	}
	return newest, nil
}

// versionLess orders dotted numeric versions.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

var exposure = regexp.MustCompile(`Overall exposure level for (\S+): ([0-9.]+)`)

// testUnits runs systemd-analyze verify on every installed unit, and fails
// when a unit's systemd-analyze security exposure rises above the ceiling
// recorded in testdata/security-ceilings.txt.
func testUnits(t *testing.T, c *chroot) {
	var paths []string
	for _, u := range units {
		paths = append(paths, "/usr/lib/systemd/system/"+u)
	}
	if out, err := c.exec(append([]string{"systemd-analyze", "verify"}, paths...)...); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	ceilings := readCeilings(t)
	for _, u := range units {
		if strings.HasSuffix(u, ".timer") {
			continue
		}
		out, err := c.exec("systemd-analyze", "security", "--offline=yes", "--no-pager", "/usr/lib/systemd/system/"+u)
		m := exposure.FindStringSubmatch(out)
		if m == nil {
			t.Errorf("systemd-analyze security %s: %v, no exposure level in:\n%s", u, err, out)
			continue
		}
		score, _ := strconv.ParseFloat(m[2], 64)
		ceiling, ok := ceilings[u]
		switch {
		case !ok:
			t.Errorf("%s scores %.1f and has no ceiling: add it to testdata/security-ceilings.txt", u, score)
		case score > ceiling:
			t.Errorf("%s: systemd-analyze security exposure %.1f, above its ceiling %.1f: a hardening line was lost", u, score, ceiling)
		case score < ceiling:
			t.Logf("%s scores %.1f, better than its ceiling %.1f: lower the ceiling", u, score, ceiling)
		default:
			t.Logf("%s scores %.1f", u, score)
		}
	}
}

func readCeilings(t *testing.T) map[string]float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "security-ceilings.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ceilings := map[string]float64{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if len(f) != 2 || err != nil {
			t.Fatalf("testdata/security-ceilings.txt:%d: want <unit> <score>, got %q", i+1, line)
		}
		ceilings[f[0]] = v
	}
	return ceilings
}

// TestRPMs reads the RPMs with Debian's rpm: name, version, licence,
// files with their modes, owners and config flags, scriptlets, requires.
func TestRPMs(t *testing.T) {
	if _, err := exec.LookPath("rpm"); err != nil {
		unavailable(t, "rpm is not installed (make deps installs Debian's rpm)")
	}
	dist := packagesDir(t)
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	debVersion := strings.TrimSpace(run(t, "", "dpkg-deb", "-f", findPackage(t, dist, parts[0], "deb"), "Version"))
	for _, part := range parts {
		t.Run(part, func(t *testing.T) {
			rpm := findPackage(t, dist, part, "rpm")
			q := func(args ...string) string {
				t.Helper()
				out, err := exec.Command("rpm", append([]string{"-qp", "--nosignature"}, append(args, rpm)...)...).Output()
				if err != nil {
					t.Fatalf("rpm -qp %s: %v", strings.Join(args, " "), err)
				}
				return string(out)
			}
			if got, want := q("--qf", "%{NAME} %{VERSION}-%{RELEASE} %{ARCH} %{LICENSE}"), fmt.Sprintf("%s %s %s Apache-2.0", part, debVersion, arch); got != want {
				t.Errorf("rpm says %q, want %q (the deb's version)", got, want)
			}
			if !strings.Contains(q("--changelog"), "Development snapshots") {
				t.Errorf("no changelog")
			}

			// --dump: path size mtime digest mode owner group isconfig isdoc rdev symlink
			got := map[string]wantFile{}
			var flags = map[string]string{}
			for _, line := range strings.Split(q("--dump"), "\n") {
				f := strings.Fields(line)
				if len(f) < 8 {
					continue
				}
				m, _ := strconv.ParseUint(f[4], 8, 32)
				got[f[0]] = wantFile{mode: fs.FileMode(m) & fs.ModePerm, owner: f[5], group: f[6], config: f[7] == "1"}
			}
			for _, line := range strings.Split(q("--qf", `[%{FILENAMES} %{FILEFLAGS:fflags}\n]`), "\n") {
				if f := strings.Fields(line); len(f) == 2 {
					flags[f[0]] = f[1]
				}
			}
			for p, w := range installed[part] {
				p = strings.Replace(p, zshDeb, zshRPM, 1)
				g, ok := got[p]
				if !ok {
					t.Errorf("%s is not in the RPM", p)
					continue
				}
				if g != w {
					t.Errorf("%s: %o %s:%s config %v, want %o %s:%s config %v", p, g.mode, g.owner, g.group, g.config, w.mode, w.owner, w.group, w.config)
				}
				if w.config && flags[p] != "cn" {
					t.Errorf("%s: file flags %q, want cn (%%config(noreplace))", p, flags[p])
				}
			}
			if _, ok := got["/usr/share/licenses/"+part+"/LICENSE"]; !ok || flags["/usr/share/licenses/"+part+"/LICENSE"] != "l" {
				t.Errorf("no %%license LICENSE")
			}
			for _, p := range strings.Fields(q("--list")) {
				if _, ok := installed[part][strings.Replace(p, zshRPM, zshDeb, 1)]; !ok && !strings.HasPrefix(p, "/usr/share/licenses/") {
					if _, dir := dirs[p]; !dir {
						t.Errorf("the RPM has %s, which the tests do not know", p)
					}
				}
			}

			// The payload as rpm2cpio | cpio -id unpacks it: every name
			// relative, so that it lands under the current folder, not /.
			names := payloadNames(t, rpm)
			for _, n := range names {
				if strings.HasPrefix(n, "/") {
					t.Errorf("the payload names %s: rpm2cpio | cpio -id would write it into the real /", n)
				}
			}
			for p := range installed[part] {
				p = strings.Replace(p, zshDeb, zshRPM, 1)
				if !slices.Contains(names, "."+p) {
					t.Errorf("the payload has no .%s (it has %d names)", p, len(names))
				}
			}

			scripts := q("--scripts")
			for _, s := range splitRPMScripts(scripts) {
				if bad := CheckScript(s); len(bad) > 0 {
					t.Errorf("a scriptlet runs what a package must not:\n  %s", strings.Join(bad, "\n  "))
				}
			}
			if slices.Contains(daemonParts, part) && !strings.Contains(scripts, "systemd-sysusers --replace=/usr/lib/sysusers.d/"+part+".conf -") {
				t.Errorf("%%pre does not make the users:\n%s", scripts)
			}

			// rpm -qp --requires names no context; %{REQUIREFLAGS:deptype}
			// does: "pre" is Requires(pre), needed installed before %pre runs.
			requires := q("--requires")
			deptypes := q("--qf", `[%{REQUIRENAME} %{REQUIREFLAGS:deptype}\n]`)
			t.Logf("rpm -qp --requires:\n%s\nwith their contexts (%%{REQUIREFLAGS:deptype}):\n%s", requires, deptypes)
			prein := strings.Contains(q("--qf", "%{PREIN}"), "systemd-sysusers")
			if marked := strings.Contains(deptypes, "/usr/bin/systemd-sysusers pre\n"); prein != marked {
				t.Errorf("%%pre runs systemd-sysusers: %v, Requires(pre): /usr/bin/systemd-sysusers: %v; want both or neither (PKG_SYSUSERS_PARTS in the Makefile)", prein, marked)
			}
			// Marked after nfpm: rpm must still find every digest good.
			if out, err := exec.Command("rpm", "-Kv", "--nosignature", rpm).CombinedOutput(); err != nil || strings.Contains(string(out), "BAD") ||
				!strings.Contains(string(out), "Header SHA256 digest: OK") {
				t.Errorf("rpm -Kv: %v\n%s", err, out)
			}
			for _, want := range map[string][]string{
				"strata-topogen":    {"glibc >= 2.28", "systemd"},
				"strata-reclaimd":   {"glibc >= 2.28", "systemd"},
				"strata-bridge":     {"systemd"},
				"strata-portal-api": {"glibc >= 2.28", "systemd"},
			}[part] {
				if !strings.Contains(requires, want) {
					t.Errorf("requires lack %q:\n%s", want, requires)
				}
			}
			if (part == "strata-policy" || part == "strata-bridge") && strings.Contains(requires, "glibc") {
				t.Errorf("%s, whose binary needs no libc, requires glibc:\n%s", part, requires)
			}
		})
	}
}

// payloadNames lists an RPM's cpio payload as an admin does:
// rpm2cpio x.rpm | cpio -t.
func payloadNames(t *testing.T, rpm string) []string {
	t.Helper()
	for _, tool := range []string{"rpm2cpio", "cpio"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(t, "%s is not installed (make deps installs rpm and cpio)", tool)
		}
	}
	out, err := exec.Command("sh", "-c", `rpm2cpio "$1" | cpio -t --quiet`, "sh", rpm).CombinedOutput()
	if err != nil {
		t.Fatalf("rpm2cpio %s | cpio -t: %v\n%s", rpm, err, out)
	}
	return strings.Fields(string(out))
}

// splitRPMScripts splits rpm --scripts output ("preinstall scriptlet
// (using /bin/sh):" headers) into the scripts' bodies.
func splitRPMScripts(out string) []string {
	var scripts []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			scripts = append(scripts, strings.Join(cur, "\n"))
		}
		cur = nil
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "scriptlet (using ") {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return scripts
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
