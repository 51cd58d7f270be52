package reclaimrules

import (
	"fmt"
	"time"
)

// Duration is a time.Duration written as a Go duration string ("30m",
// "1h30m", "90s") in JSON and YAML. A bare number is an error: "30" could
// mean seconds or minutes.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d as time.Duration does ("30m0s").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d as time.Duration's String does; JSON and YAML use it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a Go duration string; JSON and YAML use it.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := parseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: write a number with a unit, such as \"90s\", \"30m\" or \"1h30m\"", s)
	}
	return v, nil
}
