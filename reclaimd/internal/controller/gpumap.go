package controller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// gpuMapMismatches checks Slurm's placement of jobs on GPUs (gres_detail:
// Slurm's GPU indices) against the node agents' own (the jobs of the
// processes on each GPU, by NVML index, from the processes' cgroups). The
// two orders are not always the same: Slurm numbers GPUs by gres.conf or
// its own autodetection, NVML by PCI bus or the driver's enumeration, and
// sites have seen them reversed. A GPU's samples are looked up by Slurm's
// index, so on a node where the orders differ the busy job's GPUs would
// be read as the idle job's. The agents' map comes first: where it shows
// a job's process on a GPU that Slurm gives to another job, or to none,
// the node's order cannot be trusted, and it is returned with what was
// seen, so that nothing on it is acted on. GPUs without a job's process
// say nothing either way (an idle job often has none), nor do processes
// of jobs that are not among the running GPU jobs (a job that started or
// ended between the two reads).
func gpuMapMismatches(jobs []slurmrest.Job, holders map[decide.GPUKey][]int64) map[string]string {
	if len(holders) == 0 {
		return nil
	}
	owner := make(map[decide.GPUKey]int64, len(holders))
	known := make(map[int64]bool, len(jobs))
	for _, j := range jobs {
		known[j.ID] = true
		for _, g := range j.GPUs {
			owner[decide.GPUKey{Node: g.Node, Index: g.Index}] = j.ID
		}
	}
	// Mismatches are rare: only they are sorted (by GPU, for the message),
	// not every GPU of the cluster each cycle.
	type found struct {
		key  decide.GPUKey
		what string
	}
	var all []found
	for key, ids := range holders {
		for _, id := range ids {
			if !known[id] {
				continue
			}
			switch o, ok := owner[key]; {
			case !ok:
				all = append(all, found{key, fmt.Sprintf("job %d runs on GPU %d (NVML), which Slurm gives to no job", id, key.Index)})
			case o != id:
				all = append(all, found{key, fmt.Sprintf("job %d runs on GPU %d (NVML), which Slurm gives to job %d", id, key.Index, o)})
			}
		}
	}
	slices.SortStableFunc(all, func(a, b found) int { return strings.Compare(a.key.String(), b.key.String()) })
	seen := map[string][]string{}
	for _, f := range all {
		seen[f.key.Node] = append(seen[f.key.Node], f.what)
	}
	if len(seen) == 0 {
		return nil
	}
	out := make(map[string]string, len(seen))
	for node, what := range seen {
		out[node] = "the node agent and Slurm place jobs on different GPUs: " + strings.Join(what, "; ") +
			": Slurm's GPU order (gres.conf) differs from NVML's; nothing on the node is acted on until they agree"
	}
	return out
}
