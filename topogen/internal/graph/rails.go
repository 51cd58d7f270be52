package graph

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
)

// Rails are decided from the structure of the fabric, never from switch
// names (which are S-<GUID> on fabrics whose switches have no description):
//
//  1. each HCA's index on its host: the device number in its description
//     ("mlx5_3", "HCA-4", "hfi1_0"), or, where a host's descriptions carry
//     none (a GUID map names them) or repeat one, the rank of the HCA's port
//     GUID among that host's HCAs;
//  2. a leaf's rail is the index that at least three quarters of the HCAs
//     cabled to it have;
//  3. leaves that share a spine form one spine group; a leaf whose HCAs
//     are too mixed to decide takes the rail of its spine group when every
//     decided leaf of the group is on one rail.
//
// Every HCA of the fabric that names a host counts, whether the HCA filters
// select it or not: the rails are a fact of the cabling, the filters only
// choose among them.

// deviceIndex finds the HCA's device name and index at the end of a
// description: "mlx5_3", "hfi1_0" (counted from 0) or "HCA-4" (counted from
// 1: the name OFED's node description daemon gives). NVIDIA's DGX H100
// dump in testdata has pods of "HCA-1" hosts and a pod of "mlx5_0" hosts on
// the same rail's leaves (A09-P1-IBLEAF-01-*). It is a hand-written scan,
// not a regexp: it runs once per HCA, 80,000 times on a large fabric.
func deviceIndex(desc string) (device string, index int, ok bool) {
	i := len(desc)
	for i > 0 && desc[i-1] >= '0' && desc[i-1] <= '9' {
		i--
	}
	digits := desc[i:]
	if digits == "" || len(digits) > 4 {
		return "", 0, false
	}
	n, _ := strconv.Atoi(digits)
	head := desc[:i]
	switch {
	case strings.HasSuffix(head, "HCA-"):
		if n > 0 {
			n--
		}
		return desc[i-4:], n, true
	case strings.HasSuffix(head, "_"):
		// mlx<digits>_ or hfi<digits>_
		j := len(head) - 1
		for j > 0 && head[j-1] >= '0' && head[j-1] <= '9' {
			j--
		}
		if j < len(head)-1 && j >= 3 && (head[j-3:j] == "mlx" || head[j-3:j] == "hfi") {
			return desc[j-3:], n, true
		}
	}
	return "", 0, false
}

// How a rail was decided, per leaf.
const (
	byDescription = iota // majority of the HCAs' device indices in their descriptions
	byGUIDOrder          // majority of the HCAs' ranks by port GUID on their hosts
	bySpines             // the rail of the spine group the leaf is in
)

// rails is what the builder knows about the rails of the fabric. Slices
// are by node number.
type rails struct {
	leafRail []int32          // leaf -> rail; -1 when undecided (and for other nodes)
	how      []int8           // leaf -> byDescription, byGUIDOrder or bySpines
	device   map[int][]string // rail -> its HCAs' device names, most common first ("HCA-1", "mlx5_0")
	hcas     map[int]int      // rail -> HCAs on its leaves
	shares   map[int][]int    // rail -> other rails whose leaves share a spine with its leaves
	groups   map[int]int      // rail -> spine groups that hold its leaves
	multi    bool             // some host has HCAs on two or more leaves
	leafLike []bool           // switches that are leaves: HCAs make up a third or more of their links
	upper    [][]int32        // leaf -> its distinct switch neighbours that are not leaves, sorted
}

// findLeaves marks the switches that are leaves: switches whose HCAs (not
// SHARP aggregation nodes) make up a third or more of their links, so a
// spine with a UFM server on one port stays a spine.
func (b *builder) findLeaves() {
	r := &b.rails
	r.leafLike = make([]bool, len(b.node))
	r.upper = make([][]int32, len(b.node))
	var sw []int32
	for _, s := range b.switches {
		ca := 0
		sw = sw[:0]
		for _, nb := range b.neighbors(s) {
			switch n := b.node[nb]; {
			case n.Type == ib.CA && !n.Aggregation:
				ca++
			case n.Type == ib.Switch:
				sw = append(sw, nb)
			}
		}
		slices.Sort(sw)
		if ca > 0 && ca*2 >= len(slices.Compact(sw)) {
			r.leafLike[s] = true
		}
	}
	for _, s := range b.switches {
		if !r.leafLike[s] {
			continue
		}
		var up []int32
		for _, nb := range b.neighbors(s) {
			if b.node[nb].Type == ib.Switch && !r.leafLike[nb] && !slices.Contains(up, nb) {
				up = append(up, nb)
			}
		}
		slices.Sort(up)
		r.upper[s] = up
	}
}

// hcaOnHost is one HCA that names a host, with the leaves it is cabled to.
type hcaOnHost struct {
	node   *ib.Node
	index  int    // device index from the description, -1 if none
	device string // "mlx5_0", or ""
	rank   int    // rank of its port GUID among its host's HCAs
	leaves []int32
}

// tally counts votes for small numbers (device indexes, ranks): a leaf
// has a handful of distinct ones, so a short list beats a map.
type tally []struct{ idx, n int }

func (t *tally) add(idx int) {
	for k := range *t {
		if (*t)[k].idx == idx {
			(*t)[k].n++
			return
		}
	}
	*t = append(*t, struct{ idx, n int }{idx, 1})
}

func (t tally) total() int {
	n := 0
	for _, v := range t {
		n += v.n
	}
	return n
}

// findRails decides the rail of every leaf.
func (b *builder) findRails() {
	r := &b.rails
	r.leafRail, r.how = make([]int32, len(b.node)), make([]int8, len(b.node))
	for i := range r.leafRail {
		r.leafRail[i] = -1
	}
	r.device, r.hcas, r.shares, r.groups = map[int][]string{}, map[int]int{}, map[int][]int{}, map[int]int{}
	var byHost [][]*hcaOnHost // host number -> its HCAs
	all := make([]hcaOnHost, 0, len(b.cas))
	var leafBuf []int32 // every HCA's leaves, one after the other
	for _, i := range b.cas {
		ca := b.node[i]
		if ca.Aggregation {
			continue
		}
		host := b.hostOf(i)
		if host < 0 {
			continue
		}
		all = append(all, hcaOnHost{node: ca, index: -1})
		h := &all[len(all)-1]
		if dev, n, ok := deviceIndex(ca.Desc); ok {
			h.index, h.device = n, dev
		}
		start := len(leafBuf)
		for _, nb := range b.neighbors(i) {
			if r.leafLike[nb] {
				leafBuf = append(leafBuf, nb)
			}
		}
		h.leaves = leafBuf[start:len(leafBuf):len(leafBuf)]
		for int(host) >= len(byHost) {
			byHost = append(byHost, nil)
		}
		byHost[host] = append(byHost[host], h)
	}
	type vote struct {
		desc, guid tally
		devices    []deviceCount
	}
	votes := make([]*vote, len(b.node)) // leaf -> its HCAs' votes
	for _, hs := range byHost {
		// A host has a handful of HCAs: pairwise checks beat maps here,
		// which run once per host on fabrics of 10,000 hosts.
		useDesc, first := true, int32(-1)
		for i, h := range hs {
			for _, l := range h.leaves {
				if first < 0 {
					first = l
				} else if l != first {
					r.multi = true
				}
			}
			if h.index < 0 {
				useDesc = false
			}
			for _, o := range hs[:i] {
				if o.index == h.index {
					useDesc = false
				}
			}
		}
		if !useDesc {
			keys := make([]string, len(hs))
			for i, h := range hs {
				keys[i] = portGUID(h.node)
			}
			sort.Sort(byKey{hs, keys})
		}
		for i, h := range hs {
			h.rank = i
			for _, l := range h.leaves {
				v := votes[l]
				if v == nil {
					v = &vote{}
					votes[l] = v
				}
				if useDesc {
					v.desc.add(h.index)
					k := 0
					for k < len(v.devices) && v.devices[k].name != h.device {
						k++
					}
					if k == len(v.devices) {
						v.devices = append(v.devices, deviceCount{name: h.device})
					}
					v.devices[k].n++
				} else {
					v.guid.add(h.rank)
				}
			}
		}
	}
	for l, v := range votes {
		if v == nil {
			continue
		}
		// Descriptions win where a leaf has both kinds of hosts: they say
		// what the HCA is, GUID order only guesses it.
		if idx, ok := majority(v.desc, v.guid); ok {
			r.leafRail[l], r.how[l] = int32(idx), byDescription
		} else if idx, ok := majority(v.guid, v.desc); ok {
			r.leafRail[l], r.how[l] = int32(idx), byGUIDOrder
		}
	}
	b.spineGroups(func(l int32) bool { return votes[l] != nil })
	deviceVotes := map[int]map[string]int{}
	for l, v := range votes {
		rail := int(r.leafRail[l])
		if v == nil || rail < 0 {
			continue
		}
		r.hcas[rail] += v.desc.total() + v.guid.total()
		if deviceVotes[rail] == nil {
			deviceVotes[rail] = map[string]int{}
		}
		for _, d := range v.devices {
			deviceVotes[rail][d.name] += d.n
		}
	}
	for rail, dv := range deviceVotes {
		names := sortedKeys(dv)
		sort.SliceStable(names, func(i, j int) bool { return dv[names[i]] > dv[names[j]] })
		r.device[rail] = names
	}
}

// deviceCount is how many of a leaf's HCAs have one device name.
type deviceCount struct {
	name string
	n    int
}

// byKey sorts HCAs by a precomputed key (their port GUIDs).
type byKey struct {
	hs   []*hcaOnHost
	keys []string
}

func (x byKey) Len() int           { return len(x.hs) }
func (x byKey) Less(i, j int) bool { return x.keys[i] < x.keys[j] }
func (x byKey) Swap(i, j int) {
	x.hs[i], x.hs[j] = x.hs[j], x.hs[i]
	x.keys[i], x.keys[j] = x.keys[j], x.keys[i]
}

// majority returns the index at least three quarters of the votes in a
// (with b's votes counted in the total) go to.
func majority(a, b tally) (int, bool) {
	total := a.total() + b.total()
	best, bestN := -1, 0
	for _, v := range a {
		if v.n > bestN || (v.n == bestN && v.idx < best) {
			best, bestN = v.idx, v.n
		}
	}
	if bestN == 0 || bestN*4 < total*3 {
		return -1, false
	}
	return best, true
}

// spineGroups joins leaves that share a spine, gives a group's undecided
// leaves (with named HCAs too mixed to decide) the group's rail when its
// decided leaves agree, and records which rails share spines.
func (b *builder) spineGroups(voted func(leaf int32) bool) {
	r := &b.rails
	parent := make([]int32, len(b.node))
	find := func(x int32) int32 {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	var leaves []int32
	for _, s := range b.switches {
		if r.leafLike[s] {
			leaves = append(leaves, s)
			parent[s] = s
		}
	}
	bySpine := make([]int32, len(b.node)) // spine -> first leaf seen under it, +1 (0: none yet)
	for _, l := range leaves {
		for _, s := range r.upper[l] {
			if first := bySpine[s] - 1; first >= 0 {
				a, c := find(first), find(l)
				if a != c {
					parent[c] = a
				}
			} else {
				bySpine[s] = l + 1
			}
		}
	}
	members := map[int32][]int32{}
	var roots []int32
	for _, l := range leaves {
		root := find(l)
		if members[root] == nil {
			roots = append(roots, root)
		}
		members[root] = append(members[root], l)
	}
	slices.Sort(roots)
	for _, root := range roots {
		var set []int
		decided := 0
		for _, l := range members[root] {
			if rail := int(r.leafRail[l]); rail >= 0 {
				decided++
				if !slices.Contains(set, rail) {
					set = append(set, rail)
				}
			}
		}
		// Two decided leaves at least: one leaf alone cannot show that a
		// group's spines serve one rail (2-tier fabrics share spines among
		// all rails).
		if len(set) == 1 && decided >= 2 {
			for _, l := range members[root] {
				if r.leafRail[l] < 0 && len(r.upper[l]) > 0 && voted(l) {
					r.leafRail[l], r.how[l] = int32(set[0]), bySpines
				}
			}
		}
		for _, x := range set {
			r.groups[x]++
			for _, y := range set {
				if x != y && !containsInt(r.shares[x], y) {
					r.shares[x] = append(r.shares[x], y)
				}
			}
		}
	}
	for x := range r.shares {
		sort.Ints(r.shares[x])
	}
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// portGUID is the GUID an HCA is ordered by on its host: its lowest
// port's GUID, or the node GUID when the dump shows no port GUID.
func portGUID(n *ib.Node) string {
	best, bestPort := "", 0
	for p, g := range n.PortGUIDs {
		if best == "" || p < bestPort {
			best, bestPort = g, p
		}
	}
	if best == "" {
		return n.GUID
	}
	return best
}

// noteRails reports how each rail was decided, once per rail, on fabrics
// where hosts have HCAs on several leaves (on others there is one rail and
// nothing to decide).
func (b *builder) noteRails() {
	r := &b.rails
	if !r.multi {
		return
	}
	leaves := map[int][]string{}
	how := map[int][3]int{}
	for l, rail32 := range r.leafRail {
		if rail32 < 0 {
			continue
		}
		rail := int(rail32)
		leaves[rail] = append(leaves[rail], b.names[l])
		h := how[rail]
		h[r.how[l]]++
		how[rail] = h
	}
	ids := make([]int, 0, len(leaves))
	for rail := range leaves {
		ids = append(ids, rail)
	}
	sort.Ints(ids)
	for _, rail := range ids {
		sort.Strings(leaves[rail])
		h := how[rail]
		var why []string
		if h[byDescription] > 0 {
			why = append(why, fmt.Sprintf("%d by the device index in their HCAs' descriptions (%s)", h[byDescription], strings.Join(r.device[rail], ", ")))
		}
		if h[byGUIDOrder] > 0 {
			why = append(why, fmt.Sprintf("%d by their HCAs' port GUID order on each host (rank %d)", h[byGUIDOrder], rail))
		}
		if h[bySpines] > 0 {
			why = append(why, fmt.Sprintf("%d by the spines they share with this rail's leaves", h[bySpines]))
		}
		spines := fmt.Sprintf("its leaves share spines with no other rail's leaves (spine groups: %d)", r.groups[rail])
		if len(r.shares[rail]) > 0 {
			var others []string
			for _, o := range r.shares[rail] {
				others = append(others, strconv.Itoa(o))
			}
			spines = "its leaves share spines with rails " + strings.Join(others, ",")
		}
		b.note(Info, "rail", "rail"+strconv.Itoa(rail), "%d leaves (%s), %d HCAs; leaves decided %s; %s",
			len(leaves[rail]), abbreviate(leaves[rail], 3), r.hcas[rail], strings.Join(why, ", "), spines)
	}
}

// abbreviate lists at most n names and how many more there are.
func abbreviate(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ",")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ","), len(names)-n)
}

// railPattern is an include_hca pattern that selects the rail's HCAs by
// their device names ("mlx5_0$", "(HCA-1|mlx5_0)$"), or "".
func (r *rails) railPattern(rail int) string {
	names := r.device[rail]
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0] + "$"
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	return "(" + strings.Join(sorted, "|") + ")$"
}
