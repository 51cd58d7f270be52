package reclaimrules

import "github.com/strata-hpc/strata/internal/strictjson"

// FieldError is one problem of a rules document: its JSON path
// ("rules[2].signal.name"), its line and column when known, and the
// message. It prints as "line:col: path: message", so that a caller can
// prefix the file name.
type FieldError = strictjson.FieldError

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
	var r Rules
	doc, err := strictjson.Decode(data, &r, `want a JSON object with "apiVersion": "`+APIVersion+`" and "kind": "`+Kind+`"`)
	if err != nil {
		return Rules{}, err
	}
	if errs := r.Validate(); len(errs) > 0 {
		return Rules{}, doc.Locate(errs)
	}
	return r.WithDefaults(), nil
}
