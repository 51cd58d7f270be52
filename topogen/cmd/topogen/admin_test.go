package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/test/fabricgen"
)

// TestAdminMessages runs the real CLI the way a new admin does, off the
// cluster and by trial, and checks that every failure says what went wrong
// and what to do: the findings behind an exit 1, the hosts a rail filter
// drops, the flags a flag needs, and how to render without a node list.
func TestAdminMessages(t *testing.T) {
	dir := t.TempDir()
	nodesDir := filepath.Join(dir, "nodes") // empty: the tree alone
	if err := os.Mkdir(nodesDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A node with no NVLink domain (a T4), as topogen collect describes it.
	gpuDir := filepath.Join(dir, "gpu-nodes")
	if err := os.Mkdir(gpuDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var collectOut bytes.Buffer
	if err := run(t.Context(), []string{"topogen", "collect", "--hostname", "t4node", "-o", filepath.Join(gpuDir, "t4node.json"),
		"../../internal/discover/nvml/testdata/smi/tesla-t4.xml"}, &collectOut, &collectOut); err != nil {
		t.Fatalf("collect: %v\n%s", err, collectOut.String())
	}
	rails := generated(fabricgen.Spec{Nodes: 8, NodesPerLeaf: 4, Rails: 2, Spines: 2, Seed: 3})
	smi := "../../internal/discover/nvml/testdata/smi/tesla-t4.xml"
	topo := "../../internal/discover/nvml/testdata/topo/"
	const base = "apiVersion: strata/v1\nkind: TopogenConfig\n"
	nvlink := "nvlink:\n  nodes_dir: " + nodesDir + "\n"
	for name, tc := range map[string]struct {
		config     string // the config file, after apiVersion and kind
		args       []string
		wantCode   int
		wantOut    string   // in stdout
		notOut     string   // not in stdout
		wantErr    string   // in the error
		wantStderr []string // each in stderr
		notStderr  string   // not in stderr
	}{
		"--switch-names is in --help": {
			args:    []string{"render", "--help"},
			wantOut: "--switch-names value",
		},
		"switch names from the descriptions by default": {
			args:    []string{"render", rails, "--no-node-check", "--include-hca", `mlx5_0$`},
			wantOut: "SwitchName=R0-LEAF-0001 Nodes=node[00001-00004]",
		},
		"--switch-names guid overrides the config's description": {
			config:  "fabric:\n  switch_names: description\n",
			args:    []string{"render", rails, "--no-node-check", "--include-hca", `mlx5_0$`, "--switch-names", "guid"},
			wantOut: "SwitchName=S-", notOut: "R0-LEAF",
		},
		"--switch-names description overrides the config's guid": {
			config:  "fabric:\n  switch_names: guid\n",
			args:    []string{"render", rails, "--no-node-check", "--include-hca", `mlx5_0$`, "--switch-names", "description"},
			wantOut: "SwitchName=R0-LEAF-0001", notOut: "S-",
		},
		"--switch-names with an unknown value": {
			args:     []string{"render", rails, "--no-node-check", "--switch-names", "desc"},
			wantCode: exitFailure, wantErr: `fabric.switch_names: want one of auto, guid, description, got "desc"`,
		},
		"a rail filter names the host that lacks the rail's HCA": {
			// node00003's rail-0 HCA is left out as if its card were dead.
			args: []string{"--log-level", "warn", "render", rails, "--no-node-check", "--include-hca", `mlx5_0$`,
				"--exclude-hca", `^node00003 mlx5_0$`},
			wantOut:    "SwitchName=R0-LEAF-0001 Nodes=node[00001-00002,00004]",
			wantStderr: []string{"kind=filtered-host subject=node00003", "1 hosts have HCAs but none that the HCA filters select"},
		},
		"exit 1 lists the findings: warnings even at --log-level error": {
			args:     []string{"--log-level", "error", "render", rails, "--no-node-check", "--include-hca", `mlx5_9$`},
			wantCode: exitFailure, wantErr: "(4 findings): they are listed above",
			wantStderr: []string{"Findings of the fabric:\n",
				"\n  warning: filtered-host node00001,node00002,node00003,node00004,node00005,node00006,node00007,node00008: 8 hosts have HCAs",
				"\n  (3 more of severity info: --log-level info or debug shows them)\n"},
			notStderr: "hca-filter",
		},
		"exit 1 lists every finding at --log-level debug": {
			args:       []string{"--log-level", "debug", "render", rails, "--no-node-check", "--include-hca", `mlx5_9$`},
			wantCode:   exitFailure,
			wantStderr: []string{"\n  info: hca-filter fabric: 16 HCAs left out by the rail/fabric filters\n", "\n  warning: filtered-host node00001,"},
			notStderr:  "more of severity info",
		},
		"no NVLink block: the findings say which node has no domain": {
			args:     []string{"render", "--format", "block", "--no-node-check", "--nodes-dir", gpuDir},
			wantCode: exitFailure, wantErr: "no node is in a complete multi-node NVLink domain",
			wantStderr: []string{"kind=no-nvlink-domain subject=t4node"},
		},
		"collect --smi-topo needs --smi-xml": {
			args:     []string{"collect", "--hostname", "n1", "--smi-topo", topo + "missing.txt"},
			wantCode: cliexit.ExitUsage, wantErr: "collect: --smi-topo adds to an nvidia-smi -q -x file: give that file too, as --smi-xml FILE or as the argument",
		},
		"collect --smi-topo with the XML as the argument": {
			args:     []string{"collect", "--hostname", "n1", "--smi-topo", filepath.Join(dir, "missing.txt"), smi},
			wantCode: exitFailure, wantErr: "missing.txt", // past the usage check: it reads the file
		},
		"--format yaml prints topology.yaml to stdout": {
			config:  nvlink + "slurm:\n  topology_file: " + filepath.Join(dir, "topology.conf") + "\n",
			args:    []string{"render", rails, "--no-node-check", "--include-hca", `mlx5_0$`, "--format", "yaml"},
			wantOut: "- topology: fabric\n  cluster_default: true\n  tree:\n    switches:\n",
		},
		"--format yaml with the default topology file": {
			config:  nvlink,
			args:    []string{"render", rails, "--no-node-check", "--include-hca", `mlx5_0$`, "--format", "yaml"},
			wantOut: "      - switch: R0-LEAF-0001\n        nodes: node[00001-00004]\n",
		},
		"plan --format yaml compares topology.yaml beside the configured file": {
			config:   nvlink + "slurm:\n  topology_file: " + filepath.Join(dir, "topology.conf") + "\n",
			args:     []string{"plan", rails, "--no-node-check", "--include-hca", `mlx5_0$`, "--format", "yaml"},
			wantCode: exitChanges, wantOut: filepath.Join(dir, "topology.yaml") + " would change:",
		},
		"--format tree with a configured topology.yaml": {
			config:   "slurm:\n  format: yaml\n  topology_file: " + filepath.Join(dir, "topology.yaml") + "\n",
			args:     []string{"plan", rails, "--no-node-check", "--include-hca", `mlx5_0$`, "--format", "tree"},
			wantCode: exitChanges, wantOut: filepath.Join(dir, "topology.conf") + " would change:",
		},
		"--format yaml with a .conf --topology-file stays an error": {
			args:     []string{"render", rails, "--no-node-check", "--format", "yaml", "--topology-file", filepath.Join(dir, "t.conf")},
			wantCode: exitFailure, wantErr: "format yaml writes topology.yaml",
		},
		"an unreadable node list says --no-node-check renders without it": {
			config:   "slurm:\n  slurm_conf: " + filepath.Join(dir, "slurm.conf") + "\n",
			args:     []string{"render", rails, "--include-hca", `mlx5_0$`},
			wantCode: exitFailure,
			wantErr:  filepath.Join(dir, "slurm.conf") + ": no such file or directory; topogen compares the fabric with Slurm's nodes: --no-node-check (or --nodes LIST) goes on without the node list",
		},
		"an unreadable slurmrestd says --no-node-check renders without it": {
			config:   "slurm:\n  node_source: slurmrestd\n  rest:\n    url: http://127.0.0.1:1\n    token_file: " + filepath.Join(dir, "none.jwt") + "\n",
			args:     []string{"render", rails, "--include-hca", `mlx5_0$`},
			wantCode: exitFailure, wantErr: "node list from slurmrestd: ",
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "topogen.yaml")
			if err := os.WriteFile(cfg, []byte(base+tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			err := run(t.Context(), append([]string{"topogen", "-c", cfg}, tc.args...), &out, &errb)
			if code := cliexit.CodeOf(err); code != tc.wantCode {
				t.Fatalf("exit %d (%v), want %d\n%s%s", code, err, tc.wantCode, out.String(), errb.String())
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want it to contain %q", err, tc.wantErr)
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tc.wantOut, out.String())
			}
			if tc.notOut != "" && strings.Contains(out.String(), tc.notOut) {
				t.Errorf("stdout has %q:\n%s", tc.notOut, out.String())
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
			if tc.notStderr != "" && strings.Contains(errb.String(), tc.notStderr) {
				t.Errorf("stderr has %q:\n%s", tc.notStderr, errb.String())
			}
		})
	}
}
