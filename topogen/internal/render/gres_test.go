package render_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/topogen/internal/discover/nvml"
	"github.com/strata-hpc/strata/topogen/internal/render"
)

// hgx is an 8-GPU node whose device minors are not its NVML indices:
// minor = index XOR 3, so index 0 is /dev/nvidia3, index 3 /dev/nvidia0,
// index 4 /dev/nvidia7 and so on. gres.conf lists GPUs by minor:
//
//	line (minor)  0  1  2  3  4  5  6  7
//	GPU index     3  2  1  0  7  6  5  4
//
// Every GPU has NVLinks to every other GPU, and the count tells which
// peer it is: count = peer index + 1. So the Links= column for minor m
// holds (index of minor m) + 1, i.e. 4,3,2,1,8,7,6,5, with -1 in the
// GPU's own column. The links to NVSwitches (peer -1) are not GPUs and
// appear in no column.
//
// CPUs: GPUs 0-3 are near CPUs 0-31 and their hyper-thread siblings
// 64-95, GPUs 4-7 near 32-63 and 96-127. With 64 physical cores, Cores=
// keeps the CPUs below 64: 0-31 and 32-63.
func hgx() nvml.Node {
	n := nvml.Node{Hostname: "gpu1", Source: nvml.SourceNVML}
	for i := range 8 {
		g := nvml.GPU{
			Index: i, Minor: i ^ 3,
			UUID: fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i),
			Name: "NVIDIA H100 80GB HBM3", Type: "h100",
			PCIBusID:    fmt.Sprintf("0000:%02x:00.0", 0x18+i),
			NUMANode:    i / 4,
			CPUAffinity: []string{"0-31,64-95", "32-63,96-127"}[i/4],
		}
		for j := range 8 {
			if j != i {
				g.NVLinks = append(g.NVLinks, nvml.Link{Peer: j, Count: j + 1})
			}
		}
		g.NVLinks = append([]nvml.Link{{Peer: -1, Count: 18}}, g.NVLinks...)
		n.GPUs = append(n.GPUs, g)
	}
	return n
}

// pcie is a 2-GPU node with no NVLinks and no GRES type (Type= is left
// out). It is not in CoresPerNode, so it never gets Cores=.
func pcie() nvml.Node {
	n := nvml.Node{Hostname: "gpu2", Source: nvml.SourceNvidiaSMI}
	for i := range 2 {
		n.GPUs = append(n.GPUs, nvml.GPU{
			Index: i, Minor: i, UUID: fmt.Sprintf("GPU-b%07d", i), Name: "Some GPU",
			PCIBusID: fmt.Sprintf("0000:%02x:00.0", 0x3b+i), NUMANode: 0, CPUAffinity: "0-7",
		})
	}
	return n
}

func TestGresConf(t *testing.T) {
	tests := map[string]struct {
		opt  render.GresOptions
		file string
	}{
		// Cores= only for gpu1, which CoresPerNode lists.
		"cores for listed nodes": {opt: render.GresOptions{CoresPerNode: map[string]int{"gpu1": 64}}, file: "gres-cores.conf"},
		// No CoresPerNode: NVML's CPUs are not Slurm's core numbers, so no Cores=.
		"no cores": {file: "gres.conf"},
		"device prefix": {
			opt:  render.GresOptions{DevicePrefix: "/dev/dri/nvidia"},
			file: "gres-prefix.conf",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			// gpu2 is given first: nodes are written in name order.
			out, err := render.GresConf([]nvml.Node{pcie(), hgx()}, tc.opt, source)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.file, out)
		})
	}
}

func TestGresConfErrors(t *testing.T) {
	tests := map[string]struct {
		node    func() nvml.Node
		opt     render.GresOptions
		wantErr string
	}{
		"GPU without a minor number": {
			node: func() nvml.Node {
				n := hgx()
				n.GPUs[5].Minor = -1
				return n
			},
			wantErr: "node gpu1: GPU 5 has no device minor number: cannot name its device file",
		},
		"CPU list that is no list": {
			node: func() nvml.Node {
				n := hgx()
				n.GPUs[2].CPUAffinity = "zero-31"
				return n
			},
			opt:     render.GresOptions{CoresPerNode: map[string]int{"gpu1": 64}},
			wantErr: `node gpu1 GPU 2: CPU list "zero-31": "zero" is not a number`,
		},
		"MIG enabled": {
			node: func() nvml.Node {
				n := hgx()
				n.GPUs[1].MIG = true
				n.GPUs[6].MIG = true
				return n
			},
			wantErr: "MIG is enabled on gpu1 (GPU 1,6): gres.conf for MIG needs one line per MIG device, typed by its profile, with MultipleFiles=",
		},
		"host name with shell code": {
			node: func() nvml.Node {
				n := hgx()
				n.Hostname = "gpu1 Name=x;touch y"
				return n
			},
			wantErr: `host name "gpu1 Name=x;touch y": not a name Slurm accepts`,
		},
		"non-ASCII host name": {
			node: func() nvml.Node {
				n := hgx()
				n.Hostname = "gpü1"
				return n
			},
			wantErr: `host name "gpü1": not a name Slurm accepts`,
		},
		"CPU range backwards": {
			node: func() nvml.Node {
				n := hgx()
				n.GPUs[2].CPUAffinity = "31-0"
				return n
			},
			opt:     render.GresOptions{CoresPerNode: map[string]int{"gpu1": 64}},
			wantErr: `bad range "31-0"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := render.GresConf([]nvml.Node{tc.node()}, tc.opt, source)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("GresConf error = %v, want it to contain %q", err, tc.wantErr)
			}
			if out != nil {
				t.Errorf("GresConf returned output with its error:\n%s", out)
			}
		})
	}
}

// TestGresConfNVSwitch: GPUs that reach each other only through NVSwitches
// (NVML reports peer -1) get the poorer side's switch link count, as
// nvidia-smi topo -m shows NV18 between every pair of an HGX H100.
func TestGresConfNVSwitch(t *testing.T) {
	node := nvml.Node{Hostname: "hgx1", GPUs: []nvml.GPU{
		{Index: 0, Minor: 0, Type: "h100", NVLinks: []nvml.Link{{Peer: -1, Count: 18}}},
		{Index: 1, Minor: 1, Type: "h100", NVLinks: []nvml.Link{{Peer: -1, Count: 18}}},
		{Index: 2, Minor: 2, Type: "h100", NVLinks: []nvml.Link{{Peer: -1, Count: 12}}}, // a degraded GPU: 6 links down
		{Index: 3, Minor: 3, Type: "h100"},                                              // no NVLink at all
	}}
	out, err := render.GresConf([]nvml.Node{node}, render.GresOptions{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"NodeName=hgx1 Name=gpu Type=h100 File=/dev/nvidia0 Links=-1,18,12,0\n",
		"NodeName=hgx1 Name=gpu Type=h100 File=/dev/nvidia1 Links=18,-1,12,0\n",
		"NodeName=hgx1 Name=gpu Type=h100 File=/dev/nvidia2 Links=12,12,-1,0\n",
		"NodeName=hgx1 Name=gpu Type=h100 File=/dev/nvidia3\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("gres.conf lacks %q:\n%s", want, out)
		}
	}
}
