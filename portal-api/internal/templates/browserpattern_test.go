package templates

import (
	"regexp"
	"strings"
	"testing"
)

// TestBrowserPattern: patterns a browser compiles under the v flag (as
// `new RegExp("^(?:" + p + ")$", "v")` for `<input pattern>`) and reads
// as Go does, and patterns it refuses or reads otherwise, each with the
// v-flag rule it breaks. Every case compiles in Go.
func TestBrowserPattern(t *testing.T) {
	for p, want := range map[string]string{ // want: "" for valid, else a word of the reason
		// Valid under v.
		`[a-z]+`:                           "", // a range between two characters
		`[A-Za-z0-9][A-Za-z0-9._\-]{0,63}`: "", // the shipped run_name: \- is a ClassSetReservedPunctuator escape
		`[A-Za-z0-9_.\-]{1,64}`:            "", // the validator's own hint
		`[0-9]+(\.[0-9]+)?([eE]-?[0-9]+)?`: "", // - outside a class is a plain character; \. escapes a SyntaxCharacter
		`(?:ab|cd)*c?`:                     "", // non-capturing group and quantifiers
		`(?<run>[a-z]{2,})`:                "", // a named group both read
		`\d{4}-\d{2}-\d{2}`:                "", // class escapes outside a class
		`[\w\s]+`:                          "", // class escapes inside one
		`[^\]\[]`:                          "", // escaped ] and [ in a negated class
		`a\/b`:                             "", // / is an identity escape under u and v
		`[a\-z]`:                           "", // an escaped - is a character, not a range, in both
		// Invalid under v, or read otherwise than Go.
		`[A-Za-z0-9._-]{0,63}`: "a - in a class",  // ClassSetSyntaxCharacter - at a class's end
		`[-a-z]`:               "a - in a class",  // - first in a class
		`[a-z--0-9]`:           "a - in a class",  // -- is ClassSubtraction under v
		`[\d-z]`:               "a - in a class",  // a range from a class escape
		`[a(]`:                 "must be escaped", // ( is a ClassSetSyntaxCharacter
		`[a|b]`:                "must be escaped", // | likewise
		`[a{2}]`:               "must be escaped", // { likewise
		`[a/]`:                 "must be escaped", // / likewise
		`[[:alpha:]]`:          "must be escaped", // a nested class under v, POSIX class in Go
		`[a&&b]`:               "reserved",        // && is a ClassSetReservedDoublePunctuator (intersection)
		`[..]`:                 "reserved",        // .. likewise
		`[]a]`:                 "] first",         // Go: a class of ] and a; v: an empty class and a lone ]
		`a\-b`:                 "escapes only",    // outside a class, u/v allow identity escapes of SyntaxCharacters only
		`a\_b`:                 "escapes only",    // likewise
		`\pL+`:                 "escapes only",    // Go's one-letter Unicode class; JavaScript needs \p{L}
		`\Aabc`:                "escapes only",    // Go's \A
		`[a\_]`:                "escapes only",    // in a class, only syntax characters and ClassSetReservedPunctuators
		`(?i)abc`:              "(?:...)",         // Go's flags are not JavaScript
		`(?P<n>a)`:             "(?:...)",         // Go's (?P<name>) likewise
		`a{,3}`:                "repeat",          // Go reads {,3} as text; v: a lone { is a syntax error
		`a{x}`:                 "repeat",          // likewise
		`a}`:                   "lone }",          // a lone } is a syntax error under u/v
		`a]`:                   "lone ]",          // a lone ] likewise
	} {
		if _, err := regexp.Compile(`^(?:` + p + `)$`); err != nil {
			t.Fatalf("%s: not a Go pattern, so no case of this test: %v", p, err)
		}
		err := browserPattern(p)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: refused, valid under v: %v", p, err)
		case want != "" && err == nil:
			t.Errorf("%s: taken, want refused (%s)", p, want)
		case want != "" && !strings.Contains(err.Error(), want):
			t.Errorf("%s: %v, want it to say %q", p, err, want)
		}
	}
}

// FuzzBrowserPattern: any Go pattern is judged without a panic.
func FuzzBrowserPattern(f *testing.F) {
	for _, p := range []string{`[a-z]+`, `[A-Za-z0-9._-]{0,63}`, `a{2,3}?`, `(?<x>[\d-])`, `\`, `[`, `[a-\`} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		_ = browserPattern(p)
	})
}
