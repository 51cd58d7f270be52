package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// The notes of a converted ClusterCockpit trace, repeated in the report's
// header.
const (
	NoteFlatSeries = "flat series from per-job averages: bursts are not modelled (a job that worked, then idled, looks idle or busy throughout); treat the numbers as an order of magnitude"
	noteNoMemory   = "no memory activity in the trace: set to 0, so only utilisation decides"
	noteNoUsers    = "no users in the trace: user rules and exemptions match nothing; account and tenant are the ClusterCockpit project"
)

// maxSynthesised bounds the samples FromClusterCockpit makes (about 1 GB
// in memory): past it, the step is too short for the trace. A variable,
// so that the fuzz test can keep its workers small.
var maxSynthesised int64 = 20_000_000

// The columns FromClusterCockpit reads; the export has more, which it
// ignores.
var ccColumns = []string{"job_id", "subcluster", "partition", "start_time", "end_time", "num_acc", "accelerators", "acc_utilization_avg", "project"}

// LoadClusterCockpit reads a ClusterCockpit jobs export and, when
// clusterPath is not empty, the cluster description beside it; see
// [FromClusterCockpit].
func LoadClusterCockpit(jobsPath, clusterPath string, step time.Duration) (Trace, error) {
	jf, err := os.Open(jobsPath)
	if err != nil {
		return Trace{}, fmt.Errorf("open ClusterCockpit jobs: %w", err)
	}
	defer jf.Close()
	var cluster io.Reader
	if clusterPath != "" {
		cf, err := os.Open(clusterPath)
		if err != nil {
			return Trace{}, fmt.Errorf("open ClusterCockpit cluster: %w", err)
		}
		defer cf.Close()
		cluster = cf
	}
	return FromClusterCockpit(jobsPath, jf, cluster, step)
}

// FromClusterCockpit converts a ClusterCockpit job export to a trace; name
// is the file's name, for messages. The CSV has a header and, per job, at
// least these columns (the export in testdata has more, which are
// ignored): job_id, subcluster, partition, start_time and end_time (Unix
// seconds), num_acc, accelerators ("node:busid|busid;node:busid"),
// acc_utilization_avg (percent) and project.
//
// THE SAMPLES ARE MADE UP. The export holds each job's average GPU
// utilisation only, so each of the job's GPUs gets a flat series at that
// average, one sample each step from the job's start to its end, with
// memory activity 0; bursts are not modelled (see the package
// documentation). The trace's notes say so, and so does every report of
// it.
//
// ClusterCockpit names GPUs by PCI bus id; reclaimd by NVML index. With
// cluster (the cluster.json beside the export), a GPU's index is its
// position in its subcluster's accelerator list, as ClusterCockpit orders
// them; without (nil), it is its position among the bus ids the export
// shows on that node, sorted, which is NVML's order when every GPU of the
// node appears. Account and tenant are the project; the export has no
// users. A job whose accelerators name a node but no GPU (one in the Alex
// export) is left out, with a note.
func FromClusterCockpit(name string, jobsCSV, cluster io.Reader, step time.Duration) (Trace, error) {
	if step <= 0 {
		step = DefaultStep
	}
	var index map[string]map[string]int // subcluster → bus id → index
	if cluster != nil {
		var err error
		if index, err = readCCCluster(cluster); err != nil {
			return Trace{}, fmt.Errorf("%s: %w", name, err)
		}
	}

	p := &parser{name: name}
	var rows []ccRow
	var leftOut []string // jobs without GPU ids
	seen := map[int64]int{}
	p.read(jobsCSV, nil, ccColumns, "jobs", func(line int, f fields) {
		r, err := parseCCRow(f)
		if err != nil {
			p.errorf(line, "%v", err)
			return
		}
		if first, dup := seen[r.job.ID]; dup {
			p.errorf(line, "job_id %d appears twice (first on line %d)", r.job.ID, first)
			return
		}
		seen[r.job.ID] = line
		r.line = line
		if r.noIDs {
			leftOut = append(leftOut, fmt.Sprintf("%d (line %d)", r.job.ID, line))
			return
		}
		rows = append(rows, r)
	})
	if err := p.err(); err != nil {
		return Trace{}, err
	}

	if index == nil {
		// Without the cluster description: the sorted bus ids seen on each
		// node.
		byNode := map[string][]string{}
		for _, r := range rows {
			for _, nb := range r.busIDs {
				if !slices.Contains(byNode[nb[0]], nb[1]) {
					byNode[nb[0]] = append(byNode[nb[0]], nb[1])
				}
			}
		}
		for _, ids := range byNode {
			slices.Sort(ids)
		}
		for i := range rows {
			for _, nb := range rows[i].busIDs {
				rows[i].job.GPUs = append(rows[i].job.GPUs, decide.GPUKey{Node: nb[0], Index: slices.Index(byNode[nb[0]], nb[1])})
			}
		}
	} else {
		for i := range rows {
			r := &rows[i]
			ids, ok := index[r.subcluster]
			if !ok {
				p.errorf(r.line, "subcluster %q is not in the cluster description", r.subcluster)
				continue
			}
			for _, nb := range r.busIDs {
				n, ok := ids[nb[1]]
				if !ok {
					p.errorf(r.line, "GPU %s on %s is not an accelerator of subcluster %q in the cluster description", nb[1], nb[0], r.subcluster)
					break
				}
				r.job.GPUs = append(r.job.GPUs, decide.GPUKey{Node: nb[0], Index: n})
			}
		}
		if err := p.err(); err != nil {
			return Trace{}, err
		}
	}

	var total int64
	for _, r := range rows {
		// Checked as it grows, so that it cannot overflow.
		total += int64(len(r.job.GPUs)) * min(int64(r.job.End.Sub(r.job.Start)/step), maxSynthesised+1)
		if total > maxSynthesised {
			return Trace{}, fmt.Errorf("%s: the flat series would take more than %d samples at a step of %s: lengthen the step", name, maxSynthesised, step)
		}
	}
	tr := Trace{
		Samples:        map[decide.GPUKey][]decide.Sample{},
		SampleInterval: step,
		Notes:          []string{NoteFlatSeries, noteNoMemory, noteNoUsers},
	}
	if n := len(leftOut); n > 0 {
		if n > 5 {
			leftOut = append(leftOut[:5], fmt.Sprintf("and %d more", n-5))
		}
		jobs := "jobs"
		if n == 1 {
			jobs = "job"
		}
		tr.Notes = append(tr.Notes, fmt.Sprintf("left out %d %s whose accelerators name a node but no GPU: %s", n, jobs, strings.Join(leftOut, ", ")))
	}
	for _, r := range rows {
		tr.Jobs = append(tr.Jobs, r.job)
		for _, g := range r.job.GPUs {
			ss := tr.Samples[g]
			for at := r.job.Start.Add(step); !at.After(r.job.End); at = at.Add(step) {
				ss = append(ss, decide.Sample{At: at, UtilPercent: r.util})
			}
			if len(ss) > 0 { // a job shorter than a step has none
				tr.Samples[g] = ss
			}
		}
	}
	for g, ss := range tr.Samples {
		// Runs on one GPU may come in any order in the export. Where two
		// overlap (a shared GPU), the first run's sample stands.
		slices.SortStableFunc(ss, func(a, b decide.Sample) int { return a.At.Compare(b.At) })
		tr.Samples[g] = slices.CompactFunc(ss, func(a, b decide.Sample) bool { return a.At.Equal(b.At) })
	}
	sortJobs(tr.Jobs)
	return tr, nil
}

// ccRow is one row of a ClusterCockpit export, read.
type ccRow struct {
	job        Job
	line       int
	subcluster string
	busIDs     [][2]string
	noIDs      bool // a node without bus ids: the job is left out
	util       float64
}

func parseCCRow(f fields) (ccRow, error) {
	var r ccRow
	id := f.get("job_id")
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return r, fmt.Errorf("job_id %q: want a whole number above 0", id)
	}
	r.job.ID = n
	for _, c := range []struct {
		col string
		dst *string
	}{{"subcluster", &r.subcluster}, {"partition", &r.job.Partition}, {"project", &r.job.Account}} {
		v := f.get(c.col)
		if err := checkName(c.col, v); err != nil {
			return r, err
		}
		*c.dst = v
	}
	r.job.Tenant = r.job.Account
	for _, c := range []struct {
		col string
		dst *time.Time
	}{{"start_time", &r.job.Start}, {"end_time", &r.job.End}} {
		v := f.get(c.col)
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil || sec <= 0 || sec > maxUnix {
			return r, fmt.Errorf("%s %q: want Unix seconds (a job still running has none: leave it out)", c.col, v)
		}
		*c.dst = time.Unix(sec, 0).UTC()
	}
	if !r.job.End.After(r.job.Start) {
		return r, fmt.Errorf("end_time %s is not after start_time %s", f.get("end_time"), f.get("start_time"))
	}
	if r.util, err = parseNumber("acc_utilization_avg", f.get("acc_utilization_avg"), 100); err != nil {
		return r, err
	}
	acc := f.get("accelerators")
	for part := range strings.SplitSeq(acc, ";") {
		node, ids, ok := strings.Cut(part, ":")
		if _, err := gpuKey(node, "0"); !ok || err != nil {
			return r, fmt.Errorf("accelerators %q: want node:busid|busid;node:busid", acc)
		}
		if strings.TrimSpace(ids) == "" {
			// A real quirk of the export (a job of two seconds in the Alex
			// trace): the node without its GPUs.
			r.noIDs = true
			continue
		}
		for id := range strings.SplitSeq(ids, "|") {
			id = strings.TrimSpace(id)
			if id == "" || strings.ContainsFunc(id, func(c rune) bool { return c <= ' ' || c > '~' }) {
				return r, fmt.Errorf("accelerators %q: bad bus id %q", acc, id)
			}
			nb := [2]string{strings.TrimSpace(node), id}
			if slices.Contains(r.busIDs, nb) {
				return r, fmt.Errorf("accelerators %q: %s on %s is listed twice", acc, id, nb[0])
			}
			r.busIDs = append(r.busIDs, nb)
		}
	}
	if r.noIDs {
		return r, nil
	}
	if num := f.get("num_acc"); num != strconv.Itoa(len(r.busIDs)) {
		return r, fmt.Errorf("num_acc %q, but accelerators lists %d GPUs", num, len(r.busIDs))
	}
	return r, nil
}

// readCCCluster reads a ClusterCockpit cluster.json: the accelerators of
// each subcluster, in order.
func readCCCluster(r io.Reader) (map[string]map[string]int, error) {
	var c struct {
		SubClusters []struct {
			Name     string `json:"name"`
			Topology struct {
				Accelerators []struct {
					ID string `json:"id"`
				} `json:"accelerators"`
			} `json:"topology"`
		} `json:"subClusters"`
	}
	if err := json.NewDecoder(r).Decode(&c); err != nil {
		return nil, fmt.Errorf("read the cluster description: %w", err)
	}
	if len(c.SubClusters) == 0 {
		return nil, fmt.Errorf("the cluster description has no subClusters")
	}
	index := map[string]map[string]int{}
	for _, sc := range c.SubClusters {
		ids := map[string]int{}
		for i, a := range sc.Topology.Accelerators {
			if _, dup := ids[a.ID]; !dup {
				ids[a.ID] = i
			}
		}
		index[sc.Name] = ids
	}
	return index, nil
}
