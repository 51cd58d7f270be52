package spec

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a job time limit. It is written as a Go duration ("36h",
// "90m", "1h30m"), in days ("7d", "1d12h"), or in Slurm's time format
// ("1-00:00:00" for days-hours:minutes:seconds, also "2-12", "2-12:30",
// "12:00:00" and "30:00" for minutes:seconds). A bare number is an error:
// Slurm reads "30" as minutes, Go as nothing, and a reader as either.
// It is written back in hours ("36h", "168h", "1h30m").
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
func (d Duration) String() string {
	s := time.Duration(d).String()
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

// UnmarshalText reads any of the forms Duration documents.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := parseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// durationHint is what a policy author is told when a duration is wrong.
const durationHint = `write hours or minutes with a unit ("36h", "90m"), days ("7d"), or Slurm's days-hours:minutes:seconds ("1-00:00:00")`

var errDuration = errors.New("not a duration")

func parseDuration(s string) (time.Duration, error) {
	switch {
	case s == "":
		return 0, errDuration
	case strings.ContainsAny(s, "-:") && s[0] != '-':
		return parseSlurmTime(s)
	}
	if days, rest, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 16)
		if err != nil {
			return 0, errDuration
		}
		d := time.Duration(n) * 24 * time.Hour
		if rest != "" {
			r, err := time.ParseDuration(rest)
			if err != nil || r < 0 || r > math.MaxInt64-d {
				return 0, errDuration
			}
			d += r
		}
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errDuration
	}
	return d, nil
}

// parseSlurmTime reads Slurm's forms with a '-' or ':': "D-HH",
// "D-HH:MM", "D-HH:MM:SS", "HH:MM:SS" and "MM:SS" (sbatch --time).
func parseSlurmTime(s string) (time.Duration, error) {
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
		return 0, errDuration
	}
	n, err := strconv.ParseUint(days, 10, 16)
	if err != nil {
		return 0, errDuration
	}
	d := time.Duration(n) * 24 * time.Hour
	for i, p := range parts {
		// Every part is one or two digits, except the first of a form
		// without days, which Slurm lets run over (90:00 is 90 minutes).
		if p == "" || len(p) > 2 && (hasDays || i > 0) {
			return 0, errDuration
		}
		v, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return 0, errDuration
		}
		limit := uint64(60)
		if units[i] == time.Hour {
			limit = 24
		}
		if v >= limit && (hasDays || i > 0) {
			return 0, errDuration
		}
		d += time.Duration(v) * units[i]
	}
	return d, nil
}
