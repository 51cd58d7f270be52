// Package graph turns a discovered InfiniBand fabric into Strata's one
// canonical model of it: host names, the leaf switch each host hangs off
// (on one rail, found from the cabling, on rail-optimised fabrics), and the
// smallest tree of switches above the leaves that keeps the real grouping:
// only switches the placed hosts need to reach each other, as many levels
// as the fabric has tiers, one root per disconnected fabric. Renderers
// translate this model; nothing downstream reads raw tool output.
//
// Build is pure: it takes a parsed fabric and options and returns the graph
// with a finding for every decision a careful admin would want to know
// about (hosts on several leaves, hosts cabled to spines, links between
// leaves, unnamed HCAs, nodes the fabric has and Slurm lacks, and the
// reverse). Nothing is dropped without a finding.
package graph

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/topogen/internal/discover/ib"
)

// Options steer Build.
type Options struct {
	// HostRule derives a host name from an HCA's node description; its
	// first capture group is the name. Default: DefaultHostRule, the first
	// word when a device name follows it ("a08-p1-dgx-04-c01 mlx5_5"), so
	// a firmware default such as "MT4129 ConnectX7" names no host.
	HostRule *regexp.Regexp
	// Names maps node or port GUIDs to host names; it wins over HostRule.
	Names map[string]string
	// IncludeHCA and ExcludeHCA select HCAs by node description, so a
	// storage fabric or a second rail is not taken for the compute fabric
	// (e.g. include `mlx5_[0-3]$`). Nil selects every HCA.
	IncludeHCA, ExcludeHCA *regexp.Regexp
	// ExcludeGUIDs drops HCAs by node or port GUID.
	ExcludeGUIDs map[string]bool
	// SlurmNodes, when not nil, is the cluster's node list: hosts the
	// fabric has and Slurm lacks are left out of the graph (with a
	// finding), and Slurm nodes the fabric lacks are reported.
	SlurmNodes []string
	// SwitchNames is "auto" (default: the name in the switch's
	// description when every switch has a distinct one, else S-<guid>),
	// "guid" (always S-<guid>) or "description".
	SwitchNames string
}

// Severity of a finding.
type Severity string

// Severities.
const (
	Info    Severity = "info"
	Warning Severity = "warning"
)

// Finding is one decision Build took, or one thing it noticed.
type Finding struct {
	Severity Severity `json:"severity"`
	Kind     string   `json:"kind"`
	Subject  string   `json:"subject"`
	Message  string   `json:"message"`
}

func (f Finding) String() string {
	return fmt.Sprintf("%s: %s %s: %s", f.Severity, f.Kind, f.Subject, f.Message)
}

// PlacementError is Build's error when no host at all could be placed
// under a switch. Its findings say why (a host rule that matches no
// description, HCA filters that select nothing, a GUID map of other
// GUIDs): callers show them, as the message alone only counts them.
type PlacementError struct {
	Findings []Finding
}

func (e *PlacementError) Error() string {
	return fmt.Sprintf("no HCA of the fabric could be placed under a switch: check the host rule, the GUID map and the HCA filters (%d findings)", len(e.Findings))
}

// Switch is a logical switch of the tree: one physical switch, or several
// parallel ones (spines that reach exactly the same switches below) merged.
type Switch struct {
	Name     string   `json:"name"`
	Level    int      `json:"level"` // 0 for leaves
	GUIDs    []string `json:"guids,omitempty"`
	Desc     string   `json:"description,omitempty"`
	Hosts    []string `json:"hosts,omitempty"`    // leaves only
	Children []string `json:"children,omitempty"` // names of switches one level down
}

// Fabric is one connected fabric with a single root.
type Fabric struct {
	Name     string    `json:"name"`
	Root     string    `json:"root"`
	Switches []*Switch `json:"switches"` // leaves first, then by level and name
}

// Graph is the canonical model of the compute fabric.
type Graph struct {
	Fabrics  []*Fabric `json:"fabrics"`
	Findings []Finding `json:"findings,omitempty"`
}

// Hosts returns every host of the graph, sorted.
func (g *Graph) Hosts() []string {
	var out []string
	for _, f := range g.Fabrics {
		for _, s := range f.Switches {
			out = append(out, s.Hosts...)
		}
	}
	sort.Strings(out)
	return out
}

// LeafOf maps each host to its leaf switch.
func (g *Graph) LeafOf() map[string]string {
	m := map[string]string{}
	for _, f := range g.Fabrics {
		for _, s := range f.Switches {
			for _, h := range s.Hosts {
				m[h] = s.Name
			}
		}
	}
	return m
}

// DefaultHostRule matches node descriptions as the OFED/DOCA tools set
// them: the host name, a space, the device name.
const DefaultHostRule = `^(\S+) (?:mlx\d+_\d+|HCA-\d+|hfi\d+_\d+|qib\d+|ib[a-z]*\d+\S*)$`

var defaultHostRule = regexp.MustCompile(DefaultHostRule)

// The builder numbers the fabric's nodes once, in GUID order, and works
// on those numbers: slices indexed by node instead of maps keyed by GUID
// strings, which were most of the time on a fabric of 80,000 CAs (a
// string key costs a hash of its bytes on every look-up). Since the
// numbers follow the GUIDs, sorting node numbers sorts by GUID.
type builder struct {
	f        *ib.Fabric
	opt      Options
	findings []Finding
	node     []*ib.Node // every node, by number (GUID order)
	switches []int32    // the switches' numbers, in GUID order
	cas      []int32    // the CAs' numbers, in GUID order
	nbrOff   []int32    // node i's link ends are nbr[nbrOff[i]:nbrOff[i+1]]
	nbr      []int32    // the other ends of each node's links, in link order (self-links left out)
	names    []string   // switch number -> name ("" for other nodes)
	rails    rails
	host     []int32  // CA number -> host number, -1 for none, -2 before it is derived
	hostName []string // host number -> name
	hostID   map[string]int32
	// defaultRule is whether the host rule is DefaultHostRule
	defaultRule bool
	badName     []bool // CA numbers whose name is no Slurm node name (reported)
}

// index numbers the nodes in GUID order (as the parser numbered them)
// and lists every node's link ends.
func (b *builder) index() {
	var ends [][2]int32
	b.node, ends = b.f.Numbered()
	for i, n := range b.node {
		switch n.Type {
		case ib.Switch:
			b.switches = append(b.switches, int32(i))
		case ib.CA:
			b.cas = append(b.cas, int32(i))
		}
	}
	// Two passes over the links: count each node's ends, then fill them
	// in, so each node's ends are in link order as one slice.
	b.nbrOff = make([]int32, len(b.node)+1)
	for _, e := range ends {
		if e[0] < 0 || e[1] < 0 || e[0] == e[1] {
			continue
		}
		b.nbrOff[e[0]+1]++
		b.nbrOff[e[1]+1]++
	}
	for i := 1; i < len(b.nbrOff); i++ {
		b.nbrOff[i] += b.nbrOff[i-1]
	}
	b.nbr = make([]int32, b.nbrOff[len(b.node)])
	next := append([]int32(nil), b.nbrOff[:len(b.node)]...)
	for _, e := range ends {
		if e[0] < 0 || e[1] < 0 || e[0] == e[1] {
			continue
		}
		b.nbr[next[e[0]]] = e[1]
		next[e[0]]++
		b.nbr[next[e[1]]] = e[0]
		next[e[1]]++
	}
	b.names = make([]string, len(b.node))
	b.host = make([]int32, len(b.node))
	for i := range b.host {
		b.host[i] = -2
	}
	b.badName = make([]bool, len(b.node))
	b.hostID = make(map[string]int32)
}

// neighbors returns the other ends of node i's links (self-links left
// out), in link order.
func (b *builder) neighbors(i int32) []int32 { return b.nbr[b.nbrOff[i]:b.nbrOff[i+1]] }

func (b *builder) note(sev Severity, kind, subject, format string, args ...any) {
	b.findings = append(b.findings, Finding{Severity: sev, Kind: kind, Subject: subject, Message: fmt.Sprintf(format, args...)})
}

// Build makes the graph. It fails only when no host at all can be placed.
func Build(f *ib.Fabric, opt Options) (*Graph, error) {
	if opt.HostRule == nil {
		opt.HostRule = defaultHostRule
	}
	if opt.HostRule.NumSubexp() < 1 {
		return nil, fmt.Errorf("host rule %q has no capture group: wrap the host name part in ( )", opt.HostRule)
	}
	b := &builder{f: f, opt: opt, defaultRule: opt.HostRule.String() == DefaultHostRule}
	b.noteDuplicateGUIDs()
	b.index()
	if err := b.nameSwitches(); err != nil {
		return nil, err
	}
	b.findLeaves()
	b.findRails()
	b.noteRails()
	hostLeaf := b.placeHosts()
	if len(hostLeaf) == 0 {
		return nil, &PlacementError{Findings: b.findings}
	}
	g := &Graph{}
	adj := b.switchAdjacency()
	leaves := make([][]string, len(b.node)) // leaf number -> its hosts; nil for other switches
	for _, hl := range hostLeaf {
		leaves[hl.leaf] = append(leaves[hl.leaf], hl.host)
	}
	for _, comp := range b.components(adj, leaves) {
		g.Fabrics = append(g.Fabrics, b.tree(comp, adj, leaves))
	}
	b.notePieces(g)
	sort.Slice(g.Fabrics, func(i, j int) bool { return firstHost(g.Fabrics[i]) < firstHost(g.Fabrics[j]) })
	for i, fab := range g.Fabrics {
		fab.Name = fmt.Sprintf("fabric%d", i+1)
		if strings.HasPrefix(fab.Root, "\x00root") {
			b.renameRoot(fab, fab.Name+"-root")
		}
	}
	g.Findings = b.findings
	return g, nil
}

func firstHost(f *Fabric) string {
	first := ""
	for _, s := range f.Switches {
		for _, h := range s.Hosts {
			if first == "" || h < first {
				first = h
			}
		}
	}
	return first
}

// mfPattern pulls the switch name out of descriptions like
// "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1"; hashPattern out of
// "Voltaire 4036 # hoibp0013".
var (
	mfPattern   = regexp.MustCompile(`^MF0;([^:]+):`)
	hashPattern = regexp.MustCompile(`#\s*(\S+)\s*$`)
	unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
)

// SanitizeName makes a Slurm-safe switch or block name: letters, digits,
// '.', '_' and '-' only (brackets and commas would be read as host lists).
func SanitizeName(s string) string {
	return strings.Trim(unsafeChars.ReplaceAllString(s, "-"), "-")
}

func (b *builder) nameSwitches() error {
	mode := b.opt.SwitchNames
	if mode == "" {
		mode = "auto"
	}
	if mode != "auto" && mode != "guid" && mode != "description" {
		return fmt.Errorf("switch names %q: want auto, guid or description", mode)
	}
	fromDesc := make([]string, len(b.switches))
	count := map[string]int{}
	for k, i := range b.switches {
		s := b.node[i]
		n := ""
		if m := mfPattern.FindStringSubmatch(s.Desc); m != nil {
			n = m[1]
		} else if m := hashPattern.FindStringSubmatch(s.Desc); m != nil {
			n = m[1]
		} else if mode == "description" {
			n = s.Desc
		}
		n = SanitizeName(n)
		fromDesc[k] = n
		if n != "" {
			count[n]++
		}
	}
	for k, i := range b.switches {
		s := b.node[i]
		n := fromDesc[k]
		switch {
		case mode == "guid" || n == "":
			b.names[i] = "S-" + s.GUID
		case count[n] > 1:
			b.names[i] = "S-" + s.GUID
			b.note(Info, "switch-name", "S-"+s.GUID, "description name %q is shared by %d switches: using the GUID", n, count[n])
		default:
			b.names[i] = n
		}
	}
	return nil
}

// hostOf derives the host of CA number i once (the rails and the
// placement both ask, and the host rule is a regexp) and returns its
// number, or -1 when the HCA names no host.
func (b *builder) hostOf(i int32) int32 {
	if h := b.host[i]; h != -2 {
		return h
	}
	h := int32(-1)
	if name := b.deriveHostName(i); name != "" {
		var ok bool
		if h, ok = b.hostID[name]; !ok {
			h = int32(len(b.hostName))
			b.hostID[name] = h
			b.hostName = append(b.hostName, name)
		}
	}
	b.host[i] = h
	return h
}

// deriveHostName names an HCA's host: from the GUID map, else by the host
// rule on its description. A mapped name is held to the same rule as a
// description: a GUID map in ibnetdiscover's --node-name-map style names
// HCAs like "node1 HCA-1", a node description, so a mapped name that is
// no Slurm node name goes through the host rule too. A name that is still
// no Slurm node name (letters, digits, '.', '_' and '-' only; a space or
// a comma would break every Nodes= line it is in) names no host, with a
// warning, so nothing downstream can render it.
func (b *builder) deriveHostName(i int32) string {
	n := b.node[i]
	mapped := ""
	if len(b.opt.Names) > 0 {
		mapped = b.opt.Names[n.GUID]
		for _, pg := range n.PortGUIDs {
			if mapped != "" {
				break
			}
			mapped = b.opt.Names[pg]
		}
	}
	source, text := "description", n.Desc
	if mapped != "" {
		if ValidNodeName(mapped) {
			return mapped
		}
		source, text = "GUID map name", mapped
	}
	name := b.matchHost(text)
	switch {
	case name == "":
		if mapped == "" {
			return "" // placeHosts reports it as unnamed
		}
	case ValidNodeName(name):
		return name
	}
	b.badName[i] = true
	b.note(Warning, "bad-node-name", "H-"+n.GUID, "the %s %q (line %d) gives no Slurm node name (letters, digits, '.', '_' and '-' only) "+
		"and the host rule %q finds none in it: HCA left out; fix the name, or set fabric.host_rule to pick the host name out of it",
		source, text, n.Line, b.opt.HostRule)
	return ""
}

// matchHost returns the host rule's first group in text, or "".
func (b *builder) matchHost(text string) string {
	if b.defaultRule {
		return defaultHost(text)
	}
	if m := b.opt.HostRule.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	return ""
}

// defaultHost is DefaultHostRule's first group in s, or "", without the
// regexp: the rule runs once per HCA, 80,000 times on a large fabric, and
// the regexp was a tenth of the time. FuzzDefaultHost holds it to the
// regexp. The rule: a name of non-space characters, one space, and a
// device name to the end (mlx<d>_<d>, HCA-<d>, hfi<d>_<d>, qib<d>, or ib,
// letters, digits and then anything without a space).
func defaultHost(s string) string {
	i := 0
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	if i == 0 || i == len(s) || s[i] != ' ' {
		return ""
	}
	if isDevice(s[i+1:]) {
		return s[:i]
	}
	return ""
}

// isSpace is the regexp package's \s: tab, newline, form feed, carriage
// return and space.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }

// digits returns how many ASCII digits s starts with.
func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// isDevice reports whether all of d is a device name of DefaultHostRule:
// mlx\d+_\d+, HCA-\d+, hfi\d+_\d+, qib\d+ or ib[a-z]*\d+\S*.
func isDevice(d string) bool {
	numUnderNum := func(s string) bool { // \d+_\d+ to the end
		n := digits(s)
		if n == 0 || n == len(s) || s[n] != '_' {
			return false
		}
		m := digits(s[n+1:])
		return m > 0 && n+1+m == len(s)
	}
	num := func(s string) bool { n := digits(s); return n > 0 && n == len(s) } // \d+ to the end
	switch {
	case strings.HasPrefix(d, "mlx"):
		return numUnderNum(d[3:])
	case strings.HasPrefix(d, "hfi"):
		return numUnderNum(d[3:])
	case strings.HasPrefix(d, "HCA-"):
		return num(d[4:])
	case strings.HasPrefix(d, "qib"):
		return num(d[3:])
	case strings.HasPrefix(d, "ib"):
		j := 2
		for j < len(d) && d[j] >= 'a' && d[j] <= 'z' {
			j++
		}
		if digits(d[j:]) == 0 {
			return false
		}
		for k := j; k < len(d); k++ {
			if isSpace(d[k]) {
				return false
			}
		}
		return true
	}
	return false
}

// ValidNodeName reports whether s can stand in a Nodes= list of
// topology.conf as one node: letters, digits, '.', '_' and '-'.
// It is SanitizeName(s) == s without the allocation: it runs once per HCA.
func ValidNodeName(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func (b *builder) excluded(n *ib.Node) string {
	if b.opt.ExcludeGUIDs[n.GUID] {
		return "its GUID is excluded"
	}
	for _, pg := range n.PortGUIDs {
		if b.opt.ExcludeGUIDs[pg] {
			return "its port GUID " + pg + " is excluded"
		}
	}
	if b.opt.IncludeHCA != nil && !b.opt.IncludeHCA.MatchString(n.Desc) {
		return fmt.Sprintf("its description does not match the include pattern %q", b.opt.IncludeHCA)
	}
	if b.opt.ExcludeHCA != nil && b.opt.ExcludeHCA.MatchString(n.Desc) {
		return fmt.Sprintf("its description matches the exclude pattern %q", b.opt.ExcludeHCA)
	}
	return ""
}

// count is how many of a host's HCAs one leaf has.
type count struct {
	leaf int32
	n    int
}

// hostLeaf is a placed host and its leaf.
type hostLeaf struct {
	host string
	leaf int32
}

// placeHosts names HCAs and picks one leaf switch per host: the leaf most
// of its selected HCAs are on; on a tie (one HCA on each rail of a
// rail-optimised fabric) the leaf of the rail most hosts have, so every
// host is on the same rail whatever the switches are called. It returns
// the placed hosts sorted by name.
func (b *builder) placeHosts() []hostLeaf {
	seen := map[int32][]count{} // host -> leaves of its HCAs, in the order first seen
	excludedHCAs := 0
	filteredHosts := map[int32]bool{} // hosts with an HCA the filters left out
	for _, i := range b.cas {
		ca := b.node[i]
		if ca.Aggregation {
			continue // SHARP aggregation nodes live in switches; never Slurm nodes
		}
		if why := b.excluded(ca); why != "" {
			excludedHCAs++
			if h := b.hostOf(i); h >= 0 {
				filteredHosts[h] = true
			}
			continue
		}
		h := b.hostOf(i)
		if h < 0 && b.badName[i] {
			continue // reported when the name was derived
		}
		if h < 0 {
			b.note(Warning, "unnamed-hca", "H-"+ca.GUID, "HCA %q (line %d) matches neither the GUID map nor the host rule %q: left out",
				ca.Desc, ca.Line, b.opt.HostRule)
			continue
		}
		linked := false
		for _, nb := range b.neighbors(i) {
			if b.node[nb].Type != ib.Switch {
				continue
			}
			cs := seen[h]
			k := 0
			for k < len(cs) && cs[k].leaf != nb {
				k++
			}
			if k == len(cs) {
				if cs == nil {
					cs = make([]count, 0, 8) // a host of a rail-optimised fabric has 8 HCAs
				}
				cs = append(cs, count{leaf: nb})
			}
			cs[k].n++
			seen[h] = cs
			linked = true
		}
		if !linked {
			b.note(Warning, "unlinked-hca", b.hostName[h], "HCA H-%s (%q) has no link to a switch: left out", ca.GUID, ca.Desc)
		}
	}
	byName := func(m map[int32][]count) []int32 {
		hs := make([]int32, 0, len(m))
		for h := range m {
			hs = append(hs, h)
		}
		sort.Slice(hs, func(i, j int) bool { return b.hostName[hs[i]] < b.hostName[hs[j]] })
		return hs
	}
	if excludedHCAs > 0 {
		b.note(Info, "hca-filter", "fabric", "%d HCAs left out by the rail/fabric filters", excludedHCAs)
		var gone []string
		for h := range filteredHosts {
			if _, ok := seen[h]; !ok {
				gone = append(gone, b.hostName[h])
			}
		}
		sort.Strings(gone)
		if len(gone) > 0 {
			// A rail filter drops a host that lacks that rail's HCA (a
			// dead or missing card): the admin must see which.
			sev := Info
			if b.opt.IncludeHCA != nil {
				sev = Warning
			}
			b.note(sev, "filtered-host", abbreviate(gone, 20), "%d hosts have HCAs but none that the HCA filters select, so they are in no switch: %s",
				len(gone), abbreviate(gone, 20))
		}
	}
	if b.opt.SlurmNodes != nil {
		inSlurm := map[string]bool{}
		for _, n := range b.opt.SlurmNodes {
			inSlurm[n] = true
		}
		for _, h := range byName(seen) { // sorted: findings are output, and map order is random
			if !inSlurm[b.hostName[h]] {
				b.note(Warning, "not-in-slurm", b.hostName[h], "the fabric has this host but Slurm does not: left out of the topology")
				delete(seen, h)
			}
		}
		for _, n := range b.opt.SlurmNodes {
			h, ok := b.hostID[n]
			if _, placed := seen[h]; !ok || !placed {
				b.note(Warning, "not-in-fabric", n, "Slurm has this node but the fabric shows no HCA for it: it will be under no switch")
			}
		}
	}
	hosts := byName(seen)
	out := make([]hostLeaf, 0, len(hosts))
	chosen := b.chooseRail(seen)
	railOf := func(leaf int32) int { return int(b.rails.leafRail[leaf]) }
	// rank orders a host's leaves of equal HCA count: the chosen rail
	// first, then the other rails in order, then leaves of no rail.
	rank := func(leaf int32) int {
		switch r := railOf(leaf); {
		case r == chosen && r >= 0:
			return -1
		case r >= 0:
			return r
		}
		return 1 << 30
	}
	railHosts, railsSeen := 0, map[int]bool{}
	for _, h := range hosts {
		cs := seen[h]
		sort.Slice(cs, func(i, j int) bool {
			if cs[i].n != cs[j].n {
				return cs[i].n > cs[j].n
			}
			if ri, rj := rank(cs[i].leaf), rank(cs[j].leaf); ri != rj {
				return ri < rj
			}
			return b.names[cs[i].leaf] < b.names[cs[j].leaf]
		})
		out = append(out, hostLeaf{b.hostName[h], cs[0].leaf})
		if len(cs) == 1 {
			continue
		}
		if b.oneHCAPerRail(cs, chosen) {
			// The rail-optimised shape: one HCA on each rail's leaf. Said
			// once for all such hosts below, not once per host.
			railHosts++
			for _, c := range cs {
				railsSeen[railOf(c.leaf)] = true
			}
			continue
		}
		var others []string
		for _, c := range cs[1:] {
			others = append(others, fmt.Sprintf("%s (%d HCA)", b.names[c.leaf], c.n))
		}
		b.note(Warning, "multi-leaf-host", b.hostName[h], "HCAs on several switches: placed under %s (%d HCA), also on %s; "+
			"select one rail with the HCA filters if this is a rail-optimised fabric", b.names[cs[0].leaf], cs[0].n, strings.Join(others, ", "))
	}
	if railHosts > 0 {
		hint := "include_hca (--include-hca)"
		if pat := b.rails.railPattern(chosen); pat != "" {
			hint = fmt.Sprintf("include_hca (--include-hca '%s')", pat)
		}
		b.note(Warning, "rail-choice", "rail"+strconv.Itoa(chosen), "%d hosts have one HCA on each of %d rails: each is placed under its rail-%d leaf, "+
			"the first rail nearly every host has; choose the rail with %s to make it explicit", railHosts, len(railsSeen), chosen, hint)
	}
	return out
}

// chooseRail picks the rail hosts with HCAs on several leaves are placed
// on: the first rail (lowest index) that nearly every host has, at least
// nine in ten of the most hosts any rail has, so a rail a few extra hosts
// (a UFM server, a login node) are on does not win over the first HCA of
// every GPU node; -1 when no leaf has a rail.
func (b *builder) chooseRail(seen map[int32][]count) int {
	hostsOn := map[int]int{}
	var on []int32
	for _, leaves := range seen {
		on = on[:0]
		for _, c := range leaves {
			if r := b.rails.leafRail[c.leaf]; r >= 0 && !slices.Contains(on, r) {
				on = append(on, r)
			}
		}
		for _, r := range on {
			hostsOn[int(r)]++
		}
	}
	most := 0
	for _, n := range hostsOn {
		most = max(most, n)
	}
	best := -1
	for r, n := range hostsOn {
		if n*10 >= most*9 && (best < 0 || r < best) {
			best = r
		}
	}
	return best
}

// oneHCAPerRail reports whether a host's leaves (sorted, the chosen one
// first) are the rail-optimised shape: one HCA on each, each leaf on its
// own rail, the host placed on the chosen rail.
func (b *builder) oneHCAPerRail(cs []count, chosen int) bool {
	for k, c := range cs {
		r := b.rails.leafRail[c.leaf]
		if r < 0 || c.n != 1 {
			return false
		}
		for _, o := range cs[:k] {
			if b.rails.leafRail[o.leaf] == r {
				return false
			}
		}
	}
	return int(b.rails.leafRail[cs[0].leaf]) == chosen
}

// switchAdjacency returns each switch's switch neighbours, sorted and
// each once (self-links dropped), by switch number; nil for other nodes.
func (b *builder) switchAdjacency() [][]int32 {
	adj := make([][]int32, len(b.node))
	selfLinks := map[int32]int{}
	for _, s := range b.switches {
		for _, nb := range b.neighbors(s) {
			if b.node[nb].Type == ib.Switch {
				adj[s] = append(adj[s], nb)
			}
		}
		slices.Sort(adj[s])
		adj[s] = slices.Compact(adj[s])
	}
	_, ends := b.f.Numbered()
	for _, e := range ends {
		if e[0] >= 0 && e[0] == e[1] && b.node[e[0]].Type == ib.Switch {
			selfLinks[e[0]]++
		}
	}
	selfs := make([]int32, 0, len(selfLinks))
	for g := range selfLinks {
		selfs = append(selfs, g)
	}
	slices.Sort(selfs)
	for _, g := range selfs {
		b.note(Info, "self-link", b.names[g], "%d links from the switch to itself ignored", selfLinks[g])
	}
	return adj
}

// components returns the connected switch sets that hold at least one
// placed leaf, each sorted.
func (b *builder) components(adj [][]int32, leaves [][]string) [][]int32 {
	seen := make([]bool, len(b.node))
	var out [][]int32
	for s := range leaves {
		if leaves[s] == nil || seen[s] {
			continue
		}
		var comp []int32
		queue := []int32{int32(s)}
		seen[s] = true
		for len(queue) > 0 {
			x := queue[0]
			queue = queue[1:]
			comp = append(comp, x)
			for _, y := range adj[x] {
				if !seen[y] {
					seen[y] = true
					queue = append(queue, y)
				}
			}
		}
		slices.Sort(comp)
		out = append(out, comp)
	}
	return out
}

// tree builds one fabric of the placed hosts' leaves and the switches
// above them, and nothing else:
//
//   - a switch's level is its distance from the nearest leaf of the whole
//     fabric, the leaves of unselected rails included, so a spine of
//     another rail is level 1 like every spine, and never "above" the
//     cores it is cabled to;
//   - a switch joins the tree at level k only when it is cabled to a
//     switch of the tree at level k-1: a switch no placed host needs to
//     reach another never appears;
//   - the tree stops at the first level with one switch (after parallel
//     switches are merged): that switch joins every placed leaf, and
//     nothing above it changes which hosts are close.
//
// Parallel switches are merged and each group gets exactly one parent.
func (b *builder) tree(comp []int32, adj [][]int32, leaves [][]string) *Fabric {
	b.noteForeignLeaves(comp, leaves)
	dist := map[int32]int{}
	var queue []int32
	for _, g := range comp {
		if leaves[g] != nil || b.rails.leafLike[g] {
			dist[g] = 0
			queue = append(queue, g)
		}
	}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		for _, y := range adj[x] {
			if _, ok := dist[y]; !ok {
				dist[y] = dist[x] + 1
				queue = append(queue, y)
			}
		}
	}
	isPlaced := func(g int32) bool { return leaves[g] != nil }
	fab := &Fabric{}
	// Level 0: one logical switch per leaf.
	group := map[int32]*Switch{} // physical switch -> its logical switch at its level
	var current []*Switch
	var members []int32 // the current level's switches
	for _, g := range comp {
		if !isPlaced(g) {
			continue
		}
		members = append(members, g)
		hs := append([]string(nil), leaves[g]...)
		sort.Strings(hs)
		s := &Switch{Name: b.names[g], Level: 0, GUIDs: []string{b.node[g].GUID}, Desc: b.node[g].Desc, Hosts: hs}
		group[g] = s
		current = append(current, s)
		for _, y := range adj[g] {
			if isPlaced(y) && g < y {
				b.note(Warning, "leaf-link", s.Name, "link to leaf %s ignored: Slurm's tree has no links between leaves", b.names[y])
			}
		}
	}
	for _, g := range members {
		up := false
		for _, y := range adj[g] {
			if d, ok := dist[y]; ok && d > 0 {
				up = true
			}
		}
		if !up && hasLeafNeighbor(g, adj, leaves) {
			b.note(Warning, "hosts-on-spine", group[g].Name, "this switch has hosts and links only to other leaf switches: it is kept as a leaf")
		}
	}
	sort.Slice(current, func(i, j int) bool { return current[i].Name < current[j].Name }) // leaves by name, as Fabric.Switches promises
	fab.Switches = append(fab.Switches, current...)
	var tops []*Switch
	physical := map[*Switch][]int32{} // logical switch -> its physical switches
	for level := 1; len(current) > 1; level++ {
		// Candidate parents (cabled to the tree one level down, at their
		// own level) and the level-below groups each reaches.
		reach := map[int32][]*Switch{}
		for _, m := range members {
			for _, y := range adj[m] {
				if d, ok := dist[y]; !ok || d != level {
					continue
				}
				if k := group[m]; !slices.Contains(reach[y], k) {
					reach[y] = append(reach[y], k)
				}
			}
		}
		// Merge parents that reach exactly the same groups.
		byKey := map[string]*Switch{}
		var parents []*Switch
		children := map[*Switch][]*Switch{}
		guids := make([]int32, 0, len(reach))
		for g := range reach {
			guids = append(guids, g)
		}
		sort.Slice(guids, func(i, j int) bool { return b.names[guids[i]] < b.names[guids[j]] })
		for _, g := range guids {
			kids := reach[g]
			sort.Slice(kids, func(i, j int) bool { return kids[i].Name < kids[j].Name })
			names := make([]string, len(kids))
			for i, k := range kids {
				names[i] = k.Name
			}
			key := strings.Join(names, ",")
			if p, ok := byKey[key]; ok {
				p.GUIDs = append(p.GUIDs, b.node[g].GUID)
				physical[p] = append(physical[p], g)
				group[g] = p
				continue
			}
			p := &Switch{Name: b.names[g], Level: level, GUIDs: []string{b.node[g].GUID}, Desc: b.node[g].Desc}
			physical[p] = []int32{g}
			byKey[key] = p
			group[g] = p
			parents = append(parents, p)
			children[p] = kids
		}
		for _, p := range parents {
			if len(p.GUIDs) > 1 {
				var ns []string
				for _, g := range physical[p] {
					ns = append(ns, b.names[g])
				}
				b.note(Info, "merged-switches", p.Name, "%d parallel switches reach the same switches below and are one switch for Slurm: %s",
					len(p.GUIDs), strings.Join(ns, ","))
			}
		}
		// Each group below gets exactly one parent: the widest that reaches it.
		assigned := map[*Switch]bool{}
		sort.SliceStable(parents, func(i, j int) bool {
			if len(children[parents[i]]) != len(children[parents[j]]) {
				return len(children[parents[i]]) > len(children[parents[j]])
			}
			return parents[i].Name < parents[j].Name
		})
		for _, p := range parents {
			for _, k := range children[p] {
				if assigned[k] {
					continue
				}
				assigned[k] = true
				p.Children = append(p.Children, k.Name)
			}
		}
		var kept []*Switch
		takenBy := map[string]*Switch{} // child name -> the parent that took it
		for _, p := range parents {
			for _, c := range p.Children {
				takenBy[c] = p
			}
		}
		for _, p := range parents {
			if len(p.Children) == 0 {
				// Its children all have a wider parent. Switches above it
				// reach that parent instead, so no name dangles.
				q := takenBy[children[p][0].Name]
				for _, g := range physical[p] {
					group[g] = q
				}
				q.GUIDs = append(q.GUIDs, p.GUIDs...)
				physical[q] = append(physical[q], physical[p]...)
				b.note(Info, "redundant-switch", p.Name, "every switch below it already has a wider parent (%s): folded into it", q.Name)
				continue
			}
			sort.Strings(p.Children)
			kept = append(kept, p)
		}
		for _, s := range current {
			if !assigned[s] {
				tops = append(tops, s)
			}
		}
		sort.Slice(kept, func(i, j int) bool { return kept[i].Name < kept[j].Name })
		fab.Switches = append(fab.Switches, kept...)
		current = kept
		members = members[:0]
		for _, k := range kept {
			members = append(members, physical[k]...)
		}
	}
	tops = append(tops, current...)
	if len(tops) == 1 {
		fab.Root = tops[0].Name
		return fab
	}
	// Several tops (separate trees joined only by the fabric, or leaves
	// with no switch above): one synthetic root keeps one root per fabric.
	maxLevel := 0
	var names []string
	for _, t := range tops {
		if t.Level > maxLevel {
			maxLevel = t.Level
		}
		names = append(names, t.Name)
	}
	sort.Strings(names)
	root := &Switch{Name: "\x00root", Level: maxLevel + 1, Children: names}
	fab.Switches = append(fab.Switches, root)
	fab.Root = root.Name
	return fab
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func hasLeafNeighbor(g int32, adj [][]int32, leaves [][]string) bool {
	for _, y := range adj[g] {
		if leaves[y] != nil {
			return true
		}
	}
	return false
}

func (b *builder) renameRoot(f *Fabric, name string) {
	for _, s := range f.Switches {
		if s.Name == f.Root {
			s.Name = name
		}
	}
	f.Root = name
	b.note(Info, "synthetic-root", name, "%s has several top switches; a root switch that exists only in topology.conf joins them", f.Name)
}

// noteForeignLeaves reports the leaves of the fabric that hold none of the
// placed hosts: leaves of another rail, of a storage fabric, or of hosts
// that were left out. They count for the levels (they are leaves), but
// no placed host needs them, so they are not in the tree.
func (b *builder) noteForeignLeaves(comp []int32, leaves [][]string) {
	var dropped []string
	for _, g := range comp {
		if leaves[g] == nil && b.rails.leafLike[g] {
			dropped = append(dropped, b.names[g])
		}
	}
	if len(dropped) > 0 {
		sort.Strings(dropped)
		b.note(Info, "foreign-leaf", abbreviate(dropped, 8), "%d switches link to HCAs but hold none of the placed hosts "+
			"(another rail, a storage fabric, or hosts left out): left out of the tree", len(dropped))
	}
}

// notePieces warns when the fabric fell apart into many pieces of one leaf
// each: a leaf with no switch above it in a fabric of many leaves means
// the spines are missing from the dump (lines skipped, or switches the
// parser refused, such as ones declaring more ports than a switch has), not
// that the cluster has hundreds of separate fabrics. Slurm would then never
// place a job across two leaves.
func (b *builder) notePieces(g *Graph) {
	lone := 0
	for _, f := range g.Fabrics {
		if len(f.Switches) == 1 {
			lone++
		}
	}
	if lone >= 3 && lone*2 >= len(g.Fabrics) {
		b.note(Warning, "fabric-split", "fabric", "the fabric falls apart into %d separate pieces, %d of them a single leaf with no switch above it: "+
			"the spine tier is missing from the dump (check the skipped-line warnings above, and that ibnetdiscover ran on the whole subnet); "+
			"Slurm will not place a job across two of these leaves", len(g.Fabrics), lone)
	}
}
