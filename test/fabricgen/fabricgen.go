// Package fabricgen writes synthetic InfiniBand fabrics in ibnetdiscover's
// classic format, deterministic for a seed, for topogen's tests and
// benchmarks: 2-tier fat trees (every leaf cabled to every spine), with one
// or more rails, and 3-tier rail-optimised fat trees (the SuperPOD shape:
// pods of leaves, spines per pod and rail, core groups above the spines).
//
// It writes only fabrics that can exist: no switch gets more ports than a
// real switch has (Spec.Radix, 64 by default as on Quantum-2 QM9700; 128
// at most, as in its 2x200G split mode). A Spec that needs more is an
// error that says which tier overflows, so a benchmark can never measure
// a fabric topogen rightly refuses.
package fabricgen

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
)

// Spec describes a fabric.
type Spec struct {
	// Nodes is the number of hosts, named by HostFormat ("node%05d",
	// counting from 1), unless Leaves names them.
	Nodes      int
	HostFormat string
	// NodesPerLeaf hosts share each leaf switch (per rail).
	NodesPerLeaf int
	// Rails is the number of HCAs per host; rail r of every host goes to
	// rail r's own leaves (a rail-optimised fabric). 1 is a plain fat tree.
	Rails int
	// Spines is the number of spine switches; every leaf links to every
	// spine.
	Spines int
	// Leaves, when set, gives the hosts of each leaf explicitly (one rail).
	Leaves [][]string
	// Seed shuffles the order in which switches are listed, as a real
	// ibnetdiscover walk does; the fabric itself does not change.
	Seed uint64

	// PodLeaves, when positive, makes a 3-tier rail-optimised fabric:
	// leaf i of every rail is in pod i/PodLeaves; each (pod, rail) has
	// SpinesPerPod spines that every leaf of that pod and rail is cabled
	// to; spine j of every (pod, rail) is cabled to all CoresPerGroup
	// cores of core group j. Spines is then unused.
	PodLeaves, SpinesPerPod, CoresPerGroup int
	// Radix is the most ports a switch may have: 64 when 0, at most 128.
	Radix int
	// NoSwitchNames writes switch descriptions without a name in them
	// ("MQM9700 Mellanox Technologies"), as on fabrics whose switches were
	// never named, so topogen falls back to S-<GUID> names.
	NoSwitchNames bool
}

// Tiers returns the number of switch tiers the fabric has: 2 or 3.
func (s Spec) Tiers() int {
	if s.PodLeaves > 0 {
		return 3
	}
	return 2
}

type sw struct {
	guid  uint64
	desc  string
	ports []string // link lines, port by port
}

type ca struct {
	guid, port uint64
	desc       string
	link       string
}

// Write writes the fabric.
func Write(w io.Writer, s Spec) error {
	if s.HostFormat == "" {
		s.HostFormat = "node%05d"
	}
	if s.Rails <= 0 {
		s.Rails = 1
	}
	if s.Spines <= 0 {
		s.Spines = 1
	}
	groups := s.Leaves
	if groups == nil {
		if s.Nodes <= 0 || s.NodesPerLeaf <= 0 {
			return fmt.Errorf("fabricgen: Nodes and NodesPerLeaf must be positive")
		}
		for i := 0; i < s.Nodes; i += s.NodesPerLeaf {
			var g []string
			for j := i; j < i+s.NodesPerLeaf && j < s.Nodes; j++ {
				g = append(g, fmt.Sprintf(s.HostFormat, j+1))
			}
			groups = append(groups, g)
		}
	}
	if s.Radix == 0 {
		s.Radix = 64
	}
	if s.Radix < 2 || s.Radix > 128 {
		return fmt.Errorf("fabricgen: radix %d: real InfiniBand switches have at most 128 ports", s.Radix)
	}
	if s.PodLeaves > 0 {
		return write3Tier(w, s, groups)
	}
	next := uint64(0x0002c90300000000)
	guid := func() uint64 { next += 0x10; return next }
	var spines []*sw
	for i := 0; i < s.Spines; i++ {
		spines = append(spines, &sw{guid: guid(), desc: s.desc(fmt.Sprintf("SPINE-%03d", i+1), "MQM9700")})
	}
	var leaves []*sw
	var cas []*ca
	for r := 0; r < s.Rails; r++ {
		for li, g := range groups {
			leaf := &sw{guid: guid(), desc: s.desc(fmt.Sprintf("R%d-LEAF-%04d", r, li+1), "MQM9700")}
			leaves = append(leaves, leaf)
			for _, h := range g {
				cas = append(cas, host(leaf, guid(), fmt.Sprintf("%s mlx5_%d", h, r)))
			}
			for _, sp := range spines {
				cable(leaf, sp)
			}
		}
	}
	if err := s.fits("leaf", leaves, fmt.Sprintf("NodesPerLeaf + Spines = %d", len(groups[0])+s.Spines)); err != nil {
		return err
	}
	if err := s.fits("spine", spines, fmt.Sprintf("one per leaf of every rail: %d leaves x %d rails; use PodLeaves for a 3-tier fabric", len(groups), s.Rails)); err != nil {
		return err
	}
	switches := append(append([]*sw(nil), spines...), leaves...)
	return write(w, s, switches, cas)
}

// desc is a switch's node description: named as NVIDIA firmware names it
// ("MF0;<name>:<model>/U1"), or with no name at all.
func (s Spec) desc(name, model string) string {
	if s.NoSwitchNames {
		return model + " Mellanox Technologies"
	}
	return "MF0;" + name + ":" + model + "/U1"
}

// fits checks that no switch of a tier has more ports than the radix.
func (s Spec) fits(tier string, sws []*sw, why string) error {
	most := 0
	for _, x := range sws {
		most = max(most, len(x.ports))
	}
	if most > s.Radix {
		return fmt.Errorf("fabricgen: a %s switch would have %d ports (%s), more than the radix %d: no such switch exists", tier, most, why, s.Radix)
	}
	return nil
}

// cable links two switches, each on its next free port.
func cable(a, b *sw) {
	pa, pb := len(a.ports)+1, len(b.ports)+1
	a.ports = append(a.ports, fmt.Sprintf("[%d]\t\"S-%016x\"[%d]\t\t# \"%s\" lid %d 4xNDR", pa, b.guid, pb, b.desc, b.guid%60000))
	b.ports = append(b.ports, fmt.Sprintf("[%d]\t\"S-%016x\"[%d]\t\t# \"%s\" lid %d 4xNDR", pb, a.guid, pa, a.desc, a.guid%60000))
}

// host cables one HCA of a host to a leaf.
func host(leaf *sw, guid uint64, desc string) *ca {
	c := &ca{guid: guid, desc: desc}
	c.port = c.guid + 1
	p := len(leaf.ports) + 1
	leaf.ports = append(leaf.ports, fmt.Sprintf("[%d]\t\"H-%016x\"[1](%016x) \t\t# \"%s\" lid %d 4xNDR", p, c.guid, c.port, c.desc, c.guid%60000))
	c.link = fmt.Sprintf("[1](%016x) \t\"S-%016x\"[%d]\t\t# lid %d lmc 0 \"%s\" lid %d 4xNDR", c.port, leaf.guid, p, c.guid%60000, leaf.desc, leaf.guid%60000)
	return c
}

// write3Tier writes the SuperPOD shape: per rail, leaves of NodesPerLeaf
// hosts; pods of PodLeaves leaves; per (pod, rail) SpinesPerPod spines,
// each cabled to every leaf of its pod and rail; spine j of every (pod,
// rail) cabled to all CoresPerGroup cores of core group j. Hosts on one
// leaf reach each other through it, a pod's leaves of one rail through
// that rail's spines of the pod, and everything else through the cores.
func write3Tier(w io.Writer, s Spec, groups [][]string) error {
	if s.SpinesPerPod <= 0 || s.CoresPerGroup <= 0 {
		return fmt.Errorf("fabricgen: a 3-tier fabric needs SpinesPerPod and CoresPerGroup")
	}
	next := uint64(0x0002c90400000000)
	guid := func() uint64 { next += 0x10; return next }
	pods := (len(groups) + s.PodLeaves - 1) / s.PodLeaves
	cores := make([][]*sw, s.SpinesPerPod)
	var all []*sw
	for j := range cores {
		for k := 0; k < s.CoresPerGroup; k++ {
			c := &sw{guid: guid(), desc: s.desc(fmt.Sprintf("CORE-%02d-%02d", j+1, k+1), "MQM9790")}
			cores[j] = append(cores[j], c)
			all = append(all, c)
		}
	}
	var spines, leaves []*sw
	var cas []*ca
	for r := 0; r < s.Rails; r++ {
		podSpines := make([][]*sw, pods)
		for p := range podSpines {
			for j := 0; j < s.SpinesPerPod; j++ {
				sp := &sw{guid: guid(), desc: s.desc(fmt.Sprintf("R%d-P%02d-SPINE-%02d", r, p+1, j+1), "MQM9700")}
				podSpines[p] = append(podSpines[p], sp)
				spines = append(spines, sp)
				for _, c := range cores[j] {
					cable(sp, c)
				}
			}
		}
		for li, g := range groups {
			leaf := &sw{guid: guid(), desc: s.desc(fmt.Sprintf("R%d-LEAF-%04d", r, li+1), "MQM9700")}
			leaves = append(leaves, leaf)
			for _, h := range g {
				cas = append(cas, host(leaf, guid(), fmt.Sprintf("%s mlx5_%d", h, r)))
			}
			for _, sp := range podSpines[li/s.PodLeaves] {
				cable(leaf, sp)
			}
		}
	}
	if err := s.fits("leaf", leaves, fmt.Sprintf("NodesPerLeaf + SpinesPerPod = %d", len(groups[0])+s.SpinesPerPod)); err != nil {
		return err
	}
	if err := s.fits("spine", spines, fmt.Sprintf("PodLeaves + CoresPerGroup = %d", s.PodLeaves+s.CoresPerGroup)); err != nil {
		return err
	}
	if err := s.fits("core", all, fmt.Sprintf("one per pod and rail: %d pods x %d rails", pods, s.Rails)); err != nil {
		return err
	}
	all = append(append(all, spines...), leaves...)
	return write(w, s, all, cas)
}

// write lists the switches in an order shuffled by the seed, then the
// HCAs, as ibnetdiscover does.
func write(w io.Writer, s Spec, switches []*sw, cas []*ca) error {
	rng := rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))
	rng.Shuffle(len(switches), func(i, j int) { switches[i], switches[j] = switches[j], switches[i] })

	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "#\n# Topology file: generated by fabricgen (seed %d)\n#\n# Initiated from node %016x port %016x\n\n", s.Seed, cas[0].guid, cas[0].port)
	for _, x := range switches {
		fmt.Fprintf(bw, "vendid=0x2c9\ndevid=0xd2f2\nsysimgguid=0x%x\nswitchguid=0x%x(%x)\n", x.guid, x.guid, x.guid)
		fmt.Fprintf(bw, "Switch\t%d \"S-%016x\"\t\t# \"%s\" enhanced port 0 lid %d lmc 0\n", len(x.ports)+1, x.guid, x.desc, x.guid%60000)
		for _, p := range x.ports {
			fmt.Fprintln(bw, p)
		}
		fmt.Fprintln(bw)
	}
	for _, c := range cas {
		fmt.Fprintf(bw, "vendid=0x2c9\ndevid=0x1021\nsysimgguid=0x%x\ncaguid=0x%x\n", c.guid, c.guid)
		fmt.Fprintf(bw, "Ca\t1 \"H-%016x\"\t\t# \"%s\"\n%s\n\n", c.guid, c.desc, c.link)
	}
	return bw.Flush()
}
