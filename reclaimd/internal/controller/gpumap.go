package controller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// mapWords are the words a mismatch is told in, by whose map it is.
type mapWords struct {
	who   string // "the node agent"
	runs  string // "runs on"
	index string // "NVML"
	fix   string // what differs, and what is done until it agrees
}

func wordsOf(from collect.MapSource) mapWords {
	if from == collect.MapFromDCGM {
		return mapWords{who: "dcgm-exporter's job labels (hpc_job)", runs: "is labelled on", index: "dcgm-exporter's gpu",
			fix: "Slurm's GPU order (gres.conf) differs from the exporter's, or the job mapping files its prolog writes are wrong; " +
				"a job on the node is acted on only where the labels place all its GPUs, until they agree"}
	}
	return mapWords{who: "the node agent", runs: "runs on", index: "NVML",
		fix: "Slurm's GPU order (gres.conf) differs from NVML's; a job on the node is acted on only where the agent places all its GPUs, until they agree"}
}

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
//
// A GPU whose processes the agent could tie to no job (unattributed)
// marks its node too: the agent cannot tell whose work that GPU does, so
// it cannot tell either whether Slurm's index of a job is the GPU the job
// runs on, and the samples read by that index might be another GPU's.
// Judging the node's jobs then could warn a busy job whose processes run
// on the GPU in question.
//
// dcgm-exporter's job mapping labels (hpc_job) are checked the same way
// where the Prometheus source finds them (gpuMapMismatchesFrom with
// collect.MapFromDCGM): they have no processes of no job.
func gpuMapMismatches(jobs []slurmrest.Job, holders map[decide.GPUKey][]int64, unattributed map[decide.GPUKey]int) map[string]string {
	return gpuMapMismatchesFrom(collect.MapFromAgent, jobs, holders, unattributed)
}

func gpuMapMismatchesFrom(from collect.MapSource, jobs []slurmrest.Job, holders map[decide.GPUKey][]int64, unattributed map[decide.GPUKey]int) map[string]string {
	words := wordsOf(from)
	if len(holders) == 0 && len(unattributed) == 0 {
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
				all = append(all, found{key, fmt.Sprintf("job %d %s GPU %d (%s), which Slurm gives to no job", id, words.runs, key.Index, words.index)})
			case o != id:
				all = append(all, found{key, fmt.Sprintf("job %d %s GPU %d (%s), which Slurm gives to job %d", id, words.runs, key.Index, words.index, o)})
			}
		}
	}
	var unknown []found
	for key, n := range unattributed {
		if n > 0 {
			unknown = append(unknown, found{key, fmt.Sprintf("%d on GPU %d (NVML)", n, key.Index)})
		}
	}
	byKey := func(a, b found) int { return strings.Compare(a.key.String(), b.key.String()) }
	slices.SortStableFunc(all, byKey)
	slices.SortStableFunc(unknown, byKey)
	seen, unseen := map[string][]string{}, map[string][]string{}
	for _, f := range all {
		seen[f.key.Node] = append(seen[f.key.Node], f.what)
	}
	for _, f := range unknown {
		unseen[f.key.Node] = append(unseen[f.key.Node], f.what)
	}
	if len(seen) == 0 && len(unseen) == 0 {
		return nil
	}
	out := make(map[string]string, len(seen)+len(unseen))
	for node, what := range seen {
		out[node] = words.who + " and Slurm place jobs on different GPUs: " + strings.Join(what, "; ") + ": " + words.fix
	}
	for node, what := range unseen {
		msg := "the node agent cannot tell whose processes run on its GPUs (processes of no Slurm job it could find: " +
			strings.Join(what, ", ") + "), so which GPU each job's samples come from is not known; nothing on the node is " +
			"acted on until it can (check that the agent reads /proc as root, that jobs run in Slurm's cgroups, and what else runs on the GPUs)"
		if o, ok := out[node]; ok {
			msg = o + "; and " + msg
		}
		out[node] = msg
	}
	return out
}

// joinOnAgentMap places, on the nodes where the agent's map and Slurm's
// disagree (mismatched), the jobs the agent's map places whole: on each
// such node the job spans, the GPUs that run its processes and no other
// job's (nor any process of no job) are exactly as many as Slurm gives
// it there. For each placed job it puts under the job's GPUKeys (Slurm's
// indices) the samples of those GPUs (NVML's), in order, changing
// samples, and returns the placed jobs: they are judged on what their
// own GPUs did. A job the map does not place (one without processes, an
// idle job often has none) stays unjudged, as does every job of a node
// with processes of no job.
func joinOnAgentMap[V any](jobs []slurmrest.Job, holders map[decide.GPUKey][]int64, unattributed map[decide.GPUKey]int,
	mismatched map[string]string, samples map[decide.GPUKey]V) map[int64]bool {
	if len(mismatched) == 0 {
		return nil
	}
	unknown := map[string]bool{}
	for key, n := range unattributed {
		if n > 0 {
			unknown[key.Node] = true
		}
	}
	// own[node][job]: the NVML indices that run the job's processes and
	// no other job's; shared[node][job]: the job runs on a GPU with another.
	type nodeJob struct {
		node string
		job  int64
	}
	own, shared := map[nodeJob][]int{}, map[nodeJob]bool{}
	for key, ids := range holders {
		if _, bad := mismatched[key.Node]; !bad {
			continue
		}
		if len(ids) == 1 {
			own[nodeJob{key.Node, ids[0]}] = append(own[nodeJob{key.Node, ids[0]}], key.Index)
			continue
		}
		for _, id := range ids {
			shared[nodeJob{key.Node, id}] = true
		}
	}
	type move struct{ from, to decide.GPUKey }
	var moves []move
	placed := map[int64]bool{}
	for _, j := range jobs {
		slurmIdx := map[string][]int{}
		for _, g := range j.GPUs {
			if _, bad := mismatched[g.Node]; bad {
				slurmIdx[g.Node] = append(slurmIdx[g.Node], g.Index)
			}
		}
		if len(slurmIdx) == 0 {
			continue
		}
		ok := true
		var mine []move
		for node, idx := range slurmIdx {
			nj := nodeJob{node, j.ID}
			nvml := own[nj]
			if unknown[node] || shared[nj] || len(nvml) != len(idx) {
				ok = false
				break
			}
			slices.Sort(idx)
			slices.Sort(nvml)
			for i := range idx {
				mine = append(mine, move{from: decide.GPUKey{Node: node, Index: nvml[i]}, to: decide.GPUKey{Node: node, Index: idx[i]}})
			}
		}
		if ok {
			placed[j.ID] = true
			moves = append(moves, mine...)
		}
	}
	// Read every source before writing any target: two placed jobs may
	// have each other's indices.
	got := make([]V, len(moves))
	has := make([]bool, len(moves))
	for i, m := range moves {
		got[i], has[i] = samples[m.from]
	}
	for _, m := range moves {
		delete(samples, m.to)
	}
	for i, m := range moves {
		if has[i] {
			samples[m.to] = got[i]
		}
	}
	if len(placed) == 0 {
		return nil
	}
	return placed
}

// mismatchLog is the message of the log line of each mismatched node.
func mismatchLog(from collect.MapSource) string {
	if from == collect.MapFromDCGM {
		return "GPU order mismatch: only jobs dcgm-exporter's job labels place are acted on"
	}
	return "GPU order mismatch: only jobs the agent places are acted on"
}
