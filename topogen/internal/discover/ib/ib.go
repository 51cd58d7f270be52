// Package ib parses InfiniBand fabric dumps into nodes and links: the
// classic output of ibnetdiscover, its ports report (ibnetdiscover -p) and
// the ibnetdiscover file that ibdiagnet2 writes (split-port labels such as
// [1](1/1/1) on switch ports, [1](B134D0F0/0/0/1)(guid) and [1](1)(guid) on
// HCA ports). It also reads GUID-to-name maps.
//
// The package is pure: it reads the bytes it is given and nothing else (no
// files, no commands, no clock, no package state), so a captured dump always
// gives the same Fabric. It does not decide what a fabric means (which switch
// is a leaf, which CA is a Slurm node, whether a self-link matters); that is
// the graph builder's job. What it cannot use becomes a Diagnostic with the
// line number, so an admin can fix the dump or the cabling instead of
// guessing why a host went missing.
package ib

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"
)

// NodeType is the kind of an InfiniBand node.
type NodeType int

// Node types, as ibnetdiscover names them (Switch, Ca, Rt; SW, CA, RT with -p).
const (
	Switch NodeType = iota + 1
	CA
	Router
)

// String returns "switch", "ca" or "router".
func (t NodeType) String() string {
	switch t {
	case Switch:
		return "switch"
	case CA:
		return "ca"
	case Router:
		return "router"
	}
	return "NodeType(" + strconv.Itoa(int(t)) + ")"
}

// Node is one switch, channel adapter (HCA port group) or router.
type Node struct {
	GUID        string // node GUID: lowercase hex, 16 digits, no 0x ("2c5eab0300b87b40"); a port GUID for CAs in a ports report
	Type        NodeType
	Desc        string         // node description without quotes, trimmed ("MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", "a08-p1-dgx-04-c01 mlx5_5")
	Ports       int            // number of ports when the dump says (0 if unknown)
	LID         int            // base LID when known (0 if unknown); for a CA, the LID of its lowest-numbered port the dump shows
	Aggregation bool           // SHARP aggregation node ("Aggregation Node" in a CA's description): never a Slurm node
	PortGUIDs   map[int]string // for CAs and routers: port number -> port GUID, when the dump shows it (nil otherwise)
	Line        int            // 1-based line where the node was declared (first mentioned, in a ports report)
}

// Link is one cable between two ports. A self-link (A == B) is a switch
// port cabled to another port of the same switch; it is kept, and a later
// stage decides what to do with it.
type Link struct {
	A, B         string // node GUIDs; A <= B lexically, or A == B for a self-link (then APort <= BPort)
	APort, BPort int
	Width, Speed string // "4x", "NDR" when known ("" otherwise)
	Line         int    // first line that showed the link
}

// Diagnostic is one input line that was skipped or rejected.
type Diagnostic struct {
	Line int
	Text string // the offending line (trimmed, at most 200 bytes, valid UTF-8)
	Msg  string // why it was skipped or rejected
}

// Format is the dialect a dump was written in. Classic and IBDiag share one
// grammar; a dump is IBDiag when it shows a split-port label ("[1](1/1/1)")
// or a comment naming ibdiag, which is all that tells them apart. The first
// line that parses decides between the classic grammar and the ports
// report; lines of the other grammar are then diagnostics.
type Format int

// Formats Parse recognises.
const (
	Classic Format = iota + 1 // ibnetdiscover
	Ports                     // ibnetdiscover -p (ports report)
	IBDiag                    // the .ibnetdiscover file of ibdiagnet2 (split-port labels, no "Topology file:" header)
)

// String returns "classic", "ports" or "ibdiag".
func (f Format) String() string {
	switch f {
	case Classic:
		return "classic"
	case Ports:
		return "ports"
	case IBDiag:
		return "ibdiag"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// Fabric is everything a dump says about the nodes and cables of a subnet.
type Fabric struct {
	Format      Format
	Nodes       map[string]*Node // by GUID
	Links       []Link           // each physical link once, sorted by (A, APort, B, BPort)
	Diagnostics []Diagnostic     // every line that was skipped or rejected, in line order

	numbered *numbered // what Parse knows of Numbered, nil for a Fabric built by hand
}

// numbered is Numbered's answer.
type numbered struct {
	nodes []*Node
	ends  [][2]int32
}

// Numbered returns the nodes sorted by GUID and, for each link of Links,
// the places of its two ends in that slice (-1 for a GUID that names no
// node): a numbering a caller can index slices with instead of keying
// maps by GUID strings. Parse works it out while it parses; for a Fabric
// built by hand, or whose Nodes or Links changed since, it is worked out
// on the call. The slices are shared: do not change them.
func (f *Fabric) Numbered() (nodes []*Node, ends [][2]int32) {
	if n := f.numbered; n != nil && len(n.nodes) == len(f.Nodes) && len(n.ends) == len(f.Links) {
		ok := true
		for k, l := range f.Links {
			if e := n.ends[k]; e[0] < 0 || e[1] < 0 || n.nodes[e[0]].GUID != l.A || n.nodes[e[1]].GUID != l.B {
				ok = false
				break
			}
		}
		if ok {
			return n.nodes, n.ends
		}
	}
	nodes = make([]*Node, 0, len(f.Nodes))
	for _, nd := range f.Nodes {
		nodes = append(nodes, nd)
	}
	slices.SortFunc(nodes, func(a, b *Node) int { return strings.Compare(a.GUID, b.GUID) })
	place := make(map[string]int32, len(nodes))
	for i, nd := range nodes {
		place[nd.GUID] = int32(i)
	}
	ends = make([][2]int32, len(f.Links))
	for k, l := range f.Links {
		ends[k] = [2]int32{-1, -1}
		if i, ok := place[l.A]; ok {
			ends[k][0] = i
		}
		if i, ok := place[l.B]; ok {
			ends[k][1] = i
		}
	}
	return nodes, ends
}

// ErrNoNodes is wrapped by the error Parse returns when the input holds no
// usable node at all (empty input, binary garbage, the wrong file).
var ErrNoNodes = errors.New("no InfiniBand node found; give the output of ibnetdiscover, ibnetdiscover -p or ibdiagnet2's .ibnetdiscover file")

// ByType returns the nodes of one type sorted by GUID.
func (f *Fabric) ByType(t NodeType) []*Node {
	// Sort by the GUIDs' numbers: 16 lowercase hex digits sort as their
	// values do, and comparing two numbers is a fraction of comparing two
	// strings, which was most of the cost on a fabric of 80,000 CAs.
	type keyed struct {
		n   uint64
		ptr *Node
	}
	var ks []keyed
	canonical := true
	for _, n := range f.Nodes {
		if n.Type == t {
			k, ok := guidNum(n.GUID)
			canonical = canonical && ok
			ks = append(ks, keyed{k, n})
		}
	}
	if canonical {
		slices.SortFunc(ks, func(a, b keyed) int { return cmp.Compare(a.n, b.n) })
	} else {
		slices.SortFunc(ks, func(a, b keyed) int { return strings.Compare(a.ptr.GUID, b.ptr.GUID) })
	}
	if ks == nil {
		return nil
	}
	out := make([]*Node, len(ks))
	for i, k := range ks {
		out[i] = k.ptr
	}
	return out
}

// Neighbor is the far end of one of a node's links.
type Neighbor struct {
	GUID       string // the other node (the node itself for a self-link)
	Port       int    // local port
	RemotePort int
}

// Neighbors returns the other end of every link of the node with the given
// GUID, sorted by local port. A self-link shows up twice, once from each of
// its ports. It scans Links, so it costs O(len(Links)) a call: a caller
// walking the whole fabric should build its adjacency from Links once.
func (f *Fabric) Neighbors(guid string) []Neighbor {
	var out []Neighbor
	for _, l := range f.Links {
		if l.A == guid {
			out = append(out, Neighbor{GUID: l.B, Port: l.APort, RemotePort: l.BPort})
		}
		if l.B == guid && (l.A != guid || l.APort != l.BPort) {
			out = append(out, Neighbor{GUID: l.A, Port: l.BPort, RemotePort: l.APort})
		}
	}
	slices.SortFunc(out, func(a, b Neighbor) int {
		if a.Port != b.Port {
			return a.Port - b.Port
		}
		if c := strings.Compare(a.GUID, b.GUID); c != 0 {
			return c
		}
		return a.RemotePort - b.RemotePort
	})
	return out
}
