package slurmrest

import (
	"math"
	"strings"
	"time"
)

// NoVal is one of Slurm's optional numbers ({set, infinite, number}) after
// decoding: Set is false when Slurm has no value, Infinite when it means
// "no limit".
type NoVal struct {
	Set      bool
	Infinite bool
	Number   int64
}

// Value returns the number and whether it is a finite, set value.
func (n NoVal) Value() (int64, bool) { return n.Number, n.Set && !n.Infinite }

// The generated packages have one NoVal struct per width and parser, all of
// this shape; a conversion to it (struct tags included) decodes any of them,
// so this file is the only place that interprets them.
type (
	noValInt = struct {
		Infinite *bool  `json:"infinite,omitempty"`
		Number   *int64 `json:"number,omitempty"`
		Set      *bool  `json:"set,omitempty"`
	}
	noValFloat = struct {
		Infinite *bool    `json:"infinite,omitempty"`
		Number   *float64 `json:"number,omitempty"`
		Set      *bool    `json:"set,omitempty"`
	}
	tresWire = struct {
		Count *int64  `json:"count,omitempty"`
		Id    *int64  `json:"id,omitempty"` //nolint:revive // generated name
		Name  *string `json:"name,omitempty"`
		Type  string  `json:"type"`
	}
)

func noVal[T ~noValInt](p *T) NoVal {
	if p == nil {
		return NoVal{}
	}
	w := noValInt(*p)
	return NoVal{Set: deref(w.Set), Infinite: deref(w.Infinite), Number: deref(w.Number)}
}

func noValF[T ~noValFloat](p *T) (float64, bool) {
	if p == nil {
		return 0, false
	}
	w := noValFloat(*p)
	if deref(w.Infinite) {
		return math.Inf(1), true
	}
	return deref(w.Number), deref(w.Set)
}

// setNoVal builds a NoVal struct of any generated type.
func setNoVal[T ~noValInt](n int64) *T {
	t, v := true, n
	w := T(noValInt{Set: &t, Number: &v})
	return &w
}

func noValTime[T ~noValInt](p *T) time.Time {
	n := noVal(p)
	if v, ok := n.Value(); ok && v > 0 {
		return time.Unix(v, 0)
	}
	return time.Time{}
}

// noValMinutes decodes a time limit in minutes; 0 for unset or infinite,
// and for a number of minutes no time.Duration holds (some 290 years:
// no limit either), which would otherwise wrap to a negative limit.
func noValMinutes[T ~noValInt](p *T) time.Duration {
	if v, ok := noVal(p).Value(); ok && v > 0 && v <= math.MaxInt64/int64(time.Minute) {
		return time.Duration(v) * time.Minute
	}
	return 0
}

// noValOr is the number of p, or def when it is unset or infinite.
func noValOr[T ~noValInt](p *T, def int64) int64 {
	if v, ok := noVal(p).Value(); ok {
		return v
	}
	return def
}

func noValPtr[T ~noValInt](p *T) *int64 {
	if v, ok := noVal(p).Value(); ok {
		return &v
	}
	return nil
}

func tresList[T ~tresWire](in *[]T) TRESList {
	if in == nil {
		return nil
	}
	out := make(TRESList, 0, len(*in))
	for _, t := range *in {
		w := tresWire(t)
		out = append(out, TRES{Type: w.Type, Name: deref(w.Name), Count: deref(w.Count)})
	}
	return out
}

func tresWireList[T ~tresWire](l TRESList) *[]T {
	out := make([]T, 0, len(l))
	for _, t := range l {
		t := t
		w := tresWire{Type: t.Type, Count: &t.Count}
		if t.Name != "" {
			w.Name = &t.Name
		}
		out = append(out, T(w))
	}
	return &out
}

// isUnset reports whether s is one of Slurm's spellings of "no value".
func isUnset(s string) bool {
	switch strings.TrimSpace(s) {
	case "", "NONE", "None", "none", "N/A", "n/a", "(null)":
		return true
	}
	return false
}

// unset returns "" for Slurm's "no value" spellings and s otherwise.
func unset(s *string) string {
	if s == nil || isUnset(*s) {
		return ""
	}
	return *s
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

func derefSlice[T any](p *[]T) []T {
	if p == nil {
		return nil
	}
	return *p
}

// strs converts a list of generated string enums to plain strings.
func strs[T ~string](p *[]T) []string {
	if p == nil {
		return nil
	}
	out := make([]string, len(*p))
	for i, s := range *p {
		out[i] = string(s)
	}
	return out
}

// enums converts plain strings to a list of generated string enums.
func enums[T ~string](in []string) *[]T {
	out := make([]T, len(in))
	for i, s := range in {
		out[i] = T(s)
	}
	return &out
}
