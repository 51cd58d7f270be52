package collect_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/reclaimd/internal/agent"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// TestAgentsHolders: the agents' map of which job runs on which GPU is
// the jobs of the GPU's newest sample (a job that left is not held
// against the one after it); a GPU without a job's process holds none.
// The processes of no job the agent could find are counted by GPU, as of
// the newest sample; from an agent that does not count them, every
// process of a GPU whose sample names no job is. On this node GPUs 1 and
// 6 are in MIG mode: Slurm numbers the MIG devices, so every GPU and MIG
// device is keyed by Slurm's index of it (GPU 0; GPU 1's instances 1 and
// 2; GPUs 2-5; GPU 6's instance 3), and a MIG device's jobs, and
// processes of none, are its own.
func TestAgentsHolders(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	v := func(f float64) *float64 { return &f }
	point := func(off time.Duration, jobs ...int64) agent.Point {
		return agent.Point{At: at.Add(off), Util: v(50), MemActivity: v(10), JobIDs: append([]int64{}, jobs...)}
	}
	snap := agent.Snapshot{Node: "gpu1", TakenAt: at, IntervalSeconds: 10, SourceOK: true, GPUs: []agent.GPUWindow{
		{Index: 0, Samples: []agent.Point{point(-10*time.Second, 5), point(0, 7)}},
		{Index: 1, MIG: true, Samples: []agent.Point{{At: at, JobIDs: []int64{8}, MIGInstances: []agent.MIGPoint{
			{GPUInstance: 2, JobIDs: []int64{}}, {GPUInstance: 1, Util: v(80), MemActivity: v(20), MemUsedMiB: 900, Processes: 1, JobIDs: []int64{8}}}}}},
		{Index: 2, Samples: []agent.Point{point(0)}},
		{Index: 3, Samples: []agent.Point{withProcs(point(-10*time.Second), 2, 2), withProcs(point(0, 9), 3, 1)}},
		{Index: 4, Samples: []agent.Point{withProcs(point(-10*time.Second), 1, 1), withProcs(point(0, 9), 1, 0)}},
		{Index: 5, Samples: []agent.Point{withProcs(point(0), 2, 0)}}, // an agent that does not count them
		{Index: 6, MIG: true, Samples: []agent.Point{withProcs(agent.Point{At: at, MIGInstances: []agent.MIGPoint{
			{GPUInstance: 3, Processes: 1}}}, 1, 1)}},
	}}
	started := at.Add(-time.Minute)
	snap.StartedAt = &started
	secret := []byte("shared agent secret for tests")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := json.Marshal(snap)
		if err != nil {
			t.Error(err)
		}
		w.Header().Set(agent.HeaderSignature, agent.Sign(secret, r.Header.Get(agent.HeaderNonce), body))
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	agents := &collect.Agents{URL: func(string) string { return srv.URL }, Secret: func() ([]byte, error) { return secret, nil }}
	res, err := agents.Collect(t.Context(), []string{"gpu1"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[decide.GPUKey][]int64{{Node: "gpu1", Index: 0}: {7}, {Node: "gpu1", Index: 1}: {8}, {Node: "gpu1", Index: 2}: {},
		{Node: "gpu1", Index: 3}: {}, {Node: "gpu1", Index: 4}: {9}, {Node: "gpu1", Index: 5}: {9}, {Node: "gpu1", Index: 6}: {},
		{Node: "gpu1", Index: 7}: nil}
	if diff := cmp.Diff(want, res.Holders); diff != "" {
		t.Errorf("holders (-want +got):\n%s", diff)
	}
	wantUn := map[decide.GPUKey]int{{Node: "gpu1", Index: 4}: 1, {Node: "gpu1", Index: 6}: 2, {Node: "gpu1", Index: 7}: 1}
	if diff := cmp.Diff(wantUn, res.Unattributed); diff != "" {
		t.Errorf("unattributed (-want +got):\n%s", diff)
	}
	// A MIG device's samples are its own activity, under Slurm's index of
	// it; one whose activity was not measured has none (stale), and a GPU
	// in MIG mode has none as a whole.
	wantMIG := []decide.Sample{{At: at, UtilPercent: 80, MemActivityPercent: 20, MemUsedMiB: 900}}
	if diff := cmp.Diff(wantMIG, held(res, decide.GPUKey{Node: "gpu1", Index: 1})); diff != "" {
		t.Errorf("samples of GPU 1's instance 1 (Slurm's 1) (-want +got):\n%s", diff)
	}
	for _, i := range []int{2, 7} {
		if ss := held(res, decide.GPUKey{Node: "gpu1", Index: i}); len(ss) != 0 {
			t.Errorf("Slurm's GPU %d (a MIG device not measured): %d samples, want none", i, len(ss))
		}
	}
	if got := len(held(res, decide.GPUKey{Node: "gpu1", Index: 3})); got != 1 {
		t.Errorf("Slurm's GPU 3 (NVML's GPU 2): %d samples, want 1", got)
	}
}

// held returns the samples the agents collector holds of a GPU, all of
// them in a window as short as a test's (decide.WindowTail samples at
// most), or those of Samples.
func held(res collect.Result, key decide.GPUKey) []decide.Sample {
	if w, ok := res.Windows[key]; ok {
		if w.Len() > decide.WindowTail {
			panic(fmt.Sprintf("%v holds %d samples, more than a test can read back", key, w.Len()))
		}
		_, ss := w.Recent()
		return ss
	}
	return res.Samples[key]
}

func withProcs(p agent.Point, processes, unattributed int) agent.Point {
	p.Processes, p.Unattributed = processes, unattributed
	return p
}
