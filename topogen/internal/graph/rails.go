package graph

import (
	"fmt"
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

// rails is what the builder knows about the rails of the fabric.
type rails struct {
	leafRail map[string]int      // leaf GUID -> rail; absent when undecided
	how      map[string]int      // leaf GUID -> byDescription, byGUIDOrder or bySpines
	device   map[int][]string    // rail -> its HCAs' device names, most common first ("HCA-1", "mlx5_0")
	hcas     map[int]int         // rail -> HCAs on its leaves
	shares   map[int][]int       // rail -> other rails whose leaves share a spine with its leaves
	groups   map[int]int         // rail -> spine groups that hold its leaves
	multi    bool                // some host has HCAs on two or more leaves
	leafLike map[string]bool     // switches that are leaves: HCAs make up a third or more of their links
	upper    map[string][]string // leaf GUID -> its distinct switch neighbours that are not leaves
}

// findLeaves marks the switches that are leaves: switches whose HCAs (not
// SHARP aggregation nodes) make up a third or more of their links, so a
// spine with a UFM server on one port stays a spine.
func (b *builder) findLeaves() {
	b.rails.leafLike = map[string]bool{}
	for _, s := range b.nodes(ib.Switch) {
		ca := 0
		sw := map[string]bool{}
		for _, nb := range b.neighbors(s.GUID) {
			n := b.f.Nodes[nb]
			switch {
			case n == nil:
			case n.Type == ib.CA && !n.Aggregation:
				ca++
			case n.Type == ib.Switch:
				sw[nb] = true
			}
		}
		if ca > 0 && ca*2 >= len(sw) {
			b.rails.leafLike[s.GUID] = true
		}
	}
	b.rails.upper = map[string][]string{}
	for g := range b.rails.leafLike {
		seen := map[string]bool{}
		for _, nb := range b.neighbors(g) {
			if n := b.f.Nodes[nb]; n != nil && n.Type == ib.Switch && !b.rails.leafLike[nb] && !seen[nb] {
				seen[nb] = true
				b.rails.upper[g] = append(b.rails.upper[g], nb)
			}
		}
		sort.Strings(b.rails.upper[g])
	}
}

// hcaOnHost is one HCA that names a host, with the leaves it is cabled to.
type hcaOnHost struct {
	node   *ib.Node
	index  int    // device index from the description, -1 if none
	device string // "mlx5_0", or ""
	rank   int    // rank of its port GUID among its host's HCAs
	leaves []string
}

// findRails decides the rail of every leaf.
func (b *builder) findRails() {
	r := &b.rails
	r.leafRail, r.how = map[string]int{}, map[string]int{}
	r.device, r.hcas, r.shares, r.groups = map[int][]string{}, map[int]int{}, map[int][]int{}, map[int]int{}
	byHost := map[string][]*hcaOnHost{}
	for _, ca := range b.nodes(ib.CA) {
		if ca.Aggregation {
			continue
		}
		name := b.hostName(ca)
		if name == "" {
			continue
		}
		h := &hcaOnHost{node: ca, index: -1}
		if dev, n, ok := deviceIndex(ca.Desc); ok {
			h.index, h.device = n, dev
		}
		for _, nb := range b.neighbors(ca.GUID) {
			if r.leafLike[nb] {
				h.leaves = append(h.leaves, nb)
			}
		}
		byHost[name] = append(byHost[name], h)
	}
	type vote struct{ desc, guid map[int]int }
	votes := map[string]*vote{}            // leaf -> index -> HCAs
	devices := map[string]map[string]int{} // leaf -> device name -> HCAs
	for _, hs := range byHost {
		// A host has a handful of HCAs: pairwise checks beat maps here,
		// which run once per host on fabrics of 10,000 hosts.
		useDesc, first := true, ""
		for i, h := range hs {
			for _, l := range h.leaves {
				if first == "" {
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
					v = &vote{desc: map[int]int{}, guid: map[int]int{}}
					votes[l] = v
				}
				if useDesc {
					v.desc[h.index]++
					if devices[l] == nil {
						devices[l] = map[string]int{}
					}
					devices[l][h.device]++
				} else {
					v.guid[h.rank]++
				}
			}
		}
	}
	for l, v := range votes {
		// Descriptions win where a leaf has both kinds of hosts: they say
		// what the HCA is, GUID order only guesses it.
		if idx, ok := majority(v.desc, v.guid); ok {
			r.leafRail[l], r.how[l] = idx, byDescription
		} else if idx, ok := majority(v.guid, v.desc); ok {
			r.leafRail[l], r.how[l] = idx, byGUIDOrder
		}
	}
	b.spineGroups(func(l string) bool { return votes[l] != nil })
	deviceVotes := map[int]map[string]int{}
	for l, rail := range r.leafRail {
		if votes[l] == nil {
			continue
		}
		for _, n := range votes[l].desc {
			r.hcas[rail] += n
		}
		for _, n := range votes[l].guid {
			r.hcas[rail] += n
		}
		if deviceVotes[rail] == nil {
			deviceVotes[rail] = map[string]int{}
		}
		for d, n := range devices[l] {
			deviceVotes[rail][d] += n
		}
	}
	for rail, dv := range deviceVotes {
		names := sortedKeys(dv)
		sort.SliceStable(names, func(i, j int) bool { return dv[names[i]] > dv[names[j]] })
		r.device[rail] = names
	}
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
func majority(a, b map[int]int) (int, bool) {
	total := 0
	for _, n := range a {
		total += n
	}
	for _, n := range b {
		total += n
	}
	best, bestN := -1, 0
	for idx, n := range a {
		if n > bestN || (n == bestN && idx < best) {
			best, bestN = idx, n
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
func (b *builder) spineGroups(voted func(leaf string) bool) {
	r := &b.rails
	parent := map[string]string{}
	find := func(x string) string {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	leaves := sortedKeys(r.leafLike)
	for _, l := range leaves {
		parent[l] = l
	}
	bySpine := map[string]string{} // spine -> first leaf seen under it
	for _, l := range leaves {
		for _, s := range r.upper[l] {
			if first, ok := bySpine[s]; ok {
				a, c := find(first), find(l)
				if a != c {
					parent[c] = a
				}
			} else {
				bySpine[s] = l
			}
		}
	}
	members := map[string][]string{}
	for _, l := range leaves {
		root := find(l)
		members[root] = append(members[root], l)
	}
	for _, root := range sortedKeys(members) {
		set := map[int]bool{}
		for _, l := range members[root] {
			if rail, ok := r.leafRail[l]; ok {
				set[rail] = true
			}
		}
		decided := 0
		for _, l := range members[root] {
			if _, ok := r.leafRail[l]; ok {
				decided++
			}
		}
		// Two decided leaves at least: one leaf alone cannot show that a
		// group's spines serve one rail (2-tier fabrics share spines among
		// all rails).
		if len(set) == 1 && decided >= 2 {
			var rail int
			for x := range set {
				rail = x
			}
			for _, l := range members[root] {
				if _, ok := r.leafRail[l]; !ok && len(r.upper[l]) > 0 && voted(l) {
					r.leafRail[l], r.how[l] = rail, bySpines
				}
			}
		}
		for x := range set {
			r.groups[x]++
			for y := range set {
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
	for l, rail := range r.leafRail {
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
