package model

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/topogen/internal/config"
)

const ibData = "../discover/ib/testdata/"

func TestBuild(t *testing.T) {
	dir := t.TempDir()
	slurmConf := filepath.Join(dir, "slurm.conf")
	if err := os.WriteFile(slurmConf, []byte("NodeName=sl390lin[101-124] Sockets=2 CoresPerSocket=6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A site that keeps its nodes in a file of their own, included by a
	// path relative to slurm.conf's directory.
	includingConf, emptyConf := filepath.Join(dir, "etc", "slurm.conf"), filepath.Join(dir, "empty.conf")
	for p, text := range map[string]string{
		includingConf:                           "ClusterName=c\nInclude nodes.conf\n",
		filepath.Join(dir, "etc", "nodes.conf"): "NodeName=sl390lin[101-124] Sockets=2 CoresPerSocket=6\n",
		emptyConf:                               "ClusterName=c\nPartitionName=p Nodes=ALL\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A dump of comment lines just over 1 MiB.
	bigDump := filepath.Join(dir, "big.out")
	if err := os.WriteFile(bigDump, []byte(strings.Repeat("# a comment line of 32 bytes ..\n", 1<<15)+"#\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		edit      func(*config.Config)
		given     []string
		wantNodes int
		wantIn    string // in the candidate
		wantErr   string
	}{
		"tree, nodes from slurm.conf": {
			edit: func(c *config.Config) {
				c.Fabric.IBNetDiscover, c.Fabric.GUIDMap, c.Slurm.SlurmConf = ibData+"X5.topofile", ibData+"X5.map", slurmConf
			},
			wantNodes: 24, wantIn: "SwitchName=hoibp0013",
		},
		"given nodes win": {
			edit: func(c *config.Config) {
				c.Fabric.IBNetDiscover, c.Fabric.GUIDMap, c.Slurm.SlurmConf = ibData+"X5.topofile", ibData+"X5.map", "/nonexistent"
			},
			given: []string{"sl390lin101"}, wantNodes: 1, wantIn: "SwitchName=",
		},
		"missing dump": {
			edit: func(c *config.Config) {
				c.Fabric.IBNetDiscover, c.Slurm.NodeSource = filepath.Join(dir, "none.out"), "none"
			},
			wantErr: "capture one with: ibnetdiscover >",
		},
		"nodes in a file slurm.conf includes": {
			edit: func(c *config.Config) {
				c.Fabric.IBNetDiscover, c.Fabric.GUIDMap, c.Slurm.SlurmConf = ibData+"X5.topofile", ibData+"X5.map", includingConf
			},
			wantNodes: 24, wantIn: "SwitchName=hoibp0013",
		},
		"a slurm.conf that declares no node": {
			edit: func(c *config.Config) {
				c.Fabric.IBNetDiscover, c.Fabric.GUIDMap, c.Slurm.SlurmConf = ibData+"X5.topofile", ibData+"X5.map", emptyConf
			},
			wantErr: "declare no node (no NodeName= line)",
		},
		"missing slurm.conf": {
			edit:    func(c *config.Config) { c.Slurm.SlurmConf = filepath.Join(dir, "none.conf") },
			wantErr: "--no-node-check (or --nodes LIST) goes on without the node list, as slurm.node_source: none does",
		},
		"a dump past fabric.max_dump_mib names the key that raises it": {
			edit: func(c *config.Config) {
				c.Fabric.IBNetDiscover, c.Fabric.MaxDumpMiB, c.Slurm.NodeSource = bigDump, 1, "none"
			},
			wantErr: "big.out: ib: the dump is 1048578 bytes, more than 1 MiB, the most topogen reads (a fabric of 10,000 hosts on 8 rails dumps 32 MiB): " +
				"check that fabric.ibnetdiscover is the fabric's dump (ibnetdiscover > FILE), or for a larger fabric raise fabric.max_dump_mib (now 1)",
		},
		"an endless dump (/dev/zero) is refused": {
			edit: func(c *config.Config) {
				c.Fabric.IBNetDiscover, c.Slurm.NodeSource = "/dev/zero", "none"
			},
			wantErr: "/dev/zero: ib: line 1 is longer than 64 KiB, where a dump's lines are a few hundred bytes: this is no ibnetdiscover dump; " +
				"check that fabric.ibnetdiscover is the fabric's dump (ibnetdiscover > FILE)",
		},
		"block without node descriptions": {
			edit:    func(c *config.Config) { c.Slurm.Format, c.Slurm.NodeSource, c.NVLink.NodesDir = "block", "none", dir },
			wantErr: "no node descriptions (*.json) in " + dir,
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := config.Default()
			tc.edit(&cfg)
			m, err := Build(context.Background(), cfg, Options{Nodes: tc.given})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Nodes) != tc.wantNodes {
				t.Errorf("%d nodes, want %d", len(m.Nodes), tc.wantNodes)
			}
			if c := string(m.Candidate()); !strings.Contains(c, tc.wantIn) {
				t.Errorf("candidate lacks %q:\n%s", tc.wantIn, c)
			}
		})
	}
}

func TestCoresPerNode(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Slurm.SlurmConf = filepath.Join(dir, "slurm.conf")
	if err := os.WriteFile(cfg.Slurm.SlurmConf, []byte("NodeName=g[1-2] Sockets=2 CoresPerSocket=4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cores, err := CoresPerNode(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"g1": 8, "g2": 8}, cores); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	cfg.Slurm.NodeSource = "none"
	if cores, err := CoresPerNode(context.Background(), cfg); cores != nil || err != nil {
		t.Errorf("node source none: %v, %v; want nil, nil", cores, err)
	}
}

func TestNormGUID(t *testing.T) {
	for in, want := range map[string]string{
		"0x0008f105002036b4": "0008f105002036b4",
		"S-0008F105002036B4": "0008f105002036b4",
		" H-8f105002036b4 ":  "0008f105002036b4",
		"0002c90300a0bcde":   "0002c90300a0bcde",
	} {
		if got := normGUID(in); got != want {
			t.Errorf("normGUID(%q) = %q, want %q", in, got, want)
		}
	}
}
