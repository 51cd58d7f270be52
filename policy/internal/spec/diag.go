package spec

import (
	"fmt"
	"slices"
	"strings"
)

// Diagnostic is one problem of a policy file.
type Diagnostic struct {
	File string
	// Line and Col (1-based; Col counts bytes) locate the problem; both are
	// 0 when unknown (Validate on a policy built in code).
	Line, Col int
	// Path is the path of the offending value ("tenants[0].limits.gpus";
	// "" for the file itself). Error shows it only when the line is
	// unknown.
	Path string
	Msg  string
	// Hint says what to do about it.
	Hint string
}

// Error formats d as "file:line:col: message (hint: hint)". Without a
// line it is "file: path: message (hint: hint)"; parts that are empty are
// left out.
func (d Diagnostic) Error() string {
	var b strings.Builder
	b.WriteString(d.File)
	if d.Line > 0 {
		if d.File != "" {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%d:%d", d.Line, d.Col)
	} else if d.Path != "" {
		if d.File != "" {
			b.WriteString(": ")
		}
		b.WriteString(d.Path)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(d.Msg)
	if d.Hint != "" {
		b.WriteString(" (hint: ")
		b.WriteString(d.Hint)
		b.WriteByte(')')
	}
	return b.String()
}

// Diagnostics are the problems of a policy file, sorted by position. As an
// error it is one diagnostic per line.
type Diagnostics []Diagnostic

// Error prints one diagnostic per line.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.Error()
	}
	return strings.Join(lines, "\n")
}

// sort orders ds by line and column, keeping the order of problems at the
// same place.
func (ds Diagnostics) sort() {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Col - b.Col
	})
}

// Pos is a position in a policy file: 1-based line and column (bytes).
type Pos struct{ Line, Col int }

// String formats p as "line:col".
func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Positions maps the path of every value Parse read to its position.
// Paths are as Diagnostic.Path: "cluster.name",
// "tenants[1].projects[0].members[2].user",
// "tenants[0].limits.gpus_by_type.h100".
type Positions map[string]Pos

// At returns the position of path's value, or, when the value was not in
// the file (a key left out), that of the nearest enclosing value; the zero
// Pos when ps is nil.
func (ps Positions) At(path string) Pos {
	for {
		if p, ok := ps[path]; ok {
			return p
		}
		if path == "" {
			return Pos{}
		}
		path = parentPath(path)
	}
}

// parentPath strips the last ".key" or "[index]" of a path.
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}
