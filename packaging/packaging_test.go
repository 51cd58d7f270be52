package packaging

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// parts are the packages, one per part.
var parts = []string{"strata-topogen", "strata-policy", "strata-reclaimd", "strata-bridge", "strata-portal-api"}

// daemonParts are the packages whose daemon runs as its own user (the
// part's name), made by the package's sysusers.d file.
var daemonParts = []string{"strata-reclaimd", "strata-bridge", "strata-portal-api"}

// nfpmConfig is the part of an nfpm configuration these tests read.
type nfpmConfig struct {
	Name     string `yaml:"name"`
	License  string `yaml:"license"`
	Contents []struct {
		Src      string `yaml:"src"`
		Dst      string `yaml:"dst"`
		Type     string `yaml:"type"`
		Packager string `yaml:"packager"`
		FileInfo struct {
			Mode  os.FileMode `yaml:"mode"`
			Owner string      `yaml:"owner"`
			Group string      `yaml:"group"`
		} `yaml:"file_info"`
	} `yaml:"contents"`
	Scripts map[string]string `yaml:"scripts"`
}

func loadConfig(t *testing.T, part string) nfpmConfig {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("nfpm", part+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c nfpmConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", part, err)
	}
	if c.Name != part {
		t.Errorf("%s.yaml: name %q", part, c.Name)
	}
	return c
}

// configWant is how each example configuration is shipped: root's, and
// readable by the group of the one daemon that reads it.
var configWant = map[string]string{ // etc/strata/... -> group
	"bridge.yaml":                  "strata-bridge",
	"bridge/runtimes/generic.yaml": "strata-bridge",
	"bridge/runtimes/triton.yaml":  "strata-bridge",
	"bridge/runtimes/vllm.yaml":    "strata-bridge",
	"policy.yaml":                  "root",
	"portal-api.yaml":              "strata-portal-api",
	"reclaimd-mail.tmpl":           "strata-reclaimd",
	"reclaimd.yaml":                "strata-reclaimd",
	"topogen.yaml":                 "root",
	"templates/ddp-train.yaml":     "strata-portal-api",
	"templates/evaluate.yaml":      "strata-portal-api",
	"templates/finetune.yaml":      "strata-portal-api",
	"templates/jupyterlab.yaml":    "strata-portal-api",
	"templates/preprocess.yaml":    "strata-portal-api",
	"templates/terminal.yaml":      "strata-portal-api",
	"templates/vscode.yaml":        "strata-portal-api",
}

// examples are the files of etc/strata shipped as examples, not as
// configuration, with where they go: a file strata-policy render writes
// must be no package's conffile (an upgrade whose example changed would stop
// at dpkg's conffile question), so its example lies beside the docs.
var examples = map[string]string{ // etc/strata/... -> installed path
	"reclaim-rules.json": "/usr/share/strata/examples/reclaim-rules.json",
}

// unpackaged are the parts whose configs etc/strata holds before the
// part has a package: their files are in no package yet. Take a part off
// when its nfpm config comes, and ship its files there.
var unpackaged = map[string]bool{}

// TestEveryConfigIsShipped fails when a file of etc/strata is in no package,
// in two, or is shipped other than as config|noreplace 0640 root:<group>
// (an example: a plain 0644 file where examples says).
func TestEveryConfigIsShipped(t *testing.T) {
	var inTree []string
	err := filepath.WalkDir("../etc/strata", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel("../etc/strata", path)
			inTree = append(inTree, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for f := range configWant {
		want = append(want, f)
	}
	for f := range examples {
		want = append(want, f)
	}
	sort.Strings(want)
	sort.Strings(inTree)
	if d := cmp.Diff(want, inTree); d != "" {
		t.Errorf("etc/strata has files this test does not know (-known +tree); add them to configWant and to a package:\n%s", d)
	}

	shipped := map[string]string{} // etc/strata/... -> package
	for _, part := range parts {
		c := loadConfig(t, part)
		for _, f := range c.Contents {
			if !strings.HasPrefix(f.Src, "etc/strata/") {
				continue
			}
			srcs := []string{f.Src}
			if strings.ContainsAny(f.Src, "*?[") {
				m, err := filepath.Glob(filepath.Join("..", f.Src))
				if err != nil || len(m) == 0 {
					t.Errorf("%s: %s matches nothing", part, f.Src)
				}
				srcs = nil
				for _, s := range m {
					srcs = append(srcs, strings.TrimPrefix(s, "../"))
				}
			}
			for _, src := range srcs {
				rel := strings.TrimPrefix(src, "etc/strata/")
				if p, ok := shipped[rel]; ok {
					t.Errorf("%s is shipped by %s and %s", src, p, part)
				}
				shipped[rel] = part
				fi := f.FileInfo
				if dst, ok := examples[rel]; ok {
					if f.Type != "" || fi.Mode != 0o644 || f.Dst != dst {
						t.Errorf("%s: %s shipped as %q %o at %s, want a plain 644 file at %s", part, src, f.Type, fi.Mode, f.Dst, dst)
					}
					continue
				}
				if f.Type != "config|noreplace" || fi.Mode != 0o640 || fi.Owner != "root" || fi.Group != configWant[rel] {
					t.Errorf("%s: %s shipped as %q %o %s:%s, want config|noreplace 640 root:%s",
						part, src, f.Type, fi.Mode, fi.Owner, fi.Group, configWant[rel])
				}
				if dst := "/etc/strata/" + rel; !strings.HasSuffix(f.Dst, "/") && f.Dst != dst {
					t.Errorf("%s: %s installed as %s, want %s", part, src, f.Dst, dst)
				}
			}
		}
		if c.License != "Apache-2.0" {
			t.Errorf("%s: license %q, want Apache-2.0 (LICENSE)", part, c.License)
		}
	}
	for _, f := range want {
		if _, ok := shipped[f]; !ok && !unpackaged[configWant[f]] {
			t.Errorf("etc/strata/%s is in no package", f)
		}
	}
}

// TestPreinstMakesTheSysusers checks that each preinst feeds
// systemd-sysusers exactly the sysusers.d file its package installs (the
// preinst runs before that file is unpacked, so it carries a copy).
func TestPreinstMakesTheSysusers(t *testing.T) {
	for _, part := range daemonParts {
		t.Run(part, func(t *testing.T) {
			pre, err := os.ReadFile(filepath.Join("nfpm", "scripts", part+".preinst"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("sysusers.d", part+".conf"))
			if err != nil {
				t.Fatal(err)
			}
			s := string(pre)
			replace := "systemd-sysusers --replace=/usr/lib/sysusers.d/" + part + ".conf - <<'SYSUSERS'\n"
			i := strings.Index(s, replace)
			j := strings.LastIndex(s, "\nSYSUSERS\n")
			if i < 0 || j < i {
				t.Fatalf("preinst has no %q here-document", strings.TrimSpace(replace))
			}
			if d := cmp.Diff(string(want), s[i+len(replace):j+1]); d != "" {
				t.Errorf("the preinst's copy differs from sysusers.d/%s.conf (-file +copy):\n%s", part, d)
			}
			c := loadConfig(t, part)
			if c.Scripts["preinstall"] != "packaging/nfpm/scripts/"+part+".preinst" {
				t.Errorf("%s.yaml: preinstall %q", part, c.Scripts["preinstall"])
			}
			found := false
			for _, f := range c.Contents {
				found = found || (f.Src == "packaging/sysusers.d/"+part+".conf" && f.Dst == "/usr/lib/sysusers.d/"+part+".conf")
			}
			if !found {
				t.Errorf("%s.yaml does not install sysusers.d/%s.conf as /usr/lib/sysusers.d/%s.conf", part, part, part)
			}
		})
	}
}

// allowedScriptLine is every command a scriptlet may run: users, state
// folders, absent secrets, systemd's unit list, a try-restart on an
// upgrade and a stop on removal; never an enable, a start, or a restart
// outside an upgrade.
var allowedScriptLine = regexp.MustCompile(`^(` +
	`#!/bin/sh|set -e|` +
	`systemd-sysusers( --replace=/usr/lib/sysusers\.d/[a-z-]+\.conf - <<'SYSUSERS')?( /usr/lib/sysusers\.d/[a-z-]+\.conf)?|` +
	`if \[ -d /proc/self \]; then systemd-tmpfiles --create /usr/lib/tmpfiles\.d/[a-z-]+\.conf; fi|` +
	`if \[ ! -e (/etc/strata/[a-z.-]+) \]; then [a-z-]+ gen-(token|key) --file (/etc/strata/[a-z.-]+); fi|` +
	`if \[ -d /run/systemd/system \]; then systemctl daemon-reload \|\| true; fi|` +
	`if \[ -d /run/systemd/system \] && \{ \[ "\$1" = configure -a -n "\$\{2:-\}" \] \|\| \[ "\$1" = 2 \]; \}; then systemctl try-restart [a-z. -]+ \|\| true; fi|` +
	`if \[ -d /run/systemd/system \] && \{ \[ "\$1" = remove \] \|\| \[ "\$1" = 0 \]; \}; then systemctl --no-reload disable --now [a-z. -]+ \|\| true; fi` +
	`)$`)

// CheckScript returns the lines of a maintainer script that run anything
// but the allowed commands (comments, blank lines and the sysusers
// here-document aside).
func CheckScript(script string) []string {
	var bad []string
	inDoc := false
	sc := bufio.NewScanner(strings.NewReader(script))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case inDoc:
			inDoc = line != "SYSUSERS"
		case line == "" || (strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "#!")):
		case allowedScriptLine.MatchString(line):
			inDoc = strings.HasSuffix(line, "<<'SYSUSERS'")
		default:
			bad = append(bad, line)
		}
	}
	return bad
}

// TestScriptsOnlyWhatIsAllowed reads every scriptlet the packages use.
func TestScriptsOnlyWhatIsAllowed(t *testing.T) {
	for _, part := range parts {
		c := loadConfig(t, part)
		for stage, path := range c.Scripts {
			b, err := os.ReadFile(filepath.Join("..", path))
			if err != nil {
				t.Errorf("%s %s: %v", part, stage, err)
				continue
			}
			if bad := CheckScript(string(b)); len(bad) > 0 {
				t.Errorf("%s %s (%s) runs what a package must not (users, state folders, absent secrets, daemon-reload, try-restart on upgrade, stop on removal):\n  %s",
					part, stage, path, strings.Join(bad, "\n  "))
			}
		}
	}
	for _, s := range []string{
		"systemctl try-restart reclaimd.service",
		"if [ -d /run/systemd/system ]; then systemctl enable --now reclaimd.service; fi",
		"if [ ! -e /etc/strata/x ]; then rm -rf /etc/strata/x; fi",
	} {
		if bad := CheckScript("#!/bin/sh\n" + s + "\n"); len(bad) != 1 {
			t.Errorf("CheckScript lets %q through", s)
		}
	}
}

// TestVersion runs version.sh in a scratch repository through its cases.
func TestVersion(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	script, err := filepath.Abs(filepath.Join("nfpm", "version.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	version := func() string {
		t.Helper()
		out, err := exec.Command("sh", script, dir).CombinedOutput()
		if err != nil {
			t.Fatalf("version.sh: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	commit := func() string {
		git("commit", "-q", "--allow-empty", "-m", "c")
		return git("rev-parse", "--short=8", "HEAD")
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "f")
	commit()
	commit()
	// The cases run in order, each after the change it needs.
	cases := []struct {
		name string
		do   func() string // makes the change, returns the version it should give
	}{
		{"two commits, no tag", func() string { return "0.0.0~git2." + git("rev-parse", "--short=8", "HEAD") }},
		{"on a tag", func() string { git("tag", "v0.1.0"); return "0.1.0" }},
		{"after a tag", func() string { return "0.1.0+git1." + commit() }},
		{"on a release candidate", func() string { git("tag", "v0.2.0-rc1"); return "0.2.0~rc1" }},
		{"changed files", func() string {
			if err := os.WriteFile(filepath.Join(dir, "f"), []byte("b"), 0o644); err != nil {
				t.Fatal(err)
			}
			return "0.2.0~rc1.dirty"
		}},
	}
	for _, c := range cases {
		want := c.do()
		if got := version(); got != want {
			t.Errorf("%s: version %q, want %q", c.name, got, want)
		}
	}
}

// TestChangelogNamesEveryPackage: the newest changelog entry, which every
// package carries, names each package.
func TestChangelogNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile("changelog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var entries []struct {
		Semver  string `yaml:"semver"`
		Changes []struct {
			Note string `yaml:"note"`
		} `yaml:"changes"`
	}
	if err := yaml.Unmarshal(b, &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("changelog.yaml has no entry")
	}
	var notes strings.Builder
	for _, c := range entries[0].Changes {
		notes.WriteString(strings.Join(strings.Fields(c.Note), " ") + "\n")
	}
	for _, part := range parts {
		if !regexp.MustCompile(`\b` + part + `\b`).MatchString(notes.String()) {
			t.Errorf("changelog.yaml: the newest entry (%s) does not name %s", entries[0].Semver, part)
		}
	}
}

// slurmFiles are the files of Slurm's side that strata-policy ships in
// /usr/share/strata/slurm (the admin links or copies them into Slurm's
// configuration), with their mode: executables run by slurmd or
// slurmstepd, the rest read.
var slurmFiles = map[string]os.FileMode{ // source -> mode
	"slurm-plugins/job_submit.lua":         0o644,
	"slurm-plugins/dcgm-job-map-prolog.sh": 0o755,
	"slurm-plugins/dcgm-job-map-epilog.sh": 0o755,
	"slurm-plugins/strata-oci-run":         0o755,
	"etc/slurm/oci.conf":                   0o644,
}

// TestSlurmFilesShipped fails when a file of etc/slurm, or a script of
// slurm-plugins, is not in strata-policy at /usr/share/strata/slurm/<its
// name> with its mode, or when the package ships one this test does not
// know: oci.conf's RunTimeRun names the wrapper at that path, and the
// node bed runs both as they are shipped.
func TestSlurmFilesShipped(t *testing.T) {
	var inTree []string
	for _, pattern := range []string{"../etc/slurm/*", "../slurm-plugins/*.lua", "../slurm-plugins/*.sh", "../slurm-plugins/strata-*"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			inTree = append(inTree, strings.TrimPrefix(f, "../"))
		}
	}
	var want []string
	for f := range slurmFiles {
		want = append(want, f)
	}
	sort.Strings(want)
	sort.Strings(inTree)
	if d := cmp.Diff(want, inTree); d != "" {
		t.Errorf("Slurm's files in the tree are not the ones this test knows (-known +tree); add them to slurmFiles and to strata-policy:\n%s", d)
	}
	shipped := map[string]bool{}
	for _, f := range loadConfig(t, "strata-policy").Contents {
		mode, ok := slurmFiles[f.Src]
		if !ok {
			if strings.HasPrefix(f.Dst, "/usr/share/strata/slurm/") {
				t.Errorf("strata-policy ships %s from %s, which is not one of Slurm's files this test knows", f.Dst, f.Src)
			}
			continue
		}
		shipped[f.Src] = true
		if dst := "/usr/share/strata/slurm/" + filepath.Base(f.Src); f.Dst != dst || f.FileInfo.Mode != mode || f.Type != "" {
			t.Errorf("strata-policy ships %s as %q %o at %s, want a plain %o file at %s", f.Src, f.Type, f.FileInfo.Mode, f.Dst, mode, dst)
		}
	}
	for _, f := range want {
		if !shipped[f] {
			t.Errorf("%s is not shipped by strata-policy", f)
		}
	}
	conf, err := os.ReadFile("../etc/slurm/oci.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^RunTimeRun="/usr/share/strata/slurm/strata-oci-run %b `).Match(conf) {
		t.Errorf("etc/slurm/oci.conf: RunTimeRun is not the shipped strata-oci-run:\n%s", conf)
	}
}
