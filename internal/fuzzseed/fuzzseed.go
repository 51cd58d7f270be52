// Package fuzzseed cuts captured documents (slurmrestd and Prometheus
// answers, shipped YAML files) into small fuzz seeds that keep their
// shape. A seed of several kilobytes makes Go's fuzzer spend its time
// minimizing each new input it finds, which costs thousands of runs of
// a kilobytes-long input, and so barely explore: the shipped files stay
// the unit tests' inputs, their small cuts seed the fuzzers.
package fuzzseed

import (
	"bytes"
	"encoding/json"
	"strings"
)

// JSON cuts every array of a JSON document to its first n elements and
// drops the members of objects whose value is null, "", [] or {}; the
// result is compact. A document that is not JSON comes back as it is.
func JSON(data []byte, n int) []byte {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // 9223372036854775807 stays itself
	var v any
	if err := dec.Decode(&v); err != nil {
		return data
	}
	b, err := json.Marshal(cut(v, n))
	if err != nil {
		return data
	}
	return b
}

func cut(v any, n int) any {
	switch x := v.(type) {
	case []any:
		x = x[:min(n, len(x))]
		for i := range x {
			x[i] = cut(x[i], n)
		}
		return x
	case map[string]any:
		for k, e := range x {
			e = cut(e, n)
			if empty(e) {
				delete(x, k)
				continue
			}
			x[k] = e
		}
		return x
	}
	return v
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// YAML drops the comment lines and blank lines of a YAML document (a
// comment after a value stays: it may be inside a string).
func YAML(data []byte) []byte {
	var b strings.Builder
	for line := range strings.SplitAfterSeq(string(data), "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		b.WriteString(line)
	}
	return []byte(b.String())
}
