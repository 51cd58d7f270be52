package luastr

import "testing"

// TestQuote: each expected literal follows from the rule in Quote's
// comment (ü is the UTF-8 bytes 195 188; a newline is byte 10). That Lua
// reads them back as written is shown with a real interpreter by
// policy/internal/render TestLuaQuoting.
func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":          `""`,
		"acme-llm":  `"acme-llm"`,
		`a"b`:       `"a\"b"`,
		`a\b`:       `"a\\b"`,
		"a\nb":      `"a\010b"`,
		"a\x00b":    `"a\000b"`,
		"Zürich":    `"Z\195\188rich"`,
		"tab\there": `"tab\009here"`,
		"del\x7f":   `"del\127"`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}
