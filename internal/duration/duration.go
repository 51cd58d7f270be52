// Package duration is the one way Strata reads a length of time, in YAML
// configs, the policy file and the reclaim-rules JSON alike. [Parse]
// takes:
//
//   - Go durations: "90s", "30m", "1h30m", "1.5h", "500ms", and "0";
//   - days, alone or before a Go duration: "7d", "1d12h";
//   - Slurm's time forms of sbatch --time, with a '-' or ':': "D-HH",
//     "D-HH:MM", "D-HH:MM:SS", "HH:MM:SS" and "MM:SS" ("90:00" is 90
//     minutes; the first part of a form without days may run over).
//
// A bare number other than 0 is refused, although Slurm reads "30" as 30
// minutes: Go reads it as nothing, and a reader of a config could take it
// for seconds. The error says to write "30m" for what Slurm would mean.
package duration

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration read with [Parse] and written compactly
// ("36h", "1h30m", "1m30s", "0s") in JSON and YAML.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Minutes returns d in whole minutes, the unit of Slurm time limits,
// rounding a partial minute up as Slurm does.
func (d Duration) Minutes() int64 {
	return int64((time.Duration(d) + time.Minute - 1) / time.Minute)
}

// String formats d as time.Duration does, without the zero units at the
// end: "36h", "1h30m", "90s" is "1m30s".
func (d Duration) String() string { return Format(time.Duration(d)) }

// Format writes d as time.Duration's String does, without the zero units
// at the end: "36h" rather than "36h0m0s".
func Format(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalText writes d as String does; JSON and YAML use it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads any of the forms [Parse] takes; JSON and YAML use it.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAMLScalar reads the text of a YAML scalar as UnmarshalText
// does (internal/strictyaml calls it, with numbers as written, so that
// the error can say to add a unit).
func (d *Duration) UnmarshalYAMLScalar(text string) error { return d.UnmarshalText([]byte(text)) }

// YAMLKind names the values of the type in messages.
func (*Duration) YAMLKind() string { return "a duration" }

// Hint is what to write instead of text that is not a duration.
const Hint = `write hours or minutes with a unit ("36h", "90m"), days ("7d"), or Slurm's days-hours:minutes:seconds ("1-00:00:00")`

// Error is why a text is not a duration.
type Error struct {
	Text string
	hint string
}

// Error says what is wrong and what to write instead.
func (e *Error) Error() string { return fmt.Sprintf("%q is not a duration: %s", e.Text, e.hint) }

// Hint says what to write instead.
func (e *Error) Hint() string { return e.hint }

// ErrSyntax is what every [Error] is (errors.Is).
var ErrSyntax = errors.New("not a duration")

// Is makes errors.Is(err, ErrSyntax) true.
func (e *Error) Is(target error) bool { return target == ErrSyntax }

func bad(s string) error {
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		n := strings.TrimPrefix(s, "+")
		return &Error{Text: s, hint: fmt.Sprintf("add a unit, such as %q (Slurm reads a bare number as minutes) or %q",
			n+"m", n+"s")}
	}
	return &Error{Text: s, hint: Hint}
}

// Parse reads a duration in any of the forms of the package doc. Go's
// negative durations ("-1h") are read, for a validation to refuse with its
// own words; "-7d" and the Slurm forms take no sign.
func Parse(s string) (time.Duration, error) {
	switch {
	case s == "":
		return 0, bad(s)
	case strings.ContainsAny(s, "-:") && s[0] != '-':
		d, ok := parseSlurm(s)
		if !ok {
			return 0, bad(s)
		}
		return d, nil
	}
	if days, rest, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 16)
		if err != nil {
			return 0, bad(s)
		}
		d := time.Duration(n) * 24 * time.Hour
		if rest != "" {
			r, err := time.ParseDuration(rest)
			if err != nil || r < 0 || rest[0] == '+' || r > math.MaxInt64-d {
				return 0, bad(s)
			}
			d += r
		}
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, bad(s)
	}
	return d, nil
}

// parseSlurm reads Slurm's forms with a '-' or ':': "D-HH", "D-HH:MM",
// "D-HH:MM:SS", "HH:MM:SS" and "MM:SS".
func parseSlurm(s string) (time.Duration, bool) {
	days, clock, hasDays := strings.Cut(s, "-")
	if !hasDays {
		clock, days = s, "0"
	}
	parts := strings.Split(clock, ":")
	var units []time.Duration // the unit of each part
	switch {
	case hasDays && len(parts) <= 3:
		units = []time.Duration{time.Hour, time.Minute, time.Second}[:len(parts)]
	case !hasDays && len(parts) == 3:
		units = []time.Duration{time.Hour, time.Minute, time.Second}
	case !hasDays && len(parts) == 2:
		units = []time.Duration{time.Minute, time.Second}
	default:
		return 0, false
	}
	n, err := strconv.ParseUint(days, 10, 16)
	if err != nil || !digits(days) {
		return 0, false
	}
	d := time.Duration(n) * 24 * time.Hour
	for i, p := range parts {
		// Every part is one or two digits, except the first of a form
		// without days, which Slurm lets run over (90:00 is 90 minutes).
		if p == "" || !digits(p) || len(p) > 2 && (hasDays || i > 0) {
			return 0, false
		}
		v, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return 0, false
		}
		limit := uint64(60)
		if units[i] == time.Hour {
			limit = 24
		}
		if v >= limit && (hasDays || i > 0) {
			return 0, false
		}
		d += time.Duration(v) * units[i]
	}
	return d, true
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Pattern is a regular expression (RE2 and ECMA 262, for JSON Schema)
// that matches what Parse reads, negative durations and overflows aside.
const Pattern = `^(0|(` + goPattern + `)+|[0-9]+d(` + goPattern + `)*|[0-9]+-([01]?[0-9]|2[0-3])(:[0-5]?[0-9]){0,2}|[0-9]+(:[0-5]?[0-9]){1,2})$`

// goPattern matches one number and unit of a Go duration.
const goPattern = `([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)`
