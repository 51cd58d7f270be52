package collect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// promLabel is one label of a series.
type promLabel struct{ name, value string }

// promLabels is a series' labels, in the order of the answer.
type promLabels []promLabel

// get returns the value of the label name; "" when there is none.
func (ls promLabels) get(name string) string {
	for _, l := range ls {
		if l.name == name {
			return l.value
		}
	}
	return ""
}

// set sets a label, as a map would: the last of a repeated name wins.
func (ls *promLabels) set(name, value string) {
	for i := range *ls {
		if (*ls)[i].name == name {
			(*ls)[i].value = value
			return
		}
	}
	*ls = append(*ls, promLabel{name, value})
}

// promResult is a matrix result's series, read by a scanner of its own:
// through encoding/json each series' labels were a map of fresh strings,
// the bulk of the cost of an answer for a thousand nodes. It reads what
// encoding/json would read into []struct{Metric map[string]string;
// Values promValues}; the strings repeated from series to series (label
// names, node names, metric names) are made once per answer.
type promResult []promSeries

// UnmarshalJSON reads the result array; encoding/json has checked that b
// is valid JSON.
func (r *promResult) UnmarshalJSON(b []byte) error {
	sc := pointScanner{b: b}
	if sc.literal("null") {
		*r = nil
		return nil
	}
	if !sc.expect('[') {
		return sc.fail("result: want an array")
	}
	out := make(promResult, 0, bytes.Count(b, []byte(`"values"`)))
	if sc.expect(']') {
		*r = out
		return nil
	}
	strs := map[string]string{}
	for {
		s, err := sc.series(strs)
		if err != nil {
			return err
		}
		out = append(out, s)
		if sc.expect(']') {
			break
		}
		if !sc.expect(',') {
			return sc.fail("result: want , or ]")
		}
	}
	*r = out
	return nil
}

// series reads one {"metric": {...}, "values": [...]} object; keys are
// matched without regard to case, as encoding/json matches struct fields.
func (sc *pointScanner) series(strs map[string]string) (promSeries, error) {
	var s promSeries
	if !sc.expect('{') {
		return s, sc.fail("series: want an object")
	}
	if sc.expect('}') {
		return s, nil
	}
	for {
		key, err := sc.key()
		if err != nil {
			return s, err
		}
		if !sc.expect(':') {
			return s, sc.fail("series: want :")
		}
		sc.space()
		start := sc.off
		if err := sc.skipValue(); err != nil {
			return s, err
		}
		v := sc.b[start:sc.off]
		switch {
		case bytes.EqualFold(key, []byte("metric")):
			err = s.labels(v, strs)
		case bytes.EqualFold(key, []byte("values")):
			err = s.Values.UnmarshalJSON(v)
		}
		if err != nil {
			return s, err
		}
		if sc.expect('}') {
			return s, nil
		}
		if !sc.expect(',') {
			return s, sc.fail("series: want , or }")
		}
	}
}

// labels reads a metric object into s.Metric as encoding/json reads one
// into a map[string]string: null makes it nil, another object adds to it.
func (s *promSeries) labels(v []byte, strs map[string]string) error {
	sc := pointScanner{b: v}
	if sc.literal("null") {
		s.Metric = nil
		return nil
	}
	if !sc.expect('{') {
		return sc.fail("metric: want an object")
	}
	if s.Metric == nil {
		s.Metric = make(promLabels, 0, 8)
	}
	if sc.expect('}') {
		return nil
	}
	for {
		name, err := sc.str(strs)
		if err != nil {
			return err
		}
		if !sc.expect(':') {
			return sc.fail("metric: want :")
		}
		var value string
		if !sc.literal("null") { // null is "" in a map of strings
			if value, err = sc.str(strs); err != nil {
				return err
			}
		}
		s.Metric.set(name, value)
		if sc.expect('}') {
			return nil
		}
		if !sc.expect(',') {
			return sc.fail("metric: want , or }")
		}
	}
}

// str reads a JSON string, made once per answer for each value.
func (sc *pointScanner) str(strs map[string]string) (string, error) {
	sc.space()
	start := sc.off
	if sc.off >= len(sc.b) || sc.b[sc.off] != '"' {
		return "", sc.fail("want a string")
	}
	if err := sc.skipValue(); err != nil {
		return "", err
	}
	raw := sc.b[start:sc.off]
	if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) { // as encoding/json reads them
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("label: %w", err)
		}
		return s, nil
	}
	if s, ok := strs[string(raw[1:len(raw)-1])]; ok {
		return s, nil
	}
	s := string(raw[1 : len(raw)-1])
	strs[s] = s
	return s, nil
}
