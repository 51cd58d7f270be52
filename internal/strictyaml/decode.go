package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/strata-hpc/strata/internal/duration"
)

// Options say how to name a file's parts in messages, and what a file of
// the kind may hold.
type Options struct {
	// What the document is, for messages about the whole of it: "a
	// serve spec", "a policy". "" is "the file".
	What string
	// File names the file for "empty ..." and "... holds one document":
	// "policy file"; "" is What without its article.
	File string
	// Example says how a file starts, for the hint of an empty file and
	// of one that is not a mapping.
	Example string
	// Nouns name struct types in messages ("autoscale", "a project"); a
	// type not listed is called by its lower-cased Go name.
	Nouns map[reflect.Type]string
	// Forbidden are keys of a struct type that this kind of file must
	// not give (another program fills them), each with its hint. They
	// are not offered as "did you mean" either.
	Forbidden map[reflect.Type]map[string]string
	// RequiredHint says what to write for a required key left out, given
	// its path and key; nil, or "", is "add <key>:".
	RequiredHint func(path, key string) string
	// QuoteNumbers refuses numbers where a string belongs (name: 123 must
	// be name: "123"); by default a number there is the string as written
	// (cpu: 8), since that is what a reader sees.
	QuoteNumbers bool
	// AllowEmpty makes an empty or all-comment file no problem: the
	// destination keeps its defaults (a daemon config that changes none).
	AllowEmpty bool
	// MaxDiagnostics bounds the problems reported for one file (past it,
	// the rest are noise); 0 is 50.
	MaxDiagnostics int
	// MaxExpanded bounds the values aliases may expand to, so that
	// aliases of aliases cannot make a small file take forever (a file
	// without aliases is bounded by its size); 0 is 10,000.
	MaxExpanded int
	// MaxBytes bounds the file's size: decoding keeps a node per value
	// and a position per path, some 40 times the file in memory, so a
	// file larger than any real one is refused before it is parsed (and
	// Load reads no more of it); 0 is no bound. MaxBytesHint is the
	// hint of that refusal (how to raise the bound).
	MaxBytes     int64
	MaxBytesHint string
}

// ReadLimited reads the file at path, at most max bytes and one more
// (so that Decode sees it is too large) when max is above 0.
func ReadLimited(path string, max int64) ([]byte, error) {
	if max <= 0 {
		return os.ReadFile(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max+1))
}

// FormatBytes writes a size in bytes for a message: "16 MiB" when it is a
// whole number of KiB, MiB or GiB, else "1414 bytes" (a bound is given
// exactly).
func FormatBytes(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// Scalar is implemented (on the pointer) by a type that reads itself from
// one YAML scalar, as duration.Duration does. Decode passes the scalar's
// text as written, numbers too, so that the type can say what a bare 30
// lacks. An error with a Hint() string method gives the hint of the
// diagnostic.
type Scalar interface {
	UnmarshalYAMLScalar(text string) error
	// YAMLKind names the values in messages: "a duration".
	YAMLKind() string
}

// Struct tags of the key "strictyaml" (beside the "yaml" tag):
//
//	strictyaml:"required"  the key must be given
//	strictyaml:"line"      (an int field tagged yaml:"-") is set to the
//	                       line of the mapping the struct was read from
const tagKey = "strictyaml"

// Decode decodes data into dst (a pointer to a struct, whose fields hold
// their defaults) and returns the position of every value it read and the
// problems it found. Fields are named by their yaml tag; a field tagged
// "-" is not read. Types take only their own kind of value: a string
// where a number belongs, "yes" for true, a number where a duration
// belongs are problems. A time.Duration and any [Scalar] type such as
// duration.Duration read what [duration.Parse] reads.
//
// A syntax error stops the decoding, so it comes alone; otherwise every
// problem is reported, and dst holds what could be decoded. Add a
// validation's problems with [Result.Add], then take them all with
// [Result.Err].
func Decode(file string, data []byte, dst any, opts Options) *Result {
	if opts.MaxDiagnostics <= 0 {
		opts.MaxDiagnostics = 50
	}
	if opts.MaxExpanded <= 0 {
		opts.MaxExpanded = 10_000
	}
	// About one value per 32 bytes of YAML: sized once, the positions of a
	// large file are not copied over and over as the map grows.
	if opts.MaxBytes > 0 && int64(len(data)) > opts.MaxBytes {
		d := &decoder{file: file, opts: opts, pos: Positions{"": {1, 1}}, bad: map[string]bool{"": true}}
		hint := opts.MaxBytesHint
		if hint == "" {
			hint = "check that this is the right file"
		}
		d.fail(&yaml.Node{Line: 1, Column: 1}, "", hint, "the %s is larger than %s, the most it may be", d.fileNoun(), FormatBytes(opts.MaxBytes))
		return &Result{File: file, Pos: d.pos, Diags: d.diags, bad: d.bad, max: opts.MaxDiagnostics}
	}
	d := &decoder{file: file, data: data, pos: make(Positions, len(data)/32), opts: opts, bad: map[string]bool{}}
	if root := d.document(); root != nil {
		d.value(root, reflect.ValueOf(dst).Elem(), "")
	}
	if _, ok := d.pos[""]; !ok {
		// An empty file: what a validation says of its defaults is
		// about the file's start.
		d.pos[""] = Pos{1, 1}
	}
	if d.stopped {
		// What was decoded is a fraction of the file: its validation
		// would mislead.
		d.bad[""] = true
	}
	return &Result{File: file, Pos: d.pos, Diags: d.diags, bad: d.bad, max: opts.MaxDiagnostics}
}

// Validator is a decoded file that checks itself, reporting each problem
// at the path of its key (Diagnostic.Path), without a position.
type Validator interface {
	Validate() Diagnostics
}

// Parse decodes data into dst, which holds the defaults, validates it, and
// returns every problem of both at once as [Diagnostics], located and
// sorted; nil when there is none. It is how a daemon reads its config.
func Parse(file string, data []byte, dst Validator, opts Options) error {
	r := Decode(file, data, dst, opts)
	r.Add(dst.Validate())
	return r.Err()
}

// Load reads the file at path and parses it with [Parse]. A file that
// cannot be read is an error wrapping the os error (errors.Is(err,
// os.ErrNotExist) for a missing one).
func Load(path string, dst Validator, opts Options) error {
	data, err := ReadLimited(path, opts.MaxBytes)
	if err != nil {
		d := decoder{opts: opts}
		return fmt.Errorf("read %s: %w", d.fileNoun(), err)
	}
	return Parse(path, data, dst, opts)
}

// ParseWithDefaults parses data ([Parse]) over a copy of defaults and
// returns it; the zero value and every problem on any. A daemon's
// config package is then Default(), Validate() and one line:
//
//	func Parse(name string, data []byte) (Config, error) {
//		return strictyaml.ParseWithDefaults(name, data, Default(), opts)
//	}
func ParseWithDefaults[T any, P interface {
	*T
	Validator
}](file string, data []byte, defaults T, opts Options) (T, error) {
	v := defaults
	if err := Parse(file, data, P(&v), opts); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// LoadWithDefaults reads the file at path ([Load]) over a copy of
// defaults and returns it; the zero value and the error on any.
func LoadWithDefaults[T any, P interface {
	*T
	Validator
}](path string, defaults T, opts Options) (T, error) {
	v := defaults
	if err := Load(path, P(&v), opts); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// Result is what Decode found.
type Result struct {
	File  string
	Pos   Positions
	Diags Diagnostics
	bad   map[string]bool // paths of values that could not be decoded
	max   int
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

// OK reports whether no problem was found so far.
func (r *Result) OK() bool { return len(r.Diags) == 0 }

// Err returns the problems, located, sorted and bounded, as one error
// ([Diagnostics]); nil when there are none.
func (r *Result) Err() error {
	r.Pos.Locate(r.File, r.Diags)
	r.Diags.Sort()
	if max := r.max; max > 0 && len(r.Diags) > max {
		last := r.Diags[max-1]
		r.Diags = append(r.Diags[:max:max], Diagnostic{File: r.File, Line: last.Line, Col: last.Col,
			Msg: fmt.Sprintf("and %d more problems", len(r.Diags)-max), Hint: "fix these first"})
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

// decoder walks the yaml.Node tree against the Go types, decoding into
// them and reporting every unknown, repeated, missing or mistyped key with
// its position. yaml.v3's own decoder stops at the first unknown key, and
// reports neither columns nor paths.
//
// Aliases are followed where they are used. An alias inside its own
// anchor (&a [x, *a]) cannot make the walk loop: the Go types are not
// recursive, so each step goes one type deeper, and a value nested deeper
// than its type is a type error.
type decoder struct {
	file     string
	data     []byte
	opts     Options
	diags    Diagnostics
	pos      Positions
	inAlias  int        // depth of aliases being expanded
	outer    *yaml.Node // the outermost alias being expanded
	expanded int        // values visited through aliases
	stopped  bool       // MaxExpanded reached
	bad      map[string]bool
	structs  map[reflect.Type]*structInfo // structOf, once per type: a large file has many values of one type
}

// add reports a problem about the key or value at path, located at node
// n; the value still counts as decoded.
func (d *decoder) add(n *yaml.Node, path, hint, format string, args ...any) {
	d.diags = append(d.diags, Diagnostic{File: d.file, Line: n.Line, Col: n.Column, Path: path,
		Msg: fmt.Sprintf(format, args...), Hint: hint})
}

// fail reports a value that could not be decoded: a validation's findings
// about it are dropped.
func (d *decoder) fail(n *yaml.Node, path, hint, format string, args ...any) {
	d.add(n, path, hint, format, args...)
	d.bad[path] = true
}

func (d *decoder) what() string {
	if d.opts.What == "" {
		return "the file"
	}
	return d.opts.What
}

func (d *decoder) fileNoun() string {
	if d.opts.File != "" {
		return d.opts.File
	}
	if d.opts.What == "" {
		return "file"
	}
	return strings.TrimPrefix(strings.TrimPrefix(d.opts.What, "a "), "an ")
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
		article := "a "
		if strings.HasPrefix(d.fileNoun(), "file") {
			article = "the "
		}
		d.fail(at, "", article+d.fileNoun()+" holds one document: remove the '---' and what follows, or merge it into the first",
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
	if d.opts.AllowEmpty {
		return
	}
	d.diags = append(d.diags, Diagnostic{File: d.file, Line: 1, Col: 1, Msg: "empty " + d.fileNoun(), Hint: d.opts.Example})
	d.bad[""] = true
}

// decodeNode decodes the next document into n. yaml.v3 turns its own
// failures into errors; a panic on hostile input becomes one too.
func decodeNode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return dec.Decode(n)
}

var (
	syntaxLine    = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	unknownAnchor = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)
)

// syntax reports a YAML syntax error. yaml.v3 gives only a line, and for
// parser errors the line before the problem or the start of the enclosing
// collection, so locate finds the line itself; the column is that of the
// line's first character (or first tab, or of the unknown alias).
func (d *decoder) syntax(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := syntaxLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	line = d.locate(line, msg)
	text := d.line(line)
	indent := text[:len(text)-len(strings.TrimLeft(text, " \t"))]
	col := len(indent) + 1
	if i := strings.IndexByte(indent, '\t'); i >= 0 {
		col = i + 1
	}
	if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		if i := strings.Index(text, "*"+m[1]); i >= 0 {
			col = i + 1
		}
	}
	d.diags = append(d.diags, Diagnostic{File: d.file, Line: line, Col: col,
		Msg: "invalid YAML: " + msg, Hint: syntaxHint(msg, indent)})
	d.bad[""] = true
}

// maxLocate bounds the lines locate tries, and maxLocateBytes the size of
// the input it tries them on.
const (
	maxLocate      = 300
	maxLocateBytes = 256 << 10
)

// locate returns the line of a syntax error: the first line, from the one
// yaml.v3 named (or from the top for errors at the end of the input,
// which are about something opened earlier), such that the input up to
// it fails with the same message.
func (d *decoder) locate(reported int, msg string) int {
	lines := bytes.SplitAfter(d.data, []byte("\n"))
	n := len(lines)
	if n > 0 && len(lines[n-1]) == 0 {
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
	end := 0
	for k := range min(from-1, n) {
		end += len(lines[k])
	}
	for k := from; k <= min(n, from+maxLocate); k++ {
		end += len(lines[k-1])
		if failsWith(d.data[:end], msg) {
			return k
		}
	}
	return min(max(reported, 1), max(n, 1))
}

// failsWith reports whether data fails to parse with message msg.
func failsWith(data []byte, msg string) bool {
	dec := yaml.NewDecoder(bytes.NewReader(data))
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

// line returns line k (1-based) of the input, without its newline.
func (d *decoder) line(k int) string {
	for i, l := range bytes.Split(d.data, []byte("\n")) {
		if i == k-1 {
			return strings.TrimSuffix(string(l), "\r")
		}
	}
	return ""
}

// syntaxHint says what usually causes a YAML syntax error, given the
// message and the indentation of the line.
func syntaxHint(msg, indent string) string {
	switch {
	case strings.Contains(msg, "tab") || strings.Contains(indent, "\t"):
		return "indent with spaces: YAML does not allow tabs"
	case strings.Contains(msg, "mapping values are not allowed"):
		return "a key is indented under a plain value, or a value holds ': ': check the indentation, or quote the value"
	case strings.Contains(msg, "did not find expected key"), strings.Contains(msg, "did not find expected '-' indicator"):
		return "the indentation of this line matches no key or list above it: the keys of one mapping start in the same column, as do the '- ' items of one list"
	case strings.Contains(msg, "expected ',' or ']'"), strings.Contains(msg, "expected ',' or '}'"):
		return "close the [list] or {mapping} that starts here, and separate its items with ','"
	case strings.Contains(msg, "end of stream"):
		return "a quote or bracket opened here is never closed"
	case strings.HasPrefix(msg, "unknown anchor"):
		return "define the anchor with &name before using it as *name"
	case strings.Contains(msg, "UTF-8"), strings.Contains(msg, "control characters"):
		return "save the file as UTF-8 text"
	}
	return "check the indentation (spaces only) and the quoting on this line"
}

var (
	timeDurationType = reflect.TypeFor[time.Duration]()
	scalarType       = reflect.TypeFor[Scalar]()
)

// value decodes node n into v, whose path is path.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	if d.stopped {
		return
	}
	if d.inAlias > 0 {
		if d.expanded++; d.expanded > d.opts.MaxExpanded {
			d.stopped = true
			d.fail(d.outer, path, "write the values out: "+d.what()+" is not that large",
				"aliases expand to more than %d values", d.opts.MaxExpanded)
			return
		}
	}
	if _, seen := d.pos[path]; !seen {
		d.pos[path] = Pos{n.Line, n.Column}
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			d.fail(n, path, "define the anchor with &name before using it as *name", "alias to nothing")
			return
		}
		// The anchored value, located where it is used; what it holds
		// keeps its own positions.
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
		switch {
		case t.Kind() == reflect.Slice || t.Kind() == reflect.Map:
		case strings.HasSuffix(path, "]"):
			d.fail(n, path, "give the item a value, or remove the empty '-' line", "%s has no value", KeyName(path))
		default:
			d.fail(n, path, "give a value, or remove the key", "%s has no value", KeyName(path))
		}
		return
	}
	switch {
	case t == timeDurationType:
		var dur duration.Duration
		if d.custom(n, path, &dur) {
			if dur < 0 {
				d.fail(n, path, `write a duration of 0 or more, such as "90s" or "10m"`, "%s: %s is negative", KeyName(path), n.Value)
				return
			}
			v.SetInt(int64(dur))
		}
	case t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(scalarType):
		d.custom(n, path, v.Addr().Interface().(Scalar))
	case t.Kind() == reflect.String:
		tags := []string{"!!str"}
		if !d.opts.QuoteNumbers {
			tags = append(tags, "!!int", "!!float")
		}
		if d.scalar(n, path, "a string", tags...) {
			v.SetString(n.Value)
		}
	case t.Kind() == reflect.Bool:
		if d.scalar(n, path, "true or false", "!!bool") {
			var b bool
			if d.decodeScalar(n, path, &b) {
				v.SetBool(b)
			}
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		if d.scalar(n, path, "a whole number", "!!int") {
			var i int64
			if !d.decodeScalar(n, path, &i) {
				return
			}
			if v.OverflowInt(i) {
				d.fail(n, path, "give a smaller number", "%s: %s is out of range", KeyName(path), n.Value)
				return
			}
			v.SetInt(i)
		}
	case t.Kind() == reflect.Float64 || t.Kind() == reflect.Float32:
		if d.scalar(n, path, "a number", "!!int", "!!float") {
			var f float64
			if d.decodeScalar(n, path, &f) {
				v.SetFloat(f)
			}
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
				d.fail(n, path, d.opts.Example, "%s must be a mapping of keys to values, not %s", d.what(), describe(n))
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

// isNull reports whether n is a YAML null: ~, null, or nothing at all.
func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// custom decodes a scalar into a Scalar type, and reports whether it
// could.
func (d *decoder) custom(n *yaml.Node, path string, s Scalar) bool {
	kind := s.YAMLKind()
	if n.Kind != yaml.ScalarNode || !standardTag(n.ShortTag()) {
		d.mismatch(n, path, kind)
		return false
	}
	err := s.UnmarshalYAMLScalar(n.Value)
	if err == nil {
		return true
	}
	hint := err.Error()
	var h interface{ Hint() string }
	if errors.As(err, &h) {
		hint = h.Hint()
	}
	if n.ShortTag() == "!!str" {
		d.fail(n, path, hint, "%s: %q is not %s", KeyName(path), n.Value, kind)
	} else {
		d.fail(n, path, hint, "%s: want %s, got %s", KeyName(path), kind, describe(n))
	}
	return false
}

func standardTag(tag string) bool {
	switch tag {
	case "!!str", "!!int", "!!float", "!!bool", "!!timestamp":
		return true
	}
	return false
}

// scalar reports whether n is a scalar with one of the tags, and reports a
// mismatch when not.
func (d *decoder) scalar(n *yaml.Node, path, want string, tags ...string) bool {
	if n.Kind == yaml.ScalarNode {
		for _, tag := range tags {
			if n.ShortTag() == tag {
				return true
			}
		}
	}
	d.mismatch(n, path, want)
	return false
}

// decodeScalar decodes a scalar whose tag is right; what can still fail
// is a number too large for Go.
func (d *decoder) decodeScalar(n *yaml.Node, path string, out any) bool {
	if err := n.Decode(out); err != nil {
		d.fail(n, path, "give a smaller number", "%s: %s is out of range", KeyName(path), n.Value)
		return false
	}
	return true
}

// mismatch reports a value of the wrong type.
func (d *decoder) mismatch(n *yaml.Node, path, want string) {
	hint := typeHint(n, want)
	if n.Style&yaml.TaggedStyle != 0 {
		hint = "remove the tag " + n.Tag + ": " + d.what() + " uses no YAML tags"
	}
	d.fail(n, path, hint, "%s: want %s, got %s", KeyName(path), want, describe(n))
}

// typeHint says how to write a value of the type wanted.
func typeHint(n *yaml.Node, want string) string {
	scalar := n.Kind == yaml.ScalarNode
	switch want {
	case "a whole number":
		if _, err := strconv.Atoi(n.Value); err == nil && scalar {
			return "remove the quotes: a number in quotes is a string"
		}
		return "write a whole number, such as 8"
	case "a number":
		return "write a number, such as 5 or 0.5"
	case "true or false":
		switch strings.ToLower(n.Value) {
		case "yes", "no", "on", "off", "y", "n":
			return fmt.Sprintf("write true or false: YAML 1.2 reads %s as a string", n.Value)
		}
		return "write true or false"
	case "a duration":
		return duration.Hint
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
	case "a mapping":
		return "write key: value lines indented under it"
	}
	return "write a single value"
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

// KeyName is the last key of a path, for messages: "gpus", "members[2]",
// or "the file" for the root.
func KeyName(path string) string {
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
		d.fail(k, path, "write a plain name before the ':'", "a key must be a name, not %s", describe(k))
		return false
	case k.ShortTag() == "!!merge":
		d.fail(k, path, "write the keys out: strict decoding must see every key where it applies (anchors and aliases of whole values are fine)",
			"merge keys (<<) are not supported")
		return false
	}
	if first, dup := seen[k.Value]; dup {
		d.fail(k, Join(path, k.Value), "remove one of them: YAML would keep only one",
			"key %s is given twice (first at %d:%d)", k.Value, first.Line, first.Column)
		return false
	}
	seen[k.Value] = k
	return true
}

// object decodes a mapping into struct v.
func (d *decoder) object(n *yaml.Node, v reflect.Value, path string) {
	info := d.structOf(v.Type())
	seen := map[string]*yaml.Node{}
	suggested := map[string]bool{} // keys an unknown key was taken for
	merged := false                // a merge key may have given any key
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		merged = merged || k.ShortTag() == "!!merge"
		if !d.key(k, path, seen) {
			continue
		}
		kp := Join(path, k.Value)
		f, known := info.byName[k.Value]
		if !known {
			if hint, forbidden := info.forbidden[k.Value]; forbidden {
				d.add(k, kp, hint, "%s is not allowed in %s", k.Value, info.noun)
				continue
			}
			if guess := Closest(k.Value, info.names); guess != "" {
				suggested[guess] = true
				d.add(k, kp, "did you mean "+guess+"?", "unknown key %s in %s", k.Value, info.noun)
			} else {
				d.add(k, kp, "the keys of "+info.noun+" are "+strings.Join(info.names, ", "),
					"unknown key %s in %s", k.Value, info.noun)
			}
			continue
		}
		d.value(val, v.Field(f.index), kp)
	}
	for _, f := range info.fields {
		if seen[f.name] != nil || !f.required && !suggested[f.name] {
			continue
		}
		kp := Join(path, f.name)
		if suggested[f.name] || merged {
			// The misspelt or merge key says it already: a validation's
			// "required" would only repeat it.
			d.bad[kp] = true
			continue
		}
		hint := ""
		if d.opts.RequiredHint != nil {
			hint = d.opts.RequiredHint(kp, f.name)
		}
		if hint == "" {
			hint = "add " + f.name + ":"
		}
		d.fail(n, kp, hint, "missing key %s in %s", f.name, info.noun)
	}
	if info.line >= 0 {
		v.Field(info.line).SetInt(int64(n.Line))
	}
}

// field is a key of a struct: its YAML name and field index.
type field struct {
	name     string
	index    int
	required bool
}

// structInfo describes the keys of a struct type.
type structInfo struct {
	noun      string // what it is, for messages: "a project"
	fields    []field
	names     []string          // the keys, in order
	byName    map[string]field  // by key
	forbidden map[string]string // keys the file must not give → hint
	line      int               // index of the line field, or -1
}

// structOf lists the keys of struct type t; the same info for every value
// of the type (callers only read it).
func (d *decoder) structOf(t reflect.Type) *structInfo {
	if info, ok := d.structs[t]; ok {
		return info
	}
	if d.structs == nil {
		d.structs = map[reflect.Type]*structInfo{}
	}
	info := &structInfo{noun: d.opts.Nouns[t], byName: map[string]field{}, forbidden: d.opts.Forbidden[t], line: -1}
	if info.noun == "" {
		info.noun = strings.ToLower(t.Name())
	}
	for i := range t.NumField() {
		if sf := t.Field(i); sf.Type.Kind() == reflect.Int && contains(strings.Split(sf.Tag.Get(tagKey), ","), "line") {
			info.line = i
		}
	}
	for _, k := range Keys(t, d.opts) {
		f := field{name: k.Name, index: k.Index, required: k.Required}
		info.fields = append(info.fields, f)
		info.names = append(info.names, k.Name)
		info.byName[k.Name] = f
	}
	d.structs[t] = info
	return info
}

// Key is a key of a struct type, as Decode reads it.
type Key struct {
	Name     string // the yaml tag's name
	Index    int    // of the struct field
	Type     reflect.Type
	Required bool // strictyaml:"required"
}

// Keys lists the keys Decode reads into struct type t, in field order,
// leaving out those opts forbid: what a schema of the file describes.
func Keys(t reflect.Type, opts Options) []Key {
	var keys []Key
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "-" || name == "" || !sf.IsExported() {
			continue
		}
		if _, no := opts.Forbidden[t][name]; no {
			continue
		}
		keys = append(keys, Key{Name: name, Index: i, Type: sf.Type,
			Required: contains(strings.Split(sf.Tag.Get(tagKey), ","), "required")})
	}
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
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
