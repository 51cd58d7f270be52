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
				"Slurm's GPU order (gres.conf) differs from NVML's; nothing on the node is acted on until they agree"},
		},
		"a job on a GPU Slurm gives to no job": {
			holders: map[decide.GPUKey][]int64{k("n2", 3): {2}},
			want: map[string]string{"n2": "the node agent and Slurm place jobs on different GPUs: " +
				"job 2 runs on GPU 3 (NVML), which Slurm gives to no job: " +
				"Slurm's GPU order (gres.conf) differs from NVML's; nothing on the node is acted on until they agree"},
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
				"Slurm's GPU order (gres.conf) differs from NVML's; nothing on the node is acted on until they agree; and " +
				unknown("1 on GPU 1 (NVML), 1 on GPU 3 (NVML)")},
		},
	} {
		if diff := cmp.Diff(tc.want, gpuMapMismatches(jobs, tc.holders, tc.unattributed)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}
