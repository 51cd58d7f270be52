package strictyaml

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/duration"
)

// doc exercises every kind of value Decode knows.
type doc struct {
	Name    string            `yaml:"name"`
	Count   int               `yaml:"count"`
	On      bool              `yaml:"on"`
	Wait    time.Duration     `yaml:"wait"`
	Span    duration.Duration `yaml:"span"`
	Ratio   float64           `yaml:"ratio"`
	Items   []string          `yaml:"items"`
	Env     map[string]string `yaml:"env"`
	Inner   *inner            `yaml:"inner"`
	Skipped string            `yaml:"-"`
}

type inner struct {
	Size int `yaml:"size"`
}

func TestDecode(t *testing.T) {
	for name, tc := range map[string]struct {
		data string
		want doc
		// wantDiags are "line:col: message (hint: ...)" without the file.
		wantDiags []string
	}{
		"every kind": {
			data: "name: a\ncount: 3\non: true\nwait: 90s\nitems: [x, 2]\nenv: {K: v}\ninner: {size: 4}\n",
			want: doc{Name: "a", Count: 3, On: true, Wait: 90 * time.Second, Items: []string{"x", "2"},
				Env: map[string]string{"K": "v"}, Inner: &inner{Size: 4}},
		},
		"numbers are strings where strings belong": {
			data: "name: 8\nitems: [1.5]\n",
			want: doc{Name: "8", Items: []string{"1.5"}},
		},
		"defaults kept for keys left out": {data: "count: 1\n", want: doc{Name: "default", Count: 1}},
		"yes is not true": {
			data:      "on: yes\n",
			want:      doc{Name: "default"},
			wantDiags: []string{`1:5: on: want true or false, got "yes" (hint: write true or false: YAML 1.2 reads yes as a string)`},
		},
		"a duration needs a unit": {
			data:      "wait: 30\n",
			want:      doc{Name: "default"},
			wantDiags: []string{`1:7: wait: want a duration, got 30 (hint: add a unit, such as "30m" (Slurm reads a bare number as minutes) or "30s")`},
		},
		"zero needs no unit": {data: "wait: 0\n", want: doc{Name: "default"}},
		"days and Slurm times are durations": {
			data: "wait: 1d12h\nspan: 1-00:30:00\n",
			want: doc{Name: "default", Wait: 36 * time.Hour, Span: duration.Duration(24*time.Hour + 30*time.Minute)},
		},
		"not a duration": {
			data:      "span: soon\n",
			want:      doc{Name: "default"},
			wantDiags: []string{`1:7: span: "soon" is not a duration (hint: ` + duration.Hint + `)`},
		},
		"a negative duration": {
			data:      "wait: -1s\n",
			want:      doc{Name: "default"},
			wantDiags: []string{`1:7: wait: -1s is negative (hint: write a duration of 0 or more, such as "90s" or "10m")`},
		},
		"standard tags are read": {data: "name: !!str x\n", want: doc{Name: "x"}},
		"other tags are refused": {
			data:      "name: !team x\n",
			want:      doc{Name: "default"},
			wantDiags: []string{`1:7: name: want a string, got !team x (hint: remove the tag !team: the file uses no YAML tags)`},
		},
		"a list item without a value": {
			data:      "items:\n  -\n  - b\n",
			want:      doc{Name: "default", Items: []string{"", "b"}},
			wantDiags: []string{`2:4: items[0] has no value (hint: give the item a value, or remove the empty '-' line)`},
		},
		"a number": {data: "ratio: 0.5\n", want: doc{Name: "default", Ratio: 0.5}},
		"a key that is not a name": {
			data:      "[a]: 1\n",
			want:      doc{Name: "default"},
			wantDiags: []string{"1:1: a key must be a name, not a list (hint: write a plain name before the ':')"},
		},
		"a skipped field is unknown": {
			data:      "Skipped: x\n",
			want:      doc{Name: "default"},
			wantDiags: []string{"1:1: unknown key Skipped in doc (hint: the keys of doc are name, count, on, wait, span, ratio, items, env, inner)"},
		},
		"a number too large": {
			data:      "count: 99999999999999999999\n",
			want:      doc{Name: "default"},
			wantDiags: []string{`1:8: count: want a whole number, got 99999999999999999999 (hint: write a whole number, such as 8)`},
		},
		"an unknown anchor": {
			data:      "name: *nowhere\n",
			want:      doc{Name: "default"},
			wantDiags: []string{"1:7: invalid YAML: unknown anchor 'nowhere' referenced (hint: define the anchor with &name before using it as *name)"},
		},
		"an unclosed quote": {
			data:      "name: 'x\ncount: 1\n",
			want:      doc{Name: "default"},
			wantDiags: []string{"1:1: invalid YAML: found unexpected end of stream (hint: a quote or bracket opened here is never closed)"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := doc{Name: "default"}
			r := Decode("f.yaml", []byte(tc.data), &d, Options{})
			var got []string
			if err := r.Err(); err != nil {
				for _, l := range strings.Split(err.Error(), "\n") {
					got = append(got, strings.TrimPrefix(l, "f.yaml:"))
				}
			}
			if diff := cmp.Diff(tc.wantDiags, got); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, d); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAliasBomb: aliases of aliases stop at a bound instead of expanding
// for ever.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 8; i++ {
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	b.WriteString("items: *a7\n")
	var s struct {
		Items [][][][][][][][]string `yaml:"items"`
	}
	start := time.Now()
	r := Decode("bomb.yaml", []byte(b.String()), &s, Options{})
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %s", time.Since(start))
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "aliases expand to more than 10000 values") {
		t.Errorf("err = %v", err)
	}
}

func TestResultAdd(t *testing.T) {
	var d doc
	r := Decode("f.yaml", []byte("name: [x]\ninner:\n  size: 2\n"), &d, Options{})
	// A validation's problem with a value that did not decode is left
	// out; one without a position is located at the nearest value read;
	// one of a key left out, at its parent.
	r.Add(Diagnostics{
		{Path: "name", Msg: "name is empty"},
		{Path: "inner.size", Msg: "size too small"},
		{Path: "inner.missing", Msg: "missing"},
	})
	err := r.Err()
	var ds Diagnostics
	if !errors.As(err, &ds) {
		t.Fatalf("err %T", err)
	}
	want := []string{
		"f.yaml:1:7: name: want a string, got a list (hint: write a single value)",
		"f.yaml:3:3: missing",
		"f.yaml:3:9: size too small",
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDiagnosticError(t *testing.T) {
	for name, tc := range map[string]struct {
		d    Diagnostic
		want string
	}{
		"full":              {Diagnostic{File: "f", Line: 2, Col: 3, Path: "p", Msg: "m", Hint: "h"}, "f:2:3: m (hint: h)"},
		"no line":           {Diagnostic{File: "f", Path: "a.b", Msg: "m"}, "f: a.b: m"},
		"no file":           {Diagnostic{Path: "a.b", Msg: "m", Hint: "h"}, "a.b: m (hint: h)"},
		"message only":      {Diagnostic{Msg: "m"}, "m"},
		"line without file": {Diagnostic{Line: 1, Col: 1, Msg: "m"}, "1:1: m"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.d.Error(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestClosest(t *testing.T) {
	names := []string{"name", "model", "gpus", "replicas", "liveness_path"}
	for in, want := range map[string]string{
		"naem":         "name", // a swap is one edit
		"gpu":          "gpus",
		"replica":      "replicas",
		"Model":        "model", // case does not count
		"base":         "",      // two edits from name: too far for 4 letters
		"livenes_path": "liveness_path",
		"storage":      "",
	} {
		if got := Closest(in, names); got != want {
			t.Errorf("closest(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzDecode: Decode never panics, and every problem it reports has a
// position and a message.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"name: a\ncount: 3\non: true\nwait: 90s\nitems: [x, 2]\nenv: {K: v}\ninner: {size: 4}\n",
		"a: &a [*a]\n", "<<: {name: x}\n", "name: [\n", "\t- x", "---\n---\n", "inner: ~\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d doc
		r := Decode("f.yaml", data, &d, Options{})
		for _, diag := range r.Diags {
			if diag.Line < 1 || diag.Col < 1 || diag.Msg == "" || diag.File != "f.yaml" {
				t.Fatalf("diagnostic %#v", diag)
			}
		}
	})
}

// strict exercises the options a policy-like file uses.
type strict struct {
	Kind  string  `yaml:"kind" strictyaml:"required"`
	Name  string  `yaml:"name" strictyaml:"required"`
	Rules []rule  `yaml:"rules"`
	Owner *holder `yaml:"owner"`
	Line  int     `yaml:"-" strictyaml:"line"`
}

type rule struct {
	Name   string `yaml:"name"`
	Window string `yaml:"window"`
}

type holder struct {
	User string `yaml:"user" strictyaml:"required"`
	Line int    `yaml:"-" strictyaml:"line"`
}

func TestDecodeOptions(t *testing.T) {
	opts := Options{
		What: "a thing", File: "thing file", Example: "start with kind: Thing",
		Nouns:     map[reflect.Type]string{reflect.TypeFor[rule](): "a rule"},
		Forbidden: map[reflect.Type]map[string]string{reflect.TypeFor[rule](): {"name": "remove it: rules are named for you"}},
		RequiredHint: func(path, key string) string {
			if key == "kind" {
				return "add kind: Thing"
			}
			return ""
		},
		QuoteNumbers: true,
	}
	for name, tc := range map[string]struct {
		data      string
		opts      func(*Options)
		want      strict
		wantDiags []string
	}{
		"required keys and lines": {
			data: "kind: Thing\nname: a\nowner:\n  user: u\n",
			want: strict{Kind: "Thing", Name: "a", Owner: &holder{User: "u", Line: 4}, Line: 1},
		},
		"a required key left out": {
			data: "name: a\nowner: {}\n",
			want: strict{Name: "a", Owner: &holder{Line: 2}, Line: 1},
			wantDiags: []string{
				"1:1: missing key kind in strict (hint: add kind: Thing)",
				"2:8: missing key user in holder (hint: add user:)",
			},
		},
		"a misspelt required key is reported once": {
			data:      "kind: Thing\nnmae: a\n", //nolint:misspell // the typo is the test
			want:      strict{Kind: "Thing", Line: 1},
			wantDiags: []string{"2:1: unknown key nmae in strict (hint: did you mean name?)"}, //nolint:misspell // the typo is the test
		},
		"a forbidden key": {
			data:      "kind: Thing\nname: a\nrules: [{name: x, window: w}]\n",
			want:      strict{Kind: "Thing", Name: "a", Rules: []rule{{Window: "w"}}, Line: 1},
			wantDiags: []string{"3:10: name is not allowed in a rule (hint: remove it: rules are named for you)"},
		},
		"a forbidden key is no guess": {
			data:      "kind: Thing\nname: a\nrules: [{nam: x}]\n",
			want:      strict{Kind: "Thing", Name: "a", Rules: []rule{{}}, Line: 1},
			wantDiags: []string{"3:10: unknown key nam in a rule (hint: the keys of a rule are window)"},
		},
		"numbers must be quoted": {
			data:      "kind: Thing\nname: 123\n",
			want:      strict{Kind: "Thing", Line: 1},
			wantDiags: []string{`2:7: name: want a string, got 123 (hint: quote it: "123")`},
		},
		"the file's nouns": {
			data: "- a\n",
			wantDiags: []string{
				"1:1: a thing must be a mapping of keys to values, not a list (hint: start with kind: Thing)",
			},
		},
		"tags": {
			data:      "kind: !x Thing\nname: a\n",
			want:      strict{Name: "a", Line: 1},
			wantDiags: []string{"1:7: kind: want a string, got !x Thing (hint: remove the tag !x: a thing uses no YAML tags)"},
		},
		"empty": {
			data:      "# nothing\n",
			wantDiags: []string{"1:1: empty thing file (hint: start with kind: Thing)"},
		},
		"empty allowed": {data: "# nothing\n", opts: func(o *Options) { o.AllowEmpty = true }},
		"two documents": {
			data:      "kind: Thing\nname: a\n---\nx: 1\n",
			wantDiags: []string{"4:1: a second YAML document (hint: a thing file holds one document: remove the '---' and what follows, or merge it into the first)"},
		},
		"limits": {
			data: "kind: 1\nname: 2\nrules: 3\n",
			opts: func(o *Options) { o.MaxDiagnostics = 2 },
			want: strict{Line: 1},
			wantDiags: []string{
				`1:7: kind: want a string, got 1 (hint: quote it: "1")`,
				`2:7: name: want a string, got 2 (hint: quote it: "2")`,
				"2:7: and 1 more problems (hint: fix these first)",
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			o := opts
			if tc.opts != nil {
				tc.opts(&o)
			}
			var got strict
			r := Decode("f.yaml", []byte(tc.data), &got, o)
			var diags []string
			if err := r.Err(); err != nil {
				for _, l := range strings.Split(err.Error(), "\n") {
					diags = append(diags, strings.TrimPrefix(l, "f.yaml:"))
				}
			}
			if diff := cmp.Diff(tc.wantDiags, diags); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAliasBombStopsValidation: past MaxExpanded, a validation's problems
// are left out: what was decoded is a fraction of the file.
func TestAliasBombStopsValidation(t *testing.T) {
	var s struct {
		Items [][]string `yaml:"items"`
	}
	r := Decode("f.yaml", []byte("a: &a [x, x, x]\nitems: [*a, *a, *a]\n"), &s, Options{MaxExpanded: 5})
	r.Add(Diagnostics{{Path: "items", Msg: "too few"}})
	err := r.Err()
	if err == nil || !strings.Contains(err.Error(), "aliases expand to more than 5 values") || strings.Contains(err.Error(), "too few") {
		t.Errorf("err = %v", err)
	}
}

// conf is a daemon config: defaults, and a Validate with paths.
type conf struct {
	Listen string        `yaml:"listen"`
	Every  time.Duration `yaml:"every"`
	Root   string        `yaml:"root"`
}

func (c *conf) Validate() Diagnostics {
	var ds Diagnostics
	if !strings.Contains(c.Listen, ":") {
		ds = append(ds, Diagnostic{Path: "listen", Msg: "listen: not host:port", Hint: "such as 127.0.0.1:80"})
	}
	if !strings.HasPrefix(c.Root, "/") {
		ds = append(ds, Diagnostic{Path: "root", Msg: "root: not absolute"})
	}
	if c.Every < time.Second {
		ds = append(ds, Diagnostic{Path: "every", Msg: "every: too short"})
	}
	return ds
}

func TestParseWithDefaults(t *testing.T) {
	defaults := conf{Listen: "127.0.0.1:80", Every: time.Minute, Root: "/srv"}
	opts := Options{What: "a conf", AllowEmpty: true}
	for name, tc := range map[string]struct {
		data      string
		want      conf
		wantDiags []string
	}{
		"empty is the defaults":     {data: "# nothing\n", want: defaults},
		"a value over the defaults": {data: "every: 1d\n", want: conf{Listen: "127.0.0.1:80", Every: 24 * time.Hour, Root: "/srv"}},
		// A typo and two invalid values: all three, each located; the
		// misspelt key's default is not judged.
		"a typo and two invalid values": {
			data: "evrey: 0s\nlisten: x\nroot: srv\n",
			wantDiags: []string{
				"f.yaml:1:1: unknown key evrey in conf (hint: did you mean every?)",
				"f.yaml:2:9: listen: not host:port (hint: such as 127.0.0.1:80)",
				"f.yaml:3:7: root: not absolute",
			},
		},
		"the defaults are judged at the start of an empty file": {
			data:      "",
			wantDiags: nil,
			want:      defaults,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseWithDefaults("f.yaml", []byte(tc.data), defaults, opts)
			var diags []string
			if err != nil {
				diags = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tc.wantDiags, diags); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
	bad := conf{Listen: "x", Every: time.Minute, Root: "/srv"}
	_, err := ParseWithDefaults("f.yaml", nil, bad, opts)
	if err == nil || err.Error() != "f.yaml:1:1: listen: not host:port (hint: such as 127.0.0.1:80)" {
		t.Errorf("bad defaults: %v", err)
	}
}

func TestLoadWithDefaults(t *testing.T) {
	_, err := LoadWithDefaults(filepath.Join(t.TempDir(), "none.yaml"), conf{}, Options{What: "a conf"})
	if !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "read conf: ") {
		t.Errorf("missing file: %v, want os.ErrNotExist", err)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("listen: a:1\nevery: 1-00:00:00\nroot: /x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadWithDefaults(path, conf{}, Options{})
	if err != nil || got != (conf{Listen: "a:1", Every: 24 * time.Hour, Root: "/x"}) {
		t.Errorf("LoadWithDefaults = %+v, %v", got, err)
	}
}
