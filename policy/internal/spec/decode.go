package spec

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

	"go.yaml.in/yaml/v3"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/strictyaml"
)

// Load reads and parses a policy file (see [Parse]). A file that cannot be
// read is an error wrapping the os error; a file with problems is
// [Diagnostics].
func Load(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes a policy file strictly, validates it, and returns it with
// its defaults filled in (see [Policy.ApplyDefaults]) and the position of
// every value in Positions. file names the file in diagnostics.
//
// Strict means that YAML syntax errors, a second document, an unknown key
// (with the known key it is closest to, if any), a key given twice, a
// required key left out, a value of the wrong type (a string where a
// number belongs, "yes" for true, a number where a duration belongs) and
// YAML merge keys are errors, as is everything [Policy.Validate] finds.
// On any problem Parse returns nil and all the problems as [Diagnostics],
// each with its line and column, sorted. Validation problems of a value
// that could not be decoded are left out: they would only repeat it.
// A syntax error stops the decoding, so it comes alone.
func Parse(file string, data []byte) (*Policy, error) {
	d := &decoder{file: file, data: data, pos: Positions{}, taint: map[string]bool{}}
	root := d.document()
	if root == nil {
		return nil, d.diags
	}
	var p Policy
	d.value(root, reflect.ValueOf(&p).Elem(), "")
	p.Positions = d.pos
	if d.stopped {
		// What was decoded is a fraction of the file: its problems
		// would mislead.
		return nil, finish(d.diags)
	}
	for _, v := range p.Validate(file) {
		if !d.tainted(v.Path) {
			d.diags = append(d.diags, v)
		}
	}
	if len(d.diags) > 0 {
		return nil, finish(d.diags)
	}
	p.ApplyDefaults()
	return &p, nil
}

// maxDiagnostics bounds the problems reported for one file: past it, the
// rest are noise.
const maxDiagnostics = 100

// finish sorts ds and cuts it at maxDiagnostics, saying how many more
// there were.
func finish(ds Diagnostics) Diagnostics {
	ds.Sort()
	if len(ds) <= maxDiagnostics {
		return ds
	}
	last := ds[maxDiagnostics-1]
	return append(ds[:maxDiagnostics:maxDiagnostics], Diagnostic{
		File: last.File, Line: last.Line, Col: last.Col,
		Msg:  fmt.Sprintf("and %d more problems", len(ds)-maxDiagnostics),
		Hint: "fix these first",
	})
}

// maxExpanded bounds the values that aliases may expand to, so that
// aliases of aliases cannot make a small file take forever (a file
// without aliases is bounded by its size).
const maxExpanded = 100_000

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
	diags    Diagnostics
	pos      Positions
	taint    map[string]bool // paths of values that could not be decoded
	inAlias  int             // depth of aliases being expanded
	outer    *yaml.Node      // the outermost alias being expanded
	expanded int             // values visited through aliases
	stopped  bool            // maxExpanded reached
}

// add reports a problem of the value at path, located at node n.
func (d *decoder) add(n *yaml.Node, path, hint, format string, args ...any) {
	d.diags = append(d.diags, Diagnostic{
		File: d.file, Line: n.Line, Col: n.Column, Path: path,
		Msg: fmt.Sprintf(format, args...), Hint: hint,
	})
}

// bad reports a value that could not be decoded: Validate's findings
// about it are dropped.
func (d *decoder) bad(n *yaml.Node, path, hint, format string, args ...any) {
	d.add(n, path, hint, format, args...)
	d.taint[path] = true
}

// tainted reports whether path is within a value that could not be
// decoded, or is one that was left out for a misspelt key.
func (d *decoder) tainted(path string) bool {
	for ; ; path = strictyaml.Parent(path) {
		if d.taint[path] {
			return true
		}
		if path == "" {
			return false
		}
	}
}

// document parses the YAML and returns the root value, or nil after
// reporting why there is none.
func (d *decoder) document() *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(d.data))
	var doc yaml.Node
	err := decodeNode(dec, &doc)
	switch {
	case errors.Is(err, io.EOF):
		d.emptyDocument()
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
		d.add(at, "", "a policy file holds one document: remove the '---' and what follows, or merge it into the first",
			"a second YAML document")
		return nil
	}
	if len(doc.Content) != 1 || isNull(doc.Content[0]) {
		d.emptyDocument()
		return nil
	}
	return doc.Content[0]
}

func (d *decoder) emptyDocument() {
	d.diags = append(d.diags, Diagnostic{File: d.file, Line: 1, Col: 1, Msg: "empty policy file",
		Hint: "start with apiVersion: " + APIVersion + " and kind: " + Kind + " (see etc/strata/policy.yaml)"})
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

var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntax reports a YAML syntax error. yaml.v3 gives only a line, and for
// parser errors the line before the problem or the start of the enclosing
// collection, so locate finds the line itself.
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
		Msg: "invalid YAML: " + msg, Hint: syntaxHint(msg, text)})
}

var unknownAnchor = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// maxLocate bounds the lines locate tries.
const maxLocate = 300

// locate returns the line of a syntax error: the first line, from the one
// yaml.v3 named on (or from the top for errors at the end of the input,
// which are about something opened earlier), such that the file up to it
// fails with the same message.
func (d *decoder) locate(reported int, msg string) int {
	lines := bytes.SplitAfter(d.data, []byte("\n"))
	n := len(lines)
	if n > 0 && len(lines[n-1]) == 0 {
		n--
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
// message and the text of the line.
func syntaxHint(msg, line string) string {
	indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
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

// Types the walk treats as scalars of their own.
var (
	durationType     = reflect.TypeFor[Duration]()
	ruleDurationType = reflect.TypeFor[reclaimrules.Duration]()
	ruleType         = reflect.TypeFor[reclaimrules.Rule]()
	specPkg          = reflect.TypeFor[Policy]().PkgPath()
)

// value decodes node n into v, whose path is path.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	if d.stopped {
		return
	}
	if d.inAlias > 0 {
		if d.expanded++; d.expanded > maxExpanded {
			d.stopped = true
			d.bad(d.outer, path, "write the values out: a policy is not that large",
				"aliases expand to more than %d values", maxExpanded)
			return
		}
	}
	if _, seen := d.pos[path]; !seen {
		d.pos[path] = Pos{Line: n.Line, Col: n.Column}
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
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
			d.bad(n, path, "give the item a value, or remove the empty '-' line", "%s has no value", keyName(path))
		default:
			d.bad(n, path, "give a value, or remove the key", "%s has no value", keyName(path))
		}
		return
	}
	switch {
	case t == durationType:
		d.duration(n, path, func(s string) error { return v.Addr().Interface().(*Duration).UnmarshalText([]byte(s)) },
			durationHint)
	case t == ruleDurationType:
		d.duration(n, path, func(s string) error {
			return v.Addr().Interface().(*reclaimrules.Duration).UnmarshalText([]byte(s))
		}, `write a number with a unit, such as "90s", "30m" or "1h30m"`)
	case t.Kind() == reflect.String:
		if d.scalar(n, path, "a string", "!!str") {
			v.SetString(n.Value)
		}
	case t.Kind() == reflect.Bool:
		if d.scalar(n, path, "true or false", "!!bool") {
			var b bool
			d.decodeScalar(n, path, &b)
			v.SetBool(b)
		}
	case t.Kind() == reflect.Int:
		if d.scalar(n, path, "a whole number", "!!int") {
			var i int
			d.decodeScalar(n, path, &i)
			v.SetInt(int64(i))
		}
	case t.Kind() == reflect.Float64:
		if d.scalar(n, path, "a number", "!!int", "!!float") {
			var f float64
			d.decodeScalar(n, path, &f)
			v.SetFloat(f)
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
			d.value(val, elem, join(path, k.Value))
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(t.Key()), elem)
		}
		v.Set(m)
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			if path == "" {
				d.bad(n, path, "start with apiVersion: "+APIVersion+" and kind: "+Kind+" (see etc/strata/policy.yaml)",
					"a policy must be a mapping of keys to values, not %s", describe(n))
				return
			}
			d.mismatch(n, path, "a mapping")
			return
		}
		d.object(n, v, path)
	default:
		panic("spec: no YAML rule for " + t.String())
	}
}

// isNull reports whether n is a YAML null: ~, null, or nothing at all.
func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// duration decodes a duration scalar with set.
func (d *decoder) duration(n *yaml.Node, path string, set func(string) error, hint string) {
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
		d.bad(n, path, fmt.Sprintf("add a unit, such as %q: a bare number could be seconds, minutes or hours", n.Value+"m"),
			"%s: want a duration, got %s", keyName(path), n.Value)
		return
	}
	if !d.scalar(n, path, "a duration", "!!str") {
		return
	}
	if err := set(n.Value); err != nil {
		d.bad(n, path, hint, "%s: %q is not a duration", keyName(path), n.Value)
	}
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
func (d *decoder) decodeScalar(n *yaml.Node, path string, out any) {
	if err := n.Decode(out); err != nil {
		d.bad(n, path, "give a smaller number", "%s: %s is out of range", keyName(path), n.Value)
	}
}

// mismatch reports a value of the wrong type.
func (d *decoder) mismatch(n *yaml.Node, path, want string) {
	hint := typeHint(n, want)
	if n.Style&yaml.TaggedStyle != 0 {
		hint = "remove the tag " + n.Tag + ": a policy uses no YAML tags"
	}
	d.bad(n, path, hint, "%s: want %s, got %s", keyName(path), want, describe(n))
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
		return `write a duration with a unit, such as "30m" or "36h"`
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

// keyName is the last key of a path, for messages: "gpus",
// "members[2]", or "the policy" for the root.
func keyName(path string) string {
	if path == "" {
		return "the policy"
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// key checks a mapping key: a scalar, not a merge key, not seen before.
func (d *decoder) key(k *yaml.Node, path string, seen map[string]*yaml.Node) bool {
	switch {
	case k.Kind != yaml.ScalarNode:
		d.bad(k, path, "write a plain name before the ':'", "a key must be a name, not %s", describe(k))
		return false
	case k.ShortTag() == "!!merge":
		d.bad(k, path, "write the keys out: strict decoding must see every key where it applies (anchors and aliases of whole values are fine)",
			"merge keys (<<) are not supported")
		return false
	}
	if first, dup := seen[k.Value]; dup {
		d.bad(k, join(path, k.Value), "remove one of them: YAML would keep only one",
			"key %s is given twice (first at %d:%d)", k.Value, first.Line, first.Column)
		return false
	}
	seen[k.Value] = k
	return true
}

// object decodes a mapping into struct v.
func (d *decoder) object(n *yaml.Node, v reflect.Value, path string) {
	info := structOf(v.Type())
	seen := map[string]*yaml.Node{}
	suggested := map[string]bool{} // keys an unknown key was taken for
	merged := false                // a merge key may have given any key
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		merged = merged || k.ShortTag() == "!!merge"
		if !d.key(k, path, seen) {
			continue
		}
		kp := join(path, k.Value)
		f, known := info.byName[k.Value]
		if !known {
			if hint, forbidden := info.forbidden[k.Value]; forbidden {
				d.add(k, kp, hint, "%s is not allowed in %s", k.Value, info.noun)
				continue
			}
			if guess := strictyaml.Closest(k.Value, info.names); guess != "" {
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
		if !f.required || seen[f.name] != nil {
			continue
		}
		kp := join(path, f.name)
		if suggested[f.name] || merged {
			// The misspelt or merge key says it already.
			d.taint[kp] = true
			continue
		}
		d.bad(n, kp, requiredHint(kp, f.name), "missing key %s in %s", f.name, info.noun)
	}
	if info.line >= 0 {
		v.Field(info.line).SetInt(int64(n.Line))
	}
}

// requiredHint says what to write for a required key left out.
func requiredHint(path, key string) string {
	switch key {
	case "apiVersion":
		return "start the file with apiVersion: " + APIVersion
	case "kind":
		return "add kind: " + Kind
	case "cluster":
		return "add cluster: with name: the ClusterName of slurm.conf"
	case "classes":
		return "add the workload classes (train, batch, interactive, serve): every job runs in one"
	case "tenants":
		return "add at least one tenant with its projects"
	case "partition":
		return "add partition: the Slurm partition the jobs of this class run in"
	case "projects":
		return "add projects: (the tenant's jobs run in its projects' accounts)"
	case "members":
		return "add members: (an empty list [] for none yet)"
	case "user":
		return "add user: the Unix user name"
	case "gpus", "replicas":
		return "add gpus: and replicas: (0 for none)"
	case "path":
		return "add path: the absolute path of the project directory"
	case "filesystem":
		return "add filesystem: xfs or lustre"
	case "hard_gb":
		return "add hard_gb: the hard limit in GiB"
	case "nodes":
		return "add nodes: the NodeNames of slurm.conf in the partition, such as gpu[001-032]"
	case "name":
		if strings.HasPrefix(path, "cluster") {
			return "add name: the ClusterName of slurm.conf"
		}
		return "add name: lowercase letters, digits, '_' and '-', starting with a letter"
	}
	return "add " + key + ":"
}

// field is a key of a struct: its YAML name, field index and type.
type field struct {
	name     string
	index    int
	typ      reflect.Type
	required bool
}

// structInfo describes the keys of a struct type.
type structInfo struct {
	noun      string // what it is, for messages: "a project"
	fields    []field
	names     []string          // the keys, in order
	byName    map[string]field  // by key
	forbidden map[string]string // keys of the type that the policy must not give → hint
	line      int               // index of the Line field, or -1
}

// nouns name the structs in messages.
var nouns = map[reflect.Type]string{
	reflect.TypeFor[Policy]():                   "the policy",
	reflect.TypeFor[Cluster]():                  "cluster",
	reflect.TypeFor[Partition]():                "a partition",
	reflect.TypeFor[Class]():                    "a class",
	reflect.TypeFor[Tenant]():                   "a tenant",
	reflect.TypeFor[Project]():                  "a project",
	reflect.TypeFor[Member]():                   "a member",
	reflect.TypeFor[Limits]():                   "limits",
	reflect.TypeFor[Serving]():                  "serving",
	reflect.TypeFor[Disk]():                     "disk",
	ruleType:                                    "a reclaim rule",
	reflect.TypeFor[reclaimrules.IdleDef]():     "idle",
	reflect.TypeFor[reclaimrules.PartialIdle](): "partial_idle",
	reflect.TypeFor[reclaimrules.Signal]():      "signal",
}

// ruleForbidden are the keys of a reclaim rule that strata-policy fills.
var ruleForbidden = map[string]string{
	"name":  "remove it: strata-policy names the rule after its class",
	"match": "remove it: strata-policy matches the rule to the jobs of its class",
}

// structOf lists the keys of struct type t. Keys without omitempty are
// required, in this package's types only: the reclaim rule's are all
// optional, with defaults.
func structOf(t reflect.Type) structInfo {
	info := structInfo{noun: nouns[t], byName: map[string]field{}, line: -1}
	if info.noun == "" {
		info.noun = strings.ToLower(t.Name())
	}
	if t == ruleType {
		info.forbidden = ruleForbidden
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("yaml")
		if tag == "-" {
			if sf.Name == "Line" && sf.Type.Kind() == reflect.Int {
				info.line = i
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if _, no := info.forbidden[name]; no {
			continue
		}
		f := field{name: name, index: i, typ: sf.Type,
			required: t.PkgPath() == specPkg && !strings.Contains(opts, "omitempty")}
		info.fields = append(info.fields, f)
		info.names = append(info.names, name)
		info.byName[name] = f
	}
	return info
}
