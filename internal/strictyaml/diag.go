// Package strictyaml is how Strata reads every YAML file written by hand:
// the policy, the daemon configs (topogen, reclaimd, strata-bridge), serve
// specs and runtime templates. A syntax error, a second document, an
// unknown, repeated or missing key, a merge key or a value of the wrong
// type is a [Diagnostic] with its file, line and column and a hint, never
// a Go type name; every problem of a file is reported at once. It also
// records the position of every value it read, so that a validation that
// knows only paths ([Diagnostic.Path]) gets its problems located too:
//
//	cfg := Default()
//	r := strictyaml.Decode(file, data, &cfg, strictyaml.Options{What: "a bridge config"})
//	r.Add(cfg.Validate()) // Diagnostics with paths: "slurm.poll_interval"
//	return r.Err()        // every problem, "file:line:col: message (hint: ...)"
//
// yaml.v3's own strict mode (KnownFields) stops at the first unknown key
// and gives neither a column nor the path of the value, and names Go
// types in its messages.
package strictyaml

import (
	"fmt"
	"slices"
	"strings"
)

// Diagnostic is one problem of a file.
type Diagnostic struct {
	File string
	// Line and Col are 1-based (Col counts bytes); both are 0 when the
	// position is unknown (a value built in code, not read from a file).
	Line, Col int
	// Path of the offending value: "autoscale.max_replicas", "args[2]",
	// "env.HF_HOME"; "" for the file itself. Error shows it when the
	// line is unknown.
	Path string
	Msg  string
	// Hint says what to do about it.
	Hint string
}

// Error formats d as "file:line:col: message (hint: hint)", or without a
// line as "file: path: message (hint: hint)"; empty parts are left out.
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

// Diagnostics are the problems of a file. As an error it is one
// diagnostic per line.
type Diagnostics []Diagnostic

// Error prints one diagnostic per line.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.Error()
	}
	return strings.Join(lines, "\n")
}

// Err returns ds as an error, or nil when there are none (a nil
// Diagnostics in an error interface would not be nil).
func (ds Diagnostics) Err() error {
	if len(ds) == 0 {
		return nil
	}
	return ds
}

// Sort orders ds by position, keeping the order of problems at the same
// place; problems without a position come last.
func (ds Diagnostics) Sort() {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		al, bl := a.Line, b.Line
		if al == 0 {
			al = 1 << 30
		}
		if bl == 0 {
			bl = 1 << 30
		}
		if al != bl {
			return al - bl
		}
		return a.Col - b.Col
	})
}

// Pos is a position in a file: 1-based line and column (bytes).
type Pos struct{ Line, Col int }

// String formats p as "line:col".
func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Positions maps the path of every value Decode read to its position.
type Positions map[string]Pos

// At returns the position of path's value or, when the file left the value
// out, that of the nearest enclosing value; the zero Pos when ps is nil.
func (ps Positions) At(path string) Pos {
	for {
		if p, ok := ps[path]; ok {
			return p
		}
		if path == "" {
			return Pos{}
		}
		path = Parent(path)
	}
}

// Locate fills in the file and position of diagnostics made without them
// (by a validation that knows only paths), from ps.
func (ps Positions) Locate(file string, ds Diagnostics) {
	for i := range ds {
		if ds[i].File == "" {
			ds[i].File = file
		}
		if ds[i].Line == 0 {
			p := ps.At(ds[i].Path)
			ds[i].Line, ds[i].Col = p.Line, p.Col
		}
	}
}

// Parent strips the last ".key" or "[index]" of a path.
func Parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

// Join appends a key to a path.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
