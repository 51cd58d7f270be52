package spec

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for in, tc := range map[string]struct {
		want    time.Duration
		wantErr bool
	}{
		"36h":            {want: 36 * time.Hour},
		"90m":            {want: 90 * time.Minute},
		"1h30m":          {want: 90 * time.Minute},
		"0":              {want: 0},
		"1.5h":           {want: 90 * time.Minute},
		"7d":             {want: 7 * 24 * time.Hour},
		"1d12h":          {want: 36 * time.Hour},
		"0d":             {want: 0},
		"1-00:00:00":     {want: 24 * time.Hour},
		"2-12":           {want: 60 * time.Hour},
		"2-12:30":        {want: 60*time.Hour + 30*time.Minute},
		"0-00:00:30":     {want: 30 * time.Second},
		"12:00:00":       {want: 12 * time.Hour},
		"48:00:00":       {want: 48 * time.Hour},
		"30:00":          {want: 30 * time.Minute},
		"90:00":          {want: 90 * time.Minute},
		"-1h":            {want: -time.Hour}, // read; Validate rejects it
		"":               {wantErr: true},
		"30":             {wantErr: true},
		"d":              {wantErr: true},
		"7days":          {wantErr: true},
		"1d-1h":          {wantErr: true},
		"-7d":            {wantErr: true},
		"1-25:00:00":     {wantErr: true},
		"1-00:60":        {wantErr: true},
		"1-100":          {wantErr: true},
		"12:60:00":       {wantErr: true},
		"1:2:3:4":        {wantErr: true},
		"1-":             {wantErr: true},
		"-1-00:00":       {wantErr: true},
		"x:00":           {wantErr: true},
		"::":             {wantErr: true},
		"65536d":         {wantErr: true},
		"65535d2562047h": {wantErr: true}, // past time.Duration
		"3 days":         {wantErr: true},
	} {
		var d Duration
		err := d.UnmarshalText([]byte(in))
		switch {
		case tc.wantErr && err == nil:
			t.Errorf("%q: read as %v, want an error", in, d.Std())
		case !tc.wantErr && err != nil:
			t.Errorf("%q: %v", in, err)
		case !tc.wantErr && d.Std() != tc.want:
			t.Errorf("%q = %v, want %v", in, d.Std(), tc.want)
		}
		// The schema's pattern accepts what the parser reads, negative
		// times and overflows aside.
		if in == "65536d" || in == "65535d2562047h" {
			continue
		}
		if matched := regexp.MustCompile(durationPattern).MatchString(in); matched != (err == nil && d >= 0) {
			t.Errorf("%q: schema pattern matches = %v, parser error = %v", in, matched, err)
		}
	}
}

func TestDurationString(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                         "0s",
		36 * time.Hour:            "36h",
		7 * 24 * time.Hour:        "168h",
		90 * time.Minute:          "1h30m",
		30 * time.Minute:          "30m",
		90 * time.Second:          "1m30s",
		time.Hour + 5*time.Second: "1h0m5s",
		500 * time.Millisecond:    "500ms",
	} {
		if got := Duration(d).String(); got != want {
			t.Errorf("Duration(%v).String() = %q, want %q", d, got, want)
		}
		out, err := json.Marshal(Duration(d))
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := json.Unmarshal(out, &back); err != nil || back != Duration(d) {
			t.Errorf("JSON round trip of %v: %s → %v, %v", d, out, back.Std(), err)
		}
	}
}

func TestDurationMinutes(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		0:                         0,
		time.Second:               1,
		time.Minute:               1,
		time.Minute + time.Second: 2,
		36 * time.Hour:            2160,
	} {
		if got := Duration(d).Minutes(); got != want {
			t.Errorf("Duration(%v).Minutes() = %d, want %d", d, got, want)
		}
	}
}

func TestRuleDurationPattern(t *testing.T) {
	re := regexp.MustCompile(ruleDurationPattern)
	for in, want := range map[string]bool{"30m": true, "1h30m": true, "90s": true, "0": true, "1.5h": true, "7d": false, "30": false, "1-00:00": false} {
		if got := re.MatchString(in); got != want {
			t.Errorf("%q: match = %v, want %v", in, got, want)
		}
	}
}
