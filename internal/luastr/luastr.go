// Package luastr writes Go strings as Lua string literals that every Lua
// from 5.1 to 5.4 reads back byte for byte: Slurm's job_submit/lua is
// built against 5.1 on Debian, and Strata's job_submit data file and its
// tests write Lua for it.
package luastr

import (
	"fmt"
	"strings"
)

// Quote quotes s: printable ASCII as is, backslash and double quote
// escaped, every other byte as \ddd (Lua 5.1 has no \x or \u escapes).
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' || c == '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "\\%03d", c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
