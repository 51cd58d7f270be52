package slurmrest

import (
	"encoding/json"
	"strings"
	"testing"

	gen42 "github.com/strata-hpc/strata/internal/slurmrest/v0042"
	gen45 "github.com/strata-hpc/strata/internal/slurmrest/v0045"
)

// roundTrip decodes raw into a generated type as the adapters do and
// encodes it again: a key the generated type does not have is lost, so
// the result shows what slurmrestd really receives.
func roundTrip[T any](t *testing.T, raw string) string {
	t.Helper()
	var v T
	if err := jsonInto(raw, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestPreemptJSON(t *testing.T) {
	type preempt45 = struct {
		ExemptTime *gen45.V0045Uint32NoValStruct `json:"exempt_time,omitempty"`
		List       *gen45.V0045QosPreemptList    `json:"list,omitempty"`
		Mode       *[]gen45.V0045QosPreemptMode  `json:"mode,omitempty"`
	}
	type preempt42 = struct {
		ExemptTime *gen42.V0042Uint32NoValStruct `json:"exempt_time,omitempty"`
		List       *gen42.V0042QosPreemptList    `json:"list,omitempty"`
		Mode       *gen42.V0042QosPreemptModes   `json:"mode,omitempty"`
	}
	for name, tc := range map[string]struct {
		list, mode []string
		want       string // on the wire, both parsers
		wantErr    bool
	}{
		"list and mode":                               {list: []string{"batch"}, mode: []string{"REQUEUE"}, want: `{"list":["batch"],"mode":["REQUEUE"]}`},
		"mode only: the list is left":                 {mode: []string{"DISABLED"}, want: `{"mode":["DISABLED"]}`},
		"list only: slurmdbd resets mode":             {list: []string{"a", "b"}, want: `{"list":["a","b"]}`},
		"nothing":                                     {want: ""},
		"an empty name, which kills slurmrestd 26.05": {list: []string{"batch", ""}, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			raw, err := preemptJSON(tc.list, tc.mode)
			if tc.wantErr != (err != nil) {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if raw == "" || err != nil {
				if raw != tc.want {
					t.Errorf("preemptJSON = %q, want %q", raw, tc.want)
				}
				return
			}
			if got := roundTrip[preempt45](t, raw); got != tc.want {
				t.Errorf("v0.0.45: %s, want %s", got, tc.want)
			}
			if got := roundTrip[preempt42](t, raw); got != tc.want {
				t.Errorf("v0.0.42: %s, want %s", got, tc.want)
			}
		})
	}
}

func TestAssocMaxJSON(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	gpu := TRESList{{Type: "gres", Name: "gpu", Count: 8}}
	for name, tc := range map[string]struct {
		in   Association
		want []string // substrings of the wire JSON, both parsers
		none []string // must not be there
	}{
		"GrpJobs is max.jobs.per.count": {in: Association{MaxJobs: n(20)},
			want: []string{`"jobs":{"per":{"count":{"number":20,"set":true}}}`}, none: []string{`"tres"`, `"active"`}},
		"-1 clears": {in: Association{MaxJobs: n(-1)}, want: []string{`"count":{"number":-1,"set":true}`}},
		"TRES limits without GrpJobs leave it alone": {in: Association{GrpTRES: gpu},
			want: []string{`"total":[{"count":8,"name":"gpu","type":"gres"}]`}, none: []string{`"jobs"`}},
		"both": {in: Association{GrpTRES: gpu, MaxJobs: n(4)}, want: []string{`"total":[`, `"count":{"number":4,"set":true}`}},
	} {
		t.Run(name, func(t *testing.T) {
			raw := assocMaxJSON(tc.in)
			var a45 gen45.V0045Assoc
			var a42 gen42.V0042Assoc
			for parser, got := range map[string]string{
				"v0.0.45": roundTripMax(t, raw, &a45.Max),
				"v0.0.42": roundTripMax(t, raw, &a42.Max),
			} {
				for _, w := range tc.want {
					if !strings.Contains(got, w) {
						t.Errorf("%s: %s lacks %s", parser, got, w)
					}
				}
				for _, w := range tc.none {
					if strings.Contains(got, w) {
						t.Errorf("%s: %s has %s", parser, got, w)
					}
				}
			}
		})
	}
	if raw := assocMaxJSON(Association{Fairshare: 3}); raw != "" {
		t.Errorf("no limits: %q, want nothing", raw)
	}
}

// roundTripMax decodes raw into the generated max field and encodes it.
func roundTripMax(t *testing.T, raw string, dst any) string {
	t.Helper()
	if err := jsonInto(raw, dst); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(dst)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
