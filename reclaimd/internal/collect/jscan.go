package collect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// jscan reads a JSON document in one pass: it checks the syntax as it
// goes (what json.Valid accepts, it accepts; what it refuses, it
// refuses), and its readers decode the values the controller uses as
// encoding/json would into their Go types. The values nobody reads are
// passed over once, checked but not decoded. Before it, every answer was
// checked by json.Valid and then scanned again at each level of nesting:
// at a thousand agents that was most of a cycle's CPU.
type jscan struct {
	b     []byte
	off   int
	depth int
}

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// errAt is a syntax or type error at the scanner's offset.
func (s *jscan) errAt(msg string) error {
	near := s.b[min(s.off, len(s.b)):]
	if len(near) > 40 {
		near = near[:40]
	}
	return fmt.Errorf("%s at byte %d (near %q)", msg, s.off, near)
}

func (s *jscan) ws() {
	for s.off < len(s.b) {
		switch s.b[s.off] {
		case ' ', '\t', '\n', '\r':
			s.off++
		default:
			return
		}
	}
}

// peek is the next byte after white space; 0 at the end.
func (s *jscan) peek() byte {
	s.ws()
	if s.off < len(s.b) {
		return s.b[s.off]
	}
	return 0
}

// null consumes a null if one comes next.
func (s *jscan) null() bool {
	if s.peek() == 'n' && bytes.HasPrefix(s.b[s.off:], []byte("null")) {
		s.off += 4
		return true
	}
	return false
}

// end checks that nothing but white space follows the document.
func (s *jscan) end() error {
	if s.ws(); s.off < len(s.b) {
		return s.errAt("invalid JSON: data after the value")
	}
	return nil
}

// enter consumes open ('{' or '['); empty reports that the closing
// bracket followed at once (and consumes it).
func (s *jscan) enter(open byte, what string) (empty bool, err error) {
	if s.peek() != open {
		return false, s.errAt(what + ": want " + string(open))
	}
	s.off++
	if s.depth++; s.depth > maxDepth {
		return false, s.errAt("invalid JSON: nested too deep")
	}
	closer := byte(']')
	if open == '{' {
		closer = '}'
	}
	if s.peek() == closer {
		s.off++
		s.depth--
		return true, nil
	}
	return false, nil
}

// more reads what follows a member or element: ',' (true) or the
// closing bracket (false, consumed).
func (s *jscan) more(closer byte) (bool, error) {
	switch s.peek() {
	case ',':
		s.off++
		return true, nil
	case closer:
		s.off++
		s.depth--
		return false, nil
	}
	return false, s.errAt("invalid JSON: want , or " + string(closer))
}

// key reads an object key and its colon. The key is unquoted (a view
// into the document when it has no escape).
func (s *jscan) key() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.errAt("invalid JSON: want a key")
	}
	raw, escaped, wide, err := s.str()
	if err != nil {
		return nil, err
	}
	if s.peek() != ':' {
		return nil, s.errAt("invalid JSON: want :")
	}
	s.off++
	// Invalid UTF-8 is read as encoding/json reads it (each bad byte
	// U+FFFD), so that a label name means the same to both.
	if !escaped && (!wide || utf8.Valid(raw)) {
		return raw[1 : len(raw)-1], nil
	}
	var k string
	if err := json.Unmarshal(raw, &k); err != nil {
		return nil, err
	}
	return []byte(k), nil
}

// keyIs matches an object key to a field name as encoding/json matches
// struct fields: without regard to case (Unicode folding included).
// name is lower-case ASCII, so a key of lower-case ASCII matches only
// itself.
func keyIs(key []byte, name string) bool {
	return string(key) == name || !lowerASCII(key) && bytes.EqualFold(key, []byte(name))
}

func lowerASCII(b []byte) bool {
	for _, c := range b {
		if c >= 'A' && c <= 'Z' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// str reads a string (the next byte is its '"'): raw is the literal
// with its quotes; escaped and wide say whether it holds an escape or a
// byte beyond ASCII.
func (s *jscan) str() (raw []byte, escaped, wide bool, err error) {
	start := s.off
	s.off++
	for s.off < len(s.b) {
		c := s.b[s.off]
		switch {
		case c == '"':
			s.off++
			return s.b[start:s.off], escaped, wide, nil
		case c == '\\':
			escaped = true
			if s.off+1 >= len(s.b) {
				return nil, false, false, s.errAt("invalid JSON: unterminated string")
			}
			switch s.b[s.off+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.off += 2
			case 'u':
				if s.off+6 > len(s.b) {
					return nil, false, false, s.errAt("invalid JSON: unterminated string")
				}
				for _, h := range s.b[s.off+2 : s.off+6] {
					if !isHex(h) {
						return nil, false, false, s.errAt("invalid JSON: bad \\u escape")
					}
				}
				s.off += 6
			default:
				return nil, false, false, s.errAt("invalid JSON: bad escape")
			}
		case c < 0x20:
			return nil, false, false, s.errAt("invalid JSON: control character in string")
		default:
			if c >= utf8.RuneSelf {
				wide = true
			}
			s.off++
		}
	}
	return nil, false, false, s.errAt("invalid JSON: unterminated string")
}

// number reads a number's literal, checked against JSON's grammar.
func (s *jscan) number() ([]byte, error) {
	s.ws()
	start := s.off
	digits := func() int {
		n := 0
		for s.off < len(s.b) && s.b[s.off] >= '0' && s.b[s.off] <= '9' {
			s.off++
			n++
		}
		return n
	}
	if s.off < len(s.b) && s.b[s.off] == '-' {
		s.off++
	}
	switch {
	case s.off < len(s.b) && s.b[s.off] == '0':
		s.off++
	case digits() == 0:
		s.off = start
		return nil, s.errAt("invalid JSON: want a value")
	}
	if s.off < len(s.b) && s.b[s.off] == '.' {
		s.off++
		if digits() == 0 {
			return nil, s.errAt("invalid JSON: bad number")
		}
	}
	if s.off < len(s.b) && (s.b[s.off] == 'e' || s.b[s.off] == 'E') {
		s.off++
		if s.off < len(s.b) && (s.b[s.off] == '+' || s.b[s.off] == '-') {
			s.off++
		}
		if digits() == 0 {
			return nil, s.errAt("invalid JSON: bad number")
		}
	}
	return s.b[start:s.off], nil
}

// skip passes over one value, checking its syntax.
func (s *jscan) skip() error {
	switch c := s.peek(); c {
	case '"':
		_, _, _, err := s.str()
		return err
	case '{':
		empty, err := s.enter('{', "invalid JSON")
		if err != nil || empty {
			return err
		}
		for {
			if _, err := s.key(); err != nil {
				return err
			}
			if err := s.skip(); err != nil {
				return err
			}
			if more, err := s.more('}'); err != nil || !more {
				return err
			}
		}
	case '[':
		empty, err := s.enter('[', "invalid JSON")
		if err != nil || empty {
			return err
		}
		for {
			if err := s.skip(); err != nil {
				return err
			}
			if more, err := s.more(']'); err != nil || !more {
				return err
			}
		}
	case 't', 'f', 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(s.b[s.off:], []byte(lit)) {
				s.off += len(lit)
				return nil
			}
		}
		return s.errAt("invalid JSON: want a value")
	default:
		_, err := s.number()
		return err
	}
}

// skipType passes over a value (checking it) and reports that it is not
// of the type wanted: what encoding/json reports as an UnmarshalTypeError.
func (s *jscan) skipType(what string) error {
	start := s.off
	if err := s.skip(); err != nil {
		return err
	}
	return fmt.Errorf("%s: %s is not of its type", what, snippet(s.b[start:s.off]))
}

// readString reads a string or null (which leaves dst as it was).
func (s *jscan) readString(dst *string, what string) error {
	switch s.peek() {
	case 'n':
		if s.null() {
			return nil
		}
	case '"':
		raw, escaped, wide, err := s.str()
		if err != nil {
			return err
		}
		if !escaped && (!wide || utf8.Valid(raw)) {
			*dst = string(raw[1 : len(raw)-1])
			return nil
		}
		return json.Unmarshal(raw, dst) // escapes, or bytes encoding/json replaces
	}
	return s.skipType(what)
}

// readBool reads true, false or null (which leaves dst as it was).
func (s *jscan) readBool(dst *bool, what string) error {
	switch s.peek(); {
	case bytes.HasPrefix(s.b[s.off:], []byte("true")):
		*dst, s.off = true, s.off+4
	case bytes.HasPrefix(s.b[s.off:], []byte("false")):
		*dst, s.off = false, s.off+5
	case s.null():
	default:
		return s.skipType(what)
	}
	return nil
}

// isNumber says whether a value that starts with c is a number.
func isNumber(c byte) bool { return c == '-' || c >= '0' && c <= '9' }

// readInt reads an integer or null (which leaves dst as it was), as
// encoding/json reads an int64: a fraction, an exponent or a value out of
// range is an error.
func (s *jscan) readInt(dst *int64, what string) error {
	if s.null() {
		return nil
	}
	if !isNumber(s.peek()) {
		return s.skipType(what)
	}
	lit, err := s.number()
	if err != nil {
		return err
	}
	if v, ok := smallInt(lit); ok {
		*dst = v
		return nil
	}
	v, err := strconv.ParseInt(string(lit), 10, 64)
	if err != nil {
		return fmt.Errorf("%s: %s is not an integer", what, lit)
	}
	*dst = v
	return nil
}

// readFloat reads a number; null (has false) leaves dst as it was.
func (s *jscan) readFloat(dst *float64, what string) (has bool, err error) {
	if s.null() {
		return false, nil
	}
	if !isNumber(s.peek()) {
		return false, s.skipType(what)
	}
	lit, err := s.number()
	if err != nil {
		return false, err
	}
	if v, ok := smallInt(lit); ok {
		*dst = float64(v) // exact: below 2^53
		return true, nil
	}
	v, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return false, fmt.Errorf("%s: %s is out of range", what, lit)
	}
	*dst = v
	return true, nil
}

// smallInt reads an integer literal of at most 15 digits, the common
// case, without strconv.
func smallInt(lit []byte) (int64, bool) {
	neg := len(lit) > 0 && lit[0] == '-'
	digits := lit
	if neg {
		digits = lit[1:]
	}
	if len(digits) == 0 || len(digits) > 15 {
		return 0, false
	}
	var v int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// readTime reads a time as time.Time's UnmarshalJSON does (null leaves
// dst as it was).
func (s *jscan) readTime(dst *time.Time, what string) error {
	if s.null() {
		return nil
	}
	if s.peek() != '"' {
		return s.skipType(what)
	}
	raw, _, _, err := s.str()
	if err != nil {
		return err
	}
	if err := dst.UnmarshalJSON(raw); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
