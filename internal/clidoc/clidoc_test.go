package clidoc

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"
)

func testApp() *cli.App {
	app := &cli.App{
		Name:    "strata-x",
		Usage:   "do x to a cluster",
		Version: "v1",
		Flags:   []cli.Flag{&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "configuration file"}},
		Commands: []*cli.Command{
			{Name: "run", Usage: "run the daemon", Flags: []cli.Flag{&cli.BoolFlag{Name: "once"}}},
			{Name: "token", Usage: "tokens", Subcommands: []*cli.Command{
				{Name: "create", Usage: "make one", Flags: []cli.Flag{&cli.StringFlag{Name: "user"}}},
				{Name: "list", Usage: "list them"},
			}},
			{Name: "secret-verb", Hidden: true},
		},
	}
	app.Commands = append(app.Commands, Command(app, Spec{Section: 8, Configs: []Config{{Name: "x.yaml", Summary: "configuration of strata-x"}}}))
	return app
}

func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte("# the example\n.starts with a dot\nlisten: 127.0.0.1:1 # a \\ backslash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "doc")
	app := testApp()
	var stdout bytes.Buffer
	app.Writer = &stdout
	if err := app.Run([]string{"strata-x", Verb, "--out", out, "--examples", dir}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(out)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"_strata-x", "strata-x.8", "strata-x.bash", "x.yaml.5"}, names); diff != "" {
		t.Fatalf("files (-want +got):\n%s", diff)
	}
	man, _ := os.ReadFile(filepath.Join(out, "strata-x.8"))
	for _, want := range []string{`.TH strata-x 8`, "run", "create", "--config", "--once", "--user"} {
		if !strings.Contains(string(man), want) {
			t.Errorf("the man page lacks %q:\n%s", want, man)
		}
	}
	for _, hidden := range []string{"secret-verb", Verb} {
		if strings.Contains(string(man), hidden) {
			t.Errorf("the man page shows the hidden verb %s", hidden)
		}
	}
	cf, _ := os.ReadFile(filepath.Join(out, "x.yaml.5"))
	for _, want := range []string{`.TH "X.YAML" 5`, "x.yaml \\- configuration of strata-x", "\\&.starts with a dot", `a \e backslash`, `\fBstrata-x\fR(8)`} {
		if !strings.Contains(string(cf), want) {
			t.Errorf("x.yaml.5 lacks %q:\n%s", want, cf)
		}
	}
	if _, err := exec.LookPath("man"); err == nil {
		for _, page := range []string{"strata-x.8", "x.yaml.5"} {
			cmd := exec.Command("man", "--warnings", "-l", filepath.Join(out, page))
			cmd.Env = append(os.Environ(), "MANPAGER=cat", "MANWIDTH=100")
			if b, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(b), "warning") {
				t.Errorf("man -l %s: %v\n%s", page, err, b)
			}
		}
	}
}

// The bash completion, run by bash: what it offers after each command line.
func TestBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script := filepath.Join(t.TempDir(), "c.bash")
	if err := os.WriteFile(script, []byte(Bash(testApp())), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{ // the words typed so far, the last one being completed -> offered
		"strata-x ":                             "run token",
		"strata-x t":                            "token",
		"strata-x -":                            "--config -c --version --help",
		"strata-x --config /etc/x.yaml to":      "token",
		"strata-x token ":                       "create list",
		"strata-x token create --":              "--user --help",
		"strata-x run --":                       "--once --help",
		"strata-x --config x.yaml token list -": "--help",
	}
	for line, want := range cases {
		words := strings.Split(line, " ")
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+w+"'")
		}
		prog := `set -e; source "$1"; COMP_WORDS=(` + strings.Join(quoted, " ") + `); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); ` +
			`_strata_x; echo "${COMPREPLY[*]}"`
		out, err := exec.Command("bash", "-c", prog, "bash", script).CombinedOutput()
		if err != nil {
			t.Errorf("%q: %v\n%s", line, err, out)
			continue
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("after %q bash offers %q, want %q", line, got, want)
		}
	}
}

// The zsh completion at least parses (zsh -n), where zsh is installed.
func TestZsh(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Skip("zsh is not installed: the zsh completion is not parsed")
	}
	script := filepath.Join(t.TempDir(), "_strata-x")
	if err := os.WriteFile(script, []byte(Zsh(testApp())), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("zsh", "-n", script).CombinedOutput(); err != nil {
		t.Errorf("zsh -n: %v\n%s", err, out)
	}
}
