package ib

import (
	"strconv"
	"strings"
)

// The classic format, as ibnetdiscover prints it:
//
//	vendid=0x2c9
//	switchguid=0x2c5eab0300b87b40(2c5eab0300b87b40)
//	Switch	65 "S-2c5eab0300b87b40"		# "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1" enhanced port 0 lid 73 lmc 0
//	[1]	"H-e09d7303007a4bd8"[1](e09d7303007a4bd8) 		# "a08-p1-dgx-04-c01 mlx5_5" lid 647 4xNDR
//
//	caguid=0xe09d7303007a4bd8
//	Ca	1 "H-e09d7303007a4bd8"		# "a08-p1-dgx-04-c01 mlx5_5"
//	[1](e09d7303007a4bd8) 	"S-2c5eab0300b87b40"[1]		# lid 647 lmc 0 "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1" lid 73 4xNDR
//
// ibdiagnet2 writes the same records with split-port labels after port
// numbers ("[1](1/1/1)", "\"S-...\"[2](2/1/2)") and without the
// "Topology file:" header. Descriptions may hold '#' and spaces
// ("Voltaire 4036 # 4036-8C5C"), so they are cut at their quotes, never at
// '#'.

// classicNode parses a Switch, Ca or Rt header line and makes its node the
// current one. It returns a message when the line is rejected.
func (p *parser) classicNode(n int, t string, typ NodeType) string {
	p.cur = nil // a rejected header must not collect the next node's links
	_, rest := field(t)
	count, rest := field(rest)
	ports, ok := atoi(count)
	if !ok || ports < 1 || ports > 255 {
		return "bad port count " + quote(count) + " (want 1-255)"
	}
	guid, rest, msg := nodeID(trimBlank(rest))
	if msg != "" {
		return msg
	}
	var desc, tail string
	if rest = trimBlank(rest); rest != "" {
		if rest[0] != '#' {
			return "unexpected text after node id: " + quote(rest)
		}
		rest = trimBlank(rest[1:])
		tail = rest
		if strings.HasPrefix(rest, "\"") {
			end := strings.LastIndexByte(rest, '"')
			if end == 0 {
				return "unterminated node description"
			}
			desc, tail = trimBlank(rest[1:end]), rest[end+1:]
		}
	}
	if old, i := p.lookup(guid); old != nil {
		if old.Type != typ {
			return "GUID " + guid + " already declared as a " + old.Type.String() + " at line " + strconv.Itoa(old.Line) + "; this " + typ.String() + " and its links are skipped"
		}
		// Same node twice (two dumps pasted together): keep the first
		// declaration and merge the links of both.
		p.cur, p.curNum = old, i
		return "node " + guid + " declared again (first at line " + strconv.Itoa(old.Line) + "); links merged"
	}
	nd := &Node{
		GUID:  guid,
		Type:  typ,
		Desc:  desc,
		Ports: ports,
		// "enhanced port 0 lid 73 lmc 0" or "base port 0 lid 6 lmc 0" on
		// switches; CAs carry their LIDs on their link lines.
		LID:  lidIn(tail),
		Line: n,
	}
	p.curNum = p.declare(nd)
	p.cur = nd
	return ""
}

// classicLink parses a link line of the current node's block.
func (p *parser) classicLink(n int, t string) string {
	cur := p.cur
	if cur == nil {
		return "link line outside a node block (no Switch, Ca or Rt line before it)"
	}
	port, rest, msg := bracketPort(t)
	if msg != "" {
		return "local end: " + msg
	}
	if port > cur.Ports {
		return "port " + strconv.Itoa(port) + " beyond the " + strconv.Itoa(cur.Ports) + " ports node " + cur.GUID + " declares"
	}
	localGUID, rest, split1, msg := portLabels(rest)
	if msg != "" {
		return msg
	}
	remote, rest, msg := nodeID(trimBlank(rest))
	if msg != "" {
		return "remote end: " + msg
	}
	rport, rest, msg := bracketPort(rest)
	if msg != "" {
		return "remote end: " + msg
	}
	remoteGUID, rest, split2, msg := portLabels(rest)
	if msg != "" {
		return msg
	}
	var width, speed string
	lid := 0
	if rest = trimBlank(rest); rest != "" {
		if rest[0] != '#' {
			return "unexpected text after remote port: " + quote(rest)
		}
		// Switch blocks: `"remote desc" lid 647 4xNDR`. CA blocks:
		// `lid 657 lmc 0 "remote desc" lid 73 4xNDR`, where the first LID
		// is the CA port's own.
		tail := rest[1:]
		pre, post := tail, tail
		if q := strings.IndexByte(tail, '"'); q >= 0 {
			end := strings.LastIndexByte(tail, '"')
			if end == q {
				return "unterminated remote description"
			}
			pre, post = tail[:q], tail[end+1:]
		}
		if cur.Type != Switch {
			lid = lidIn(pre)
		}
		width, speed = widthSpeed(lastField(post))
	}

	if split1 || split2 {
		p.ibdiag = true
	}
	p.setPortGUID(cur, port, localGUID)
	switch {
	case lid == 0:
	case cur.Ports == 1:
		cur.LID = lid
	default:
		// Each port of a CA has its own LID; keep the lowest port's, as
		// ibnetdiscover lists ports in no fixed order.
		if lp, ok := p.lidPort[p.curNum]; !ok || port < lp {
			cur.LID = lid
			p.lidPort[p.curNum] = port
		}
	}
	rn, _ := guidNum(remote)
	rpg, hasRPG := guidNum(remoteGUID)
	p.raw.add(rawLink{
		a: p.curNum, aPort: uint8(port),
		b: rn, bPort: uint8(rport), bPortGUID: rpg, hasPortGUID: hasRPG,
		speed: p.speedOf(width, speed),
		line:  int32(n), off: p.lineOff,
	})
	return ""
}
