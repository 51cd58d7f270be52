package reclaimrules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/internal/duration"
)

// FieldError is one problem of a rules document.
type FieldError struct {
	// Path is the JSON path of the field: "rules[2].signal.name"; "" for
	// the document itself.
	Path string
	// Line and Col (1-based, Col in bytes) locate the problem in Parse's
	// input; both are 0 when unknown (errors from Validate on a value).
	Line, Col int
	Msg       string
}

// Error formats the problem as "line:col: path: message", leaving out the
// parts that are unknown, so that a caller can prefix the file name:
// "/etc/strata/reclaim-rules.json:7:9: rules[0].idle.windw: unknown field …".
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

// Parse decodes a reclaim rules document strictly, validates it and fills
// in the defaults.
//
// Strict means: malformed JSON, an unknown field, a field given twice, a
// value of the wrong type (a number where a duration string belongs, a
// fraction where a count belongs, null for a non-list) and data after the
// document are errors. Every problem of the document is reported at once:
// the error is an errors.Join of *FieldError, one per line when printed,
// each with its line, column and JSON path; a syntax error stops the
// decoding, so it comes alone.
func Parse(data []byte) (Rules, error) {
	d := &decoder{data: data, offsets: map[string]int64{}}
	d.document()
	if len(d.errs) > 0 {
		return Rules{}, errors.Join(d.errs...)
	}
	var r Rules
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		// The walk above checks everything the decoder does; this is a
		// safety net, not an expected path.
		return Rules{}, fmt.Errorf("decode reclaim rules: %w", err)
	}
	if errs := r.Validate(); len(errs) > 0 {
		more := len(errs) > maxErrors
		errs = errs[:min(len(errs), maxErrors)]
		for _, err := range errs {
			var fe *FieldError
			if errors.As(err, &fe) {
				fe.Line, fe.Col = d.position(fe.Path)
			}
		}
		if more {
			errs = append(errs, &FieldError{Msg: "too many problems: fix these first"})
		}
		return Rules{}, errors.Join(errs...)
	}
	return r.WithDefaults(), nil
}

// decoder walks the JSON token stream against the Go types, so that it can
// report every unknown, repeated or mistyped field with its path and
// position, which encoding/json does not (it stops at the first, without a
// path or a position).
type decoder struct {
	data    []byte
	dec     *json.Decoder
	errs    []error
	offsets map[string]int64 // JSON path → offset of its value (or key)
	fatal   bool             // a syntax error: nothing more can be read
}

var (
	rulesType    = reflect.TypeFor[Rules]()
	durationType = reflect.TypeFor[Duration]()
)

func (d *decoder) document() {
	d.dec = json.NewDecoder(bytes.NewReader(d.data))
	d.dec.UseNumber()
	if d.skip(0) >= int64(len(d.data)) {
		d.errorAt(0, "", `empty document: want a JSON object with "apiVersion": "`+APIVersion+`" and "kind": "`+Kind+`"`)
		return
	}
	d.value("", rulesType)
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
	for off < int64(len(d.data)) {
		switch d.data[off] {
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
		d.errorAt(int64(len(d.data)), "", "invalid JSON: the document ends too early (a missing } or ]?)")
	default:
		d.errorAt(off, "", "invalid JSON: "+err.Error())
	}
}

// badByte returns the offset of the character a syntax error names
// ("invalid character '}' …"): json.SyntaxError's Offset is sometimes that
// character, sometimes the token before it.
func (d *decoder) badByte(se *json.SyntaxError, tokenStart int64) int64 {
	from := min(max(min(tokenStart, se.Offset), 0), int64(len(d.data)))
	_, rest, found := strings.Cut(se.Error(), "invalid character '")
	if !found {
		return min(se.Offset, int64(len(d.data)))
	}
	// The character is written as a Go rune literal: '}', '\'', '\x01'.
	var c string
	for i := 2; i <= len(rest) && i < 12 && c == ""; i++ {
		if rest[i-1] == '\'' {
			c, _ = strconv.Unquote("'" + rest[:i])
		}
	}
	if c == "" {
		return min(se.Offset, int64(len(d.data)))
	}
	if i := bytes.Index(d.data[from:], []byte(c)); i >= 0 {
		return from + int64(i)
	}
	return min(se.Offset, int64(len(d.data)))
}

// maxErrors bounds the problems reported for one document: past it, the
// rest are noise, and counting lines for each would cost time.
const maxErrors = 50

func (d *decoder) errorAt(off int64, path, msg string) {
	if len(d.errs) == maxErrors {
		d.errs = append(d.errs, &FieldError{Msg: "too many problems: fix these first"})
	}
	if len(d.errs) > maxErrors {
		return
	}
	line, col := d.lineCol(off)
	d.errs = append(d.errs, &FieldError{Path: path, Line: line, Col: col, Msg: msg})
}

func (d *decoder) lineCol(off int64) (int, int) {
	off = min(max(off, 0), int64(len(d.data)))
	before := d.data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// position returns the line and column of path's value, or of the nearest
// enclosing value that was in the input (a missing field is reported at
// its object).
func (d *decoder) position(path string) (int, int) {
	for {
		if off, ok := d.offsets[path]; ok {
			return d.lineCol(off)
		}
		if path == "" {
			return 0, 0
		}
		path = parent(path)
	}
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

// value reads one value of type t at path.
func (d *decoder) value(path string, t reflect.Type) {
	tok, off, ok := d.token()
	if !ok {
		return
	}
	if _, seen := d.offsets[path]; !seen {
		d.offsets[path] = off
	}
	if tok == nil {
		if t.Kind() != reflect.Slice {
			d.errorAt(off, path, "null: give a value or leave the field out")
		}
		return
	}
	switch {
	case t == durationType:
		s, isString := tok.(string)
		if !isString {
			d.mismatch(off, path, `a duration string such as "30m"`, tok)
		} else if _, err := duration.Parse(s); err != nil {
			d.errorAt(off, path, err.Error())
		}
	case t.Kind() == reflect.String:
		if _, isString := tok.(string); !isString {
			d.mismatch(off, path, "a string", tok)
		}
	case t.Kind() == reflect.Bool:
		if _, isBool := tok.(bool); !isBool {
			d.mismatch(off, path, "true or false", tok)
		}
	case t.Kind() == reflect.Int:
		n, isNumber := tok.(json.Number)
		if !isNumber {
			d.mismatch(off, path, "a whole number", tok)
		} else if _, err := strconv.ParseInt(string(n), 10, strconv.IntSize); err != nil {
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
	default:
		panic("reclaimrules: no JSON rule for " + t.String())
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
			line, col := d.lineCol(first)
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

// fields lists the JSON names of struct type t in order, and their types.
func fields(t reflect.Type) ([]string, map[string]reflect.Type) {
	names := make([]string, 0, t.NumField())
	types := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
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
