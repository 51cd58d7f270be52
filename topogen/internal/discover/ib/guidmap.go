package ib

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ParseGUIDMap reads a GUID -> name map, one "<guid> <name>" a line. The
// GUID may be written bare or prefixed "H-", "S-", "R-" or "0x" (so both
// ibnetdiscover ids such as "H-003048c74e4a0000" and the node-name-map
// style "0x0008f104003f0a9f" work). The name is one word or a double-quoted
// string (as in ibnetdiscover's --node-name-map file); a '#' after it starts
// a comment. '#' comment lines and blank lines are allowed.
//
// It returns map[lowercase 16-digit GUID]name. A map names hosts, so it is
// strict: the first bad line (no name, a bad GUID, extra words, a GUID named
// twice with different names) is an error that names the line. The same
// line repeated is allowed, so map files can be concatenated.
func ParseGUIDMap(r io.Reader) (map[string]string, error) {
	data, err := io.ReadAll(newCapped(r, Limits{MaxBytes: maxGUIDMap}))
	if err != nil {
		return nil, fmt.Errorf("ib: read GUID map: %w", err)
	}
	s := strings.TrimPrefix(string(data), "\uFEFF")
	out := make(map[string]string)
	lineOf := make(map[string]int)
	for n := 1; len(s) > 0; n++ {
		line := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' {
			continue
		}
		guid, name, msg := guidMapLine(t)
		if msg != "" {
			return nil, fmt.Errorf("ib: GUID map line %d: %s: %q", n, msg, clip(t))
		}
		if old, ok := out[guid]; ok && old != name {
			return nil, fmt.Errorf("ib: GUID map line %d: GUID %s is already named %q at line %d; keep one name per GUID", n, guid, old, lineOf[guid])
		}
		if _, ok := out[guid]; !ok {
			out[guid] = name
			lineOf[guid] = n
		}
	}
	return out, nil
}

// maxGUIDMap bounds a GUID map, as Limits bound a dump: a map of 100,000
// HCAs is some 4 MiB.
const maxGUIDMap = 64 << 20

// guidMapLine parses one non-blank, non-comment line of a GUID map.
func guidMapLine(t string) (guid, name, msg string) {
	tok, rest := field(t)
	g := tok
	if len(g) >= 2 && g[1] == '-' && (g[0] == 'H' || g[0] == 'S' || g[0] == 'R') {
		g = g[2:]
	}
	guid, ok := normGUID(g)
	if !ok {
		return "", "", "bad GUID " + quote(tok) + " (want up to 16 hex digits, optionally prefixed H-, S-, R- or 0x)"
	}
	rest = trimBlank(rest)
	if rest == "" {
		return "", "", "no name after the GUID"
	}
	if rest[0] == '"' {
		end := strings.IndexByte(rest[1:], '"')
		if end < 0 {
			return "", "", "unterminated quoted name"
		}
		name, rest = rest[1:1+end], rest[2+end:]
	} else {
		name, rest = field(rest)
	}
	if rest = trimBlank(rest); rest != "" && rest[0] != '#' {
		return "", "", "unexpected text after the name (quote a name that has spaces)"
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return "", "", "empty name"
	}
	if !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl) {
		return "", "", "name has control characters or invalid UTF-8"
	}
	return guid, name, ""
}
