package simulate

import (
	"bytes"
	"encoding/csv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

var (
	alexJobs    = filepath.Join("testdata", "alex_gpu_jobs.csv")
	alexCluster = filepath.Join("testdata", "alex_cluster.json")
	alexRules   = filepath.Join("testdata", "alex-rules.json")
)

// loadRules parses a rules file of testdata.
func loadRules(t testing.TB, path string) reclaimrules.Rules {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := reclaimrules.Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return r
}

// alex simulates the Alex trace with testdata/alex-rules.json ("idle ≤ 5 %
// for 1h, warn 15m, then cancel").
func alex(t testing.TB) (Trace, Report) {
	t.Helper()
	alexOnce.Do(func() {
		tr, err := LoadClusterCockpit(alexJobs, alexCluster, DefaultStep)
		if err != nil {
			alexErr = err
			return
		}
		alexTrace, alexReport = tr, Run(tr, loadRules(t, alexRules), Options{})
	})
	if alexErr != nil {
		t.Fatal(alexErr)
	}
	return alexTrace, alexReport
}

// The Alex trace's simulation, run once for the tests that read it (it
// takes seconds, and a minute under the race detector).
var (
	alexOnce   sync.Once
	alexTrace  Trace
	alexReport Report
	alexErr    error
)

// TestAlexReport is the golden text report of the Alex trace.
func TestAlexReport(t *testing.T) {
	_, rep := alex(t)
	var buf bytes.Buffer
	if err := rep.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "alex.report.golden"), buf.Bytes())
	if !strings.HasPrefix(buf.String(), "NOTE: "+NoteFlatSeries+"\n") {
		t.Errorf("the report does not open with the flat-series note:\n%s", buf.String()[:200])
	}
}

// alexRow is what TestAlexTouched reads of a row of the Alex CSV, on its
// own, without the converter.
type alexRow struct {
	id         int64
	start, end int64
	util       float64
}

func readAlexCSV(t *testing.T) []alexRow {
	t.Helper()
	f, err := os.Open(alexJobs)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range records[0] {
		col[h] = i
	}
	var rows []alexRow
	for _, rec := range records[1:] {
		num := func(name string) float64 {
			v, err := strconv.ParseFloat(rec[col[name]], 64)
			if err != nil {
				t.Fatalf("%s %q: %v", name, rec[col[name]], err)
			}
			return v
		}
		rows = append(rows, alexRow{id: int64(num("job_id")), start: int64(num("start_time")), end: int64(num("end_time")), util: num("acc_utilization_avg")})
	}
	return rows
}

// TestAlexTouched checks the simulation of the Alex trace against what the
// CSV says on its own: with "idle ≤ 5 % for 1h, warn 15m, then cancel",
// the jobs cancelled are exactly those that averaged ≤ 5 % and ran longer
// than 1h15m, and the jobs touched (warned) those that averaged ≤ 5 % and
// were still running at the first cycle an hour after their start.
func TestAlexTouched(t *testing.T) {
	rows := readAlexCSV(t)
	_, rep := alex(t)

	const step = int64(DefaultStep / time.Second)
	first := slices.MinFunc(rows, func(a, b alexRow) int { return int(a.start - b.start) }).start
	var wantTouched, wantCancelled, plainCancelled []int64
	for _, r := range rows {
		if r.util > 5 {
			continue
		}
		// The first cycle at or after an hour's run; the clock ticks from
		// the first job's start.
		judged := first + (r.start+3600-first+step-1)/step*step
		if judged < r.end {
			wantTouched = append(wantTouched, r.id)
		}
		if judged+15*60 < r.end {
			wantCancelled = append(wantCancelled, r.id)
		}
		if r.end-r.start > 75*60 {
			plainCancelled = append(plainCancelled, r.id)
		}
	}
	// In this trace no job ends within a cycle of the boundary, so the
	// plain statement holds exactly.
	if diff := cmp.Diff(plainCancelled, wantCancelled); diff != "" {
		t.Fatalf("cancelled by the cycle arithmetic vs by duration > 1h15m (-duration +cycles):\n%s", diff)
	}

	var touched, cancelled []int64
	for _, j := range rep.Jobs {
		if len(j.Events) > 0 {
			touched = append(touched, j.JobID)
		}
		if !j.ReclaimedAt.IsZero() {
			cancelled = append(cancelled, j.JobID)
		}
	}
	for _, ids := range [][]int64{wantTouched, wantCancelled, touched, cancelled} {
		slices.Sort(ids)
	}
	if diff := cmp.Diff(wantCancelled, cancelled); diff != "" {
		t.Errorf("cancelled jobs (-want +simulated):\n%s", diff)
	}
	if diff := cmp.Diff(wantTouched, touched); diff != "" {
		t.Errorf("touched jobs (-want +simulated):\n%s", diff)
	}
	if rep.JobsTouched != len(wantTouched) || rep.JobsReclaimed != len(wantCancelled) {
		t.Errorf("JobsTouched, JobsReclaimed = %d, %d; want %d, %d", rep.JobsTouched, rep.JobsReclaimed, len(wantTouched), len(wantCancelled))
	}
	if rep.StaleJobs != 0 {
		t.Errorf("StaleJobs = %d, want 0: the synthesised series has no gaps", rep.StaleJobs)
	}

	// The totals, from the CSV: every job's GPUs × duration, and each
	// cancelled job's GPUs × (end − cancel).
	var total float64
	for _, j := range rep.Jobs {
		total += float64(j.GPUs) * j.End.Sub(j.Start).Hours()
	}
	if diff := cmp.Diff(total, rep.TotalGPUHours, approx); diff != "" {
		t.Errorf("TotalGPUHours (-want +got):\n%s", diff)
	}
}

// TestFromClusterCockpit converts a small export with and without the
// cluster description.
func TestFromClusterCockpit(t *testing.T) {
	const export = "job_id,subcluster,partition,start_time,end_time,num_acc,accelerators,acc_utilization_avg,project,extra\n" +
		"7,a100,a100,1675777200,1675777320,2,a0605:00000000:49:00.0|00000000:0E:00.0,2.5,proj,x\n" +
		"8,a100,a100,1675777320,1675777380,1,a0605:00000000:D1:00.0,90,proj,y\n"
	cluster, err := os.ReadFile(alexCluster)
	if err != nil {
		t.Fatal(err)
	}
	at := func(sec int64) time.Time { return time.Unix(sec, 0).UTC() }
	flat := func(from, to int64, util float64) []decide.Sample {
		var ss []decide.Sample
		for s := from + 60; s <= to; s += 60 {
			ss = append(ss, decide.Sample{At: at(s), UtilPercent: util})
		}
		return ss
	}
	job := func(id, start, end int64, gpus ...decide.GPUKey) Job {
		return Job{ID: id, Account: "proj", Tenant: "proj", Partition: "a100", Start: at(start), End: at(end), GPUs: gpus}
	}
	g := func(i int) decide.GPUKey { return decide.GPUKey{Node: "a0605", Index: i} }
	tests := map[string]struct {
		cluster []byte
		want    Trace
	}{
		// The subcluster's list: 0E is 0, 49 is 2, D1 is 7.
		"with the cluster description": {cluster, Trace{
			Jobs:    []Job{job(7, 1675777200, 1675777320, g(2), g(0)), job(8, 1675777320, 1675777380, g(7))},
			Samples: map[decide.GPUKey][]decide.Sample{g(2): flat(1675777200, 1675777320, 2.5), g(0): flat(1675777200, 1675777320, 2.5), g(7): flat(1675777320, 1675777380, 90)},
		}},
		// The bus ids seen on a0605, sorted: 0E, 49, D1.
		"without": {nil, Trace{
			Jobs:    []Job{job(7, 1675777200, 1675777320, g(1), g(0)), job(8, 1675777320, 1675777380, g(2))},
			Samples: map[decide.GPUKey][]decide.Sample{g(1): flat(1675777200, 1675777320, 2.5), g(0): flat(1675777200, 1675777320, 2.5), g(2): flat(1675777320, 1675777380, 90)},
		}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var c io.Reader // nil, not a nil *bytes.Reader, when there is none
			if tt.cluster != nil {
				c = bytes.NewReader(tt.cluster)
			}
			got, err := FromClusterCockpit("jobs.csv", strings.NewReader(export), c, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.SampleInterval = time.Minute
			tt.want.Notes = []string{NoteFlatSeries, noteNoMemory, noteNoUsers}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FromClusterCockpit() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFromClusterCockpitErrors checks that every bad line is reported with
// its file and line.
func TestFromClusterCockpitErrors(t *testing.T) {
	const header = "job_id,subcluster,partition,start_time,end_time,num_acc,accelerators,acc_utilization_avg,project\n"
	tests := map[string]struct {
		in, cluster string
		want        string
	}{
		"missing column": {in: "job_id,subcluster\n1,a\n",
			want: `cc.csv:1: missing column "partition"; the header needs at least job_id,subcluster,partition,start_time,end_time,num_acc,accelerators,acc_utilization_avg,project` + "\n" +
				`cc.csv:1: missing column "start_time"; the header needs at least job_id,subcluster,partition,start_time,end_time,num_acc,accelerators,acc_utilization_avg,project` + "\n" +
				`cc.csv:1: missing column "end_time"; the header needs at least job_id,subcluster,partition,start_time,end_time,num_acc,accelerators,acc_utilization_avg,project` + "\n" +
				`cc.csv:1: missing column "num_acc"; the header needs at least job_id,subcluster,partition,start_time,end_time,num_acc,accelerators,acc_utilization_avg,project` + "\n" +
				`cc.csv:1: missing column "accelerators"; the header needs at least job_id,subcluster,partition,start_time,end_time,num_acc,accelerators,acc_utilization_avg,project` + "\n" +
				`cc.csv:1: missing column "acc_utilization_avg"; the header needs at least job_id,subcluster,partition,start_time,end_time,num_acc,accelerators,acc_utilization_avg,project` + "\n" +
				`cc.csv:1: missing column "project"; the header needs at least job_id,subcluster,partition,start_time,end_time,num_acc,accelerators,acc_utilization_avg,project`},
		"bad rows": {in: header +
			"1,a100,a100,100,50,1,n:00.0,1,p\n" +
			"2,a100,a100,100,200,2,n:00.0,1,p\n" +
			"3,a100,a100,100,200,1,n:00.0,101,p\n" +
			"4,a100,a100,0,200,1,n:00.0,1,p\n" +
			"2,a100,a100,300,400,1,n:00.0,1,p\n",
			want: "cc.csv:2: end_time 50 is not after start_time 100\n" +
				`cc.csv:3: num_acc "2", but accelerators lists 1 GPUs` + "\n" +
				`cc.csv:4: acc_utilization_avg "101": want a number from 0 to 100` + "\n" +
				`cc.csv:5: start_time "0": want Unix seconds (a job still running has none: leave it out)`},
		"unknown GPU": {in: header + "1,a100,a100,100,200,1,n:00000000:AA:00.0,1,p\n2,zz,a100,100,200,1,n:00000000:0E:00.0,1,p\n",
			cluster: `{"subClusters":[{"name":"a100","topology":{"accelerators":[{"id":"00000000:0E:00.0"}]}}]}`,
			want: `cc.csv:2: GPU 00000000:AA:00.0 on n is not an accelerator of subcluster "a100" in the cluster description` + "\n" +
				`cc.csv:3: subcluster "zz" is not in the cluster description`},
		"bad cluster": {in: header + "1,a100,a100,100,200,1,n:00.0,1,p\n", cluster: `{"name": "alex"}`,
			want: "cc.csv: the cluster description has no subClusters"},
		"too many samples": {in: header + "1,a100,a100,100,253402300799,1,n:00.0,1,p\n",
			want: "cc.csv: the flat series would take more than 20000000 samples at a step of 30s: lengthen the step"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var c io.Reader
			if tt.cluster != "" {
				c = strings.NewReader(tt.cluster)
			}
			_, err := FromClusterCockpit("cc.csv", strings.NewReader(tt.in), c, 0)
			if err == nil {
				t.Fatal("FromClusterCockpit() = nil error")
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzFromClusterCockpit checks that the converter never panics, and that
// what it accepts is a trace Run can take: runs with GPUs, end after
// start, samples in order.
func FuzzFromClusterCockpit(f *testing.F) {
	if b, err := os.ReadFile(alexJobs); err == nil {
		lines := strings.SplitAfter(string(b), "\n")
		f.Add(strings.Join(lines[:min(len(lines), 12)], ""))
	}
	f.Add("job_id,subcluster,partition,start_time,end_time,num_acc,accelerators,acc_utilization_avg,project\n1,a,b,100,200,2,n:x|y;m:z,0,p\n")
	old := maxSynthesised
	maxSynthesised = 100_000 // not a gigabyte per input
	f.Cleanup(func() { maxSynthesised = old })
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := FromClusterCockpit("f.csv", strings.NewReader(in), nil, time.Minute)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.csv") {
				t.Fatalf("error %q does not start with the file name", err)
			}
			return
		}
		checkTrace(t, tr)
	})
}

// BenchmarkRunAlex simulates the Alex trace: 303 jobs, about 4000
// GPU-hours, 8300 cycles of 30s.
func BenchmarkRunAlex(b *testing.B) {
	tr, err := LoadClusterCockpit(alexJobs, alexCluster, DefaultStep)
	if err != nil {
		b.Fatal(err)
	}
	rules := loadRules(b, alexRules)
	b.ReportAllocs()
	for b.Loop() {
		Run(tr, rules, Options{})
	}
}
