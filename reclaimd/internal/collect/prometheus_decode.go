package collect

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
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

// promAnswer is what parseQueryRange reads of an answer, as
// encoding/json would read it into
//
//	struct {
//		Status, ErrorType, Error string
//		Data struct {
//			ResultType string
//			Result     []struct {
//				Metric map[string]string
//				Values [][2]... // [unix_seconds, "value"]
//			}
//		}
//	}
//
// in one pass (jscan): through encoding/json, the body was checked
// once, passed over again to find the result, and then each series' labels
// and values scanned once more each; and each series' labels were a
// map of fresh strings. Here the strings repeated from series to series
// (label names, node names, metric names) are made once per answer, and
// every series' points are carved from one array.
type promAnswer struct {
	status, errorType, error, resultType string
	result                               []promSeries
}

// promDecoder reads a query_range answer.
type promDecoder struct {
	jscan
	strs  map[string]string
	pts   []promPoint // the answer's points
	lbls  []promLabel // the answer's labels
	sizes promSizes
}

// promSizes are the sizes of an answer: what the next one's arrays are
// made for (a cycle's answer is the size of the last).
type promSizes struct{ series, points, labels, strs int }

// decodePromAnswer reads an answer; sizes, where not nil, sizes its
// arrays and is set to the answer's.
func decodePromAnswer(body []byte, sizes *promSizes) (promAnswer, error) {
	var a promAnswer
	d := promDecoder{jscan: jscan{b: body}}
	if sizes != nil {
		d.sizes = *sizes
	}
	d.strs = make(map[string]string, d.sizes.strs)
	d.pts = make([]promPoint, 0, max(64, d.sizes.points))
	d.lbls = make([]promLabel, 0, max(64, d.sizes.labels))
	err := d.answer(&a)
	if err == nil {
		err = d.end()
	}
	if err == nil && sizes != nil {
		*sizes = promSizes{series: len(a.result), points: len(d.pts), labels: len(d.lbls), strs: len(d.strs)}
	}
	return a, err
}

func (d *promDecoder) answer(a *promAnswer) error {
	return d.object("answer", func(key []byte) error {
		switch {
		case keyIs(key, "status"):
			return d.readString(&a.status, "status")
		case keyIs(key, "errortype"):
			return d.readString(&a.errorType, "errorType")
		case keyIs(key, "error"):
			return d.readString(&a.error, "error")
		case keyIs(key, "data"):
			return d.object("data", func(key []byte) error {
				switch {
				case keyIs(key, "resulttype"):
					return d.readString(&a.resultType, "resultType")
				case keyIs(key, "result"):
					return d.result(a)
				}
				return d.skip()
			})
		}
		return d.skip()
	})
}

// object reads an object or null (which changes nothing), handing each
// key to member, which reads its value.
func (d *promDecoder) object(what string, member func(key []byte) error) error {
	if d.null() {
		return nil
	}
	if d.peek() != '{' {
		return d.skipType(what)
	}
	empty, err := d.enter('{', what)
	if err != nil || empty {
		return err
	}
	for {
		key, err := d.key()
		if err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		if more, err := d.more('}'); err != nil || !more {
			return err
		}
	}
}

// result reads the result array. A repeated "result" key decodes into
// the series the one before it left, as encoding/json decodes into a
// slice it has filled.
func (d *promDecoder) result(a *promAnswer) error {
	if d.null() {
		a.result = nil
		return nil
	}
	if d.peek() != '[' {
		return d.skipType("result")
	}
	old := a.result
	empty, err := d.enter('[', "result")
	if err != nil {
		return err
	}
	if empty {
		a.result = []promSeries{}
		return nil
	}
	out := old[:0]
	if out == nil {
		out = make([]promSeries, 0, max(64, d.sizes.series))
	}
	for i := 0; ; i++ {
		var s promSeries
		if i < cap(old) {
			s = old[:cap(old)][i]
		}
		if err := d.series(&s); err != nil {
			return err
		}
		out = append(out, s)
		if more, err := d.more(']'); err != nil || !more {
			a.result = out
			return err
		}
	}
}

// series reads one {"metric": {...}, "values": [...]} object.
func (d *promDecoder) series(s *promSeries) error {
	return d.object("series", func(key []byte) error {
		switch {
		case keyIs(key, "metric"):
			return d.labels(s)
		case keyIs(key, "values"):
			return d.values(s)
		}
		return d.skip()
	})
}

// labels reads a metric object into s.Metric as encoding/json reads one
// into a map[string]string: null makes it nil, another object adds to it.
// The labels are carved from the answer's array.
func (d *promDecoder) labels(s *promSeries) error {
	if d.null() {
		s.Metric = nil
		return nil
	}
	if d.peek() != '{' {
		return d.skipType("metric")
	}
	start := len(d.lbls)
	d.lbls = append(d.lbls, s.Metric...) // a second metric object adds to the first
	err := d.object("metric", func(name []byte) error {
		n := d.intern(name)
		var value string
		switch d.peek() {
		case 'n':
			if !d.null() {
				return d.skipType("label")
			}
			// null is "" in a map of strings
		case '"':
			v, err := d.str()
			if err != nil {
				return err
			}
			value = v
		default:
			return d.skipType("label")
		}
		ls := promLabels(d.lbls[start:])
		ls.set(n, value)
		if len(ls) > len(d.lbls)-start {
			d.lbls = append(d.lbls, ls[len(ls)-1])
		}
		return nil
	})
	s.Metric = d.lbls[start:len(d.lbls):len(d.lbls)]
	return err
}

// str reads a string, made once per answer for each value.
func (d *promDecoder) str() (string, error) {
	raw, escaped, wide, err := d.jscan.str()
	if err != nil {
		return "", err
	}
	if escaped || wide && !utf8.Valid(raw) { // as encoding/json reads them
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("label: %w", err)
		}
		return s, nil
	}
	return d.intern(raw[1 : len(raw)-1]), nil
}

// intern gives the string of b, made once per answer.
func (d *promDecoder) intern(b []byte) string {
	if s, ok := d.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	d.strs[s] = s
	return s
}

// values reads a values array; its points are carved from one array for
// the whole answer. A repeated "values" key replaces the values.
func (d *promDecoder) values(s *promSeries) error {
	if d.null() {
		s.Values = nil
		return nil
	}
	if d.peek() != '[' {
		return d.skipType("values")
	}
	empty, err := d.enter('[', "values")
	if err != nil {
		return err
	}
	start := len(d.pts)
	if !empty {
		for {
			pt, err := d.point()
			if err != nil {
				return err
			}
			d.pts = append(d.pts, pt)
			more, err := d.more(']')
			if err != nil {
				return err
			}
			if !more {
				break
			}
		}
	}
	s.Values = d.pts[start:len(d.pts):len(d.pts)]
	return nil
}

// point reads [1795900000.25,"42"]. Prometheus writes values as strings,
// NaN, +Inf and -Inf among them, which ParseFloat reads.
func (d *promDecoder) point() (promPoint, error) {
	if d.peek() != '[' {
		return promPoint{}, d.errAt("point: want [time, \"value\"]")
	}
	d.off++
	var sec float64
	if !isNumber(d.peek()) {
		return promPoint{}, d.errAt("point: time is not Unix seconds")
	}
	start := d.off
	if has, err := d.readFloat(&sec, "point: time"); err != nil || !has || math.Abs(sec) > 253402300799 {
		// Year 1 to 9999 at most; anything else is not a sample time.
		d.off = start
		return promPoint{}, d.errAt("point: time is not Unix seconds")
	}
	if d.peek() != ',' {
		return promPoint{}, d.errAt("point: want [time, \"value\"]")
	}
	d.off++
	if d.peek() != '"' {
		return promPoint{}, d.errAt("point: want [time, \"value\"]")
	}
	start = d.off
	raw, escaped, _, err := d.jscan.str()
	if err != nil {
		return promPoint{}, err
	}
	var v float64
	if !escaped { // no number has an escape
		v, err = strconv.ParseFloat(string(raw[1:len(raw)-1]), 64)
	}
	if escaped || err != nil {
		d.off = start + 1
		return promPoint{}, d.errAt("point: value is not a number")
	}
	if d.peek() != ']' {
		return promPoint{}, d.errAt("point: want [time, \"value\"]")
	}
	d.off++
	return promPoint{ms: int64(math.Round(sec * 1e3)), v: v}, nil
}
