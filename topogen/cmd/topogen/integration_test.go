//go:build integration

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/test/fabricgen"
	"github.com/strata-hpc/strata/topogen/internal/apply"
	"github.com/strata-hpc/strata/topogen/internal/discover/nvml"
	"github.com/strata-hpc/strata/topogen/internal/render"
)

// cliMu serialises in-process runs: urfave/cli shares its help flag
// between apps, so two apps must not parse flags at once.
var cliMu sync.Mutex

// topogenOn runs topogen in-process against a test bed and returns its
// exit code and output.
func topogenOn(t *testing.T, cfgPath string, args ...string) (int, string) {
	t.Helper()
	cliMu.Lock()
	defer cliMu.Unlock()
	var out, errb bytes.Buffer
	err := run(testbed.Context(t), append([]string{"topogen", "-c", cfgPath}, args...), &out, &errb)
	code := cliexit.CodeOf(err)
	return code, out.String() + errb.String() + fmt.Sprint(err)
}

// setup writes a topogen config for the bed and returns its path, and
// restores the bed's topology (and slurm.conf) when the test ends.
func setup(t *testing.T, b *testbed.Bed, format, fabric, nodesDir string) string {
	t.Helper()
	topo := b.HostPath("/etc/slurm/topology.conf")
	topoFile := topo
	if format == "yaml" {
		topoFile = b.HostPath("/etc/slurm/topology.yaml")
	}
	conf := b.HostPath("/etc/slurm/slurm.conf")
	origTopo, err := os.ReadFile(topo)
	if err != nil {
		t.Fatal(err)
	}
	origConf, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if format == "yaml" {
			_ = os.Remove(topoFile)
		}
		_ = os.WriteFile(topo, origTopo, 0o644)
		_ = os.WriteFile(conf, origConf, 0o644)
		ctl := scontrolFor(t, b)
		ctx := testbed.Context(t)
		if err := ctl.Ping(ctx); err != nil {
			_ = ctl.Restart(ctx)
		}
		_ = ctl.Reconfigure(ctx)
		time.Sleep(2 * time.Second)
		if err := ctl.Ping(ctx); err != nil {
			t.Errorf("slurmctld is not back after the test: %v", err)
		}
	})
	script, _ := filepath.Abs("../../../test/testbed/slurm/testbed.sh")
	cfg := fmt.Sprintf(`apiVersion: strata/v1
kind: TopogenConfig
slurm:
  format: %s
  topology_file: %s
  scontrol: %s
  restart_command: bash %s restart-ctld --version %s --name %s
  node_source: slurmrestd
  rest:
    url: %s
    user: %s
    token_file: %s
fabric:
  ibnetdiscover: %s
nvlink:
  nodes_dir: %s
`, format, topoFile, b.Scontrol, script, b.Version, b.Name, b.URL, b.AdminUser, b.TokenFile, fabric, nodesDir)
	path := filepath.Join(t.TempDir(), "topogen.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func scontrolFor(t *testing.T, b *testbed.Bed) apply.Scontrol {
	script, _ := filepath.Abs("../../../test/testbed/slurm/testbed.sh")
	return apply.Scontrol{Path: b.Scontrol, RestartCommand: fmt.Sprintf("bash %s restart-ctld --version %s --name %s", script, b.Version, b.Name)}
}

func showTopology(t *testing.T, b *testbed.Bed) []byte {
	t.Helper()
	out, err := scontrolFor(t, b).ShowTopology(testbed.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTreeApplyPlacement: a generated fabric whose leaves pair gpu1 with
// gpu3 and gpu2 with gpu4 (not the test bed's default) is planned, applied
// and verified, and then a 2-node job lands under one leaf while another
// node is busy.
func TestTreeApplyPlacement(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		dir := t.TempDir()
		fab := filepath.Join(dir, "fabric.out")
		var buf bytes.Buffer
		if err := fabricgen.Write(&buf, fabricgen.Spec{Leaves: [][]string{{"gpu1", "gpu3"}, {"gpu2", "gpu4"}}, Spines: 2, Seed: 7}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fab, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := setup(t, b, "tree", fab, dir)

		code, out := topogenOn(t, cfg, "plan")
		if code != exitChanges || !strings.Contains(out, "+ SwitchName=LEAF-0001") && !strings.Contains(out, "Nodes=gpu[1,3]") {
			t.Fatalf("plan: exit %d, want %d with the new leaves:\n%s", code, exitChanges, out)
		}
		code, out = topogenOn(t, cfg, "apply", "--settle", "1s")
		if code != exitOK {
			t.Fatalf("apply: exit %d:\n%s", code, out)
		}
		show := showTopology(t, b)
		live, err := render.ParseShowTopology(show)
		if err != nil {
			t.Fatal(err)
		}
		if live["node gpu1"] != live["node gpu3"] || live["node gpu2"] != live["node gpu4"] || live["node gpu1"] == live["node gpu2"] {
			t.Fatalf("scontrol show topology does not pair gpu1/gpu3 and gpu2/gpu4:\n%s", show)
		}
		if code, out := topogenOn(t, cfg, "plan"); code != exitOK {
			t.Errorf("plan after apply: exit %d, want 0:\n%s", code, out)
		}
		backups, _ := filepath.Glob(b.HostPath("/etc/slurm/topology.conf") + ".*.bak")
		if len(backups) == 0 {
			t.Errorf("apply left no backup of the previous topology.conf")
		}
		for _, f := range backups {
			t.Cleanup(func() { os.Remove(f) })
		}

		// Placement: fill one node, then ask for two whole nodes.
		c := b.Client(t)
		ctx := testbed.Context(t)
		busy, err := c.Submit(ctx, "alice", slurmrest.JobSpec{Name: "busy", Script: "#!/bin/sh\nsleep 300\n", Account: b.Account,
			Partition: b.Partition, TRESPerNode: "gres/gpu:8", WorkDir: b.JobDir, StdOut: "/dev/null"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Cancel(testbed.Context(t), busy.JobID) })
		bj := testbed.WaitJob(t, c, busy.JobID, time.Minute, "running", slurmrest.Job.Running)
		pair, err := c.Submit(ctx, "alice", slurmrest.JobSpec{Name: "pair", Script: "#!/bin/sh\nsleep 300\n", Account: b.Account,
			Partition: b.Partition, Nodes: "2", TRESPerNode: "gres/gpu:8", WorkDir: b.JobDir, StdOut: "/dev/null"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Cancel(testbed.Context(t), pair.JobID) })
		pj := testbed.WaitJob(t, c, pair.JobID, time.Minute, "running", slurmrest.Job.Running)
		if len(pj.Nodes) != 2 || live["node "+pj.Nodes[0]] != live["node "+pj.Nodes[1]] {
			t.Errorf("2-node job on %v (busy node %v): want both under one leaf (%v)", pj.Nodes, bj.Nodes, live)
		}
	})
}

// TestApplyRefusesAndRollsBack: a broken candidate is refused before it
// reaches Slurm; one that slurmctld rejects anyway (forced past
// validation) is rolled back, and slurmctld is up afterwards.
func TestApplyRefusesAndRollsBack(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		dir := t.TempDir()
		cfg := setup(t, b, "tree", filepath.Join(dir, "none.out"), dir)
		topo := b.HostPath("/etc/slurm/topology.conf")
		before, _ := os.ReadFile(topo)
		bad := filepath.Join(dir, "bad.conf")
		// spine1 names a child that is not defined: slurmctld exits on it.
		if err := os.WriteFile(bad, []byte("SwitchName=leaf1 Nodes=gpu[1-4]\nSwitchName=spine1 Switches=leaf[1-3]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out := topogenOn(t, cfg, "apply", "--from-file", bad)
		if code != exitInvalid || !strings.Contains(out, "leaf2, which is not defined") {
			t.Fatalf("apply of a broken file: exit %d, want %d naming the undefined switch:\n%s", code, exitInvalid, out)
		}
		if after, _ := os.ReadFile(topo); !bytes.Equal(before, after) {
			t.Fatalf("a refused candidate changed %s", topo)
		}
		code, out = topogenOn(t, cfg, "apply", "--from-file", bad, "--skip-validation", "--settle", "3s")
		if code != exitRolledBack {
			t.Fatalf("forced apply of a file slurmctld rejects: exit %d, want %d:\n%s", code, exitRolledBack, out)
		}
		if after, _ := os.ReadFile(topo); !bytes.Equal(before, after) {
			t.Errorf("after the rollback %s is not the previous file:\n%s", topo, after)
		}
		if _, err := b.Client(t).Ping(testbed.Context(t)); err != nil {
			t.Errorf("slurmctld is not up after the rollback: %v", err)
		}
		backups, _ := filepath.Glob(topo + ".*.bak")
		for _, f := range backups {
			t.Cleanup(func() { os.Remove(f) })
		}
	})
}

// TestBlockApply: NVLink domains from node descriptions become a block
// topology that slurmctld reports (26.05).
func TestBlockApply(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		if b.Version != "26.05" {
			t.Skip("block topology is exercised on 26.05")
		}
		dir := t.TempDir()
		writeNVLinkNodes(t, b, dir)
		cfg := setup(t, b, "block", filepath.Join(dir, "none.out"), dir)
		conf := b.HostPath("/etc/slurm/slurm.conf")
		data, _ := os.ReadFile(conf)
		if err := os.WriteFile(conf, bytes.Replace(data, []byte("TopologyPlugin=topology/tree"), []byte("TopologyPlugin=topology/block"), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out := topogenOn(t, cfg, "apply", "--settle", "1s")
		if code != exitOK {
			t.Fatalf("apply block topology: exit %d:\n%s", code, out)
		}
		show := showTopology(t, b)
		for _, want := range []string{"BlockName=nvl1", "Nodes=gpu[1-2]", "BlockName=nvl2", "Nodes=gpu[3-4]"} {
			if !strings.Contains(string(show), want) {
				t.Errorf("scontrol show topology lacks %q:\n%s", want, show)
			}
		}
		backups, _ := filepath.Glob(b.HostPath("/etc/slurm/topology.conf") + ".*.bak")
		for _, f := range backups {
			t.Cleanup(func() { os.Remove(f) })
		}
	})
}

// writeNVLinkNodes writes node descriptions that put gpu1+gpu2 and
// gpu3+gpu4 in two complete multi-node NVLink domains.
func writeNVLinkNodes(t *testing.T, b *testbed.Bed, dir string) {
	t.Helper()
	for i, n := range b.Nodes {
		node := nvml.Node{Hostname: n, CollectedAt: time.Unix(1795900000, 0).UTC(), Source: nvml.SourceNVML}
		for g := 0; g < b.GPUsPerNode; g++ {
			node.GPUs = append(node.GPUs, nvml.GPU{Index: g, Minor: g, UUID: fmt.Sprintf("GPU-%s-%d", n, g), Name: "NVIDIA GB200", Type: "gb200",
				PCIBusID: fmt.Sprintf("0000:%02x:00.0", g+1), NUMANode: -1,
				Fabric: &nvml.Fabric{ClusterUUID: "5f2c8a34-0000-4000-8000-00000000000" + fmt.Sprint(i/2), CliqueID: 1, State: nvml.FabricCompleted}})
		}
		var buf bytes.Buffer
		if err := nvml.Write(&buf, node); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n+".json"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestYAMLApply: topology.yaml (Slurm 25.05 and later) with the tree as the
// default topology and the NVLink blocks as "nvl" is applied and verified.
func TestYAMLApply(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		if b.Version == "24.11" {
			t.Skip("topology.yaml needs Slurm 25.05 or later")
		}
		dir := t.TempDir()
		writeNVLinkNodes(t, b, dir)
		fab := filepath.Join(dir, "fabric.out")
		var buf bytes.Buffer
		if err := fabricgen.Write(&buf, fabricgen.Spec{Leaves: [][]string{{"gpu1", "gpu3"}, {"gpu2", "gpu4"}}, Spines: 1, Seed: 3}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fab, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := setup(t, b, "yaml", fab, dir)
		code, out := topogenOn(t, cfg, "apply", "--settle", "1s")
		if code != exitOK {
			t.Fatalf("apply topology.yaml: exit %d:\n%s", code, out)
		}
		live, err := render.ParseShowTopology(showTopology(t, b))
		if err != nil {
			t.Fatal(err)
		}
		if live["node gpu1"] != "R0-LEAF-0001" || live["node gpu3"] != "R0-LEAF-0001" || live["node gpu2"] != "R0-LEAF-0002" {
			t.Errorf("default topology is not the tree of topology.yaml: %v", live)
		}
		nvl, err := scontrolFor(t, b).ShowTopologyNamed(testbed.Context(t), "nvl")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(nvl), "BlockName=nvl1") || !strings.Contains(string(nvl), "Nodes=gpu[3-4]") {
			t.Errorf("scontrol show topology nvl does not show the blocks:\n%s", nvl)
		}
		backups, _ := filepath.Glob(b.HostPath("/etc/slurm/topology.yaml") + ".*.bak")
		for _, f := range backups {
			t.Cleanup(func() { os.Remove(f) })
		}
	})
}

// TestPartialScanRefusedOnBed: after a whole fabric is applied, a scan that
// saw only gpu1 and gpu3 is refused by the change budget, in topology.conf
// (both releases) and in topology.yaml (26.05): nothing is written, and
// slurmctld still reports all four nodes. A live file with a line topogen
// cannot parse refuses too, instead of skipping the budget.
func TestPartialScanRefusedOnBed(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		for _, format := range []string{"tree", "yaml"} {
			t.Run(format, func(t *testing.T) {
				if format == "yaml" && b.Version == "24.11" {
					t.Skip("topology.yaml needs Slurm 25.05 or later")
				}
				dir := t.TempDir()
				write := func(name string, spec fabricgen.Spec) string {
					var buf bytes.Buffer
					if err := fabricgen.Write(&buf, spec); err != nil {
						t.Fatal(err)
					}
					path := filepath.Join(dir, name)
					if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					return path
				}
				full := write("full.out", fabricgen.Spec{Leaves: [][]string{{"gpu1", "gpu3"}, {"gpu2", "gpu4"}}, Spines: 1, Seed: 5})
				partial := write("partial.out", fabricgen.Spec{Leaves: [][]string{{"gpu1", "gpu3"}}, Spines: 1, Seed: 5})
				cfg := setup(t, b, format, full, dir)
				live := b.HostPath("/etc/slurm/topology.conf")
				if format == "yaml" {
					live = b.HostPath("/etc/slurm/topology.yaml")
				}
				t.Cleanup(func() {
					backups, _ := filepath.Glob(live + ".*.bak")
					for _, f := range backups {
						os.Remove(f)
					}
				})
				if code, out := topogenOn(t, cfg, "apply", "--settle", "1s"); code != exitOK {
					t.Fatalf("apply of the whole fabric: exit %d:\n%s", code, out)
				}
				before, _ := os.ReadFile(live)
				code, out := topogenOn(t, cfg, "apply", "--settle", "1s", partial)
				if code != exitInvalid || !strings.Contains(out, "it drops 2 of the live file's 4 nodes (50%, more than the 10% allowed): gpu[2,4]") {
					t.Fatalf("apply of a partial scan: exit %d, want %d with the budget's message:\n%s", code, exitInvalid, out)
				}
				if after, _ := os.ReadFile(live); !bytes.Equal(before, after) {
					t.Errorf("the refused apply changed %s:\n%s", live, after)
				}
				placed, err := render.ParseShowTopology(showTopology(t, b))
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range b.Nodes {
					if placed["node "+n] == "" {
						t.Errorf("slurmctld no longer places %s after the refused apply: %v", n, placed)
					}
				}
				if format == "tree" {
					// A live file with a line topogen cannot parse.
					odd := append(bytes.Clone(before), "SwitchName=extra Switches=R0-LEAF-0001 Weight=1\n"...)
					if err := os.WriteFile(live, odd, 0o644); err != nil {
						t.Fatal(err)
					}
					code, out := topogenOn(t, cfg, "apply", "--settle", "1s", partial)
					if code != exitInvalid || !strings.Contains(out, "the live file cannot be read to measure the change against it") {
						t.Fatalf("apply over a live file topogen cannot read: exit %d, want %d:\n%s", code, exitInvalid, out)
					}
					if after, _ := os.ReadFile(live); !bytes.Equal(odd, after) {
						t.Errorf("the refused apply changed %s", live)
					}
				}
			})
		}
	})
}
