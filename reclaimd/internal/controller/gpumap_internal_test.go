package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

func TestGPUMapMismatches(t *testing.T) {
	jobs := []slurmrest.Job{
		{ID: 1, GPUs: []slurmrest.GPU{{Node: "n1", Index: 0}, {Node: "n1", Index: 1}}},
		{ID: 2, GPUs: []slurmrest.GPU{{Node: "n1", Index: 2}, {Node: "n2", Index: 0}}},
	}
	k := func(node string, i int) decide.GPUKey { return decide.GPUKey{Node: node, Index: i} }
	unknown := func(what string) string {
		return "the node agent cannot tell whose processes run on its GPUs (processes of no Slurm job it could find: " + what +
			"), so which GPU each job's samples come from is not known; nothing on the node is acted on until it can " +
			"(check that the agent reads /proc as root, that jobs run in Slurm's cgroups, and what else runs on the GPUs)"
	}
	for name, tc := range map[string]struct {
		holders      map[decide.GPUKey][]int64
		unattributed map[decide.GPUKey]int
		want         map[string]string
	}{
		"no map (Prometheus)": {},
		"agreeing, idle GPUs without processes": {
			holders: map[decide.GPUKey][]int64{k("n1", 0): {1}, k("n1", 1): {}, k("n1", 2): {}, k("n2", 0): {2}},
		},
		"a job that is not a running GPU job says nothing": {
			holders: map[decide.GPUKey][]int64{k("n1", 0): {1, 99}, k("n1", 3): {98}},
		},
		"reversed on n1 only": {
			holders: map[decide.GPUKey][]int64{k("n1", 0): {2}, k("n1", 2): {1}, k("n2", 0): {2}},
			want: map[string]string{"n1": "the node agent and Slurm place jobs on different GPUs: " +
				"job 2 runs on GPU 0 (NVML), which Slurm gives to job 1; job 1 runs on GPU 2 (NVML), which Slurm gives to job 2: " +
				"Slurm's GPU order (gres.conf) differs from NVML's; a job on the node is acted on only where the agent places all its GPUs, until they agree"},
		},
		"a job on a GPU Slurm gives to no job": {
			holders: map[decide.GPUKey][]int64{k("n2", 3): {2}},
			want: map[string]string{"n2": "the node agent and Slurm place jobs on different GPUs: " +
				"job 2 runs on GPU 3 (NVML), which Slurm gives to no job: " +
				"Slurm's GPU order (gres.conf) differs from NVML's; a job on the node is acted on only where the agent places all its GPUs, until they agree"},
		},
		// The join: every process placed, each on the GPU Slurm gives its
		// job, reads by Slurm's index.
		"attributed": {
			holders: map[decide.GPUKey][]int64{k("n1", 0): {1}, k("n1", 1): {1}, k("n1", 2): {2}, k("n2", 0): {2}},
		},
		"unattributed processes mark their node only": {
			holders:      map[decide.GPUKey][]int64{k("n1", 0): {1}, k("n2", 0): {}},
			unattributed: map[decide.GPUKey]int{k("n2", 0): 2, k("n1", 3): 0},
			want:         map[string]string{"n2": unknown("2 on GPU 0 (NVML)")},
		},
		"reversed and unattributed on one node": {
			holders:      map[decide.GPUKey][]int64{k("n1", 0): {2}},
			unattributed: map[decide.GPUKey]int{k("n1", 3): 1, k("n1", 1): 1},
			want: map[string]string{"n1": "the node agent and Slurm place jobs on different GPUs: " +
				"job 2 runs on GPU 0 (NVML), which Slurm gives to job 1: " +
				"Slurm's GPU order (gres.conf) differs from NVML's; a job on the node is acted on only where the agent places all its GPUs, until they agree; and " +
				unknown("1 on GPU 1 (NVML), 1 on GPU 3 (NVML)")},
		},
	} {
		if diff := cmp.Diff(tc.want, gpuMapMismatches(jobs, tc.holders, tc.unattributed)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// TestJoinOnAgentMap: on a node whose order is reversed, a job whose
// processes the agent places on as many GPUs of its own as Slurm gives it
// is judged on those GPUs' samples; one without processes, one sharing a
// GPU with another job, and every job of a node with processes of no job
// are not placed.
func TestJoinOnAgentMap(t *testing.T) {
	k := func(node string, i int) decide.GPUKey { return decide.GPUKey{Node: node, Index: i} }
	s := func(util float64) []decide.Sample { return []decide.Sample{{UtilPercent: util}} }
	// Slurm: job 1 on n1 0-1 and n2 0, job 2 on n1 2-3, job 3 on n3 0-1,
	// job 4 on n3 2, job 5 on n4 0.
	jobs := []slurmrest.Job{
		{ID: 1, GPUs: []slurmrest.GPU{{Node: "n1", Index: 0}, {Node: "n1", Index: 1}, {Node: "n2", Index: 0}}},
		{ID: 2, GPUs: []slurmrest.GPU{{Node: "n1", Index: 2}, {Node: "n1", Index: 3}}},
		{ID: 3, GPUs: []slurmrest.GPU{{Node: "n3", Index: 0}, {Node: "n3", Index: 1}}},
		{ID: 4, GPUs: []slurmrest.GPU{{Node: "n3", Index: 2}}},
		{ID: 5, GPUs: []slurmrest.GPU{{Node: "n4", Index: 0}}},
	}
	for name, tc := range map[string]struct {
		holders      map[decide.GPUKey][]int64
		unattributed map[decide.GPUKey]int
		samples      map[decide.GPUKey][]decide.Sample
		wantPlaced   map[int64]bool
		wantSamples  map[decide.GPUKey][]decide.Sample
	}{
		"attributed, agreeing: nothing to join": {
			holders:     map[decide.GPUKey][]int64{k("n1", 0): {1}, k("n1", 2): {2}},
			samples:     map[decide.GPUKey][]decide.Sample{k("n1", 0): s(1), k("n1", 2): s(2)},
			wantSamples: map[decide.GPUKey][]decide.Sample{k("n1", 0): s(1), k("n1", 2): s(2)},
		},
		"reversed index, both jobs' processes placed: each reads its own GPUs": {
			holders:     map[decide.GPUKey][]int64{k("n1", 0): {2}, k("n1", 1): {2}, k("n1", 2): {1}, k("n1", 3): {1}},
			samples:     map[decide.GPUKey][]decide.Sample{k("n1", 0): s(90), k("n1", 1): s(91), k("n1", 2): s(0), k("n1", 3): s(1), k("n2", 0): s(2)},
			wantPlaced:  map[int64]bool{1: true, 2: true},
			wantSamples: map[decide.GPUKey][]decide.Sample{k("n1", 0): s(0), k("n1", 1): s(1), k("n1", 2): s(90), k("n1", 3): s(91), k("n2", 0): s(2)},
		},
		"reversed index, the idle job without processes: only the busy one is placed": {
			holders:    map[decide.GPUKey][]int64{k("n1", 0): {2}, k("n1", 1): {2}, k("n1", 2): {}, k("n1", 3): {}},
			samples:    map[decide.GPUKey][]decide.Sample{k("n1", 0): s(90), k("n1", 1): s(91), k("n1", 2): s(0), k("n1", 3): s(1)},
			wantPlaced: map[int64]bool{2: true},
			// Job 1's keys (0, 1) still hold NVML 0-1's samples, but it is not placed: not judged.
			wantSamples: map[decide.GPUKey][]decide.Sample{k("n1", 0): s(90), k("n1", 1): s(91), k("n1", 2): s(90), k("n1", 3): s(91)},
		},
		"a GPU shared with another job, and fewer GPUs than Slurm gives: not placed": {
			holders:     map[decide.GPUKey][]int64{k("n3", 0): {3, 4}, k("n3", 2): {3}, k("n4", 1): {5}, k("n4", 2): {5}},
			samples:     map[decide.GPUKey][]decide.Sample{k("n3", 0): s(5)},
			wantSamples: map[decide.GPUKey][]decide.Sample{k("n3", 0): s(5)},
		},
		"unattributed: nothing on the node is placed": {
			holders:      map[decide.GPUKey][]int64{k("n1", 0): {2}, k("n1", 1): {2}, k("n1", 2): {1}, k("n1", 3): {1}},
			unattributed: map[decide.GPUKey]int{k("n1", 5): 1},
			samples:      map[decide.GPUKey][]decide.Sample{k("n1", 0): s(90)},
			wantSamples:  map[decide.GPUKey][]decide.Sample{k("n1", 0): s(90)},
		},
	} {
		mismatched := gpuMapMismatches(jobs, tc.holders, tc.unattributed)
		got := joinOnAgentMap(jobs, tc.holders, tc.unattributed, mismatched, tc.samples)
		if diff := cmp.Diff(tc.wantPlaced, got); diff != "" {
			t.Errorf("%s: placed (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(tc.wantSamples, tc.samples); diff != "" {
			t.Errorf("%s: samples (-want +got):\n%s", name, diff)
		}
	}
}
