package ib

import (
	"strconv"
	"strings"
)

// The ports report (ibnetdiscover -p), one line per port:
//
//	SW    34    1 0x7cfe9003009ce5b0 4x EDR - CA    14    1 0x7cfe9003003e8e21 ( 'switch desc' - 'ca desc' )
//	SW  2052   37 0x506b4b03005c2740 4x ???                                    'ib-i4l1s01'
//
// Fields: type, LID (the switch's, or the CA port's), port, port GUID,
// width, speed, then either the remote end and both descriptions, or (an
// unconnected port) the local description alone. Descriptions may carry
// stray spaces ("' 5FB0406-spine-IB03 '"), which are trimmed, and some
// reports leave the quotes out altogether.

// portEnd is one side of a ports-report line.
type portEnd struct {
	typ  NodeType
	lid  int
	port int
	guid string
}

// parsePortEnd reads "SW  1719 10 0x7cfe9003009ce5b0" from the start of s.
func parsePortEnd(s string) (portEnd, string, string) {
	var e portEnd
	tok, s := field(s)
	switch tok {
	case "SW":
		e.typ = Switch
	case "CA":
		e.typ = CA
	case "RT":
		e.typ = Router
	default:
		return e, "", "bad node type " + quote(tok) + " (want SW, CA or RT)"
	}
	tok, s = field(s)
	lid, ok := atoi(tok)
	if !ok || lid > 0xffff {
		return e, "", "bad LID " + quote(tok)
	}
	e.lid = lid
	tok, s = field(s)
	port, ok := atoi(tok)
	if !ok || port < 1 || port > 255 {
		return e, "", "bad port number " + quote(tok) + " (want 1-255)"
	}
	e.port = port
	tok, s = field(s)
	if e.guid, ok = normGUID(tok); !ok {
		return e, "", "bad GUID " + quote(tok)
	}
	return e, s, ""
}

// portsLine parses one line of a ports report.
func (p *parser) portsLine(n int, t string) string {
	a, rest, msg := parsePortEnd(t)
	if msg != "" {
		return msg
	}
	width, rest := field(rest)
	speed, rest := field(rest)
	if width == "??" {
		width = ""
	} else if !isWidth(width) {
		return "bad link width " + quote(width) + " (want 4x, 12x or ??)"
	}
	if speed == "???" {
		speed = ""
	} else if !isAlnum(speed) {
		return "bad link speed " + quote(speed) + " (want SDR..XDR or ???)"
	}
	rest = trimBlank(rest)

	if len(rest) < 2 || rest[0] != '-' || !isBlank(rest[1]) {
		// An unconnected port: it declares its node and nothing else.
		if msg := p.checkType(a); msg != "" {
			return msg
		}
		p.portsNode(a, unquote(rest), n)
		return ""
	}

	b, rest, msg := parsePortEnd(rest[1:])
	if msg != "" {
		return "remote end: " + msg
	}
	rest = trimBlank(rest)
	if len(rest) < 2 || rest[0] != '(' || rest[len(rest)-1] != ')' {
		return "expected ( 'local desc' - 'remote desc' ) after the remote end"
	}
	inner := trimBlank(rest[1 : len(rest)-1])
	// The separator is "' - '"; descriptions may contain " - " themselves
	// ("Voltaire 4036 - 36 QDR ports switch"), so look for the quotes too.
	sep := -1
	if len(inner) >= 2 && inner[0] == '\'' && inner[len(inner)-1] == '\'' {
		if i := strings.Index(inner[1:], "' - '"); i >= 0 && i+6 <= len(inner)-1 {
			sep = i + 1
		}
	}
	if sep < 0 {
		return "expected ( 'local desc' - 'remote desc' ) after the remote end"
	}
	descA, descB := trimBlank(inner[1:sep]), trimBlank(inner[sep+5:len(inner)-1])
	if msg := p.checkType(a); msg != "" {
		return msg
	}
	if msg := p.checkType(b); msg != "" {
		return "remote end: " + msg
	}
	if a.guid == b.guid && a.typ != b.typ {
		return "GUID " + a.guid + " is both a " + a.typ.String() + " and a " + b.typ.String() + " on this line"
	}
	ai := p.portsNode(a, descA, n)
	p.portsNode(b, descB, n)
	bn, _ := guidNum(b.guid)
	p.raw.add(rawLink{
		a: ai, aPort: uint8(a.port),
		b: bn, bPort: uint8(b.port),
		speed: p.speedOf(width, speed),
		line:  int32(n), off: p.lineOff,
	})
	return ""
}

// checkType rejects a GUID that an earlier line gave another node type.
func (p *parser) checkType(e portEnd) string {
	if old, _ := p.lookup(e.guid); old != nil && old.Type != e.typ {
		return "GUID " + e.guid + " is a " + e.typ.String() + " here but a " + old.Type.String() + " at line " + strconv.Itoa(old.Line)
	}
	return ""
}

// portsNode declares the node of one end of a ports-report line, or adds
// what this line knows to it. A CA is keyed by the port GUID the report
// prints (ibnetdiscover -p shows no node GUIDs); it is also the CA's
// PortGUIDs entry for that port. It returns the node's number.
func (p *parser) portsNode(e portEnd, desc string, line int) int32 {
	nd, i := p.lookup(e.guid)
	if nd == nil {
		nd = &Node{GUID: e.guid, Type: e.typ, Desc: desc, LID: e.lid, Line: line}
		i = p.declare(nd)
	} else {
		if nd.LID == 0 {
			nd.LID = e.lid
		}
		if nd.Desc == "" && desc != "" {
			nd.Desc = p.copyString(desc) // see declare
			markAggregation(nd)
		}
	}
	p.setPortGUID(nd, e.port, e.guid)
	return i
}

// unquote strips the single quotes around a ports-report description and
// trims it.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		s = s[1 : len(s)-1]
	}
	return trimBlank(s)
}
