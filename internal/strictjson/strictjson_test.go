package strictjson_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/strictjson"
)

// level is a scalar of its own, as a contract's role or duration is.
type level string

func (l *level) UnmarshalText(b []byte) error {
	switch string(b) {
	case "", "low", "high": // "": left out
		*l = level(b)
		return nil
	}
	return fmt.Errorf("%q: want low or high", b)
}

type doc struct {
	Name  string  `json:"name"`
	Count int     `json:"count,omitempty"`
	Ratio float64 `json:"ratio"`
	On    bool    `json:"on"`
	Level level   `json:"level"`
	Items []item  `json:"items"`
	// Size, Limit and ByType: an optional value, a 64-bit count, and an
	// object keyed by names of its own.
	Size   int64           `json:"size,omitempty"`
	Limit  *item           `json:"limit,omitempty"`
	ByType map[string]item `json:"by_type,omitempty"`
	hidden int             //nolint:unused // an unexported field, which the decoder must treat as unknown
	Skip   string          `json:"-"`
}

type item struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags"`
}

func TestDecode(t *testing.T) {
	for name, tc := range map[string]struct {
		in       string
		want     doc
		wantErrs []string
	}{
		"good": {
			in:   `{"name": "a", "count": 2, "ratio": 0.5, "on": true, "level": "low", "items": [{"id": "x", "tags": ["t"]}, {"id": "y", "tags": null}]}`,
			want: doc{Name: "a", Count: 2, Ratio: 0.5, On: true, Level: "low", Items: []item{{ID: "x", Tags: []string{"t"}}, {ID: "y"}}},
		},
		"every problem at once": {
			in: "{\n  \"name\": 1,\n  \"count\": 1.5,\n  \"ratio\": \"x\",\n  \"on\": \"yes\",\n  \"level\": \"mid\",\n  \"items\": [{\"id\": \"x\", \"idd\": 2}, 3],\n  \"name\": \"b\",\n  \"Skip\": \"\",\n  \"hidden\": 1\n}",
			wantErrs: []string{
				`2:11: name: want a string, got 1`,
				`3:12: count: want a whole number, got 1.5`,
				`4:12: ratio: want a number, got "x"`,
				`5:9: on: want true or false, got "yes"`,
				`6:12: level: "mid": want low or high`,
				`7:25: items[0].idd: unknown field; the fields here are id, tags`,
				`7:36: items[1]: want an object, got 3`,
				`8:3: name: given twice (first at 2:3)`,
				`9:3: Skip: unknown field; the fields here are name, count, ratio, on, level, items, size, limit, by_type`,
				`10:3: hidden: unknown field; the fields here are name, count, ratio, on, level, items, size, limit, by_type`,
			},
		},
		"optional, 64-bit and keyed values": {
			in: `{"size": 9007199254740993, "limit": {"id": "l"}, "by_type": {"h100": {"id": "h"}, "a100": {"id": "a", "tags": ["x"]}}}`,
			want: doc{Size: 9007199254740993, Limit: &item{ID: "l"},
				ByType: map[string]item{"h100": {ID: "h"}, "a100": {ID: "a", Tags: []string{"x"}}}},
		},
		"problems in optional, 64-bit and keyed values": {
			in: "{\"size\": 1.5, \"limit\": {\"idd\": 1},\n \"by_type\": {\"h100\": {\"id\": 2}, \"h100\": {}, \"a100\": 3}, \"limit\": null}",
			wantErrs: []string{
				`1:10: size: want a whole number, got 1.5`,
				`1:25: limit.idd: unknown field; the fields here are id, tags`,
				`2:29: by_type.h100.id: want a string, got 2`,
				`2:33: by_type.h100: given twice (first at 2:14)`,
				`2:53: by_type.a100: want an object, got 3`,
				`2:57: limit: given twice (first at 1:15)`,
			},
		},
		"a map for a list":               {in: `{"by_type": []}`, wantErrs: []string{`1:13: by_type: want an object, got a list`}},
		"number for a scalar of its own": {in: `{"level": 3}`, wantErrs: []string{`1:11: level: want a string, got 3: "3": want low or high`}},
		"unquoted good value":            {in: `{"level": true}`, wantErrs: []string{`1:11: level: want a string, got true: "true": want low or high`}},
		"null for a scalar":              {in: `{"name": null}`, wantErrs: []string{`1:10: name: null: give a value or leave the field out`}},
		"empty":                          {in: " \n", wantErrs: []string{`1:1: empty document: want a doc`}},
		"syntax":                         {in: "{\"name\": \"a\",\n}", wantErrs: []string{`2:1: invalid JSON: invalid character '}' looking for beginning of object key string`}},
		"truncated":                      {in: `{"items": [`, wantErrs: []string{`1:12: invalid JSON: the document ends too early (a missing } or ]?)`}},
		"trailing data":                  {in: `{} {}`, wantErrs: []string{`1:4: unexpected data after the document: a file holds one JSON object`}},
		"not an object":                  {in: `[]`, wantErrs: []string{`1:1: want an object, got a list`}},
	} {
		t.Run(name, func(t *testing.T) {
			var got doc
			_, err := strictjson.Decode([]byte(tc.in), &got, "want a doc")
			if tc.wantErrs == nil {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(doc{})); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if diff := cmp.Diff(tc.wantErrs, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLocate(t *testing.T) {
	in := "{\n  \"name\": \"a\",\n  \"items\": [\n    {\"id\": \"\"}\n  ]\n}"
	var d doc
	document, err := strictjson.Decode([]byte(in), &d, "")
	if err != nil {
		t.Fatal(err)
	}
	errs := []error{
		&strictjson.FieldError{Path: "items[0].id", Msg: "required"},
		&strictjson.FieldError{Path: "items[0].tags", Msg: "missing: at its object"},
		&strictjson.FieldError{Path: "level", Msg: "missing: at the document"},
		errors.New("not a field error"),
	}
	want := []string{
		"4:12: items[0].id: required",
		"4:5: items[0].tags: missing: at its object",
		"1:1: level: missing: at the document",
		"not a field error",
	}
	if diff := cmp.Diff(want, strings.Split(document.Locate(errs).Error(), "\n")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	many := make([]error, strictjson.MaxErrors+5)
	for i := range many {
		many[i] = &strictjson.FieldError{Path: "name", Msg: "bad"}
	}
	lines := strings.Split(document.Locate(many).Error(), "\n")
	if len(lines) != strictjson.MaxErrors+1 || lines[len(lines)-1] != "too many problems: fix these first" {
		t.Errorf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

// FuzzDecode: no input panics, and what Decode accepts it accepts again
// once written back by encoding/json, as the same value.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"name": "a", "items": [{"id": "x"}]}`, `{"level": "mid"}`, `{"items": [`, `{} {}`, `[]`, `{"name": null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d doc
		if _, err := strictjson.Decode(data, &d, ""); err != nil {
			return
		}
		out, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var again doc
		if _, err := strictjson.Decode(out, &again, ""); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if diff := cmp.Diff(d, again, cmp.AllowUnexported(doc{})); diff != "" {
			t.Errorf("(-first +again):\n%s", diff)
		}
	})
}

func TestUnique(t *testing.T) {
	for name, tc := range map[string]struct {
		list []string
		want []string
	}{
		"none":            {nil, nil},
		"distinct":        {[]string{"a", "b"}, nil},
		"empty and blank": {[]string{"", "a", "  "}, []string{"l[0]: empty user name", "l[2]: empty user name"}},
		"twice":           {[]string{"a", "b", "a", "a"}, []string{`l[2]: "a" is listed twice`, `l[3]: "a" is listed twice`}},
	} {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, err := range strictjson.Unique("l", tc.list, "user name") {
				got = append(got, err.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// named holds the other kinds a contract may use: maps keyed by name,
// optional values behind pointers, 64-bit counts.
type named struct {
	Limits map[string]item `json:"limits"`
	Lines  map[string]int  `json:"lines"`
	Best   *item           `json:"best,omitempty"`
	Most   *int            `json:"most,omitempty"`
	Total  int64           `json:"total"`
}

func TestDecodeMapsAndPointers(t *testing.T) {
	seven := 7
	for name, tc := range map[string]struct {
		in       string
		want     named
		wantErrs []string
	}{
		"good": {
			in:   `{"limits": {"a.b": {"id": "x", "tags": []}}, "lines": {"u": 3}, "best": {"id": "y", "tags": null}, "most": 7, "total": 9007199254740993}`,
			want: named{Limits: map[string]item{"a.b": {ID: "x", Tags: []string{}}}, Lines: map[string]int{"u": 3}, Best: &item{ID: "y"}, Most: &seven, Total: 9007199254740993},
		},
		"null for a map and a pointer": {in: `{"limits": null, "best": null}`, want: named{}},
		"every problem at once": {
			in: "{\n  \"limits\": {\"a\": {\"idd\": 1}, \"a\": {}},\n  \"lines\": {\"u\": \"3\"},\n  \"best\": 3,\n  \"most\": 1.5,\n  \"total\": 99999999999999999999\n}",
			wantErrs: []string{
				`2:20: limits.a.idd: unknown field; the fields here are id, tags`,
				`2:31: limits.a: given twice (first at 2:14)`,
				`3:18: lines.u: want a whole number, got "3"`,
				`4:11: best: want an object, got 3`,
				`5:11: most: want a whole number, got 1.5`,
				`6:12: total: want a whole number, got 99999999999999999999`,
			},
		},
		"a list for a map": {in: `{"lines": [1]}`, wantErrs: []string{`1:11: lines: want an object, got a list`}},
	} {
		t.Run(name, func(t *testing.T) {
			var got named
			_, err := strictjson.Decode([]byte(tc.in), &got, "want a named")
			if tc.wantErrs == nil {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if diff := cmp.Diff(tc.wantErrs, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInFile: every problem of a joined error gets the file's path, as
// "path:line:col: …" where it has a position and "path: …" where it has
// none, and each *FieldError stays reachable; a single error too.
func TestInFile(t *testing.T) {
	joined := errors.Join(
		&strictjson.FieldError{Line: 3, Col: 4, Path: "tenants[0].name", Msg: "required"},
		&strictjson.FieldError{Path: "cluster", Msg: "no position"},
		errors.New("not a field error"),
	)
	got := strictjson.InFile("/etc/strata/tenants.json", joined)
	want := []string{
		"/etc/strata/tenants.json:3:4: tenants[0].name: required",
		"/etc/strata/tenants.json: cluster: no position",
		"/etc/strata/tenants.json: not a field error",
	}
	if diff := cmp.Diff(want, strings.Split(got.Error(), "\n")); diff != "" {
		t.Errorf("InFile (-want +got):\n%s", diff)
	}
	var fe *strictjson.FieldError
	if !errors.As(got, &fe) || fe.Path != "tenants[0].name" {
		t.Errorf("errors.As found %+v, want the first FieldError", fe)
	}
	if got := strictjson.InFile("p.json", errors.New("decode: bad")).Error(); got != "p.json: decode: bad" {
		t.Errorf("one error = %q", got)
	}
}
