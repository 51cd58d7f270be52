package slurmrest

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	v0042 "github.com/strata-hpc/strata/internal/slurmrest/v0042"
	v0045 "github.com/strata-hpc/strata/internal/slurmrest/v0045"
)

// gpus builds the GPUs a node gets for indices, all of one type.
func gpus(node, typ string, indices ...int) []GPU {
	out := make([]GPU, 0, len(indices))
	for _, i := range indices {
		out = append(out, GPU{Node: node, Index: i, Type: typ})
	}
	return out
}

func TestJobGPUs(t *testing.T) {
	tests := map[string]struct {
		nodes   string
		detail  []string
		want    []GPU
		wantErr string
	}{
		"two nodes, one detail each in node order": {
			nodes:  "gpu[2-3]",
			detail: []string{"gpu:h100:4(IDX:0-3)", "gpu:h100:2(IDX:4-5)"},
			want:   append(gpus("gpu2", "h100", 0, 1, 2, 3), gpus("gpu3", "h100", 4, 5)...),
		},
		"one node, untyped": {
			nodes:  "gpu7",
			detail: []string{"gpu:2(IDX:0,2)"},
			want:   gpus("gpu7", "", 0, 2),
		},
		"one node with no GPUs": {
			nodes:  "cpu[1-2]",
			detail: []string{"gpu:h100:0(IDX:N/A)", "gpu:1(IDX:3)"},
			want:   gpus("cpu2", "", 3),
		},
		"node without GPUs only": {
			nodes:  "cpu1",
			detail: []string{"gpu:h100:0(IDX:N/A)"},
			want:   nil,
		},
		"pending job: no detail": {
			nodes:  "",
			detail: nil,
			want:   nil,
		},
		"pending job with a planned node list": {
			nodes:  "gpu[2-3]",
			detail: []string{},
			want:   nil,
		},
		"fewer details than nodes": {
			nodes:   "gpu[2-3]",
			detail:  []string{"gpu:h100:4(IDX:0-3)"},
			wantErr: `gres_detail has 1 entries for 2 nodes ("gpu[2-3]"): refusing to guess`,
		},
		"more details than nodes": {
			nodes:   "gpu2",
			detail:  []string{"gpu:h100:4(IDX:0-3)", "gpu:h100:2(IDX:4-5)"},
			wantErr: "refusing to guess",
		},
		"detail but no nodes": {
			nodes:   "(null)",
			detail:  []string{"gpu:h100:4(IDX:0-3)"},
			wantErr: "gres_detail has 1 entries for 0 nodes",
		},
		"bad node list": {
			nodes:   "gpu[2-",
			detail:  []string{"gpu:h100:4(IDX:0-3)"},
			wantErr: "job nodes: hostlist",
		},
		"bad detail on the second node": {
			nodes:   "gpu[2-3]",
			detail:  []string{"gpu:h100:1(IDX:0)", "gpu:h100:1(IDX:x)"},
			wantErr: `node gpu3: GRES "gpu:h100:1(IDX:x)"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := JobGPUs(tc.nodes, tc.detail)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("JobGPUs(%q, %q) = %v, %v; want error containing %q", tc.nodes, tc.detail, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("JobGPUs(%q, %q): %v", tc.nodes, tc.detail, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("JobGPUs(%q, %q) mismatch (-want +got):\n%s", tc.nodes, tc.detail, diff)
			}
		})
	}
}

var parseGRESDetailTests = map[string]struct {
	node    string
	s       string
	want    []GPU
	wantErr string
}{
	"typed range": {
		node: "gpu2",
		s:    "gpu:h100:4(IDX:0-3)",
		want: gpus("gpu2", "h100", 0, 1, 2, 3),
	},
	"untyped list": {
		node: "gpu2",
		s:    "gpu:2(IDX:0,2)",
		want: gpus("gpu2", "", 0, 2),
	},
	"ranges and singles": {
		node: "gpu2",
		s:    "gpu:h100:5(IDX:0-1,4,6-7)",
		want: gpus("gpu2", "h100", 0, 1, 4, 6, 7),
	},
	"other GRES ignored": {
		node: "gpu2",
		s:    "gpu:h100:2(IDX:0-1),nic:1(IDX:0)",
		want: gpus("gpu2", "h100", 0, 1),
	},
	"other GRES first": {
		node: "gpu2",
		s:    "nic:1(IDX:0),gpu:a100:1(IDX:7)",
		want: gpus("gpu2", "a100", 7),
	},
	"two GPU types": {
		node: "gpu2",
		s:    "gpu:h100:1(IDX:0),gpu:a100:1(IDX:1)",
		want: []GPU{{Node: "gpu2", Index: 0, Type: "h100"}, {Node: "gpu2", Index: 1, Type: "a100"}},
	},
	"highest index allowed": {
		node: "gpu2",
		s:    "gpu:1(IDX:4096)",
		want: gpus("gpu2", "", 4096),
	},
	"none allocated": {
		node: "gpu2",
		s:    "gpu:h100:0(IDX:N/A)",
		want: nil,
	},
	"empty": {
		node: "gpu2",
		s:    "",
		want: nil,
	},
	"null": {
		node: "gpu2",
		s:    "(null)",
		want: nil,
	},
	"non-numeric index range": {
		node:    "gpu2",
		s:       "gpu:h100:2(IDX:a-b)",
		wantErr: `node gpu2: GRES "gpu:h100:2(IDX:a-b)": index "a-b" is not a GPU index`,
	},
	"non-numeric range end": {
		node:    "gpu2",
		s:       "gpu:h100:2(IDX:0-b)",
		wantErr: `index range "0-b" is not valid`,
	},
	"backwards range": {
		node:    "gpu2",
		s:       "gpu:h100:2(IDX:3-1)",
		wantErr: `index range "3-1" is not valid`,
	},
	"negative index": {
		node:    "gpu2",
		s:       "gpu:1(IDX:-1)",
		wantErr: `index "-1" is not a GPU index`,
	},
	"index past the bound": {
		node:    "gpu2",
		s:       "gpu:1(IDX:4097)",
		wantErr: `index "4097" is not a GPU index`,
	},
	"range past the bound": {
		node:    "gpu2",
		s:       "gpu:2(IDX:0-100000)",
		wantErr: `index range "0-100000" is not valid`,
	},
	"no IDX": {
		node:    "gpu2",
		s:       "gpu:h100:2",
		wantErr: `node gpu2: GRES "gpu:h100:2" has no IDX list`,
	},
	"too many fields": {
		node:    "gpu2",
		s:       "gpu:h100:sxm:2(IDX:0-1)",
		wantErr: "too many ':' fields",
	},
}

func TestParseGRESDetail(t *testing.T) {
	for name, tc := range parseGRESDetailTests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseGRESDetail(tc.node, tc.s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseGRESDetail(%q, %q) = %v, %v; want error containing %q", tc.node, tc.s, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseGRESDetail(%q, %q): %v", tc.node, tc.s, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseGRESDetail(%q, %q) mismatch (-want +got):\n%s", tc.node, tc.s, diff)
			}
		})
	}
}

func FuzzParseGRESDetail(f *testing.F) {
	for _, tc := range parseGRESDetailTests {
		f.Add(tc.node, tc.s)
	}
	f.Fuzz(func(t *testing.T, node, s string) {
		got, err := ParseGRESDetail(node, s)
		if err != nil {
			if got != nil {
				t.Fatalf("ParseGRESDetail(%q, %q) returned GPUs with its error", node, s)
			}
			return
		}
		for _, g := range got {
			if g.Index < 0 || g.Index > maxGPUIndex {
				t.Fatalf("ParseGRESDetail(%q, %q): GPU index %d outside 0..%d", node, s, g.Index, maxGPUIndex)
			}
			if g.Node != node {
				t.Fatalf("ParseGRESDetail(%q, %q): GPU on node %q", node, s, g.Node)
			}
			if strings.ContainsAny(g.Type, ":(") {
				t.Fatalf("ParseGRESDetail(%q, %q): GPU type %q", node, s, g.Type)
			}
		}
	})
}

func TestCountGPUs(t *testing.T) {
	tests := map[string]struct {
		s        string
		want     int
		wantType string
	}{
		"typed":                               {s: "gpu:h100:8", want: 8, wantType: "h100"},
		"typed with IDX":                      {s: "gpu:h100:4(IDX:0-3)", want: 4, wantType: "h100"},
		"typed with sockets":                  {s: "gpu:h100:8(S:0-1)", want: 8, wantType: "h100"},
		"untyped and a nic":                   {s: "gpu:2,nic:1", want: 2, wantType: ""},
		"two types, first one":                {s: "gpu:h100:4,gpu:a100:2", want: 6, wantType: "h100"},
		"untyped then typed":                  {s: "gpu:1,gpu:a100:2", want: 3, wantType: "a100"},
		"none allocated":                      {s: "gpu:h100:0(IDX:N/A)", want: 0, wantType: "h100"},
		"null":                                {s: "(null)", want: 0, wantType: ""},
		"empty":                               {s: "", want: 0, wantType: ""},
		"no count":                            {s: "gpu", want: 0, wantType: ""},
		"bad count":                           {s: "gpu:h100:x", want: 0, wantType: ""},
		"a count no node has, and one it has": {s: "gpu:h100:9223372036854775807,gpu:h100:1", want: 1, wantType: "h100"},
		"a negative count":                    {s: "gpu:-3,gpu:2", want: 2, wantType: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n, typ := countGPUs(tc.s)
			if n != tc.want || typ != tc.wantType {
				t.Errorf("countGPUs(%q) = %d, %q; want %d, %q", tc.s, n, typ, tc.want, tc.wantType)
			}
		})
	}
}

var parseTRESTests = map[string]struct {
	s       string
	want    TRESList
	wantErr string
}{
	"job allocation": {
		s: "cpu=2,mem=2000M,node=1,billing=2,gres/gpu=8,gres/gpu:h100=8",
		want: TRESList{
			{Type: "cpu", Count: 2},
			{Type: "mem", Count: 2000},
			{Type: "node", Count: 1},
			{Type: "billing", Count: 2},
			{Type: "gres", Name: "gpu", Count: 8},
			{Type: "gres", Name: "gpu:h100", Count: 8},
		},
	},
	"GiB to MiB":               {s: "mem=2G", want: TRESList{{Type: "mem", Count: 2048}}},
	"fractional GiB":           {s: "mem=1.5G", want: TRESList{{Type: "mem", Count: 1536}}},
	"TiB to MiB":               {s: "mem=1T", want: TRESList{{Type: "mem", Count: 1048576}}},
	"KiB to MiB truncates":     {s: "mem=512K", want: TRESList{{Type: "mem", Count: 0}}},
	"KiB to MiB whole":         {s: "mem=4096K", want: TRESList{{Type: "mem", Count: 4}}},
	"lower-case unit":          {s: "mem=2g", want: TRESList{{Type: "mem", Count: 2048}}},
	"no unit is MiB":           {s: "mem=2048", want: TRESList{{Type: "mem", Count: 2048}}},
	"license":                  {s: "license/matlab=1", want: TRESList{{Type: "license", Name: "matlab", Count: 1}}},
	"blanks around items":      {s: " cpu=2 , node=1", want: TRESList{{Type: "cpu", Count: 2}, {Type: "node", Count: 1}}},
	"negative count (cleared)": {s: "gres/gpu=-1", want: TRESList{{Type: "gres", Name: "gpu", Count: -1}}},
	"empty":                    {s: "", want: nil},
	"null":                     {s: "(null)", want: nil},
	"no count":                 {s: "cpu", wantErr: `TRES "cpu": item "cpu" is not key=count`},
	"no key":                   {s: "=5", wantErr: `item "=5" is not key=count`},
	"trailing comma":           {s: "cpu=2,", wantErr: `item "" is not key=count`},
	"count not a number":       {s: "gpu=x", wantErr: `TRES "gpu=x": item "gpu=x": count "x" is not a TRES count`},
	"unit without a number":    {s: "mem=G", wantErr: `count "" is not a TRES count`},
	"empty count":              {s: "cpu=", wantErr: `count "" is not a TRES count`},
	"not finite":               {s: "cpu=NaN", wantErr: `count "NaN" is not a TRES count`},
	"too large after its unit": {s: "gres/gpu=999999999999999999G", wantErr: `count "999999999999999999" is too large to be a TRES count`},
	"too large in terabytes":   {s: "mem=1e15T", wantErr: `is too large to be a TRES count`},
}

func TestParseTRES(t *testing.T) {
	for name, tc := range parseTRESTests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseTRES(tc.s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseTRES(%q) = %v, %v; want error containing %q", tc.s, got, err, tc.wantErr)
				}
				if got != nil {
					t.Errorf("ParseTRES(%q) returned %v with its error", tc.s, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTRES(%q): %v", tc.s, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseTRES(%q) mismatch (-want +got):\n%s", tc.s, diff)
			}
		})
	}
}

func TestTRESListString(t *testing.T) {
	tests := map[string]struct {
		l    TRESList
		want string
	}{
		"nil": {l: nil, want: ""},
		"sorted by key=count text": {
			l: TRESList{
				{Type: "node", Count: 1},
				{Type: "gres", Name: "gpu", Count: 8},
				{Type: "cpu", Count: 2},
				{Type: "gres", Name: "gpu:h100", Count: 8},
				{Type: "mem", Count: 2000},
				{Type: "billing", Count: 2},
			},
			// ':' sorts before '=', so the typed GPU comes first.
			want: "billing=2,cpu=2,gres/gpu:h100=8,gres/gpu=8,mem=2000,node=1",
		},
		"negative count": {l: TRESList{{Type: "gres", Name: "gpu", Count: -1}}, want: "gres/gpu=-1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.l.String()); diff != "" {
				t.Errorf("String() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTRESListGet(t *testing.T) {
	l := TRESList{
		{Type: "cpu", Count: 2},
		{Type: "mem", Count: 2000},
		{Type: "gres", Name: "gpu", Count: 8},
		{Type: "gres", Name: "gpu:h100", Count: 6},
	}
	tests := map[string]struct {
		key    string
		want   int64
		wantOK bool
	}{
		"plain type":   {key: "cpu", want: 2, wantOK: true},
		"memory":       {key: "mem", want: 2000, wantOK: true},
		"gres":         {key: "gres/gpu", want: 8, wantOK: true},
		"typed gres":   {key: "gres/gpu:h100", want: 6, wantOK: true},
		"gres by name": {key: "gpu", want: 0, wantOK: false},
		"type only":    {key: "gres", want: 0, wantOK: false},
		"absent":       {key: "node", want: 0, wantOK: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := l.Get(tc.key)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("Get(%q) = %d, %v; want %d, %v", tc.key, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func FuzzParseTRES(f *testing.F) {
	for _, tc := range parseTRESTests {
		f.Add(tc.s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseTRES(s)
		if err != nil {
			if l != nil {
				t.Fatalf("ParseTRES(%q) returned %v with its error", s, l)
			}
			return
		}
		if isUnset(s) {
			if l != nil {
				t.Fatalf("ParseTRES(%q) = %v, want nil", s, l)
			}
			return
		}
		if n := strings.Count(s, ",") + 1; len(l) != n {
			t.Fatalf("ParseTRES(%q) gave %d entries for %d items", s, len(l), n)
		}
		_ = l.String()
		for _, x := range l {
			if _, ok := l.Get(x.Key()); !ok {
				t.Fatalf("ParseTRES(%q): Get(%q) finds nothing", s, x.Key())
			}
		}
	})
}

func TestNoVal(t *testing.T) {
	tests := map[string]struct {
		in        *v0045.V0045Uint32NoValStruct
		want      NoVal
		wantValue int64
		wantOK    bool
		wantPtr   *int64
	}{
		"nil": {
			in:   nil,
			want: NoVal{},
		},
		"empty struct": {
			in:   &v0045.V0045Uint32NoValStruct{},
			want: NoVal{},
		},
		"unset with a number": {
			in:        &v0045.V0045Uint32NoValStruct{Set: ptr(false), Number: ptr(int64(5))},
			want:      NoVal{Number: 5},
			wantValue: 5,
		},
		"infinite": {
			in:   &v0045.V0045Uint32NoValStruct{Set: ptr(true), Infinite: ptr(true), Number: ptr(int64(0))},
			want: NoVal{Set: true, Infinite: true},
		},
		"set": {
			in:        &v0045.V0045Uint32NoValStruct{Set: ptr(true), Infinite: ptr(false), Number: ptr(int64(90))},
			want:      NoVal{Set: true, Number: 90},
			wantValue: 90,
			wantOK:    true,
			wantPtr:   ptr(int64(90)),
		},
		"set to zero": {
			in:      &v0045.V0045Uint32NoValStruct{Set: ptr(true), Number: ptr(int64(0))},
			want:    NoVal{Set: true},
			wantOK:  true,
			wantPtr: ptr(int64(0)),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := noVal(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("noVal mismatch (-want +got):\n%s", diff)
			}
			v, ok := got.Value()
			if v != tc.wantValue || ok != tc.wantOK {
				t.Errorf("Value() = %d, %v; want %d, %v", v, ok, tc.wantValue, tc.wantOK)
			}
			if diff := cmp.Diff(tc.wantPtr, noValPtr(tc.in)); diff != "" {
				t.Errorf("noValPtr mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoValTime(t *testing.T) {
	tests := map[string]struct {
		in   *v0042.V0042Uint64NoValStruct
		want time.Time
	}{
		"nil":      {in: nil, want: time.Time{}},
		"unset":    {in: &v0042.V0042Uint64NoValStruct{Set: ptr(false), Number: ptr(int64(1795978614))}, want: time.Time{}},
		"infinite": {in: &v0042.V0042Uint64NoValStruct{Set: ptr(true), Infinite: ptr(true)}, want: time.Time{}},
		"zero":     {in: &v0042.V0042Uint64NoValStruct{Set: ptr(true), Number: ptr(int64(0))}, want: time.Time{}},
		"set":      {in: &v0042.V0042Uint64NoValStruct{Set: ptr(true), Number: ptr(int64(1795978614))}, want: time.Unix(1795978614, 0)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := noValTime(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("noValTime mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoValMinutes(t *testing.T) {
	tests := map[string]struct {
		in   *v0045.V0045Uint32NoValStruct
		want time.Duration
	}{
		"nil":      {in: nil, want: 0},
		"unset":    {in: &v0045.V0045Uint32NoValStruct{Set: ptr(false), Number: ptr(int64(90))}, want: 0},
		"infinite": {in: &v0045.V0045Uint32NoValStruct{Set: ptr(true), Infinite: ptr(true), Number: ptr(int64(90))}, want: 0},
		"zero":     {in: &v0045.V0045Uint32NoValStruct{Set: ptr(true), Number: ptr(int64(0))}, want: 0},
		"90":       {in: &v0045.V0045Uint32NoValStruct{Set: ptr(true), Number: ptr(int64(90))}, want: 90 * time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := noValMinutes(tc.in); got != tc.want {
				t.Errorf("noValMinutes = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNoValF(t *testing.T) {
	tests := map[string]struct {
		in     *v0045.V0045Float64NoValStruct
		want   float64
		wantOK bool
	}{
		"nil":      {in: nil, want: 0, wantOK: false},
		"unset":    {in: &v0045.V0045Float64NoValStruct{Set: ptr(false), Number: ptr(0.5)}, want: 0.5, wantOK: false},
		"set":      {in: &v0045.V0045Float64NoValStruct{Set: ptr(true), Number: ptr(0.25)}, want: 0.25, wantOK: true},
		"infinite": {in: &v0045.V0045Float64NoValStruct{Set: ptr(true), Infinite: ptr(true), Number: ptr(0.25)}, want: math.Inf(1), wantOK: true},
		"infinite but not set": {
			in:   &v0045.V0045Float64NoValStruct{Set: ptr(false), Infinite: ptr(true)},
			want: math.Inf(1), wantOK: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := noValF(tc.in)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("noValF = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestSetNoValRoundTrip builds NoVal structs of two generated types with
// setNoVal, reads them back with noVal, and checks the JSON slurmrestd is
// sent.
func TestSetNoValRoundTrip(t *testing.T) {
	tests := map[string]struct {
		build    func() (NoVal, any)
		want     NoVal
		wantJSON string
	}{
		"v0045 uint32 set": {
			build: func() (NoVal, any) {
				p := setNoVal[v0045.V0045Uint32NoValStruct](42)
				return noVal(p), p
			},
			want:     NoVal{Set: true, Number: 42},
			wantJSON: `{"number":42,"set":true}`,
		},
		"v0042 uint64 set": {
			build: func() (NoVal, any) {
				p := setNoVal[v0042.V0042Uint64NoValStruct](1795978614)
				return noVal(p), p
			},
			want:     NoVal{Set: true, Number: 1795978614},
			wantJSON: `{"number":1795978614,"set":true}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, wire := tc.build()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("noVal mismatch (-want +got):\n%s", diff)
			}
			b, err := json.Marshal(wire)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantJSON, string(b)); diff != "" {
				t.Errorf("JSON mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsUnset(t *testing.T) {
	tests := map[string]struct {
		s    string
		want bool
	}{
		"empty":          {s: "", want: true},
		"blank":          {s: "  ", want: true},
		"NONE":           {s: "NONE", want: true},
		"None":           {s: "None", want: true},
		"none":           {s: "none", want: true},
		"N/A":            {s: "N/A", want: true},
		"n/a":            {s: "n/a", want: true},
		"(null)":         {s: "(null)", want: true},
		"padded NONE":    {s: " NONE\n", want: true},
		"host name":      {s: "gpu1", want: false},
		"null bare":      {s: "null", want: false},
		"zero":           {s: "0", want: false},
		"NONE in a word": {s: "NONEX", want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := isUnset(tc.s); got != tc.want {
				t.Errorf("isUnset(%q) = %v, want %v", tc.s, got, tc.want)
			}
		})
	}
}

func TestUnset(t *testing.T) {
	tests := map[string]struct {
		in   *string
		want string
	}{
		"nil":   {in: nil, want: ""},
		"None":  {in: ptr("None"), want: ""},
		"value": {in: ptr("gpu[1-2]"), want: "gpu[1-2]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := unset(tc.in); got != tc.want {
				t.Errorf("unset = %q, want %q", got, tc.want)
			}
		})
	}
}

var sentinels = map[string]error{
	"ErrNotFound":        ErrNotFound,
	"ErrExists":          ErrExists,
	"ErrPermission":      ErrPermission,
	"ErrJobPending":      ErrJobPending,
	"ErrRequeueDisabled": ErrRequeueDisabled,
	"ErrUnsupported":     ErrUnsupported,
}

func TestCheckResponse(t *testing.T) {
	const (
		kindNil  = "nil"
		kindAuth = "auth"
		kindAPI  = "api"
	)
	tests := map[string]struct {
		status   int
		body     string
		wantKind string
		wantIs   string   // name of the one sentinel errors.Is matches, or ""
		wantMsg  []string // substrings of Error()
	}{
		"200 with no errors": {
			status: 200, body: `{"errors":[],"warnings":[]}`, wantKind: kindNil,
		},
		"200 with an empty body": {
			status: 200, body: ``, wantKind: kindNil,
		},
		"304 not modified": {
			status: 304, body: ``, wantKind: kindNil,
		},
		"401 without a body": {
			status: 401, body: ``, wantKind: kindAuth,
			wantMsg: []string{`for user "alice" (HTTP 401: Unauthorized)`, "scontrol token username=alice"},
		},
		"511 authentication error": {
			status: 511, body: `{"errors":[{"description":"Protocol authentication error","error_number":1007}]}`,
			wantKind: kindAuth,
			wantMsg:  []string{"HTTP 511: Protocol authentication error (slurm error 1007)", "scontrol token"},
		},
		"500 authentication error number": {
			status: 500, body: `{"errors":[{"description":"Unexpected","error_number":1007}]}`,
			wantKind: kindAuth,
			wantMsg:  []string{"HTTP 500: Unexpected (slurm error 1007)", "scontrol token"},
		},
		"500 authentication error text": {
			status: 500, body: `{"errors":[{"error":"Authentication failure"}]}`,
			wantKind: kindAuth,
			wantMsg:  []string{"HTTP 500: Authentication failure)"},
		},
		"404 without a body": {
			status: 404, body: ``, wantKind: kindAPI, wantIs: "ErrNotFound",
			wantMsg: []string{"get job 42: slurmrestd answered HTTP 404: Not Found"},
		},
		"invalid job id": {
			status: 500, body: `{"errors":[{"description":"Invalid job id specified","error_number":2017}]}`,
			wantKind: kindAPI, wantIs: "ErrNotFound",
			wantMsg: []string{"HTTP 500: Invalid job id specified (slurm error 2017)"},
		},
		"requeue disabled": {
			status: 422, body: `{"errors":[{"description":"Requeue of job failed","error":"Requested operation is presently disabled","error_number":2037}]}`,
			wantKind: kindAPI, wantIs: "ErrRequeueDisabled",
			wantMsg: []string{"HTTP 422: Requeue of job failed: Requested operation is presently disabled (slurm error 2037)"},
		},
		"job pending": {
			status: 422, body: `{"errors":[{"error":"Job is pending execution","error_number":2024}]}`,
			wantKind: kindAPI, wantIs: "ErrJobPending",
			wantMsg: []string{"Job is pending execution (slurm error 2024)"},
		},
		"access denied": {
			status: 422, body: `{"errors":[{"error":"Access/permission denied","error_number":2002}]}`,
			wantKind: kindAPI, wantIs: "ErrPermission",
			wantMsg: []string{"Access/permission denied (slurm error 2002)"},
		},
		"500 with a body that is not JSON": {
			status: 500, body: `<html>proxy error</html>`,
			wantKind: kindAPI,
			wantMsg:  []string{"HTTP 500: Internal Server Error"},
		},
		"200 with errors": {
			status: 200, body: `{"errors":[{"description":"Unable to query jobs","error_number":9999}]}`,
			wantKind: kindAPI,
			wantMsg:  []string{"HTTP 200: Unable to query jobs (slurm error 9999)"},
		},
		"302 redirect": {
			status: 302, body: ``, wantKind: kindAPI,
			wantMsg: []string{"HTTP 302: Found"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := checkResponse("get job 42", "alice", tc.status, []byte(tc.body))
			var authErr *AuthError
			var apiErr *APIError
			switch tc.wantKind {
			case kindNil:
				if err != nil {
					t.Fatalf("checkResponse(%d, %q) = %v, want nil", tc.status, tc.body, err)
				}
				return
			case kindAuth:
				if !errors.As(err, &authErr) {
					t.Fatalf("checkResponse(%d, %q) = %T %v, want *AuthError", tc.status, tc.body, err, err)
				}
				if authErr.Status != tc.status || authErr.User != "alice" || authErr.Op != "get job 42" {
					t.Errorf("AuthError = %+v, want status %d, user alice, op %q", authErr, tc.status, "get job 42")
				}
			case kindAPI:
				if !errors.As(err, &apiErr) {
					t.Fatalf("checkResponse(%d, %q) = %T %v, want *APIError", tc.status, tc.body, err, err)
				}
				if apiErr.Status != tc.status || apiErr.Op != "get job 42" {
					t.Errorf("APIError = %+v, want status %d, op %q", apiErr, tc.status, "get job 42")
				}
			}
			for _, m := range tc.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
			for sname, s := range sentinels {
				if got, want := errors.Is(err, s), sname == tc.wantIs; got != want {
					t.Errorf("errors.Is(err, %s) = %v, want %v", sname, got, want)
				}
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	tests := map[string]struct {
		body string
		want []string
	}{
		"two warnings": {
			body: `{"warnings":[{"description":"Job 42 not modified","source":"slurm_update_job"},{"description":"second"}],"errors":[]}`,
			want: []string{"Job 42 not modified", "second"},
		},
		"no warnings": {body: `{"errors":[]}`, want: []string{}},
		"not JSON":    {body: `oops`, want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, warnings([]byte(tc.body))); diff != "" {
				t.Errorf("warnings(%q) mismatch (-want +got):\n%s", tc.body, diff)
			}
		})
	}
}

// writeToken writes a token file and gives it mtime, so that a test does
// not depend on the file system's timestamp resolution.
func writeToken(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestFileToken(t *testing.T) {
	mtime := time.Unix(1795978614, 0)
	tests := map[string]struct {
		content string
		want    string
		wantErr []string
	}{
		"bare token":             {content: "eyJhbGci.eyJzdW4i.c2ln", want: "eyJhbGci.eyJzdW4i.c2ln"},
		"token and newline":      {content: "eyJhbGci.eyJzdW4i.c2ln\n", want: "eyJhbGci.eyJzdW4i.c2ln"},
		"scontrol token output":  {content: "SLURM_JWT=eyJhbGci.eyJzdW4i.c2ln\n", want: "eyJhbGci.eyJzdW4i.c2ln"},
		"blanks around":          {content: "  \tSLURM_JWT=abc \n\n", want: "abc"},
		"empty file":             {content: "", wantErr: []string{"is empty", "scontrol token"}},
		"only blanks":            {content: " \n\t\n", wantErr: []string{"is empty", "scontrol token"}},
		"prefix without a token": {content: "SLURM_JWT=\n", wantErr: []string{"is empty", "scontrol token"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "token")
			writeToken(t, path, tc.content, mtime)
			ft := &FileToken{Path: path}
			got, err := ft.Token(context.Background(), "alice")
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Token() = %q, want an error", got)
				}
				for _, m := range append(tc.wantErr, path) {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("Token() error %q does not contain %q", err, m)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Token(): %v", err)
			}
			if got != tc.want {
				t.Errorf("Token() = %q, want %q", got, tc.want)
			}
		})
	}
}

// A token file others may read is used by the command-line tools, with a
// warning that names the file and says what to change; a private one gives
// no warning.
func TestFileTokenWarnsWhenExposed(t *testing.T) {
	for name, tc := range map[string]struct {
		mode os.FileMode
		warn bool
	}{
		"private":        {mode: 0o600},
		"world-readable": {mode: 0o644, warn: true},
		"world-writable": {mode: 0o602, warn: true},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "token")
			writeToken(t, path, "SLURM_JWT=abc\n", time.Unix(1795978614, 0))
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			var logs strings.Builder
			ft := &FileToken{Path: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			if got, err := ft.Token(context.Background(), "alice"); err != nil || got != "abc" {
				t.Fatalf("Token() = %q, %v; want abc", got, err)
			}
			warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), path) &&
				strings.Contains(logs.String(), "chmod o-rwx")
			if warned != tc.warn {
				t.Errorf("mode %04o: warned %v, want %v; log:\n%s", tc.mode, warned, tc.warn, logs.String())
			}
			if strings.Contains(logs.String(), "abc") {
				t.Errorf("the log quotes the token: %s", logs.String())
			}
		})
	}
}

func TestFileTokenRereadsChangedFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "token")
	mtime := time.Unix(1795978614, 0)
	writeToken(t, path, "SLURM_JWT=token-one\n", mtime)
	ft := &FileToken{Path: path}

	step := func(want string) {
		t.Helper()
		got, err := ft.Token(ctx, "alice")
		if err != nil {
			t.Fatalf("Token(): %v", err)
		}
		if got != want {
			t.Fatalf("Token() = %q, want %q", got, want)
		}
	}
	step("token-one")
	step("token-one") // unchanged file, same token

	// Rotated by cron: same size, later mtime.
	writeToken(t, path, "SLURM_JWT=token-two\n", mtime.Add(time.Minute))
	step("token-two")

	// Rotated again to a longer token with an mtime that went backwards.
	writeToken(t, path, "SLURM_JWT=token-three\n", mtime)
	step("token-three")

	// Emptied: an error, not the last good token.
	writeToken(t, path, "", mtime.Add(2*time.Minute))
	if got, err := ft.Token(ctx, "alice"); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("Token() of an emptied file = %q, %v; want an error saying it is empty", got, err)
	}

	// Removed: an error, not the last good token.
	writeToken(t, path, "SLURM_JWT=token-four\n", mtime.Add(3*time.Minute))
	step("token-four")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got, err := ft.Token(ctx, "alice"); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Token() of a removed file = %q, %v; want a not-exist error", got, err)
	}
}

func TestFileTokenMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-token")
	ft := &FileToken{Path: path}
	got, err := ft.Token(context.Background(), "alice")
	if err == nil {
		t.Fatalf("Token() = %q, want an error", got)
	}
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "token file") || !strings.Contains(err.Error(), path) {
		t.Errorf("Token() error = %v, want a not-exist error naming the token file %s", err, path)
	}
}

var testJWTKey = []byte("0123456789abcdef0123456789abcdef")

// parseJWT verifies tok as an HS256 token signed with key, taking the time
// from now, and returns its claims.
func parseJWT(t *testing.T, tok string, key []byte, now time.Time) (jwt.MapClaims, error) {
	t.Helper()
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return key, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithTimeFunc(func() time.Time { return now }))
	return claims, err
}

// wantClaims is what a token for user minted at iat for lifetime holds.
func wantClaims(user string, iat time.Time, lifetime time.Duration) jwt.MapClaims {
	return jwt.MapClaims{
		"sun": user,
		"iat": float64(iat.Unix()),
		"exp": float64(iat.Add(lifetime).Unix()),
	}
}

func TestKeySigner(t *testing.T) {
	ctx := context.Background()
	start := time.Unix(1795978614, 0)
	clock := start
	const lifetime = 10 * time.Minute
	k := newKeySigner(testJWTKey, lifetime, func() time.Time { return clock })

	first, err := k.Token(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	claims, err := parseJWT(t, first, testJWTKey, clock)
	if err != nil {
		t.Fatalf("token does not verify with the key: %v", err)
	}
	if diff := cmp.Diff(wantClaims("alice", start, lifetime), claims); diff != "" {
		t.Errorf("claims mismatch (-want +got):\n%s", diff)
	}
	if _, err := parseJWT(t, first, []byte("another key, 32 bytes long......"), clock); err == nil {
		t.Error("token verifies with another key")
	}

	// Reused while more than a fifth of the lifetime is left: up to 8m.
	clock = start.Add(lifetime*4/5 - time.Second)
	if again, err := k.Token(ctx, "alice"); err != nil || again != first {
		t.Errorf("Token() at +%v = %v, %v; want the first token again", clock.Sub(start), again, err)
	}

	// Another user gets a token of their own.
	bob, err := k.Token(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	claims, err = parseJWT(t, bob, testJWTKey, clock)
	if err != nil {
		t.Fatalf("bob's token does not verify: %v", err)
	}
	if diff := cmp.Diff(wantClaims("bob", clock, lifetime), claims); diff != "" {
		t.Errorf("bob's claims mismatch (-want +got):\n%s", diff)
	}

	// Past four fifths of the lifetime: a new token.
	clock = start.Add(lifetime*4/5 + time.Second)
	second, err := k.Token(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatalf("Token() at +%v returned the first token again", clock.Sub(start))
	}
	claims, err = parseJWT(t, second, testJWTKey, clock)
	if err != nil {
		t.Fatalf("second token does not verify: %v", err)
	}
	if diff := cmp.Diff(wantClaims("alice", clock, lifetime), claims); diff != "" {
		t.Errorf("second token's claims mismatch (-want +got):\n%s", diff)
	}
}

func TestKeySignerDefaultLifetime(t *testing.T) {
	now := time.Unix(1795978614, 0)
	k := newKeySigner(testJWTKey, 0, func() time.Time { return now })
	tok, err := k.Token(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	claims, err := parseJWT(t, tok, testJWTKey, now)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantClaims("alice", now, 10*time.Minute), claims); diff != "" {
		t.Errorf("claims mismatch (-want +got):\n%s", diff)
	}
}

func TestKeySignerNoUser(t *testing.T) {
	k := newKeySigner(testJWTKey, time.Minute, time.Now)
	tok, err := k.Token(context.Background(), "")
	if err == nil || !strings.Contains(err.Error(), "no user name") {
		t.Fatalf("Token(\"\") = %q, %v; want an error saying there is no user name", tok, err)
	}
}

// TestKeySignerConcurrent has the race detector watch the token cache.
func TestKeySignerConcurrent(t *testing.T) {
	now := time.Unix(1795978614, 0)
	k := newKeySigner(testJWTKey, time.Minute, func() time.Time { return now })
	want, err := k.Token(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Go(func() {
			got[i], _ = k.Token(context.Background(), "alice")
		})
	}
	wg.Wait()
	for i, g := range got {
		if g != want {
			t.Errorf("goroutine %d got token %q, want %q", i, g, want)
		}
	}
}

func TestNewKeySigner(t *testing.T) {
	dir := t.TempDir()
	tests := map[string]struct {
		key     []byte // nil: no file
		wantErr []string
	}{
		"16 bytes": {key: []byte("0123456789abcdef")},
		"32 bytes": {key: testJWTKey},
		"15 bytes": {key: []byte("0123456789abcde"), wantErr: []string{"has 15 bytes: too short"}},
		"empty":    {key: []byte{}, wantErr: []string{"has 0 bytes: too short"}},
		"no file":  {key: nil, wantErr: []string{"jwt key"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
			if tc.key != nil {
				if err := os.WriteFile(path, tc.key, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			k, err := NewKeySigner(path, time.Minute)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatal("NewKeySigner succeeded, want an error")
				}
				for _, m := range tc.wantErr {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("NewKeySigner error %q does not contain %q", err, m)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("NewKeySigner: %v", err)
			}
			tok, err := k.Token(context.Background(), "alice")
			if err != nil {
				t.Fatal(err)
			}
			claims, err := parseJWT(t, tok, tc.key, time.Now())
			if err != nil {
				t.Fatalf("token does not verify with the key file's key: %v", err)
			}
			if claims["sun"] != "alice" {
				t.Errorf("sun = %v, want alice", claims["sun"])
			}
		})
	}
}
