package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Options say how to name a file's parts in messages.
type Options struct {
	// What the file is, for messages about the whole file: "a serve spec".
	What string
	// Example says how a file starts, for the hint of an empty file.
	Example string
	// Nouns name struct types in messages ("autoscale"); a type not
	// listed is called by its lower-cased Go name.
	Nouns map[reflect.Type]string
}

// maxDiagnostics bounds the problems reported for one file: past it, the
// rest are noise.
const maxDiagnostics = 50

// maxExpanded bounds the values aliases may expand to, so that aliases of
// aliases cannot make a small file take forever.
const maxExpanded = 10_000

// Decode decodes data into dst (a pointer to a struct, whose fields hold
// their defaults) and returns the position of every value it read and the
// problems it found, sorted. Fields are named by their yaml tag; a field
// tagged "-" is not read. String fields also take numbers as written
// (cpu: 8), since those are strings to the reader; every other type takes
// only its own kind of value. time.Duration takes a string with a unit.
//
// A syntax error stops the decoding, so it comes alone; otherwise every
// problem is reported, and dst holds what could be decoded.
func Decode(file string, data []byte, dst any, opts Options) *Result {
	d := &decoder{file: file, data: data, pos: Positions{}, opts: opts, bad: map[string]bool{}}
	if root := d.document(); root != nil {
		d.value(root, reflect.ValueOf(dst).Elem(), "")
	} else {
		d.bad[""] = true
	}
	return &Result{File: file, Pos: d.pos, Diags: d.diags, bad: d.bad}
}

// Result is what Decode found.
type Result struct {
	File  string
	Pos   Positions
	Diags Diagnostics
	bad   map[string]bool // paths of values that could not be decoded
}

// Add adds the problems a validation found, located by their paths:
// those about a value that could not be decoded are left out (they would
// only repeat it), as is everything when the file had no document.
func (r *Result) Add(ds Diagnostics) {
	for _, v := range ds {
		if !r.tainted(v.Path) {
			r.Diags = append(r.Diags, v)
		}
	}
}

// Err returns the problems, located, sorted and bounded, as one error;
// nil when there are none.
func (r *Result) Err() error {
	r.Pos.Locate(r.File, r.Diags)
	r.Diags.Sort()
	if len(r.Diags) > maxDiagnostics {
		last := r.Diags[maxDiagnostics-1]
		r.Diags = append(r.Diags[:maxDiagnostics:maxDiagnostics], Diagnostic{File: r.File, Line: last.Line, Col: last.Col,
			Msg: fmt.Sprintf("and %d more problems", len(r.Diags)-maxDiagnostics), Hint: "fix these first"})
	}
	return r.Diags.Err()
}

func (r *Result) tainted(path string) bool {
	for ; ; path = Parent(path) {
		if r.bad[path] {
			return true
		}
		if path == "" {
			return false
		}
	}
}

type decoder struct {
	file     string
	data     []byte
	opts     Options
	diags    Diagnostics
	pos      Positions
	inAlias  int
	outer    *yaml.Node
	expanded int
	stopped  bool
	bad      map[string]bool
}

// add reports a problem of the value at path, located at node n; the
// value counts as not decoded.
func (d *decoder) add(n *yaml.Node, path, hint, format string, args ...any) {
	d.diags = append(d.diags, Diagnostic{File: d.file, Line: n.Line, Col: n.Column, Path: path,
		Msg: fmt.Sprintf(format, args...), Hint: hint})
	d.bad[path] = true
}

// document parses the YAML and returns the root value, or nil after
// reporting why there is none.
func (d *decoder) document() *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(d.data))
	var doc yaml.Node
	switch err := decodeNode(dec, &doc); {
	case errors.Is(err, io.EOF):
		d.empty()
		return nil
	case err != nil:
		d.syntax(err)
		return nil
	}
	var next yaml.Node
	switch err := decodeNode(dec, &next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.syntax(err)
		return nil
	default:
		at := &next
		if len(next.Content) > 0 {
			at = next.Content[0]
		}
		d.add(at, "", "the file holds one document: remove the '---' and what follows, or merge it into the first",
			"a second YAML document")
		return nil
	}
	if len(doc.Content) != 1 || isNull(doc.Content[0]) {
		d.empty()
		return nil
	}
	return doc.Content[0]
}

func (d *decoder) empty() {
	what := d.opts.What
	if what == "" {
		what = "file"
	}
	d.diags = append(d.diags, Diagnostic{File: d.file, Line: 1, Col: 1, Msg: "empty " + strings.TrimPrefix(what, "a "),
		Hint: d.opts.Example})
}

// decodeNode decodes the next document into n; a panic of the YAML parser
// on hostile input becomes an error.
func decodeNode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return dec.Decode(n)
}

var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntax reports a YAML syntax error at its line, column of the line's
// first character (or of its first tab).
func (d *decoder) syntax(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := syntaxLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	lines := strings.Split(string(d.data), "\n")
	line = d.locate(lines, line, msg)
	text := ""
	if line <= len(lines) {
		text = strings.TrimSuffix(lines[line-1], "\r")
	}
	indent := text[:len(text)-len(strings.TrimLeft(text, " \t"))]
	col := len(indent) + 1
	if i := strings.IndexByte(indent, '\t'); i >= 0 {
		col = i + 1
	}
	d.diags = append(d.diags, Diagnostic{File: d.file, Line: line, Col: col,
		Msg: "invalid YAML: " + msg, Hint: syntaxHint(msg, indent)})
}

// maxLocate bounds the lines locate tries, and maxLocateBytes the size of
// the input it tries them on.
const (
	maxLocate      = 200
	maxLocateBytes = 64 << 10
)

// locate returns the line of a syntax error. yaml.v3 names the line
// before the problem for some errors, and the end of the input for
// something opened earlier and never closed ("end of stream"); the line
// is the first, from the one named (or from the top), such that the input
// up to it fails with the same message.
func (d *decoder) locate(lines []string, reported int, msg string) int {
	n := len(lines)
	if n > 0 && lines[n-1] == "" {
		n--
	}
	if len(d.data) > maxLocateBytes {
		// Each try parses the input up to a line: too slow for a large
		// file, which no one writes by hand.
		return min(max(reported, 1), max(n, 1))
	}
	from := max(reported, 1)
	if strings.Contains(msg, "end of stream") || reported == 0 {
		from = 1
	}
	prefix := strings.Join(lines[:min(from-1, n)], "\n")
	for k := from; k <= min(n, from+maxLocate); k++ {
		if k > 1 {
			prefix += "\n"
		}
		prefix += lines[k-1]
		if failsWith(prefix+"\n", msg) {
			return k
		}
	}
	return min(max(reported, 1), max(n, 1))
}

// failsWith reports whether data fails to parse with message msg.
func failsWith(data, msg string) bool {
	dec := yaml.NewDecoder(strings.NewReader(data))
	for {
		var n yaml.Node
		err := decodeNode(dec, &n)
		switch {
		case errors.Is(err, io.EOF):
			return false
		case err != nil:
			return strings.HasSuffix(err.Error(), msg)
		}
	}
}

func syntaxHint(msg, indent string) string {
	switch {
	case strings.Contains(msg, "tab") || strings.Contains(indent, "\t"):
		return "indent with spaces: YAML does not allow tabs"
	case strings.Contains(msg, "mapping values are not allowed"):
		return "a key is indented under a plain value, or a value holds ': ': check the indentation, or quote the value"
	case strings.Contains(msg, "did not find expected key"), strings.Contains(msg, "did not find expected '-' indicator"):
		return "the keys of one mapping start in the same column, as do the '- ' items of one list"
	case strings.Contains(msg, "expected ',' or ']'"), strings.Contains(msg, "expected ',' or '}'"):
		return "close the [list] or {mapping} that starts here, and separate its items with ','"
	case strings.Contains(msg, "end of stream"):
		return "a quote or bracket opened here is never closed"
	case strings.HasPrefix(msg, "unknown anchor"):
		return "define the anchor with &name before using it as *name"
	}
	return "check the indentation (spaces only) and the quoting on this line"
}

var durationType = reflect.TypeFor[time.Duration]()

// value decodes node n into v, whose path is path.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	if d.stopped {
		return
	}
	if d.inAlias > 0 {
		if d.expanded++; d.expanded > maxExpanded {
			d.stopped = true
			d.add(d.outer, path, "write the values out", "aliases expand to more than %d values", maxExpanded)
			return
		}
	}
	if _, seen := d.pos[path]; !seen {
		d.pos[path] = Pos{n.Line, n.Column}
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			d.add(n, path, "define the anchor with &name before using it as *name", "alias to nothing")
			return
		}
		target := *n.Alias
		target.Line, target.Column = n.Line, n.Column
		if d.inAlias == 0 {
			d.outer = n
		}
		d.inAlias++
		d.value(&target, v, path)
		d.inAlias--
		return
	}
	t := v.Type()
	if isNull(n) {
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			return
		}
		d.add(n, path, "give a value, or remove the key", "%s has no value", keyName(path))
		return
	}
	switch {
	case t == durationType:
		if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
			d.add(n, path, fmt.Sprintf("add a unit, such as %q", n.Value+"s"), "%s: want a duration, got %s", keyName(path), n.Value)
			return
		}
		if !d.scalar(n, path, "a duration", "!!str") {
			return
		}
		dur, err := time.ParseDuration(n.Value)
		if err != nil || dur < 0 {
			d.add(n, path, `write a duration with a unit, such as "90s", "10m" or "1h30m"`, "%s: %q is not a duration",
				keyName(path), n.Value)
			return
		}
		v.SetInt(int64(dur))
	case t.Kind() == reflect.String:
		if d.scalar(n, path, "a string", "!!str", "!!int", "!!float") {
			v.SetString(n.Value)
		}
	case t.Kind() == reflect.Bool:
		if d.scalar(n, path, "true or false", "!!bool") {
			var b bool
			if err := n.Decode(&b); err != nil {
				d.add(n, path, "write true or false", "%s: %s is not true or false", keyName(path), n.Value)
				return
			}
			v.SetBool(b)
		}
	case t.Kind() == reflect.Int:
		if d.scalar(n, path, "a whole number", "!!int") {
			var i int
			if err := n.Decode(&i); err != nil {
				d.add(n, path, "give a smaller number", "%s: %s is out of range", keyName(path), n.Value)
				return
			}
			v.SetInt(int64(i))
		}
	case t.Kind() == reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.value(n, v.Elem(), path)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.mismatch(n, path, "a list")
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.value(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		if n.Kind != yaml.MappingNode {
			d.mismatch(n, path, "a mapping")
			return
		}
		m := reflect.MakeMapWithSize(t, len(n.Content)/2)
		seen := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if !d.key(k, path, seen) {
				continue
			}
			elem := reflect.New(t.Elem()).Elem()
			d.value(val, elem, Join(path, k.Value))
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(t.Key()), elem)
		}
		v.Set(m)
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			if path == "" {
				d.add(n, path, d.opts.Example, "%s must be a mapping of keys to values, not %s", d.what(), describe(n))
				return
			}
			d.mismatch(n, path, "a mapping")
			return
		}
		d.object(n, v, path)
	default:
		panic("strictyaml: no YAML rule for " + t.String())
	}
}

func (d *decoder) what() string {
	if d.opts.What == "" {
		return "the file"
	}
	return d.opts.What
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// scalar reports whether n is a scalar with one of the tags, and reports a
// mismatch when not.
func (d *decoder) scalar(n *yaml.Node, path, want string, tags ...string) bool {
	if n.Kind == yaml.ScalarNode && n.Style&yaml.TaggedStyle == 0 {
		for _, tag := range tags {
			if n.ShortTag() == tag {
				return true
			}
		}
	}
	d.mismatch(n, path, want)
	return false
}

func (d *decoder) mismatch(n *yaml.Node, path, want string) {
	hint := typeHint(n, want)
	if n.Style&yaml.TaggedStyle != 0 {
		hint = "remove the tag " + n.Tag + ": these files use no YAML tags"
	}
	d.add(n, path, hint, "%s: want %s, got %s", keyName(path), want, describe(n))
}

func typeHint(n *yaml.Node, want string) string {
	scalar := n.Kind == yaml.ScalarNode
	switch want {
	case "a whole number":
		if _, err := strconv.Atoi(n.Value); err == nil && scalar {
			return "remove the quotes: a number in quotes is a string"
		}
		return "write a whole number, such as 2"
	case "true or false":
		switch strings.ToLower(n.Value) {
		case "yes", "no", "on", "off", "y", "n":
			return fmt.Sprintf("write true or false: YAML 1.2 reads %s as a string", n.Value)
		}
		return "write true or false"
	case "a duration":
		return `write a duration with a unit, such as "90s" or "10m"`
	case "a string":
		if scalar {
			return fmt.Sprintf("quote it: %q", n.Value)
		}
		return "write a single value"
	case "a list":
		if scalar {
			return fmt.Sprintf("write a list: [%s], or one '- item' line per item", n.Value)
		}
		return "write a list: [a, b], or one '- item' line per item"
	}
	return "write key: value lines indented under it"
}

// describe names what a node holds, for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	if n.ShortTag() == "!!str" {
		v = strconv.Quote(v)
	}
	if n.Style&yaml.TaggedStyle != 0 {
		v = n.Tag + " " + v
	}
	return v
}

// keyName is the last key of a path, for messages.
func keyName(path string) string {
	if path == "" {
		return "the file"
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

// key checks a mapping key: a scalar, not a merge key, not seen before.
func (d *decoder) key(k *yaml.Node, path string, seen map[string]*yaml.Node) bool {
	switch {
	case k.Kind != yaml.ScalarNode:
		d.add(k, path, "write a plain name before the ':'", "a key must be a name, not %s", describe(k))
		return false
	case k.ShortTag() == "!!merge":
		d.add(k, path, "write the keys out: strict decoding must see every key where it applies",
			"merge keys (<<) are not supported")
		return false
	}
	if first, dup := seen[k.Value]; dup {
		d.add(k, Join(path, k.Value), "remove one of them: YAML would keep only one",
			"key %s is given twice (first at %d:%d)", k.Value, first.Line, first.Column)
		return false
	}
	seen[k.Value] = k
	return true
}

type field struct {
	name  string
	index int
}

// object decodes a mapping into struct v.
func (d *decoder) object(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	noun := d.opts.Nouns[t]
	if noun == "" {
		noun = strings.ToLower(t.Name())
	}
	var names []string
	byName := map[string]field{}
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "-" || name == "" || !sf.IsExported() {
			continue
		}
		names = append(names, name)
		byName[name] = field{name: name, index: i}
	}
	seen := map[string]*yaml.Node{}
	var guesses []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if !d.key(k, path, seen) {
			continue
		}
		kp := Join(path, k.Value)
		f, known := byName[k.Value]
		if !known {
			if guess := Closest(k.Value, names); guess != "" {
				guesses = append(guesses, guess)
				d.add(k, kp, "did you mean "+guess+"?", "unknown key %s in %s", k.Value, noun)
			} else {
				d.add(k, kp, "the keys of "+noun+" are "+strings.Join(names, ", "), "unknown key %s in %s", k.Value, noun)
			}
			continue
		}
		d.value(val, v.Field(f.index), kp)
	}
	// A key left out because it was misspelt: "did you mean" says it
	// already, so a validation's "required" would only repeat it.
	for _, g := range guesses {
		if seen[g] == nil {
			d.bad[Join(path, g)] = true
		}
	}
}

// Closest returns the name nearest to s (ignoring case) when it is close
// enough to be a typo, for "did you mean" hints: one edit away for names of up to 4 characters, two
// for longer ones; "" when none is. A swap of two neighbours is one edit.
func Closest(s string, names []string) string {
	if len(s) > 64 {
		return ""
	}
	limit := 2
	if len(s) <= 4 {
		limit = 1
	}
	best, bestDist := "", limit+1
	for _, name := range names {
		if d := editDistance(strings.ToLower(s), strings.ToLower(name)); d < bestDist {
			best, bestDist = name, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b
// (bytes): insertions, deletions, substitutions and swaps of neighbours.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
