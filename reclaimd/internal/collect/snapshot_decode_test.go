package collect

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/reclaimd/internal/agent"
)

// leanOf is what the controller reads of a snapshot decoded whole into
// agent.Snapshot, in the form the lean decode gives.
func leanOf(s agent.Snapshot) snapshot {
	l := snapshot{Node: s.Node, TakenAt: s.TakenAt, IntervalSeconds: s.IntervalSeconds, WindowSeconds: s.WindowSeconds,
		SourceOK: s.SourceOK, LastError: s.LastError, Version: s.Version, Cursor: s.Cursor, Full: s.Full, After: s.After,
		MaxSamples: s.MaxSamples, StartedAt: s.StartedAt, Faults: s.Faults}
	if s.GPUs != nil {
		l.GPUs = []gpuWindow{}
	}
	for _, g := range s.GPUs {
		w := gpuWindow{Index: g.Index, MIG: g.MIG}
		if g.Samples != nil {
			w.Samples = samples{}
		}
		for _, p := range g.Samples {
			q := point{At: p.At, MemUsedMiB: p.MemUsedMiB, JobIDs: p.JobIDs, Processes: p.Processes, Unattributed: p.Unattributed}
			if p.Util != nil {
				q.Util, q.hasUtil = *p.Util, true
			}
			if p.MemActivity != nil {
				q.MemActivity, q.hasMemAct = *p.MemActivity, true
			}
			if p.MIGInstances != nil {
				q.MIG = []migPoint{}
			}
			for _, m := range p.MIGInstances {
				r := migPoint{GPUInstance: m.GPUInstance, MemUsedMiB: m.MemUsedMiB, Processes: m.Processes, JobIDs: m.JobIDs}
				if m.Util != nil {
					r.Util, r.hasUtil = *m.Util, true
				}
				if m.MemActivity != nil {
					r.MemActivity, r.hasMemAct = *m.MemActivity, true
				}
				q.MIG = append(q.MIG, r)
			}
			w.Samples = append(w.Samples, q)
		}
		l.GPUs = append(l.GPUs, w)
	}
	return l
}

var snapshotSeeds = []string{
	`{}`, `null`, `[]`, `{"gpus":null}`, `{"gpus":[{"samples":null}]}`, `{"gpus":[{"samples":[]}]}`,
	`{"node":"n1","gpus":[{"index":0,"samples":[{"at":"2026-12-01T12:00:00Z","util":-5,"mem_activity":0}]}]}`,
	`{"gpus":[{"index":3,"samples":[{"AT":"2026-12-01T12:00:01Z","Util":1,"util":2,"mem_activity":null,"MEM_ACTIVITY":3}]}]}`,
	`{"gpus":[{"samples":[{"\u0061t":"2026-12-01T12:00:01.5Z","u\"til":9,"util":1e2,"job_ids":[1,2,3],"mig_instances":[{"job_ids":[4],"x":{"y":[1,"]}"]}}]}]}]}`,
	`{"gpus":[{"samples":[{"util":"5"}]}]}`, `{"gpus":[{"samples":[{"util":true}]}]}`, `{"gpus":[{"samples":[{"job_ids":[1.5]}]}]}`,
	`{"gpus":[{"samples":[{"at":"yesterday"}]}]}`, `{"gpus":[{"samples":[{"util":1e400}]}]}`, `{"gpus":[{"samples":[{"mem_used_mib":null}]}]}`,
	`{"gpus":[{"samples":[{ "at" : "2026-12-01T12:00:00Z" , "util" : 0 , "job_ids" : [ ] } , { } ]}]}`,
	`{"gpus":[{"samples":{"at":"2026-12-01T12:00:00Z"}}]}`, `{"gpus":[{"samples":[1]}]}`,
	// A repeated key decodes into what the one before it left.
	`{"gpus":[{"index":1,"samples":[{"util":1}]},{"index":2}],"gpus":[{"mig":true}],"gpus":[{},{}]}`,
	`{"gpus":[{"samples":[{"util":1,"job_ids":[1,2]},{"util":2}],"samples":[{"mem_activity":3}],"samples":[{},{}]}]}`,
	`{"gpus":[{"samples":[{"job_ids":[1,2,3],"job_ids":[null],"job_ids":[null,null,null]}]}]}`,
	`{"gpus":[{"samples":[{"job_ids":[1,2]}],"samples":[],"samples":[{}]}]}`,
	`{"gpus":[null,{"samples":[null,{"job_ids":[null,5]}]}]}`,
	`{"gpus":[{"samples":[{"util":5,"util":null,"mem_used_mib":7,"mem_used_mib":null}]}]}`,
	`{"gpus":[{"samples":[{"processes":3,"unattributed_processes":2,"job_ids":[4]},{"processes":1.5}]}]}`,
	// MIG devices, each judged for itself.
	`{"gpus":[{"mig":true,"samples":[{"mig_instances":[{"gpu_instance":1,"util":5,"mem_activity":null,"processes":2,"job_ids":[7]},null,{"GPU_INSTANCE":2,"Util":1,"util":2}]}]}]}`,
	`{"gpus":[{"samples":[{"mig_instances":[{"gpu_instance":1,"job_ids":[1,2]},{"gpu_instance":2}],"mig_instances":[{"util":3}],"mig_instances":[{},{}]}]}]}`,
	`{"gpus":[{"samples":[{"mig_instances":[{"job_ids":[1]}],"mig_instances":[],"mig_instances":[{}]}]}]}`,
	`{"gpus":[{"samples":[{"mig_instances":null},{"mig_instances":{}},{"mig_instances":[1]},{"mig_instances":[{"gpu_instance":1.5}]}]}]}`,
	`{"started_at":"2026-12-01T12:00:00Z","started_at":null}`, `{"started_at":null,"started_at":"2026-12-01T12:00:00Z"}`,
	`{"started_at":"2026-12-01T12:00:00Z","STARTED_AT":"2026-12-02T12:00:00Z"}`,
	// Strings, keys and numbers as encoding/json reads them.
	`{"node":"n\u00e9\"1","cursor":"a\/b","last_error":"café","after":null}`,
	`{"taKen_at":"2026-12-01T12:00:00Z","ſource_ok":true,"Max_Samples":3}`,
	`{"interval_seconds":1.5e1,"window_seconds":-0.0,"version":-0,"max_samples":123456789012345678}`,
	`{"version":1.0}`, `{"version":99999999999999999999}`, `{"interval_seconds":1e400}`, `{"full":"true"}`,
	`{"gpus":[{"samples":[{"at":"2026-12-01T12:00:00+02:00","util":0.5e2,"mem_activity":1E-7}]}]}`,
	`{"gpus":[{"index":-3,"samples":[{"job_ids":[-1,9223372036854775807]}]}]}`,
	`{"gpus":[{"samples":[{"job_ids":[9223372036854775808]}]}]}`,
	// Syntax that json.Valid refuses.
	`{} x`, `{"a":tru}`, `{"a":01}`, "{\"a\":\"\x01\"}", `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":[1,]}`, `{"a":1,}`,
	`{"a" 1}`, `{"a":-}`, `{"a":1.}`, `{"a":1e}`, `{"a":.5}`, `{"a":"`, `{"a":[`, `{,}`, `{"gpus":[{"samples":[{"at":"x"]}]}`,
	// GPU faults.
	`{"faults":null}`, `{"faults":[]}`, `{"faults":[{"at":"2026-12-01T12:00:00Z","gpu":3,"uuid":"GPU-3","kind":"xid","code":79}]}`,
	`{"FAULTS":[{"GPU":1,"Kind":"ecc_uncorrectable","extra":[1]}],"faults":[{"gpu":2}]}`, `{"faults":[{"code":"79"}]}`,
	`{"faults":{}}`, `{"faults":[{"gpu":1.5}]}`,
}

// FuzzSnapshotDecode checks the controller's lean decode of an agent's
// snapshot against encoding/json's decode into agent.Snapshot: where that
// reads a body, the lean decode reads the same values from it.
func FuzzSnapshotDecode(f *testing.F) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pct := func(v float64) *float64 { return &v }
	// A whole snapshot in small pieces: one seed of a kilobyte left the
	// fuzzer minimizing each input it found from it for the rest of its
	// time (64 runs in 10 s); pieces of a few hundred bytes let it explore.
	for _, snap := range []agent.Snapshot{
		{Node: "n1", TakenAt: t0, IntervalSeconds: 10, WindowSeconds: 600, SourceOK: true,
			Version: 2, Cursor: "a.2", After: "a.1", MaxSamples: 60, StartedAt: &t0},
		{Faults: []agent.FaultEvent{{At: t0, GPU: 3, UUID: "GPU-3", Kind: "xid", Code: 79}, {At: t0, GPU: 1, Kind: "row_remap_failure"}}},
		{GPUs: []agent.GPUWindow{{Index: 0, UUID: "GPU-0", Model: "H100", MemTotalMiB: 81559, Samples: []agent.Point{
			{At: t0.Add(-10 * time.Second), Util: pct(0), MemActivity: pct(0.25), SMActive: pct(3), MemUsedMiB: 500, JobIDs: []int64{7}},
			{At: t0, Util: pct(97), MemActivity: pct(40), MemUsedMiB: 70000, JobIDs: []int64{}}}}}},
		{GPUs: []agent.GPUWindow{{Index: 1, MIG: true, Samples: []agent.Point{{At: t0, JobIDs: []int64{},
			MIGInstances: []agent.MIGPoint{{GPUInstance: 1, JobIDs: []int64{8}}}}}}}},
	} {
		b, err := json.Marshal(snap)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range snapshotSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var whole agent.Snapshot
		wholeErr := json.Unmarshal(body, &whole)
		lean, leanErr := decodeSnapshot(body, nil)
		if wholeErr != nil {
			return // the lean decode may read what it does not need more leniently
		}
		if leanErr != nil {
			t.Fatalf("lean decode failed where encoding/json reads the snapshot: %v", leanErr)
		}
		// reflect.DeepEqual first: cmp.Diff at every run cost more than
		// the decodes, and the fuzzer barely ran. Equal by DeepEqual is
		// equal by cmp; cmp decides and explains a difference.
		if want := leanOf(whole); !reflect.DeepEqual(want, lean) {
			if diff := cmp.Diff(want, lean, cmp.AllowUnexported(point{})); diff != "" {
				t.Fatalf("lean decode (-encoding/json +lean):\n%s", diff)
			}
		}
	})
}

// TestSnapshotDecodeRefuses: values of the wrong type in the fields the
// controller reads are errors, as they are for encoding/json.
func TestSnapshotDecodeRefuses(t *testing.T) {
	for name, body := range map[string]string{
		"util string":       `{"gpus":[{"samples":[{"util":"5"}]}]}`,
		"util bool":         `{"gpus":[{"samples":[{"util":true}]}]}`,
		"job id float":      `{"gpus":[{"samples":[{"job_ids":[1.5]}]}]}`,
		"at not a time":     `{"gpus":[{"samples":[{"at":"yesterday"}]}]}`,
		"util too large":    `{"gpus":[{"samples":[{"util":1e400}]}]}`,
		"samples object":    `{"gpus":[{"samples":{"at":"2026-12-01T12:00:00Z"}}]}`,
		"sample number":     `{"gpus":[{"samples":[1]}]}`,
		"not JSON":          `{"gpus":[`,
		"index string":      `{"gpus":[{"index":"0"}]}`,
		"node number":       `{"node":5}`,
		"gpus object":       `{"gpus":{}}`,
		"data after":        `{} {}`,
		"bad literal":       `{"x":nul}`,
		"leading zero":      `{"x":01}`,
		"bad escape":        `{"x":"\q"}`,
		"control char":      "{\"x\":\"\t\"}",
		"trailing comma":    `{"gpus":[],}`,
		"version float":     `{"version":2.0}`,
		"id too large":      `{"gpus":[{"samples":[{"job_ids":[9223372036854775808]}]}]}`,
		"empty":             ``,
		"faults object":     `{"faults":{}}`,
		"fault code string": `{"faults":[{"code":"79"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			if s, err := decodeSnapshot([]byte(body), nil); err == nil {
				t.Errorf("read %s: %+v", body, s)
			}
		})
	}
}

// FuzzJScanSyntax checks the one-pass scanner's syntax check against
// json.Valid: it passes over a document exactly when json.Valid accepts
// it, so reading answers in one pass accepts no JSON that encoding/json
// would refuse.
func FuzzJScanSyntax(f *testing.F) {
	for _, s := range snapshotSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{``, ` `, `1`, `-0.5e+3`, `"\ud800"`, `[[[]]]`, `{"a":{"b":[true,false,null]}}`, "\"\xff\"",
		`tru`, `nulls`, `[1 2]`, `{"a":1 "b":2}`, `"\u00zz"`, `1e+`, `--1`, `[]]`, `{"a"}`, "\"\x7f\"", `  {}  `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		s := jscan{b: doc}
		err := s.skip()
		if err == nil {
			err = s.end()
		}
		if valid := json.Valid(doc); valid != (err == nil) {
			t.Fatalf("json.Valid %v, scanner error %v", valid, err)
		}
	})
}
