package templates

import (
	"fmt"
	"strings"
)

// A string parameter's pattern is used twice: by the portal, in Go
// (`^(?:p)$`, RE2), and by the browser that shows the template's form, in
// `<input pattern>`, which a browser compiles as
// `new RegExp("^(?:" + p + ")$", "v")`. The v flag (ECMAScript's
// unicodeSets mode) is stricter than Go: a pattern Go takes may be one the
// browser refuses to compile, and then the browser checks nothing (it
// logs "is not a valid regular expression" and takes any value). So a
// pattern must compile under both, and mean the same under both.
// browserPattern checks the second, conservatively: it takes the syntax
// the two share and refuses anything else, saying which v-flag rule the
// pattern breaks and how to write it.

// classSyntax are ECMAScript's ClassSetSyntaxCharacters: within a class
// under the v flag each must be escaped (a "-" may stand only between the
// two ends of a range).
const classSyntax = "()[]{}/-\\|"

// classDouble are the characters that, doubled within a class, make one
// of ECMAScript's ClassSetReservedDoublePunctuators ("&&", "!!", ...).
const classDouble = "&!#$%*+,.:;<=>?@^`~"

// classPunct are the characters a class may escape under the v flag
// beside the syntax characters (ClassSetReservedPunctuator).
const classPunct = "&-!#%,:;<=>@`~"

// syntaxChars are ECMAScript's SyntaxCharacters and "/": the only
// characters an identity escape may escape under the u and v flags.
const syntaxChars = "^$\\.*+?()[]{}|/"

// classEscapes are the escapes of a character class (\d, \w, \s and
// their negations) and of control characters, in and outside classes.
const (
	classEscapes   = "dDwWsS"
	controlEscapes = "tnrfv"
)

// browserPattern says why a browser would not compile p (as its form's
// `<input pattern>`, under the v flag) or would read it otherwise than
// Go; nil when it compiles and means the same. p compiles in Go.
func browserPattern(p string) error {
	bad := func(i int, format string, args ...any) error {
		return fmt.Errorf("a browser's form would not check it (at %d, %q): %s", i+1, p[i:min(len(p), i+8)], fmt.Sprintf(format, args...))
	}
	atom := false // the last item can take a quantifier
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '\\':
			if i+1 >= len(p) {
				return bad(i, "a pattern may not end in a backslash")
			}
			e := p[i+1]
			switch {
			case strings.IndexByte(syntaxChars, e) >= 0, strings.IndexByte(classEscapes, e) >= 0, strings.IndexByte(controlEscapes, e) >= 0:
			case e == 'b' || e == 'B':
				atom = false
				i++
				continue
			default:
				// \-, \_, \: and the like: Go takes any punctuation escaped,
				// the v flag (as the u flag) only syntax characters outside a
				// class; \pL, \A, \z, \Q are Go's alone.
				return bad(i, `outside a character class the v flag escapes only ^$\.*+?()[]{}|/ and \d\w\s\b: write %q unescaped, or inside a class`, string(e))
			}
			i++
			atom = true
		case '[':
			end, err := browserClass(p, i, bad)
			if err != nil {
				return err
			}
			i, atom = end, true
		case '(':
			if strings.HasPrefix(p[i:], "(?") {
				switch {
				case strings.HasPrefix(p[i:], "(?:"):
					i += 2
				case strings.HasPrefix(p[i:], "(?<") && !strings.HasPrefix(p[i:], "(?<=") && !strings.HasPrefix(p[i:], "(?<!"):
					j := strings.IndexByte(p[i:], '>')
					if j < 0 {
						return bad(i, "a named group needs its closing >")
					}
					i += j
				default:
					// (?i), (?s), (?P<name>...): Go's flags and names, which a
					// browser does not read.
					return bad(i, "of the (?...) groups a browser reads (?:...) and (?<name>...) only: Go's flags such as (?i) and (?P<name>...) are not JavaScript")
				}
			}
			atom = false
		case ')', '|', '^', '$':
			atom = c == ')'
		case '*', '+', '?':
			if !atom {
				return bad(i, "nothing to repeat")
			}
			if i+1 < len(p) && p[i+1] == '?' {
				i++ // lazy
			}
			atom = false
		case '{':
			j := strings.IndexByte(p[i:], '}')
			if j < 0 || !atom || !isRepeat(p[i+1:i+j]) {
				return bad(i, "under the v flag a { is a repeat such as {1,64} after what it repeats, or escaped as \\{")
			}
			i += j
			if i+1 < len(p) && p[i+1] == '?' {
				i++
			}
			atom = false
		case '}', ']':
			return bad(i, "under the v flag a lone %c is a syntax error: escape it as \\%c", c, c)
		default:
			atom = true
		}
	}
	return nil
}

// browserClass checks the class that starts at p[start] under the v
// flag, and returns the index of its closing ].
func browserClass(p string, start int, bad func(int, string, ...any) error) (int, error) {
	i := start + 1
	if i < len(p) && p[i] == '^' {
		i++
	}
	if i < len(p) && p[i] == ']' {
		// Go reads []a] as a class of "]" and "a"; a browser as an empty
		// class, then a lone ].
		return 0, bad(i, `a ] first in a class is a character to Go and the class's end to a browser: escape it as \]`)
	}
	prevChar := false // the last item is one character, which may start a range
	for ; i < len(p); i++ {
		c := p[i]
		switch {
		case c == ']':
			return i, nil
		case c == '\\':
			if i+1 >= len(p) {
				return 0, bad(i, "a pattern may not end in a backslash")
			}
			e := p[i+1]
			switch {
			case strings.IndexByte(syntaxChars, e) >= 0, strings.IndexByte(classPunct, e) >= 0, strings.IndexByte(controlEscapes, e) >= 0:
				prevChar = true
			case strings.IndexByte(classEscapes, e) >= 0:
				prevChar = false
			default:
				return 0, bad(i, `in a class the v flag escapes only syntax characters and &-!#%%,:;<=>@`+"`"+`~: write %q unescaped`, string(e))
			}
			i++
		case c == '-':
			// A range a-z; anything else with a - (first, last, after a
			// range or a class escape, or --, the v flag's subtraction) is
			// a syntax error or not Go's meaning.
			if !prevChar || i+1 >= len(p) || p[i+1] == ']' || p[i+1] == '-' || p[i+1] == '[' {
				return 0, bad(i, `under the v flag a - in a class stands only between the ends of a range such as a-z: escape a literal - as \-`)
			}
			j := i + 1
			if p[j] == '\\' {
				if j+1 >= len(p) || strings.IndexByte(classEscapes, p[j+1]) >= 0 {
					return 0, bad(j, `a range ends in one character, not a class such as \d`)
				}
				j++
			} else if strings.IndexByte(classSyntax, p[j]) >= 0 {
				return 0, bad(j, "under the v flag %q in a class must be escaped", string(p[j]))
			}
			i, prevChar = j, false
		case strings.IndexByte(classSyntax, c) >= 0:
			return 0, bad(i, `under the v flag %q in a class must be escaped (\%c)`, string(c), c)
		case strings.IndexByte(classDouble, c) >= 0 && i+1 < len(p) && p[i+1] == c:
			return 0, bad(i, "under the v flag %q in a class is reserved: escape one of them", p[i:i+2])
		default:
			prevChar = true
		}
	}
	return 0, bad(start, "the class has no closing ]")
}

// isRepeat reports whether s is the inside of a repeat: n, n, or n,m.
func isRepeat(s string) bool {
	lo, hi, comma := strings.Cut(s, ",")
	digits := func(d string) bool {
		for _, r := range d {
			if r < '0' || r > '9' {
				return false
			}
		}
		return true
	}
	return lo != "" && digits(lo) && digits(hi) && (comma || hi == "")
}
