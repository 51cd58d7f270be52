// Package strictjson decodes the JSON contracts Strata's parts exchange
// (the tenant map, and any versioned file a part renders for another)
// strictly, and reports every problem of a document at once, each with its
// line, column and JSON path, which encoding/json does not: it stops at the
// first problem, without a path or a position.
//
// Strict means: malformed JSON, an unknown field, a field given twice, a
// value of the wrong type (a string where a number belongs, a fraction
// where a count belongs, null for a non-list) and data after the document
// are errors. A syntax error stops the walk, so it comes alone.
//
// [Decode] walks the document against the Go type it decodes into, so a
// contract declares its format once, as a Go type with json tags. Its
// validation problems get their positions from the same walk
// ([Document.Locate]).
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// FieldError is one problem of a document.
type FieldError struct {
	// Path is the JSON path of the field: "tenants[2].projects[0].account";
	// "" for the document itself.
	Path string
	// Line and Col (1-based, Col in bytes) locate the problem in the input;
	// both are 0 when unknown.
	Line, Col int
	Msg       string
}

// Error formats the problem as "line:col: path: message", leaving out the
// parts that are unknown, so that a caller can prefix the file name:
// "/etc/strata/tenants.json:7:9: tenants[0].acount: unknown field …".
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", e.Line, e.Col)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// MaxErrors bounds the problems reported for one document: past it, the
// rest are noise, and counting lines for each would cost time.
const MaxErrors = 50

// Document is a decoded document: where each of its values was, for
// locating validation problems.
type Document struct {
	data    []byte
	offsets map[string]int64 // JSON path → offset of its value
}

// Decode decodes data into v (a pointer to a struct) strictly. empty is the
// message for an empty document ("want a JSON object with …"). The error is
// an errors.Join of *FieldError, one per line when printed.
func Decode(data []byte, v any, empty string) (*Document, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic("strictjson: Decode needs a pointer to a struct, not " + rv.Type().String())
	}
	d := &decoder{doc: &Document{data: data, offsets: map[string]int64{}}}
	d.document(rv.Elem().Type(), empty)
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		// The walk checks everything the decoder does; this is a safety
		// net, not an expected path.
		return nil, fmt.Errorf("decode: %w", err)
	}
	return d.doc, nil
}

// Locate gives every *FieldError of errs the position of its path (or of
// the nearest enclosing value in the document: a missing field is reported
// at its object), keeps at most MaxErrors and joins them.
func (doc *Document) Locate(errs []error) error {
	more := len(errs) > MaxErrors
	errs = errs[:min(len(errs), MaxErrors)]
	for _, err := range errs {
		var fe *FieldError
		if errors.As(err, &fe) && fe.Line == 0 {
			fe.Line, fe.Col = doc.position(fe.Path)
		}
	}
	if more {
		errs = append(errs, &FieldError{Msg: "too many problems: fix these first"})
	}
	return errors.Join(errs...)
}

// InFile puts the file's path before every problem of a joined error:
// "path:3:4: …" for a *FieldError with a position, "path: …" for any
// other, keeping each *FieldError reachable through errors.As.
func InFile(path string, err error) error {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		var fe *FieldError
		if errors.As(e, &fe) && fe.Line > 0 {
			out[i] = fmt.Errorf("%s:%w", path, e)
		} else {
			out[i] = fmt.Errorf("%s: %w", path, e)
		}
	}
	return errors.Join(out...)
}

func (doc *Document) position(path string) (int, int) {
	for {
		if off, ok := doc.offsets[path]; ok {
			return doc.lineCol(off)
		}
		if path == "" {
			return 0, 0
		}
		path = parent(path)
	}
}

func (doc *Document) lineCol(off int64) (int, int) {
	off = min(max(off, 0), int64(len(doc.data)))
	before := doc.data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// parent strips the last ".field" or "[index]" of a path.
func parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// decoder walks the JSON token stream against a Go type.
type decoder struct {
	doc   *Document
	dec   *json.Decoder
	errs  []error
	fatal bool // a syntax error: nothing more can be read
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

func (d *decoder) document(t reflect.Type, empty string) {
	data := d.doc.data
	d.dec = json.NewDecoder(bytes.NewReader(data))
	d.dec.UseNumber()
	if d.skip(0) >= int64(len(data)) {
		d.errorAt(0, "", "empty document: "+empty)
		return
	}
	d.value("", t)
	if d.fatal {
		return
	}
	off := d.skip(d.dec.InputOffset())
	switch _, err := d.dec.Token(); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.syntax(err, off)
	default:
		d.errorAt(off, "", "unexpected data after the document: a file holds one JSON object")
	}
}

// skip returns the offset of the next token at or after off: past white
// space and the separators json.Decoder leaves unread.
func (d *decoder) skip(off int64) int64 {
	data := d.doc.data
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\n', '\r', ':', ',':
			off++
		default:
			return off
		}
	}
	return off
}

// token reads the next token and the offset where it starts.
func (d *decoder) token() (json.Token, int64, bool) {
	off := d.skip(d.dec.InputOffset())
	tok, err := d.dec.Token()
	if err != nil {
		d.syntax(err, off)
		return nil, off, false
	}
	return tok, off, true
}

func (d *decoder) syntax(err error, off int64) {
	d.fatal = true
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		d.errorAt(d.badByte(se, off), "", "invalid JSON: "+strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		d.errorAt(int64(len(d.doc.data)), "", "invalid JSON: the document ends too early (a missing } or ]?)")
	default:
		d.errorAt(off, "", "invalid JSON: "+err.Error())
	}
}

// badByte returns the offset of the character a syntax error names
// ("invalid character '}' …"): json.SyntaxError's Offset is sometimes that
// character, sometimes the token before it.
func (d *decoder) badByte(se *json.SyntaxError, tokenStart int64) int64 {
	data := d.doc.data
	from := min(max(min(tokenStart, se.Offset), 0), int64(len(data)))
	_, rest, found := strings.Cut(se.Error(), "invalid character '")
	if !found {
		return min(se.Offset, int64(len(data)))
	}
	// The character is written as a Go rune literal: '}', '\'', '\x01'.
	var c string
	for i := 2; i <= len(rest) && i < 12 && c == ""; i++ {
		if rest[i-1] == '\'' {
			c, _ = strconv.Unquote("'" + rest[:i])
		}
	}
	if c == "" {
		return min(se.Offset, int64(len(data)))
	}
	if i := bytes.Index(data[from:], []byte(c)); i >= 0 {
		return from + int64(i)
	}
	return min(se.Offset, int64(len(data)))
}

func (d *decoder) errorAt(off int64, path, msg string) {
	if len(d.errs) == MaxErrors {
		d.errs = append(d.errs, &FieldError{Msg: "too many problems: fix these first"})
	}
	if len(d.errs) > MaxErrors {
		return
	}
	line, col := d.doc.lineCol(off)
	d.errs = append(d.errs, &FieldError{Path: path, Line: line, Col: col, Msg: msg})
}

// value reads one value of type t at path.
func (d *decoder) value(path string, t reflect.Type) {
	tok, off, ok := d.token()
	if !ok {
		return
	}
	if _, seen := d.doc.offsets[path]; !seen {
		d.doc.offsets[path] = off
	}
	if tok == nil {
		if k := t.Kind(); k != reflect.Slice && k != reflect.Map && k != reflect.Pointer {
			d.errorAt(off, path, "null: give a value or leave the field out")
		}
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem() // an optional value: present, it is its element
	}
	switch {
	case reflect.PointerTo(t).Implements(textUnmarshaler):
		// A scalar of its own (a role, a duration): a string its
		// UnmarshalText accepts.
		parse := func(s string) error {
			return reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
		}
		switch v := tok.(type) {
		case string:
			if err := parse(v); err != nil {
				d.errorAt(off, path, err.Error())
			}
		case json.Number, bool:
			// 1800 for a duration: what the type says of "1800" tells
			// how to write it.
			lit := fmt.Sprint(v)
			if err := parse(lit); err != nil {
				d.errorAt(off, path, fmt.Sprintf("want a string, got %s: %v", lit, err))
			} else {
				d.errorAt(off, path, fmt.Sprintf("want a string, got %s: write it in quotes", lit))
			}
		default:
			d.mismatch(off, path, "a string", tok)
		}
	case t.Kind() == reflect.String:
		if _, isString := tok.(string); !isString {
			d.mismatch(off, path, "a string", tok)
		}
	case t.Kind() == reflect.Bool:
		if _, isBool := tok.(bool); !isBool {
			d.mismatch(off, path, "true or false", tok)
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		n, isNumber := tok.(json.Number)
		if !isNumber {
			d.mismatch(off, path, "a whole number", tok)
		} else if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			d.errorAt(off, path, fmt.Sprintf("want a whole number, got %s", n))
		}
	case t.Kind() == reflect.Float64:
		n, isNumber := tok.(json.Number)
		if !isNumber {
			d.mismatch(off, path, "a number", tok)
		} else if _, err := strconv.ParseFloat(string(n), 64); err != nil {
			d.errorAt(off, path, fmt.Sprintf("%s is out of range", n))
		}
	case t.Kind() == reflect.Slice:
		if tok != json.Delim('[') {
			d.mismatch(off, path, "a list", tok)
			return
		}
		for i := 0; d.dec.More(); i++ {
			d.value(fmt.Sprintf("%s[%d]", path, i), t.Elem())
			if d.fatal {
				return
			}
		}
		d.token() // ]
	case t.Kind() == reflect.Struct:
		if tok != json.Delim('{') {
			d.mismatch(off, path, "an object", tok)
			return
		}
		d.object(path, t)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		if tok != json.Delim('{') {
			d.mismatch(off, path, "an object", tok)
			return
		}
		d.entries(path, t.Elem())
	default:
		panic("strictjson: no JSON rule for " + t.String())
	}
}

// object reads the fields of an object of struct type t; its { is read.
func (d *decoder) object(path string, t reflect.Type) {
	names, types := fields(t)
	seen := map[string]int64{}
	for d.dec.More() {
		tok, off, ok := d.token()
		if !ok {
			return
		}
		key, _ := tok.(string) // json.Decoder only gives strings here
		fp := join(path, key)
		if first, dup := seen[key]; dup {
			line, col := d.doc.lineCol(first)
			d.errorAt(off, fp, fmt.Sprintf("given twice (first at %d:%d)", line, col))
			d.skipValue()
		} else if ft, known := types[key]; !known {
			seen[key] = off
			d.errorAt(off, fp, "unknown field; the fields here are "+strings.Join(names, ", "))
			d.skipValue()
		} else {
			seen[key] = off
			d.value(fp, ft)
		}
		if d.fatal {
			return
		}
	}
	d.token() // }
}

// entries reads the entries of an object whose keys are names of its
// own (a map), each value of type elem; its { is read.
func (d *decoder) entries(path string, elem reflect.Type) {
	seen := map[string]int64{}
	for d.dec.More() {
		tok, off, ok := d.token()
		if !ok {
			return
		}
		key, _ := tok.(string)
		fp := join(path, key)
		if first, dup := seen[key]; dup {
			line, col := d.doc.lineCol(first)
			d.errorAt(off, fp, fmt.Sprintf("given twice (first at %d:%d)", line, col))
			d.skipValue()
		} else {
			seen[key] = off
			d.value(fp, elem)
		}
		if d.fatal {
			return
		}
	}
	d.token() // }
}

// fields lists the JSON names of struct type t in order, and their types;
// unexported fields and fields tagged "-" are not part of the format.
func fields(t reflect.Type) ([]string, map[string]reflect.Type) {
	names := make([]string, 0, t.NumField())
	types := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
		types[name] = f.Type
	}
	return names, types
}

// mismatch reports a value of the wrong type and skips it.
func (d *decoder) mismatch(off int64, path, want string, tok json.Token) {
	var got string
	switch v := tok.(type) {
	case json.Delim:
		got = "an object"
		if v == '[' {
			got = "a list"
		}
		d.skipRest()
	case string:
		got = strconv.Quote(v)
	case json.Number:
		got = v.String()
	case bool:
		got = strconv.FormatBool(v)
	}
	d.errorAt(off, path, fmt.Sprintf("want %s, got %s", want, got))
}

// skipValue reads and drops one value.
func (d *decoder) skipValue() {
	tok, _, ok := d.token()
	if !ok {
		return
	}
	if tok == json.Delim('{') || tok == json.Delim('[') {
		d.skipRest()
	}
}

// skipRest reads and drops the rest of an object or list whose opening
// delimiter has been read.
func (d *decoder) skipRest() {
	for depth := 1; depth > 0; {
		tok, _, ok := d.token()
		if !ok {
			return
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

// Unique checks a list of names in a contract: none empty (or only
// spaces), none twice. Each problem is a FieldError at the item's path
// ("exempt.qos[1]"); what names the items in the message ("name",
// "user name").
func Unique(path string, list []string, what string) []error {
	var errs []error
	seen := make(map[string]bool, len(list))
	for i, s := range list {
		at := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case strings.TrimSpace(s) == "":
			errs = append(errs, &FieldError{Path: at, Msg: "empty " + what})
		case seen[s]:
			errs = append(errs, &FieldError{Path: at, Msg: fmt.Sprintf("%q is listed twice", s)})
		}
		seen[s] = true
	}
	return errs
}
