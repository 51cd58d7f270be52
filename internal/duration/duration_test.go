package duration

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// parseTests are the table of Parse; FuzzParse starts from them.
var parseTests = map[string]struct {
	want    time.Duration
	wantErr bool
}{
	"36h":        {want: 36 * time.Hour},
	"90m":        {want: 90 * time.Minute},
	"90s":        {want: 90 * time.Second},
	"1h30m":      {want: 90 * time.Minute},
	"500ms":      {want: 500 * time.Millisecond},
	"0":          {want: 0},
	"1.5h":       {want: 90 * time.Minute},
	"7d":         {want: 7 * 24 * time.Hour},
	"1d12h":      {want: 36 * time.Hour},
	"1d30m":      {want: 24*time.Hour + 30*time.Minute},
	"0d":         {want: 0},
	"1-00:00:00": {want: 24 * time.Hour},
	"2-12":       {want: 60 * time.Hour},
	"2-12:30":    {want: 60*time.Hour + 30*time.Minute},
	"0-00:00:30": {want: 30 * time.Second},
	"12:00:00":   {want: 12 * time.Hour},
	"48:00:00":   {want: 48 * time.Hour},
	"30:00":      {want: 30 * time.Minute},
	"90:00":      {want: 90 * time.Minute},
	"1:05":       {want: time.Minute + 5*time.Second},
	"-1h":        {want: -time.Hour}, // read; a validation refuses it
	"":           {wantErr: true},
	// A bare number: Slurm's minutes, Go's nothing.
	"30":             {wantErr: true},
	"1.5":            {wantErr: true},
	"d":              {wantErr: true},
	"7days":          {wantErr: true},
	"1d-1h":          {wantErr: true},
	"1d+1h":          {wantErr: true},
	"-7d":            {wantErr: true},
	"1-25:00:00":     {wantErr: true},
	"1-00:60":        {wantErr: true},
	"1-100":          {wantErr: true},
	"12:60:00":       {wantErr: true},
	"1:2:3:4":        {wantErr: true},
	"1-":             {wantErr: true},
	"-1-00:00":       {wantErr: true},
	"x:00":           {wantErr: true},
	"+1:00":          {wantErr: true},
	"::":             {wantErr: true},
	"65536d":         {wantErr: true},
	"65535d2562047h": {wantErr: true}, // past time.Duration
	"3 days":         {wantErr: true},
}

func TestParse(t *testing.T) {
	re := regexp.MustCompile(Pattern)
	for in, tc := range parseTests {
		d, err := Parse(in)
		switch {
		case tc.wantErr && err == nil:
			t.Errorf("%q: read as %v, want an error", in, d)
		case !tc.wantErr && err != nil:
			t.Errorf("%q: %v", in, err)
		case !tc.wantErr && d != tc.want:
			t.Errorf("%q = %v, want %v", in, d, tc.want)
		}
		if err != nil && !errors.Is(err, ErrSyntax) {
			t.Errorf("%q: error %v is not ErrSyntax", in, err)
		}
		// The schema's pattern accepts what the parser reads, negative
		// times and overflows aside.
		if in == "65536d" || in == "65535d2562047h" {
			continue
		}
		if matched := re.MatchString(in); matched != (err == nil && d >= 0) {
			t.Errorf("%q: Pattern matches = %v, Parse error = %v", in, matched, err)
		}
	}
}

func TestParseHints(t *testing.T) {
	for in, want := range map[string]string{
		"30":   `add a unit, such as "30m" (Slurm reads a bare number as minutes) or "30s"`,
		"soon": Hint,
	} {
		_, err := Parse(in)
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%q: error %v is not an *Error", in, err)
		}
		if e.Hint() != want {
			t.Errorf("%q: hint %q, want %q", in, e.Hint(), want)
		}
		if !strings.HasPrefix(err.Error(), `"`+in+`" is not a duration: `) {
			t.Errorf("%q: error %q", in, err)
		}
	}
}

func TestString(t *testing.T) {
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
	}
}

func TestMinutes(t *testing.T) {
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

type doc struct {
	Window Duration `json:"window" yaml:"window"`
}

func TestMarshal(t *testing.T) {
	for name, tc := range map[string]struct {
		in       doc
		wantJSON string
		wantYAML string
	}{
		"hours":   {in: doc{Duration(36 * time.Hour)}, wantJSON: `{"window":"36h"}`, wantYAML: "window: 36h\n"},
		"minutes": {in: doc{Duration(90 * time.Second)}, wantJSON: `{"window":"1m30s"}`, wantYAML: "window: 1m30s\n"},
		"zero":    {in: doc{}, wantJSON: `{"window":"0s"}`, wantYAML: "window: 0s\n"},
	} {
		t.Run(name, func(t *testing.T) {
			j, err := json.Marshal(tc.in)
			if err != nil || string(j) != tc.wantJSON {
				t.Errorf("JSON = %s, %v; want %s", j, err, tc.wantJSON)
			}
			var back doc
			if err := json.Unmarshal(j, &back); err != nil || back != tc.in {
				t.Errorf("JSON round trip = %v, %v", back, err)
			}
			y, err := yaml.Marshal(tc.in)
			if err != nil || string(y) != tc.wantYAML {
				t.Errorf("YAML = %q, %v; want %q", y, err, tc.wantYAML)
			}
			back = doc{}
			if err := yaml.Unmarshal(y, &back); err != nil || back != tc.in {
				t.Errorf("YAML round trip = %v, %v", back, err)
			}
		})
	}
}

func TestUnmarshal(t *testing.T) {
	for in, want := range map[string]time.Duration{
		`{"window":"7d"}`:         7 * 24 * time.Hour,
		`{"window":"1-12:00:00"}`: 36 * time.Hour,
		`{"window":"30:00"}`:      30 * time.Minute,
	} {
		var d doc
		if err := json.Unmarshal([]byte(in), &d); err != nil || d.Window.Std() != want {
			t.Errorf("JSON %s = %v, %v; want %v", in, d.Window, err, want)
		}
	}
	for _, in := range []string{`{"window":"30"}`, `{"window":30}`, `{"window":"soon"}`} {
		var d doc
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("JSON %s read as %v, want an error", in, d.Window)
		}
	}
	var d doc
	if err := yaml.Unmarshal([]byte("window: 1d12h\n"), &d); err != nil || d.Window.Std() != 36*time.Hour {
		t.Errorf("YAML 1d12h = %v, %v", d.Window, err)
	}
	if err := yaml.Unmarshal([]byte("window: 30\n"), &d); err == nil {
		t.Errorf("YAML 30 read as %v, want an error", d.Window)
	}
}

// FuzzParse: Parse never panics; what it reads is written back by String
// in a form it reads again as the same duration.
func FuzzParse(f *testing.F) {
	for in := range parseTests {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Errorf("%q: error %v is not ErrSyntax", s, err)
			}
			return
		}
		out := Duration(d).String()
		back, err := Parse(out)
		if err != nil || back != d {
			t.Errorf("%q = %v, written %q, read back as %v, %v", s, d, out, back, err)
		}
	})
}
