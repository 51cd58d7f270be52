package failure_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
	"github.com/strata-hpc/strata/reclaimd/internal/failure"
)

// records reads the job records captured from a Slurm 26.05 test bed
// (testdata/slurm-26.05: jobs that exited 1, printed an NCCL watchdog
// timeout and exited 1, ran out of time, were cancelled by their owner,
// lost their node with and without --requeue) through the real client,
// so the classification sees what the controller sees.
func records(t *testing.T, release string) map[string]slurmrest.Job {
	t.Helper()
	dir := "testdata/slurm-" + release
	srv := slurmresttest.NewServer(t, dir)
	c, err := slurmrest.New(t.Context(), slurmrest.Config{URL: srv.URL, User: "root", Tokens: slurmrest.StaticToken("replay-token"),
		HTTPClient: &http.Client{Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := slurmresttest.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]slurmrest.Job{}
	for _, r := range recs {
		if !strings.Contains(r.Path, "/job/") {
			continue
		}
		var body struct {
			Jobs []struct {
				JobID int64 `json:"job_id"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal(r.Response, &body); err != nil || len(body.Jobs) != 1 {
			t.Fatalf("%s: %v", r.Name, err)
		}
		// Each record answers the same path: serve this one alone.
		srv.Handle(http.MethodGet, r.Path, slurmresttest.Reply(r))
		j, err := c.Job(t.Context(), body.Jobs[0].JobID)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		out[r.Name] = j
	}
	return out
}

// run is what the controller builds from a job's record and what it saw
// of the run (a record Slurm requeued has no nodes: they come from seen).
func run(j slurmrest.Job, seen []string, requeued bool) failure.Run {
	r := failure.Run{JobID: j.ID, State: j.State, StateReason: j.StateReason, ExitCode: j.ExitCode, ExitSignal: j.ExitSignal,
		Nodes: j.Nodes, Start: j.StartTime, End: j.EndTime, AdminComment: j.AdminComment, Requeued: requeued}
	if len(r.Nodes) == 0 {
		r.Nodes = seen
	}
	for _, g := range j.GPUs {
		r.GPUs = append(r.GPUs, failure.GPU{Node: g.Node, Index: g.Index})
	}
	if len(r.GPUs) == 0 {
		for _, n := range r.Nodes {
			r.GPUs = append(r.GPUs, failure.GPU{Node: n, Index: 0}, failure.GPU{Node: n, Index: 1})
		}
	}
	return r
}

func ptr[T any](v T) *T { return &v }

func TestClassify(t *testing.T) {
	jobs := records(t, "26.05")
	nccl := []string{"step 100 loss 2.31",
		"[rank0]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 0] Process group watchdog thread terminated with exception: [Rank 0] Watchdog caught collective operation timeout"}
	pythonErr := []string{"Traceback (most recent call last):", `  File "train.py", line 12, in <module>`,
		"ValueError: could not convert string to float: 'abc'"}
	with := func(name string, edit func(*slurmrest.Job)) slurmrest.Job {
		j := jobs[name]
		edit(&j)
		return j
	}
	exit1 := jobs["failed-exit1"]
	xidAt := exit1.StartTime.Add(time.Second)
	tests := map[string]struct {
		in        failure.Input
		wantClass failure.Class
		wantNone  bool
		wantEv    failure.Evidence
	}{
		"exit 1 is a user error": {
			in:        failure.Input{Run: run(exit1, nil, false), StderrTail: pythonErr},
			wantClass: failure.UserError,
			wantEv:    failure.Evidence{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: 1, Nodes: []string{"gpu1"}},
		},
		"an NCCL watchdog timeout in stderr is nccl": {
			in:        failure.Input{Run: run(jobs["failed-nccl"], nil, false), StderrTail: nccl},
			wantClass: failure.NCCL,
			wantEv: failure.Evidence{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: 1, Nodes: []string{"gpu1"},
				LogLine: nccl[1], Signature: failure.DefaultSignatures[0]},
		},
		"the NCCL job without its stderr is a user error": {
			in:        failure.Input{Run: run(jobs["failed-nccl"], nil, false)},
			wantClass: failure.UserError,
			wantEv:    failure.Evidence{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: 1, Nodes: []string{"gpu1"}},
		},
		"an Xid on the job's GPU during the run is a gpu fault, before nccl": {
			in: failure.Input{Run: run(exit1, nil, false), StderrTail: nccl,
				Faults: []failure.Fault{{Time: xidAt, Node: "gpu1", GPU: 0, Code: 79, Kind: "xid"}}},
			wantClass: failure.GPUFault,
			wantEv: failure.Evidence{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: 1, Nodes: []string{"gpu1"},
				Node: "gpu1", GPU: ptr(0), Xid: 79, FaultKind: "xid", FaultCount: 1},
		},
		"an Xid on another GPU of the node does not count": {
			in: failure.Input{Run: run(exit1, nil, false),
				Faults: []failure.Fault{{Time: xidAt, Node: "gpu1", GPU: 5, Code: 79, Kind: "xid"}}},
			wantClass: failure.UserError,
			wantEv:    failure.Evidence{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: 1, Nodes: []string{"gpu1"}},
		},
		"an Xid before the run started does not count": {
			in: failure.Input{Run: run(exit1, nil, false),
				Faults: []failure.Fault{{Time: exit1.StartTime.Add(-time.Minute), Node: "gpu1", GPU: 0, Code: 79, Kind: "xid"}}},
			wantClass: failure.UserError,
			wantEv:    failure.Evidence{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: 1, Nodes: []string{"gpu1"}},
		},
		"an application Xid alone is the job's own error, not a gpu fault": {
			in: failure.Input{Run: run(exit1, nil, false), ApplicationXids: failure.DefaultApplicationXids,
				Faults: []failure.Fault{{Time: xidAt, Node: "gpu1", GPU: 0, Code: 13, Kind: "xid"}}},
			wantClass: failure.UserError,
			wantEv: failure.Evidence{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: 1, Nodes: []string{"gpu1"},
				ApplicationXid: &failure.Fault{Time: xidAt, Node: "gpu1", GPU: 0, Code: 13, Kind: "xid"}},
		},
		"application Xids 31 and 43 with an NCCL error in stderr are nccl, no node blamed": {
			in: failure.Input{Run: run(exit1, nil, false), ApplicationXids: failure.DefaultApplicationXids, StderrTail: nccl,
				Faults: []failure.Fault{
					{Time: xidAt.Add(time.Second), Node: "gpu1", GPU: 0, Code: 43, Kind: "xid"},
					{Time: xidAt, Node: "gpu1", GPU: 0, Code: 31, Kind: "xid"},
				}},
			wantClass: failure.NCCL,
			wantEv: failure.Evidence{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: 1, Nodes: []string{"gpu1"},
				LogLine: nccl[1], Signature: failure.DefaultSignatures[0],
				ApplicationXid: &failure.Fault{Time: xidAt, Node: "gpu1", GPU: 0, Code: 31, Kind: "xid"}},
		},
		"application Xid 45 after an Xid 79: the 79 is the fault": {
			in: failure.Input{Run: run(exit1, nil, false), ApplicationXids: failure.DefaultApplicationXids,
				Faults: []failure.Fault{
					{Time: xidAt, Node: "gpu1", GPU: 0, Code: 45, Kind: "xid"},
					{Time: xidAt.Add(time.Second), Node: "gpu1", GPU: 0, Code: 79, Kind: "xid"},
				}},
			wantClass: failure.GPUFault,
			wantEv: failure.Evidence{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: 1, Nodes: []string{"gpu1"},
				Node: "gpu1", GPU: ptr(0), Xid: 79, FaultKind: "xid", FaultCount: 1,
				ApplicationXid: &failure.Fault{Time: xidAt, Node: "gpu1", GPU: 0, Code: 45, Kind: "xid"}},
		},
		"an application Xid under a time limit is still a timeout": {
			in: failure.Input{Run: run(jobs["timeout"], nil, false), ApplicationXids: failure.DefaultApplicationXids,
				Faults: []failure.Fault{{Time: jobs["timeout"].StartTime.Add(time.Second), Node: "gpu1", GPU: 0, Code: 68, Kind: "xid"}}},
			wantClass: failure.Timeout,
			wantEv: failure.Evidence{State: "TIMEOUT", Reason: "TimeLimit", Signal: 15, Nodes: []string{"gpu1"},
				ApplicationXid: &failure.Fault{Time: jobs["timeout"].StartTime.Add(time.Second), Node: "gpu1", GPU: 0, Code: 68, Kind: "xid"}},
		},
		"Xid 13 counts as a gpu fault where the site lists no application Xids": {
			in: failure.Input{Run: run(exit1, nil, false), ApplicationXids: []int{},
				Faults: []failure.Fault{{Time: xidAt, Node: "gpu1", GPU: 0, Code: 13, Kind: "xid"}}},
			wantClass: failure.GPUFault,
			wantEv: failure.Evidence{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: 1, Nodes: []string{"gpu1"},
				Node: "gpu1", GPU: ptr(0), Xid: 13, FaultKind: "xid", FaultCount: 1},
		},
		"an uncorrectable ECC event with code 13 is no Xid: a gpu fault": {
			in: failure.Input{Run: run(exit1, nil, false), ApplicationXids: failure.DefaultApplicationXids,
				Faults: []failure.Fault{{Time: xidAt, Node: "gpu1", GPU: 0, Code: 13, Kind: "ecc_uncorrectable"}}},
			wantClass: failure.GPUFault,
			wantEv: failure.Evidence{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: 1, Nodes: []string{"gpu1"},
				Node: "gpu1", GPU: ptr(0), Xid: 13, FaultKind: "ecc_uncorrectable", FaultCount: 1},
		},
		"time limit": {
			in:        failure.Input{Run: run(jobs["timeout"], nil, false)},
			wantClass: failure.Timeout,
			wantEv:    failure.Evidence{State: "TIMEOUT", Reason: "TimeLimit", Signal: 15, Nodes: []string{"gpu1"}},
		},
		"cancelled by its owner": {
			in:        failure.Input{Run: run(jobs["cancelled-owner"], nil, false), StderrTail: nccl},
			wantClass: failure.Cancelled,
			wantEv:    failure.Evidence{State: "CANCELLED", Signal: 15, Nodes: []string{"gpu1"}},
		},
		"cancelled by reclaimd is reclaimed": {
			in: failure.Input{Run: run(with("cancelled-owner", func(j *slurmrest.Job) {
				j.AdminComment = "site note; strata: reclaimed (cancel, rule batch): 1 of 1 GPUs idle"
			}), nil, false)},
			wantClass: failure.Reclaimed,
			wantEv:    failure.Evidence{State: "CANCELLED", Signal: 15, Nodes: []string{"gpu1"}},
		},
		"reclaimd's mark on a job that then failed is no reclaim": {
			in: failure.Input{Run: run(with("failed-exit1", func(j *slurmrest.Job) {
				j.AdminComment = "strata: reclaimed (requeue, rule batch): 1 of 1 GPUs idle"
			}), nil, false)},
			wantClass: failure.UserError,
			wantEv:    failure.Evidence{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: 1, Nodes: []string{"gpu1"}},
		},
		"node down under a --no-requeue job": {
			in:        failure.Input{Run: run(jobs["node-fail"], nil, false), DownNodes: []string{"gpu2"}},
			wantClass: failure.NodeFail,
			wantEv: failure.Evidence{State: "NODE_FAIL", Reason: "NodeDown", Signal: 1, Nodes: []string{"gpu2"},
				Node: "gpu2", DownNodes: []string{"gpu2"}},
		},
		"node down under a requeueable job Slurm requeued itself": {
			in:        failure.Input{Run: run(jobs["node-fail-requeued"], []string{"gpu2"}, true), DownNodes: []string{"gpu2", "gpu4"}},
			wantClass: failure.NodeFail,
			wantEv: failure.Evidence{State: "PENDING", Reason: "BeginTime", Nodes: []string{"gpu2"}, Node: "gpu2",
				DownNodes: []string{"gpu2"}, Requeued: true},
		},
		"requeued by someone, no node down: nothing to classify": {
			in:       failure.Input{Run: run(jobs["node-fail-requeued"], []string{"gpu2"}, true)},
			wantNone: true,
		},
		"a job running again is not classified": {
			in:       failure.Input{Run: run(jobs["node-fail-requeued"], []string{"gpu2"}, false)},
			wantNone: true,
		},
		// No fake-GPU test bed job runs out of memory (no memory cgroup);
		// the OOM record is the exit-1 one with Slurm's state for it.
		"out of memory": {
			in: failure.Input{Run: run(with("failed-exit1", func(j *slurmrest.Job) {
				j.State, j.StateReason = slurmrest.JobState{"OUT_OF_MEMORY"}, "OutOfMemory"
			}), nil, false), StderrTail: nccl},
			wantClass: failure.OOM,
			wantEv:    failure.Evidence{State: "OUT_OF_MEMORY", Reason: "OutOfMemory", ExitCode: 1, Nodes: []string{"gpu1"}},
		},
		"preempted": {
			in: failure.Input{Run: run(with("cancelled-owner", func(j *slurmrest.Job) {
				j.State = slurmrest.JobState{"PREEMPTED"}
			}), nil, false)},
			wantClass: failure.Preempted,
			wantEv:    failure.Evidence{State: "PREEMPTED", Signal: 15, Nodes: []string{"gpu1"}},
		},
	}
	for _, code := range []int{48, 63, 64, 74, 79, 92, 94, 95, 119, 120} {
		tests["fatal Xid "+strconv.Itoa(code)+" stays a gpu fault"] = struct {
			in        failure.Input
			wantClass failure.Class
			wantNone  bool
			wantEv    failure.Evidence
		}{
			in: failure.Input{Run: run(exit1, nil, false), ApplicationXids: failure.DefaultApplicationXids,
				Faults: []failure.Fault{{Time: xidAt, Node: "gpu1", GPU: 0, Code: code, Kind: "xid"}}},
			wantClass: failure.GPUFault,
			wantEv: failure.Evidence{State: "FAILED", Reason: "NonZeroExitCode", ExitCode: 1, Nodes: []string{"gpu1"},
				Node: "gpu1", GPU: ptr(0), Xid: code, FaultKind: "xid", FaultCount: 1},
		}
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := failure.Classify(tc.in, nil)
			if tc.wantNone {
				if ok {
					t.Fatalf("classified as %s, want nothing", got.Class)
				}
				return
			}
			if !ok {
				t.Fatal("not classified")
			}
			if got.Class != tc.wantClass {
				t.Errorf("class %s, want %s", got.Class, tc.wantClass)
			}
			if diff := cmp.Diff(tc.wantEv, got.Evidence); diff != "" {
				t.Errorf("evidence (-want +got):\n%s", diff)
			}
		})
	}
	if j := jobs["failed-exit1"]; j.StdErr != "/var/lib/strata-jobs/exit1-%j.err" {
		t.Errorf("stderr path %q: the record's standard_error is not read", j.StdErr)
	}
	if j := jobs["failed-exit1-retried"]; j.ExcludedNodes != "gpu1" || j.RestartCount != 1 {
		t.Errorf("retried job: excluded %q restarts %d", j.ExcludedNodes, j.RestartCount)
	}
}

// TestClassify2411: the records of a Slurm 24.11 bed (data parser
// v0.0.42) read the same.
func TestClassify2411(t *testing.T) {
	jobs := records(t, "24.11")
	for name, want := range map[string]failure.Class{"failed-exit1": failure.UserError, "cancelled-owner": failure.Cancelled,
		"timeout": failure.Timeout} {
		j, ok := jobs[name]
		if !ok {
			t.Errorf("no record %s", name)
			continue
		}
		got, ok := failure.Classify(failure.Input{Run: run(j, nil, false)}, nil)
		if !ok || got.Class != want {
			t.Errorf("%s: %v %v, want %s", name, got.Class, ok, want)
		}
		if len(got.Evidence.Nodes) != 1 {
			t.Errorf("%s: nodes %v", name, got.Evidence.Nodes)
		}
	}
	if j := jobs["failed-exit1"]; j.ExitCode != 1 || j.StdErr == "" {
		t.Errorf("exit code %d, stderr %q", j.ExitCode, j.StdErr)
	}
}

// stderrLines reads testdata/stderr-lines.tsv.
func stderrLines(t testing.TB) (match, nomatch []string) {
	f, err := os.Open("testdata/stderr-lines.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") || sc.Text() == "" {
			continue
		}
		parts := strings.SplitN(sc.Text(), "\t", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[1], "https://") {
			t.Fatalf("bad line %q", sc.Text())
		}
		if parts[0] == "yes" {
			match = append(match, parts[2])
		} else {
			nomatch = append(nomatch, parts[2])
		}
	}
	return match, nomatch
}

func TestMatcherRealLines(t *testing.T) {
	match, nomatch := stderrLines(t)
	for _, l := range match {
		if _, _, ok := failure.DefaultMatcher().Match([]string{"unrelated line", l}); !ok {
			t.Errorf("no signature matches %q", l)
		}
	}
	for _, l := range nomatch {
		if line, sig, ok := failure.DefaultMatcher().Match([]string{l}); ok {
			t.Errorf("%q matches %q, want no match", line, sig)
		}
	}
}

func TestMatcherConfigured(t *testing.T) {
	m, err := failure.NewMatcher([]string{`Cuda failure \d+`})
	if err != nil {
		t.Fatal(err)
	}
	line, sig, ok := m.Match([]string{"[rank7]: Cuda failure 1 'invalid argument'", "ok"})
	if !ok || sig != `Cuda failure \d+` || line != "[rank7]: Cuda failure 1 'invalid argument'" {
		t.Errorf("got %q %q %v", line, sig, ok)
	}
	if _, err := failure.NewMatcher([]string{"ok", "(unclosed", " "}); err == nil ||
		!strings.Contains(err.Error(), "signature 1") || !strings.Contains(err.Error(), "signature 2 is empty") {
		t.Errorf("bad signatures: %v, want both reported", err)
	}
}

func TestTail(t *testing.T) {
	got := failure.Tail([]byte("a\r\nb\r\nc\n\n"), 2)
	if diff := cmp.Diff([]string{"b", "c"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := failure.Tail(nil, 3); got != nil {
		t.Errorf("empty: %q", got)
	}
}

func FuzzMatch(f *testing.F) {
	match, nomatch := stderrLines(f)
	for _, l := range append(match, nomatch...) {
		f.Add(l, "")
	}
	f.Add("NCCL error", `NCCL (`)
	f.Add(strings.Repeat("x", failure.MaxLineBytes)+"NCCL error", "")
	f.Fuzz(func(t *testing.T, line, sig string) {
		m, err := failure.NewMatcher([]string{sig})
		if sig == "" {
			m, err = failure.NewMatcher(nil)
		}
		if err != nil {
			return
		}
		got, s, ok := m.Match(failure.Tail([]byte(line), 20))
		if !ok {
			return
		}
		if !strings.Contains(line, got) && got != "" {
			t.Fatalf("matched line %q is not in the input", got)
		}
		if s == "" {
			t.Fatal("a match without its signature")
		}
	})
}
