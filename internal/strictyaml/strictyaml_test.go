package strictyaml

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// doc exercises every kind of value Decode knows.
type doc struct {
	Name    string            `yaml:"name"`
	Count   int               `yaml:"count"`
	On      bool              `yaml:"on"`
	Wait    time.Duration     `yaml:"wait"`
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
			wantDiags: []string{`1:7: wait: want a duration, got 30 (hint: add a unit, such as "30s")`},
		},
		"a negative duration": {
			data:      "wait: -1s\n",
			want:      doc{Name: "default"},
			wantDiags: []string{`1:7: wait: "-1s" is not a duration (hint: write a duration with a unit, such as "90s", "10m" or "1h30m")`},
		},
		"tags are refused": {
			data:      "name: !!str x\n",
			want:      doc{Name: "default"},
			wantDiags: []string{`1:7: name: want a string, got !!str "x" (hint: remove the tag !!str: these files use no YAML tags)`},
		},
		"a key that is not a name": {
			data:      "[a]: 1\n",
			want:      doc{Name: "default"},
			wantDiags: []string{"1:1: a key must be a name, not a list (hint: write a plain name before the ':')"},
		},
		"a skipped field is unknown": {
			data:      "Skipped: x\n",
			want:      doc{Name: "default"},
			wantDiags: []string{"1:1: unknown key Skipped in doc (hint: the keys of doc are name, count, on, wait, items, env, inner)"},
		},
		"a number too large": {
			data:      "count: 99999999999999999999\n",
			want:      doc{Name: "default"},
			wantDiags: []string{`1:8: count: want a whole number, got 99999999999999999999 (hint: write a whole number, such as 2)`},
		},
		"an unknown anchor": {
			data:      "name: *nowhere\n",
			want:      doc{Name: "default"},
			wantDiags: []string{"1:1: invalid YAML: unknown anchor 'nowhere' referenced (hint: define the anchor with &name before using it as *name)"},
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
