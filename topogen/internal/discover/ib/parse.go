package ib

import (
	"bytes"
	"cmp"
	"errors"
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
//
// The dump is read a chunk at a time, and nothing the Fabric holds points
// into it (node strings are copied out as they are declared), so a run
// needs memory for the fabric, not for its dump: 32 MiB of text on a
// fabric of 80,000 CAs. A link line found wrong only once every node is
// known is read again for its diagnostic, from r when r can seek (a file,
// a strings.Reader); other readers (a pipe) are read whole first.
//
// Parse reads at most DefaultMaxBytes and lines of at most DefaultMaxLine
// bytes (ParseLimited sets other limits): past them it fails with an error
// wrapping ErrTooLarge or ErrLineTooLong, having read no more than that.
func Parse(r io.Reader) (*Fabric, error) { return ParseLimited(r, Limits{}) }

// ParseLimited is Parse with other limits.
func ParseLimited(r io.Reader, lim Limits) (*Fabric, error) {
	c := newCapped(r, lim)
	lim = c.lim
	rs, seeks := r.(io.ReadSeeker)
	ra, readsAt := r.(io.ReaderAt)
	var base, end int64
	var err error
	if seeks && readsAt {
		base, err = rs.Seek(0, io.SeekCurrent)
		if err == nil {
			// The size, so a small dump gets a small buffer.
			if end, err = rs.Seek(0, io.SeekEnd); err == nil {
				_, err = rs.Seek(base, io.SeekStart)
			}
		}
	}
	if err == nil && end-base > lim.MaxBytes {
		return nil, tooLarge(end-base, lim.MaxBytes)
	}
	if !seeks || !readsAt || err != nil {
		data, err := io.ReadAll(c)
		if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrLineTooLong) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("ib: read dump: %w", err)
		}
		sr := strings.NewReader(string(data))
		ra, base, end = sr, 0, int64(len(data))
		c = newCapped(sr, lim)
	}
	return parse(c, ra, base, int(min(end-base, int64(chunkSize)))+1, lim.MaxLine)
}

// chunkSize is how much of the dump is read at a time: a few thousand
// lines, made into one string whose substrings the line parsers take.
var chunkSize = 1 << 20

// lineKind is what the first token of a trimmed line says it is.
type lineKind int

const (
	kindUnknown lineKind = iota
	kindHeader           // classic: Switch/Ca/Rt node header
	kindLink             // classic: [port] ... link line
	kindMeta             // classic: vendid=, caguid=, Chassis ...
	kindPorts            // ports report: SW/CA/RT line
)

// rawLink is a link line as read, before its remote end is checked. It
// is kept small (there are two for every cable of the fabric, and they
// were the largest part of a parse's memory): the local end by node
// number, the remote one by its GUID's number, ports as bytes (1-255), the
// width and speed by their place in parser.speeds, the line's text by
// where it starts in the dump.
type rawLink struct {
	b            uint64 // remote node's GUID
	bPortGUID    uint64 // remote port GUID shown on the line, if hasPortGUID
	off          int    // where the line starts in the dump
	a            int32  // local node's number
	line         int32
	aPort, bPort uint8
	speed        uint16 // width and speed: parser.speeds[speed]
	hasPortGUID  bool
}

// rawLinks holds the link lines in blocks, so that a growing list never
// copies (and leaves behind) what it holds already.
type rawLinks struct {
	blocks [][]rawLink
	n      int
}

const rawBlock = 1 << 12

func (l *rawLinks) add(r rawLink) {
	if l.n%rawBlock == 0 {
		l.blocks = append(l.blocks, make([]rawLink, 0, rawBlock))
	}
	b := &l.blocks[len(l.blocks)-1]
	*b = append(*b, r)
	l.n++
}

func (l *rawLinks) at(k int) *rawLink { return &l.blocks[k/rawBlock][k%rawBlock] }

// linkSpeed is a link width and speed ("4x", "NDR"; "" when unknown).
type linkSpeed struct{ width, speed string }

// The parser numbers nodes in the order they are declared and finds them
// by their GUIDs' numbers: a uint64 key hashes and compares in a few
// instructions, where a string key costs a hash of its 16 bytes and a
// comparison through a pointer, once per link line. Fabric.Nodes is
// filled once at the end.
type parser struct {
	nodes   []*Node          // by number
	keys    []uint64         // node number -> its GUID's number
	num     map[uint64]int32 // GUID number -> node number
	raw     rawLinks
	speeds  []linkSpeed     // the width and speed pairs of the dump, each once
	ra      io.ReaderAt     // the dump, to read a line again
	base    int64           // where the dump starts in ra
	lineOff int             // where the line being parsed starts in the dump
	arena   strings.Builder // see copyString
	diags   []Diagnostic
	family  Format        // Classic or Ports, from the first line that parsed; 0 before
	ibdiag  bool          // saw a sign of ibdiagnet2: a split-port label or an IBDIAG comment
	cur     *Node         // classic: the node whose link lines follow
	curNum  int32         // its number
	lidPort map[int32]int // CA number -> port whose LID is in Node.LID
}

// lookup returns the node with GUID guid (as the line parsers normalise
// it) and its number, or nil.
func (p *parser) lookup(guid string) (*Node, int32) {
	k, _ := guidNum(guid)
	if i, ok := p.num[k]; ok {
		return p.nodes[i], i
	}
	return nil, -1
}

func parse(r io.Reader, ra io.ReaderAt, base int64, bufSize, maxLine int) (*Fabric, error) {
	p := &parser{
		num:     make(map[uint64]int32),
		lidPort: make(map[int32]int),
		ra:      ra,
		base:    base,
	}
	p.speeds = []linkSpeed{{}}
	n := 0
	buf := make([]byte, max(bufSize, 1))
	carry := 0 // bytes of an unfinished line at the start of buf
	off := 0   // where buf starts in the dump
	for first := true; ; first = false {
		m, err := io.ReadFull(r, buf[carry:])
		eof := err == io.EOF || err == io.ErrUnexpectedEOF
		if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrLineTooLong) {
			return nil, err
		}
		if err != nil && !eof {
			return nil, fmt.Errorf("ib: read dump: %w", err)
		}
		chunk := string(buf[:carry+m])
		pos := 0
		if first && strings.HasPrefix(chunk, "\uFEFF") {
			pos = len("\uFEFF")
		}
		for {
			i := strings.IndexByte(chunk[pos:], '\n')
			if i < 0 {
				break
			}
			n++
			if i > maxLine {
				return nil, lineTooLong(n, maxLine)
			}
			p.lineOff = off + pos
			p.line(n, chunk[pos:pos+i])
			pos += i + 1
		}
		if eof {
			if pos < len(chunk) {
				n++
				if len(chunk)-pos > maxLine {
					return nil, lineTooLong(n, maxLine)
				}
				p.lineOff = off + pos
				p.line(n, chunk[pos:])
			}
			break
		}
		// Carry the unfinished line over to the next chunk, in a larger
		// buffer if it fills this one.
		carry = copy(buf, chunk[pos:])
		off += pos
		if carry == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
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
	f := &Fabric{Format: p.family, Nodes: make(map[string]*Node, len(p.nodes))}
	for _, nd := range p.nodes {
		f.Nodes[nd.GUID] = nd
	}
	if f.Format == Classic && p.ibdiag {
		f.Format = IBDiag
	}
	var order []int32 // declaration number -> place in GUID order
	f.numbered, order = p.sorted()
	f.Links = p.resolve(order, f.numbered)
	// Diagnostics from the line pass are in line order already; resolve
	// adds some for earlier link lines, so merge them in.
	slices.SortStableFunc(p.diags, func(a, b Diagnostic) int { return a.Line - b.Line })
	f.Diagnostics = p.diags
	return f, nil
}

// speedOf returns the place of a width and speed in p.speeds, adding
// them when new: a fabric has a handful of pairs.
func (p *parser) speedOf(width, speed string) uint16 {
	for i, ws := range p.speeds {
		if ws.width == width && ws.speed == speed {
			return uint16(i)
		}
	}
	if len(p.speeds) == 1<<16 {
		return 0 // 65,536 kinds of link: the rest are unknown
	}
	p.speeds = append(p.speeds, linkSpeed{strings.Clone(width), strings.Clone(speed)})
	return uint16(len(p.speeds) - 1)
}

// text is the trimmed text of the line that starts at off in the dump,
// read again (its first maxText bytes after leading blanks are all a
// Diagnostic keeps).
func (p *parser) text(off int) string {
	var line []byte
	buf := make([]byte, 4096)
	for {
		n, err := p.ra.ReadAt(buf, p.base+int64(off+len(line)))
		line = append(line, buf[:n]...)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
			break
		}
		if err != nil || len(bytes.TrimLeft(line, " \t\r\v\f")) > 2*maxText {
			break
		}
	}
	return strings.TrimSpace(string(line))
}

func (p *parser) diag(line int, text, msg string) {
	p.diags = append(p.diags, Diagnostic{Line: line, Text: strings.Clone(clip(text)), Msg: strings.Clone(msg)})
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

// declare adds a node whose GUID is not taken and returns its number.
//
// The node's strings are copied out of the dump (GUID and description in
// one allocation), as are the width and speed names and diagnostics'
// texts: nothing the Fabric holds points into the dump, so the dump (32
// MiB on a fabric of 80,000 CAs, most of it link lines) is garbage once
// Parse returns, not kept alive by the strings of the graph built from it.
func (p *parser) declare(nd *Node) int32 {
	nd.GUID, nd.Desc = p.own(nd.GUID, nd.Desc)
	markAggregation(nd)
	k, _ := guidNum(nd.GUID)
	i := int32(len(p.nodes))
	p.nodes = append(p.nodes, nd)
	p.keys = append(p.keys, k)
	p.num[k] = i
	return i
}

// own returns copies of a GUID and a description.
func (p *parser) own(guid, desc string) (string, string) {
	s := p.copyStrings(guid, desc)
	return s[:len(guid)], s[len(guid):]
}

// copyString returns a copy of s that shares no memory with the dump. The
// copies are cut out of 64 KiB blocks, one allocation for hundreds of node
// strings: a strings.Builder only ever appends, so the strings it has
// handed out never change, and each block lives as long as one of them.
func (p *parser) copyString(s string) string { return p.copyStrings(s, "") }

// copyStrings returns a copy of a and b one after the other, as
// copyString does.
func (p *parser) copyStrings(a, b string) string {
	const block = 64 << 10
	n := len(a) + len(b)
	if n > block/4 {
		return strings.Clone(a + b)
	}
	if p.arena.Cap()-p.arena.Len() < n {
		p.arena = strings.Builder{}
		p.arena.Grow(block)
	}
	start := p.arena.Len()
	p.arena.WriteString(a)
	p.arena.WriteString(b)
	return p.arena.String()[start:]
}

// markAggregation marks SHARP aggregation nodes: CAs that live inside a
// switch and must never become Slurm nodes.
func markAggregation(nd *Node) {
	nd.Aggregation = nd.Type == CA && strings.Contains(nd.Desc, "Aggregation Node")
}

// setPortGUID records a CA or router port GUID unless one is known already.
func (p *parser) setPortGUID(nd *Node, port int, guid string) {
	if nd.Type == Switch || guid == "" {
		return
	}
	if nd.PortGUIDs == nil {
		nd.PortGUIDs = make(map[int]string, 1)
	}
	if _, ok := nd.PortGUIDs[port]; !ok {
		if guid == nd.GUID {
			guid = nd.GUID // the CA's own GUID, as on most classic dumps: no copy
		} else {
			guid = p.copyString(guid) // see declare
		}
		nd.PortGUIDs[port] = guid
	}
}

// setRemotePortGUID records the remote port GUID a link line shows for
// its remote end rn (node number j).
func (p *parser) setRemotePortGUID(rn *Node, j int32, r *rawLink) {
	if !r.hasPortGUID || rn.Type == Switch {
		return
	}
	if _, ok := rn.PortGUIDs[int(r.bPort)]; ok {
		return
	}
	g := rn.GUID // the CA's own GUID, as on most classic dumps: no copy
	if r.bPortGUID != p.keys[j] {
		g = hex16(r.bPortGUID)
	}
	p.setPortGUID(rn, int(r.bPort), g)
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

// cable is one cable found by resolve: its ends as node numbers and
// GUID numbers (the sort key), and the link lines it came from.
type cable struct {
	an, bn       uint64 // GUID numbers, an <= bn
	a, b         int32  // node numbers
	raw, ws      int32  // the first link line that showed it; the one whose width and speed it takes
	aPort, bPort uint8
}

// sorted numbers the nodes in GUID order: it returns them so, and for
// each declaration number the node's place among them.
func (p *parser) sorted() (*numbered, []int32) {
	type keyed struct {
		k uint64
		i int32
	}
	ks := make([]keyed, len(p.nodes))
	for i, k := range p.keys {
		ks[i] = keyed{k, int32(i)}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return cmp.Compare(a.k, b.k) })
	n := &numbered{nodes: make([]*Node, len(ks))}
	order := make([]int32, len(ks))
	for place, k := range ks {
		n.nodes[place] = p.nodes[k.i]
		order[k.i] = int32(place)
	}
	return n, order
}

// link is the cable as a Link.
func (p *parser) link(c cable) Link {
	return Link{
		A: p.nodes[c.a].GUID, APort: int(c.aPort), B: p.nodes[c.b].GUID, BPort: int(c.bPort),
		Width: p.speeds[p.raw.at(int(c.ws)).speed].width, Speed: p.speeds[p.raw.at(int(c.ws)).speed].speed, Line: int(p.raw.at(int(c.raw)).line),
	}
}

// resolve turns link lines into links now that every node is known: it
// drops links to undeclared nodes, merges the two views of each cable, and
// rejects a port claimed by two different cables.
//
// Which cable holds a port is kept in one flat slice (each node's ports
// side by side, sized from the highest port each node shows), not a map:
// resolve asks it twice per link line.
//
// It fills in the ends of the Fabric's numbering (order: declaration
// number -> place in GUID order) as it makes the Links.
func (p *parser) resolve(order []int32, n *numbered) []Link {
	if p.raw.n == 0 {
		return nil
	}
	remote := make([]int32, p.raw.n) // node number of each line's remote end, -1 if never declared
	top := make([]int32, len(p.nodes)+1)
	for i, nd := range p.nodes {
		top[i] = int32(min(max(nd.Ports, 0), 255))
	}
	for k := range p.raw.n {
		r := p.raw.at(k)
		j, ok := p.num[r.b]
		if !ok {
			remote[k] = -1
			continue
		}
		remote[k] = j
		top[r.a] = max(top[r.a], int32(r.aPort))
		top[j] = max(top[j], int32(r.bPort))
	}
	base := top // base[i]: where node i's ports start in used (an exclusive scan of top+1, in place)
	next := int32(0)
	for i := range base {
		n := base[i] + 1
		base[i] = next
		next += n
	}
	used := make([]int32, next) // port -> its cable's index in cables, +1 (0: free)
	cables := make([]cable, 0, p.raw.n/2+1)
	for k := range p.raw.n {
		r := p.raw.at(k)
		j := remote[k]
		if j < 0 {
			p.diag(int(r.line), p.text(r.off), "remote node never declared: "+hex16(r.b)+" (a truncated dump, or the node did not answer the scan)")
			continue
		}
		rn := p.nodes[j]
		if rn.Ports > 0 && int(r.bPort) > rn.Ports {
			p.diag(int(r.line), p.text(r.off), fmt.Sprintf("remote port %d beyond the %d ports node %s declares", r.bPort, rn.Ports, rn.GUID))
			continue
		}
		an := p.keys[r.a]
		c := cable{an: an, bn: r.b, a: r.a, b: j, aPort: r.aPort, bPort: r.bPort, raw: int32(k), ws: int32(k)}
		if c.bn < c.an || (c.an == c.bn && c.bPort < c.aPort) {
			c.an, c.bn, c.a, c.b, c.aPort, c.bPort = c.bn, c.an, c.b, c.a, c.bPort, c.aPort
		}
		ka, kb := base[c.a]+int32(c.aPort), base[c.b]+int32(c.bPort)
		i := used[ka] - 1
		if i >= 0 && cables[i].a == c.a && cables[i].b == c.b && cables[i].aPort == c.aPort && cables[i].bPort == c.bPort {
			// The same cable seen from its other end.
			if p.speeds[p.raw.at(int(cables[i].ws)).speed].width == "" {
				cables[i].ws = int32(k)
			}
			p.setRemotePortGUID(rn, j, r)
			continue
		}
		if i >= 0 {
			p.diag(int(r.line), p.text(r.off), conflict(p.link(cables[i]), int(c.aPort), p.nodes[c.a].GUID))
			continue
		}
		if i := used[kb] - 1; i >= 0 {
			p.diag(int(r.line), p.text(r.off), conflict(p.link(cables[i]), int(c.bPort), p.nodes[c.b].GUID))
			continue
		}
		used[ka] = int32(len(cables)) + 1
		used[kb] = int32(len(cables)) + 1
		p.setRemotePortGUID(rn, j, r)
		cables = append(cables, c)
	}
	// Links are sorted by (A, APort, B, BPort). The nodes' places in GUID
	// order sort by A already: count the cables of each A, lay them out
	// in that order (a counting sort, one pass), then sort each A's few
	// cables (a switch has 64 ports at most) by port and far end.
	start := make([]int32, len(p.nodes)+1)
	for _, c := range cables {
		start[order[c.a]+1]++
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	byA := make([]int32, len(cables)) // cable indexes in A order
	fill := append([]int32(nil), start[:len(p.nodes)]...)
	for k, c := range cables {
		byA[fill[order[c.a]]] = int32(k)
		fill[order[c.a]]++
	}
	for i := range p.nodes {
		group := byA[start[i]:start[i+1]]
		if len(group) < 2 {
			continue
		}
		slices.SortFunc(group, func(x, y int32) int {
			cx, cy := &cables[x], &cables[y]
			if cx.aPort != cy.aPort {
				return cmp.Compare(cx.aPort, cy.aPort)
			}
			if cx.bn != cy.bn {
				return cmp.Compare(cx.bn, cy.bn)
			}
			return cmp.Compare(cx.bPort, cy.bPort)
		})
	}
	links := make([]Link, len(cables))
	n.ends = make([][2]int32, len(cables))
	for k, ci := range byA {
		c := cables[ci]
		links[k] = p.link(c)
		n.ends[k] = [2]int32{order[c.a], order[c.b]}
	}
	return links
}

// hex16 writes a GUID number as the parser writes GUIDs: 16 lowercase
// hex digits.
func hex16(n uint64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[n&15]
		n >>= 4
	}
	return string(b[:])
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
