package ib

import (
	"strings"
	"unicode/utf8"
)

// Lexical helpers shared by the line parsers. They work on substrings of the
// input and allocate only when a GUID has to be padded or lowercased.

// maxText bounds Diagnostic.Text, so a megabyte of binary garbage on one
// "line" does not end up in a log.
const maxText = 200

// isBlank reports whether c separates fields: ibnetdiscover mixes tabs and
// runs of spaces.
func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// trimBlank trims spaces and tabs on both ends.
// strings.Trim would build its set of cut bytes on every call.
func trimBlank(s string) string {
	i, j := 0, len(s)
	for i < j && isBlank(s[i]) {
		i++
	}
	for j > i && isBlank(s[j-1]) {
		j--
	}
	return s[i:j]
}

// field returns the first blank-separated token of s and what follows it.
func field(s string) (tok, rest string) {
	i := 0
	for i < len(s) && isBlank(s[i]) {
		i++
	}
	j := i
	for j < len(s) && !isBlank(s[j]) {
		j++
	}
	return s[i:j], s[j:]
}

// lastField returns the last blank-separated token of s.
func lastField(s string) string {
	j := len(s)
	for j > 0 && isBlank(s[j-1]) {
		j--
	}
	i := j
	for i > 0 && !isBlank(s[i-1]) {
		i--
	}
	return s[i:j]
}

// atoi parses a small non-negative decimal number. Nine digits at most, so
// it cannot overflow and "lid 99999999999999999999" is just not a number.
func atoi(s string) (int, bool) {
	if len(s) == 0 || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// normGUID returns a GUID as 16 lowercase hex digits without 0x. Dumps
// print GUIDs in several ways: "2c5eab0300b87b40", "0x2c5eab0300b87b40"
// and, for port GUIDs, without leading zeros ("8f10403961355").
func normGUID(s string) (string, bool) {
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s = s[2:]
	}
	if len(s) == 0 || len(s) > 16 {
		return "", false
	}
	canonical := len(s) == 16
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		case c >= 'A' && c <= 'F':
			canonical = false
		default:
			return "", false
		}
	}
	if canonical {
		return s, true
	}
	var b [16]byte
	pad := 16 - len(s)
	for i := range pad {
		b[i] = '0'
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'F' {
			c += 'a' - 'A'
		}
		b[pad+i] = c
	}
	return string(b[:]), true
}

// nodeID parses the quoted node id of classic dumps ("S-<guid>", "H-<guid>",
// "R-<guid>") at the start of s and returns the GUID and what follows the
// closing quote.
func nodeID(s string) (guid, rest, msg string) {
	if len(s) == 0 || s[0] != '"' {
		return "", "", "expected a quoted node id such as \"S-<guid>\""
	}
	end := strings.IndexByte(s[1:], '"')
	if end < 0 {
		return "", "", "unterminated node id"
	}
	id := s[1 : 1+end]
	rest = s[2+end:]
	if len(id) < 3 || id[1] != '-' || (id[0] != 'S' && id[0] != 'H' && id[0] != 'R') {
		return "", "", "node id " + quote(id) + " is not S-, H- or R- followed by a GUID"
	}
	g, ok := normGUID(id[2:])
	if !ok {
		return "", "", "node id " + quote(id) + " has a bad GUID (want up to 16 hex digits)"
	}
	return g, rest, ""
}

// bracketPort parses "[N]" at the start of s.
func bracketPort(s string) (port int, rest, msg string) {
	if len(s) == 0 || s[0] != '[' {
		return 0, "", "expected a port number in brackets"
	}
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return 0, "", "unterminated port number"
	}
	n, ok := atoi(s[1:end])
	if !ok {
		return 0, "", "bad port number " + quote(s[1:end])
	}
	if n < 1 || n > 255 {
		return 0, "", "port number " + s[1:end] + " out of range 1-255"
	}
	return n, s[end+1:], ""
}

// portLabels parses the parenthesised groups after a port number: a port
// GUID ("(e09d7303007a4bd8)") and the labels ibdiagnet2 writes. On switch
// ports a label is the split-port position ("(1/1/1)"); on HCA ports it
// comes before the port GUID and is either the PCI location with the port
// ("(B134D0F0/0/0/1)") or the plain port number ("(1)(e09d7303007a4bd8)").
// So a group is a label when it holds a slash or another group follows it;
// the last group without a slash is the port GUID. It returns the port GUID
// ("" if none) and whether a label was seen; labels themselves are not
// kept, the port number is what identifies a port.
func portLabels(s string) (portGUID, rest string, label bool, msg string) {
	for len(s) > 0 && s[0] == '(' {
		end := strings.IndexByte(s, ')')
		if end < 0 {
			return "", "", false, "unterminated parenthesis after port number"
		}
		inner := s[1:end]
		s = s[end+1:]
		if strings.IndexByte(inner, '/') >= 0 || (len(s) > 0 && s[0] == '(') {
			if !isPortLabel(inner) {
				return "", "", false, "bad port label " + quote(inner) + " (want letters and digits joined by slashes, such as 1/1/1 or B134D0F0/0/0/1)"
			}
			label = true
			continue
		}
		g, ok := normGUID(inner)
		if !ok {
			return "", "", false, "bad port GUID " + quote(inner)
		}
		portGUID = g
	}
	return portGUID, s, label, ""
}

// isPortLabel reports whether s looks like "1/1/1", "B134D0F0/0/0/1" or
// "1": runs of letters and digits joined by single slashes.
func isPortLabel(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			run++
		case c == '/' && run > 0:
			run = 0
		default:
			return false
		}
	}
	return run > 0
}

// lidIn finds "lid N" in s and returns N, or 0 when there is none or it is
// empty ("lid  4xNDR") or out of range: an unknown LID, not an error.
func lidIn(s string) int {
	for {
		var tok string
		tok, s = field(s)
		if tok == "" {
			return 0
		}
		if tok == "lid" {
			next, _ := field(s)
			if n, ok := atoi(next); ok && n <= 0xffff {
				return n
			}
			return 0
		}
	}
}

// widthSpeed splits "4xNDR" into "4x" and "NDR". Anything else gives "".
func widthSpeed(tok string) (width, speed string) {
	i := 0
	for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
		i++
	}
	if i == 0 || i > 2 || i >= len(tok) || tok[i] != 'x' || !isAlnum(tok[i+1:]) {
		return "", ""
	}
	return tok[:i+1], tok[i+1:]
}

// isWidth reports whether s is a link width such as "4x" or "12x".
func isWidth(s string) bool {
	n := len(s)
	if n < 2 || n > 3 || s[n-1] != 'x' {
		return false
	}
	_, ok := atoi(s[:n-1])
	return ok
}

func isAlnum(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		default:
			return false
		}
	}
	return true
}

// clip shortens s for a message: at most maxText bytes, cut on a rune
// boundary, invalid UTF-8 replaced.
func clip(s string) string {
	if len(s) > maxText {
		s = s[:maxText]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > maxText {
		cut := maxText
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// quote quotes a fragment of input for a message, clipped.
func quote(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return "\"" + strings.ToValidUTF8(s, "\uFFFD") + "\""
}
