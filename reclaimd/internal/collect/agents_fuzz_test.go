package collect

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/agent"
	"github.com/strata-hpc/strata/reclaimd/internal/source"
)

// FuzzAgentSnapshot serves a fuzzed body as an agent's /v1/snapshot and
// collects it, through the same decode the controller uses: it never
// panics; the samples it keeps are of the node's own GPUs only, sorted by
// time, each a percentage (a value out of range would read as
// idle or busy). Seeded from a snapshot as the agent writes it.
func FuzzAgentSnapshot(f *testing.F) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pct := func(v float64) *float64 { return &v }
	// A whole snapshot in small pieces, each a few hundred bytes: one
	// seed of a kilobyte left the fuzzer minimizing what it found from it
	// rather than exploring.
	for _, snap := range []agent.Snapshot{
		{Node: "n1", TakenAt: t0, IntervalSeconds: 10, WindowSeconds: 600, SourceOK: true, StartedAt: &t0},
		{Node: "n1", StartedAt: &t0, GPUs: []agent.GPUWindow{{Index: 0, UUID: "GPU-0", Model: "H100", MemTotalMiB: 81559, Samples: []agent.Point{
			{At: t0, Util: pct(0), MemActivity: pct(0), MemUsedMiB: 500, JobIDs: []int64{7}},
			{At: t0.Add(10 * time.Second), Util: pct(97), MemActivity: pct(40), MemUsedMiB: 70000, JobIDs: []int64{7}}}}}},
		{Node: "n1", StartedAt: &t0, GPUs: []agent.GPUWindow{{Index: 1, MIG: true, Samples: []agent.Point{{At: t0}}}}},
		{Node: "n1", Faults: []agent.FaultEvent{{At: t0, GPU: 3, UUID: "GPU-3", Kind: "xid", Code: 79}, {At: t0, GPU: 0, Kind: "ecc_uncorrectable"}}},
	} {
		data, err := json.Marshal(snap)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{`{}`, `{"node":"n2"}`, `{"node":"n1","gpus":[{"index":0,"samples":[{"at":"2026-12-01T12:00:00Z","util":-5,"mem_activity":0}]}]}`,
		`{"gpus":[{"index":3,"samples":[{"at":"2026-12-01T12:00:01Z","util":1,"mem_activity":1},{"at":"2026-12-01T12:00:00Z","util":2,"mem_activity":2}]}]}`,
		`{"interval_seconds":1e300}`, `[]`, `{"gpus":null}`, `{"gpus":[{"samples":[{"util":1e400}]}]}`,
		`{"node":"n1","faults":[{"at":"2026-12-01T12:00:00Z","gpu":-1,"kind":"xid","code":79},{"at":"2026-12-01T12:00:00Z","gpu":1,"kind":"bogus"}]}`,
		`{"faults":[{"at":"2026-12-01T12:00:00Z","gpu":1,"kind":"xid","code":0},{"gpu":1,"kind":"xid","code":79}]}`} {
		f.Add([]byte(s))
	}
	// One agent for every input (a worker runs one input at a time): it
	// answers the body of the input being run.
	// It signs its answer with the controller's secret, as a real agent
	// does: unsigned, every body was refused before it was decoded, and
	// nothing past the signature check was explored. It is served in
	// process (a socket per run cost more than the decode).
	secret := []byte("fuzz secret")
	var current atomic.Pointer[[]byte]
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := *current.Load()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(agent.HeaderSignature, agent.Sign(secret, r.Header.Get(agent.HeaderNonce), body))
		_, _ = w.Write(body)
	})
	a := &Agents{URL: func(string) string { return "http://n1.invalid:9810" }, Client: &http.Client{Transport: handlerTransport{h}},
		Secret: func() ([]byte, error) { return secret, nil }}
	f.Fuzz(func(t *testing.T, body []byte) {
		current.Store(&body)
		res, _ := a.Collect(context.Background(), []string{"n1"})
		if res.Interval < 0 {
			t.Fatalf("interval %v", res.Interval)
		}
		for _, fl := range res.Faults {
			if fl.Node != "n1" || !fl.Kind.Known() || fl.GPU < 0 || fl.GPU > 1023 || fl.Code < 0 || fl.Code > source.MaxFaultCode ||
				fl.At.IsZero() || (fl.Kind == source.FaultXid) != (fl.Code != 0) {
				t.Fatalf("fault %+v kept", fl)
			}
		}
		for key, w := range res.Windows {
			_, ss := w.Recent()
			if key.Node != "n1" {
				t.Fatalf("samples of node %q from n1's agent", key.Node)
			}
			if !sort.SliceIsSorted(ss, func(i, j int) bool { return ss[i].At.Before(ss[j].At) }) {
				t.Fatalf("samples of %v not in time order", key)
			}
			for _, s := range ss {
				if s.UtilPercent < 0 || s.UtilPercent > 100 || s.MemActivityPercent < 0 || s.MemActivityPercent > 100 {
					t.Fatalf("sample %+v of %v is no percentage", s, key)
				}
			}
		}
	})
}

// handlerTransport answers every request with its handler, in process.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}
