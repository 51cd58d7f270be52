package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validateBed writes a config whose node source is a slurm.conf declaring
// nodes, and returns the config's path.
func validateBed(t *testing.T, nodes []string) string {
	t.Helper()
	dir := t.TempDir()
	var conf strings.Builder
	conf.WriteString("ClusterName=test\n")
	for _, n := range nodes {
		fmt.Fprintf(&conf, "NodeName=%s CPUs=8\n", n)
	}
	slurmConf := filepath.Join(dir, "slurm.conf")
	cfg := filepath.Join(dir, "topogen.yaml")
	for path, content := range map[string]string{
		slurmConf: conf.String(),
		cfg:       "apiVersion: strata/v1\nkind: TopogenConfig\nslurm:\n  node_source: slurm.conf\n  slurm_conf: " + slurmConf + "\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestValidateReach: validate reads the cluster's nodes from the
// configured node source and reports what the file leaves out of Slurm's
// reach: nodes under no switch (an error), and leaves with no common
// ancestor (a warning). Problems go to stderr, the verdict to stdout.
func TestValidateReach(t *testing.T) {
	instances, err := os.ReadFile(filepath.Join("testdata", "example.instances.txt"))
	if err != nil {
		t.Fatal(err)
	}
	superPOD := validateBed(t, strings.Fields(string(instances)))
	small := validateBed(t, []string{"n1", "n2", "n3", "n4", "n5", "n6"})
	// Three pods whose spines nothing joins.
	unconnected := writeTemp(t, "topology.conf", "SwitchName=leaf1 Nodes=n[1-2]\nSwitchName=leaf2 Nodes=n[3-4]\nSwitchName=leaf3 Nodes=n5\n"+
		"SwitchName=leaf4 Nodes=n6\nSwitchName=spine1 Switches=leaf[1-2]\nSwitchName=spine2 Switches=leaf3\n")
	// Several roots, one of which is above every leaf (as in ibmap2slurm's
	// X5 output): no warning.
	joined := writeTemp(t, "topology.conf", "SwitchName=leaf1 Nodes=n[1-3]\nSwitchName=leaf2 Nodes=n[4-6]\n"+
		"SwitchName=spine1 Switches=leaf1\nSwitchName=spine2 Switches=leaf[1-2]\n")
	for name, tc := range map[string]struct {
		cfg        string
		args       []string
		wantCode   int
		wantOut    string
		wantStderr []string
		notStderr  string
	}{
		"topograph's SuperPOD topology.conf: 8 of the 39 nodes under no switch": {
			// topograph's expected output for its 39 instances places the 31
			// that have an HCA in example.out; the 8 others are in no switch.
			cfg: superPOD, args: []string{"testdata/example.expected-topology.conf"}, wantCode: exitInvalid,
			wantStderr: []string{"testdata/example.expected-topology.conf: 8 of the cluster's 39 nodes are under no switch: " +
				"a06-p1-dgx-02-c[05-06,08-09,13,15,17],dgx-gb200-n01-c1; topology/tree never gives them to a job"},
			notStderr: "warning:",
		},
		"--nodes instead of the node source": {
			cfg: superPOD, args: []string{"testdata/example.expected-topology.conf", "--nodes", "a05-p1-dgx-01-c[03-04],a06-p1-dgx-02-c[01-04,07,10-12,14,16,18],b05-p1-dgx-05-c[01-18]"},
			wantOut: "is valid.",
		},
		"leaves with no common ancestor: a warning": {
			cfg: small, args: []string{unconnected}, wantOut: unconnected + " is valid.",
			wantStderr: []string{unconnected + ": warning: no switch is above every leaf: the switches form 3 trees with no common ancestor, " +
				"spine1 (2 leaves, 4 nodes), leaf4 (1 leaf, 1 node), spine2 (1 leaf, 1 node); no job spans two of them " +
				"(slurmctld logs \"no switch can reach all nodes through its descendants\"): if the fabric joins them, add the switch that does " +
				"(SwitchName=... Switches=leaf4,spine[1-2])"},
		},
		"several roots, one above every leaf": {cfg: small, args: []string{joined}, wantOut: joined + " is valid.", notStderr: "warning"},
		"a slurm.conf: one message": {
			cfg: small, args: []string{"../../../test/testbed/slurm/etc/slurm.conf.in"}, wantCode: exitInvalid,
			notStderr: "unknown line type",
		},
		"an unreadable node source says how to go on without it": {
			cfg:  writeTemp(t, "topogen.yaml", "apiVersion: strata/v1\nkind: TopogenConfig\nslurm:\n  slurm_conf: /nonexistent/slurm.conf\n"),
			args: []string{joined}, wantCode: exitFailure,
		},
		"--no-node-check": {
			cfg:  writeTemp(t, "topogen.yaml", "apiVersion: strata/v1\nkind: TopogenConfig\nslurm:\n  slurm_conf: /nonexistent/slurm.conf\n"),
			args: []string{joined, "--no-node-check"}, wantOut: "is valid.",
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := topogen(t, tc.cfg, append([]string{"validate"}, tc.args...)...)
			if r.code != tc.wantCode {
				t.Fatalf("exit %d (%v), want %d\nstdout:\n%s\nstderr:\n%s", r.code, r.err, tc.wantCode, r.out, r.stderr)
			}
			if !strings.Contains(r.out, tc.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tc.wantOut, r.out)
			}
			if tc.wantCode != exitOK && r.out != "" {
				t.Errorf("problems on stdout:\n%s", r.out)
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if tc.notStderr != "" && strings.Contains(r.stderr, tc.notStderr) {
				t.Errorf("stderr has %q:\n%s", tc.notStderr, r.stderr)
			}
		})
	}
}

// A topology.conf with one slurm.conf line is a topology.conf with a bad
// line, reported as such.
func TestValidateStraySlurmConfLine(t *testing.T) {
	file := writeTemp(t, "topology.conf", "SwitchName=l1 Nodes=n[1-2]\nSwitchName=l2 Nodes=n[3-4]\nTopologyPlugin=topology/tree\nSwitchName=s Switches=l[1-2]\n")
	r := topogen(t, "", "validate", "--no-node-check", file)
	if r.code != exitInvalid || !strings.Contains(r.stderr, file+": line 3: unknown line type \"TopologyPlugin=topology/tree\"") {
		t.Fatalf("exit %d (%v), want %d and line 3 reported:\n%s", r.code, r.err, exitInvalid, r.stderr)
	}
}

// TestValidateOtherFiles: a slurm.conf, or a file most of whose lines are
// no topology.conf lines, is one clear error, not an "unknown line type"
// a line.
func TestValidateOtherFiles(t *testing.T) {
	var log strings.Builder
	for i := range 20 {
		fmt.Fprintf(&log, "Dec  6 10:00:%02d host slurmctld[1]: something happened\n", i)
	}
	for name, tc := range map[string]struct {
		file string
		want string
	}{
		"slurm.conf": {"../../../test/testbed/slurm/etc/slurm.conf.in",
			"is not a topology.conf: it looks like a slurm.conf (line 3 starts with a slurm.conf key): give the topology.conf, which sits beside slurm.conf"},
		"topology.yaml": {writeTemp(t, "topology.yaml", "# written by hand\n- topology: fabric\n  tree:\n    switches:\n      - switch: s1\n        nodes: n1\n"),
			"is a topology.yaml: validate checks topology.conf files; topogen plan and apply (slurm.format: yaml) check the topology.yaml topogen writes"},
		"a log": {writeTemp(t, "messages", log.String()),
			"is not a topology.conf: 20 of its 20 lines are not SwitchName, BlockName or BlockSizes lines (the first: line 1): check the path"},
	} {
		t.Run(name, func(t *testing.T) {
			r := topogen(t, "", "validate", "--no-node-check", tc.file)
			if r.code != exitInvalid || r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("exit %d (%v), want %d and an error with %q", r.code, r.err, exitInvalid, tc.want)
			}
			if strings.Count(r.out+r.stderr, "\n") > 1 {
				t.Errorf("more than one line of output:\n%s%s", r.out, r.stderr)
			}
		})
	}
}
