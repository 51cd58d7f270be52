package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/test/fabricgen"
)

// result is what one run of the CLI gave.
type result struct {
	code        int
	out, stderr string
	err         error
}

// topogen runs the CLI with the config at cfg (none when "").
func topogen(t *testing.T, cfg string, args ...string) result {
	t.Helper()
	all := []string{"topogen", "--log-level", "error"}
	if cfg != "" {
		all = append(all, "-c", cfg)
	}
	var out, errb bytes.Buffer
	err := run(t.Context(), append(all, args...), &out, &errb)
	return result{code: cliexit.CodeOf(err), out: out.String(), stderr: errb.String(), err: err}
}

// scanBed is a cluster of 4 nodes (two leaves under a spine) with a dump
// of the whole fabric and one of a scan cut short, which saw 2 nodes.
type scanBed struct {
	dir, full, partial, cfg, live string
}

func newScanBed(t *testing.T, format string) scanBed {
	t.Helper()
	b := scanBed{dir: t.TempDir()}
	b.full = generated(fabricgen.Spec{Nodes: 4, NodesPerLeaf: 2, Spines: 1, Seed: 1})
	b.partial = generated(fabricgen.Spec{Nodes: 2, NodesPerLeaf: 2, Spines: 1, Seed: 1})
	b.live = filepath.Join(b.dir, "topology.conf")
	if format == "yaml" {
		b.live = filepath.Join(b.dir, "topology.yaml")
	}
	nodesDir := filepath.Join(b.dir, "nodes")
	if err := os.Mkdir(nodesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	b.cfg = filepath.Join(b.dir, "topogen.yaml")
	cfg := "apiVersion: strata/v1\nkind: TopogenConfig\nslurm:\n  format: " + format + "\n  topology_file: " + b.live +
		"\n  node_source: none\n  scontrol: " + filepath.Join(b.dir, "no-scontrol") + "\nnvlink:\n  nodes_dir: " + nodesDir + "\n"
	if err := os.WriteFile(b.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// The live file: what topogen writes for the whole fabric.
	if r := topogen(t, b.cfg, "render", b.full, "-o", b.live); r.code != 0 {
		t.Fatalf("render: %v\n%s", r.err, r.stderr)
	}
	return b
}

func (b scanBed) liveFile(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(b.live)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A scan that saw 2 of the 4 nodes is refused by apply in both formats,
// with the budget's message, before slurmctld is asked anything (the
// config's scontrol does not exist); plan says apply would refuse it,
// instead of "Run topogen apply".
func TestPartialScanRefused(t *testing.T) {
	for _, format := range []string{"tree", "yaml"} {
		t.Run(format, func(t *testing.T) {
			b := newScanBed(t, format)
			before := b.liveFile(t)
			r := topogen(t, b.cfg, "apply", b.partial)
			if r.code != exitInvalid {
				t.Fatalf("apply of a partial scan: exit %d (%v), want %d\n%s%s", r.code, r.err, exitInvalid, r.out, r.stderr)
			}
			for _, want := range []string{
				"Not applied: the change budget refused the candidate:",
				"it drops 2 of the live file's 4 nodes (50%, more than the 10% allowed): node[00003-00004]",
				"if the fabric really is this now, apply with --force",
			} {
				if !strings.Contains(r.out, want) {
					t.Errorf("apply's output lacks %q:\n%s", want, r.out)
				}
			}
			if got := b.liveFile(t); got != before {
				t.Errorf("the refused apply changed %s:\n%s", b.live, got)
			}
			p := topogen(t, b.cfg, "plan", b.partial)
			if p.code != exitInvalid {
				t.Errorf("plan of a partial scan: exit %d (%v), want %d", p.code, p.err, exitInvalid)
			}
			if !strings.Contains(p.out, "topogen apply would refuse this (the change budget):\n  it drops 2 of the live file's 4 nodes") ||
				strings.Contains(p.out, "Run `topogen apply`") {
				t.Errorf("plan does not say that apply would refuse:\n%s", p.out)
			}
			// The whole fabric is no change.
			if r := topogen(t, b.cfg, "plan", b.full); r.code != exitOK || !strings.Contains(r.out, "is up to date") {
				t.Errorf("plan of the whole fabric: exit %d (%v)\n%s", r.code, r.err, r.out)
			}
		})
	}
}

// A live topology.conf with a line topogen cannot parse: apply refuses,
// saying why and what to do, instead of skipping the budget.
func TestApplyRefusesUnreadableLiveFile(t *testing.T) {
	b := newScanBed(t, "tree")
	live := b.liveFile(t) + "SwitchName=extra Switches=R0-LEAF-000[1-2] Weight=1\n"
	if err := os.WriteFile(b.live, []byte(live), 0o644); err != nil {
		t.Fatal(err)
	}
	r := topogen(t, b.cfg, "apply", b.partial)
	if r.code != exitInvalid {
		t.Fatalf("exit %d (%v), want %d\n%s", r.code, r.err, exitInvalid, r.out)
	}
	for _, want := range []string{
		"the live file cannot be read to measure the change against it (line 6: unknown key \"weight\" on a SwitchName line)",
		"fix that line of the live file (or move the file away) and run again, or apply with --force if the candidate is right",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if got := b.liveFile(t); got != live {
		t.Errorf("the refused apply changed the live file:\n%s", got)
	}
}

// TestExitCodes runs every verb into each outcome it can have: a usage
// error is 2, changes found 3, the same 0, an error 1, and a refused
// candidate or file 6. --help documents them.
func TestExitCodes(t *testing.T) {
	b := newScanBed(t, "tree")
	// The same 4 nodes, each under its own leaf: a change within the
	// budget (no node lost, more switches).
	regrouped := generated(fabricgen.Spec{Nodes: 4, NodesPerLeaf: 1, Spines: 1, Seed: 1})
	missing := filepath.Join(b.dir, "missing")
	valid := filepath.Join(b.dir, "valid.conf")
	invalid := filepath.Join(b.dir, "invalid.conf")
	for path, content := range map[string]string{valid: "SwitchName=s1 Nodes=n[1-2]\n", invalid: "SwitchName=s1 Nodes=n[1-2]\nSwitchName=s1 Nodes=n3\n"} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	smi := "../../internal/discover/nvml/testdata/smi/tesla-t4.xml"
	type tc struct {
		verb string
		args []string
		want int
	}
	cases := map[string]tc{
		"render: done":        {"render", []string{b.full}, exitOK},
		"render: error":       {"render", []string{missing}, exitFailure},
		"render: usage":       {"render", []string{b.full, b.full}, cliexit.ExitUsage},
		"plan: same":          {"plan", []string{b.full}, exitOK},
		"plan: changes":       {"plan", []string{regrouped}, cliexit.ExitChanges},
		"plan: refused":       {"plan", []string{b.partial}, exitInvalid},
		"plan: error":         {"plan", []string{missing}, exitFailure},
		"plan: usage":         {"plan", []string{b.full, "x"}, cliexit.ExitUsage},
		"apply: same":         {"apply", []string{b.full}, exitOK},
		"apply: refused":      {"apply", []string{b.partial}, exitInvalid},
		"apply: error":        {"apply", []string{missing}, exitFailure},
		"apply: usage":        {"apply", []string{b.full, "x"}, cliexit.ExitUsage},
		"validate: same":      {"validate", []string{valid, "--no-node-check"}, exitOK},
		"validate: refused":   {"validate", []string{invalid, "--no-node-check"}, exitInvalid},
		"validate: error":     {"validate", []string{missing}, exitFailure},
		"validate: usage":     {"validate", nil, cliexit.ExitUsage},
		"collect: done":       {"collect", []string{"--hostname", "n1", smi}, exitOK},
		"collect: error":      {"collect", []string{"--hostname", "n1", missing}, exitFailure},
		"collect: usage":      {"collect", []string{"--smi-topo", missing}, cliexit.ExitUsage},
		"check-config: done":  {"check-config", []string{b.cfg}, exitOK},
		"check-config: error": {"check-config", []string{invalid}, exitFailure},
		"check-config: usage": {"check-config", []string{b.cfg, "x"}, cliexit.ExitUsage},
		"unknown verb: usage": {"rendr", nil, cliexit.ExitUsage},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := b.cfg
			if c.verb == "check-config" {
				cfg = "" // it takes the file as its argument
			}
			r := topogen(t, cfg, append([]string{c.verb}, c.args...)...)
			if r.code != c.want {
				t.Fatalf("exit %d (%v), want %d\n%s%s", r.code, r.err, c.want, r.out, r.stderr)
			}
		})
	}
	// Every verb the app has is in the table, with a usage error.
	help := topogen(t, "", "--help")
	if help.code != 0 {
		t.Fatalf("--help: exit %d", help.code)
	}
	section := help.out[strings.Index(help.out, "COMMANDS:"):strings.Index(help.out, "GLOBAL OPTIONS:")]
	for _, m := range regexp.MustCompile(`(?m)^\s+([a-z-]+)\s`).FindAllStringSubmatch(section, -1) {
		if verb := m[1]; verb != "help" {
			if _, ok := cases[verb+": usage"]; !ok {
				t.Errorf("verb %s has no case in TestExitCodes", verb)
			}
		}
	}
	for _, want := range []string{"2  usage error", "3  plan: the live file differs", "6  refused"} {
		if !strings.Contains(help.out, want) {
			t.Errorf("--help lacks %q:\n%s", want, help.out)
		}
	}
	for verb, want := range map[string]string{"plan": "3 when it differs", "apply": "6 when the candidate is refused", "validate": "6 when it is not"} {
		if r := topogen(t, "", verb, "--help"); !strings.Contains(strings.Join(strings.Fields(r.out), " "), want) {
			t.Errorf("%s --help lacks %q:\n%s", verb, want, r.out)
		}
	}
	if codes := regexp.MustCompile(`(?m)^   ([0-9])  `).FindAllStringSubmatch(help.out, -1); !slices.EqualFunc(codes, []string{"0", "1", "2", "3", "4", "5", "6"},
		func(m []string, c string) bool { return m[1] == c }) {
		t.Errorf("--help lists exit codes %v, want 0 to 6 once each", codes)
	}
}
