package ib

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Parse reads a dump in any of the three formats (detected from content)
// from r.
//
// It is one pass over the lines. A byte-order mark, tabs or spaces and CRLF
// line ends are all fine; lines it cannot use (a stray "ibwarn:" line, a
// line cut short by a full disk) become Diagnostics and never stop the
// parse. Links are checked once every node is known,
// because classic dumps declare switches before the CAs they link to: a link
// to a node the dump never declares (a truncated dump) is dropped with the
// Diagnostic "remote node never declared", and a port that two different
// links claim keeps the first and reports the second.
//
// In a ports report (-p) unconnected ports ("4x ???" or a speed with no
// remote end) are skipped silently: they still declare their node, and a
// 64-port switch with 20 empty cages is normal, not a problem. The GUID a
// ports report prints is a port GUID; for switches it equals the node GUID,
// for CAs it does not, so a CA there is keyed by its port GUID (and a
// two-port HCA shows up as two CA nodes).
//
// Parse returns an error only when nothing usable is found (empty input, no
// node at all); the error wraps ErrNoNodes and names the line of the first
// problem it saw.
func Parse(r io.Reader) (*Fabric, error) {
	// Reading everything first lets nodes, links and diagnostics point into
	// one string instead of copying each line. A strings.Builder hands its
	// bytes over without the copy string(io.ReadAll(r)) would make, and
	// takes a bytes.Reader or strings.Reader in one write. Dumps are
	// megabytes at most.
	var sb strings.Builder
	if _, err := io.Copy(&sb, r); err != nil {
		return nil, fmt.Errorf("ib: read dump: %w", err)
	}
	return parse(sb.String())
}

// lineKind is what the first token of a trimmed line says it is.
type lineKind int

const (
	kindUnknown lineKind = iota
	kindHeader           // classic: Switch/Ca/Rt node header
	kindLink             // classic: [port] ... link line
	kindMeta             // classic: vendid=, caguid=, Chassis ...
	kindPorts            // ports report: SW/CA/RT line
)

// rawLink is a link line as read, before its remote end is checked.
type rawLink struct {
	a, b         string
	aPort, bPort int
	bPortGUID    string // remote port GUID shown on the line, "" if none
	width, speed string
	line         int
	text         string
}

type parser struct {
	nodes   map[string]*Node
	raw     []rawLink
	diags   []Diagnostic
	family  Format         // Classic or Ports, from the first line that parsed; 0 before
	ibdiag  bool           // saw a sign of ibdiagnet2: a split-port label or an IBDIAG comment
	cur     *Node          // classic: the node whose link lines follow
	lidPort map[string]int // CA GUID -> port whose LID is in Node.LID
}

func parse(s string) (*Fabric, error) {
	p := &parser{
		nodes:   make(map[string]*Node),
		lidPort: make(map[string]int),
	}
	s = strings.TrimPrefix(s, "\uFEFF")
	// Size the link buffer once: a classic link line has two '[' (counting
	// one byte is a vector instruction, a two-byte string is not), a ports
	// report has a link on most lines.
	est := strings.Count(s, "[") / 2
	if est == 0 {
		est = strings.Count(s, "\n")
	}
	// Real link lines are 60 bytes and more; the cap keeps a file of
	// brackets or newlines from reserving 100 times its size.
	p.raw = make([]rawLink, 0, min(est, len(s)/48)+1)
	n := 0
	for len(s) > 0 {
		line := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		n++
		p.line(n, line)
	}
	if len(p.nodes) == 0 {
		switch {
		case n == 0:
			return nil, fmt.Errorf("ib: empty input: %w", ErrNoNodes)
		case len(p.diags) > 0:
			d := p.diags[0]
			return nil, fmt.Errorf("ib: line %d: %s: %q: %w", d.Line, d.Msg, d.Text, ErrNoNodes)
		default:
			return nil, fmt.Errorf("ib: line %d: end of input, only comments and blank lines before it: %w", n, ErrNoNodes)
		}
	}
	f := &Fabric{Format: p.family, Nodes: p.nodes}
	if f.Format == Classic && p.ibdiag {
		f.Format = IBDiag
	}
	f.Links = p.resolve()
	// Diagnostics from the line pass are in line order already; resolve
	// adds some for earlier link lines, so merge them in.
	slices.SortStableFunc(p.diags, func(a, b Diagnostic) int { return a.Line - b.Line })
	f.Diagnostics = p.diags
	return f, nil
}

func (p *parser) diag(line int, text, msg string) {
	p.diags = append(p.diags, Diagnostic{Line: line, Text: clip(text), Msg: msg})
}

// line handles one input line.
func (p *parser) line(n int, raw string) {
	t := strings.TrimSpace(raw)
	if t == "" {
		return
	}
	if t[0] == '#' {
		// Header comments ("# Topology file: generated on ...", "# Initiated
		// from node ...") carry nothing the graph needs.
		if containsFold(t, "ibdiag") {
			p.ibdiag = true
		}
		return
	}
	kind, typ := classify(t)
	if kind == kindUnknown {
		p.diag(n, t, "unrecognised line: not a node, link or header line of an ibnetdiscover dump")
		return
	}
	family := Classic
	if kind == kindPorts {
		family = Ports
	}
	if p.family != 0 && family != p.family {
		p.diag(n, t, fmt.Sprintf("%s line in a %s dump; dumps in two formats were concatenated", family, p.family))
		return
	}
	var msg string
	switch kind {
	case kindHeader:
		msg = p.classicNode(n, t, typ)
	case kindLink:
		msg = p.classicLink(n, t)
	case kindMeta:
		// vendid=, devid=, sysimgguid=, switchguid=, caguid= open the next
		// node record; what they say is repeated in its header.
		p.cur = nil
	case kindPorts:
		msg = p.portsLine(n, t)
	}
	if msg != "" {
		p.diag(n, t, msg)
		return
	}
	if p.family == 0 {
		p.family = family
	}
}

// classify tells a line's kind from its first token.
func classify(t string) (lineKind, NodeType) {
	if t[0] == '[' {
		return kindLink, 0
	}
	tok, _ := field(t)
	switch tok {
	case "Switch":
		return kindHeader, Switch
	case "Ca":
		return kindHeader, CA
	case "Rt":
		return kindHeader, Router
	case "SW":
		return kindPorts, Switch
	case "CA":
		return kindPorts, CA
	case "RT":
		return kindPorts, Router
	case "Chassis", "Non-Chassis":
		// ibnetdiscover -g groups nodes under chassis headings.
		return kindMeta, 0
	}
	if key, _, ok := strings.Cut(tok, "="); ok {
		switch key {
		case "vendid", "devid", "sysimgguid", "switchguid", "caguid", "rtguid", "routerguid":
			return kindMeta, 0
		}
	}
	return kindUnknown, 0
}

// declare adds a node whose GUID is not taken, marking SHARP aggregation
// nodes: CAs that live inside a switch and must never become Slurm nodes.
func (p *parser) declare(nd *Node) {
	nd.Aggregation = nd.Type == CA && strings.Contains(nd.Desc, "Aggregation Node")
	p.nodes[nd.GUID] = nd
}

// setPortGUID records a CA or router port GUID unless one is known already.
func setPortGUID(nd *Node, port int, guid string) {
	if nd.Type == Switch || guid == "" {
		return
	}
	if nd.PortGUIDs == nil {
		nd.PortGUIDs = make(map[int]string, 1)
	}
	if _, ok := nd.PortGUIDs[port]; !ok {
		nd.PortGUIDs[port] = guid
	}
}

// portKey is one port of one node. The GUID is held as its number: a
// parsed GUID is 16 lowercase hex digits, so the number is as unique as the
// string and sorts the same, and a 16-byte key hashes and compares in a
// few instructions where a string key costs a hash of its bytes and a
// comparison through a pointer. resolve does both once per link line.
type portKey struct {
	guid uint64
	port int
}

// guidNum is the number a parsed GUID stands for; ok is false when g is
// not 16 lowercase hex digits (a Fabric built by hand), whose number would
// not sort as the string does.
func guidNum(g string) (n uint64, ok bool) {
	if len(g) != 16 {
		return 0, false
	}
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			return 0, false
		}
		n = n<<4 | uint64(c)
	}
	return n, true
}

// resolve turns link lines into links now that every node is known: it
// drops links to undeclared nodes, merges the two views of each cable, and
// rejects a port claimed by two different cables.
func (p *parser) resolve() []Link {
	if len(p.raw) == 0 {
		return nil
	}
	links := make([]Link, 0, len(p.raw)/2+1)
	keys := make([]linkKey, 0, len(p.raw)/2+1)  // links[i] as numbers, for the sort
	used := make(map[portKey]int32, len(p.raw)) // port -> index in links of its cable
	for _, r := range p.raw {
		remote := p.nodes[r.b]
		if remote == nil {
			p.diag(r.line, r.text, "remote node never declared: "+r.b+" (a truncated dump, or the node did not answer the scan)")
			continue
		}
		if remote.Ports > 0 && r.bPort > remote.Ports {
			p.diag(r.line, r.text, fmt.Sprintf("remote port %d beyond the %d ports node %s declares", r.bPort, remote.Ports, r.b))
			continue
		}
		a, aPort, b, bPort := r.a, r.aPort, r.b, r.bPort
		an, _ := guidNum(a) // the line parsers normalised both
		bn, _ := guidNum(b)
		if bn < an || (an == bn && bPort < aPort) {
			a, aPort, b, bPort = b, bPort, a, aPort
			an, bn = bn, an
		}
		ka, kb := portKey{an, aPort}, portKey{bn, bPort}
		i, ok := used[ka]
		if ok && keys[i].a == an && keys[i].b == bn && links[i].APort == aPort && links[i].BPort == bPort {
			// The same cable seen from its other end.
			if links[i].Width == "" {
				links[i].Width, links[i].Speed = r.width, r.speed
			}
			setPortGUID(remote, r.bPort, r.bPortGUID)
			continue
		}
		if ok {
			p.diag(r.line, r.text, conflict(links[i], ka.port, a))
			continue
		}
		if j, ok := used[kb]; ok {
			p.diag(r.line, r.text, conflict(links[j], kb.port, b))
			continue
		}
		used[ka] = int32(len(links))
		used[kb] = int32(len(links))
		setPortGUID(remote, r.bPort, r.bPortGUID)
		keys = append(keys, linkKey{a: an, b: bn, aPort: int32(aPort), bPort: int32(bPort), i: int32(len(links))})
		links = append(links, Link{A: a, APort: aPort, B: b, BPort: bPort, Width: r.width, Speed: r.speed, Line: r.line})
	}
	// Sort small numeric keys, then copy once: swapping 88-byte structs
	// full of strings costs a write barrier per pointer, and comparing
	// GUID strings was most of the sort.
	slices.SortFunc(keys, func(x, y linkKey) int {
		if x.a != y.a {
			return cmp.Compare(x.a, y.a)
		}
		if x.aPort != y.aPort {
			return cmp.Compare(x.aPort, y.aPort)
		}
		if x.b != y.b {
			return cmp.Compare(x.b, y.b)
		}
		return cmp.Compare(x.bPort, y.bPort)
	})
	sorted := make([]Link, len(links))
	for k, key := range keys {
		sorted[k] = links[key.i]
	}
	return sorted
}

// linkKey is a link's sort key: (A, APort, B, BPort) with the GUIDs as
// numbers, and the link's index.
type linkKey struct {
	a, b         uint64
	aPort, bPort int32
	i            int32
}

// conflict explains why port port of the node with GUID guid cannot take
// another cable: l already holds it.
func conflict(l Link, port int, guid string) string {
	other, otherPort := l.B, l.BPort
	if l.B == guid && l.BPort == port {
		other, otherPort = l.A, l.APort
	}
	return "port " + strconv.Itoa(port) + " of " + guid + " is already cabled to port " +
		strconv.Itoa(otherPort) + " of " + other + " (line " + strconv.Itoa(l.Line) + "); kept that link"
}

// containsFold reports whether s contains the ASCII word sub, ignoring case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
