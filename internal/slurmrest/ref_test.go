package slurmrest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
)

// TestJobRefs checks that an array task and a heterogeneous component are
// read with their place and acted on alone. slurmrestd answers an array's
// ID with every task of the array and a het leader's ID with every
// component (as a 26.05 test bed does), and reads a bare '+' of a path as
// a space.
func TestJobRefs(t *testing.T) {
	for version, bed := range replayBeds(t) {
		t.Run("slurm-"+version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := filepath.Join("testdata", "replay", "slurm-"+version)
			srv := slurmresttest.NewServer(t, dir)
			rec, ok := srv.Record("job")
			if !ok {
				t.Fatal("no job record")
			}
			noVal := func(n int64) map[string]any { return map[string]any{"set": true, "infinite": false, "number": n} }
			unsetNoVal := map[string]any{"set": false, "infinite": false, "number": 0}
			// Array 7: its own record (ID 7) runs task 5; task 2 is job 9.
			// Het job 20: leader 20 (offset 0), component 21 (offset 1).
			answer := func(records ...map[string]any) http.HandlerFunc {
				return func(w http.ResponseWriter, _ *http.Request) {
					var body map[string]any
					if err := json.Unmarshal(rec.Response, &body); err != nil {
						t.Error(err)
					}
					base := body["jobs"].([]any)[0].(map[string]any)
					var jobs []any
					for _, r := range records {
						j := map[string]any{}
						for k, v := range base {
							j[k] = v
						}
						for k, v := range r {
							j[k] = v
						}
						jobs = append(jobs, j)
					}
					body["jobs"] = jobs
					w.Header().Set("Content-Type", "application/json")
					_ = json.NewEncoder(w).Encode(body)
				}
			}
			task := func(id, arr, tid int64) map[string]any {
				return map[string]any{"job_id": id, "array_job_id": noVal(arr), "array_task_id": noVal(tid),
					"het_job_id": noVal(0), "het_job_offset": noVal(0)}
			}
			het := func(id, leader, off int64) map[string]any {
				return map[string]any{"job_id": id, "array_job_id": noVal(0), "array_task_id": unsetNoVal,
					"het_job_id": noVal(leader), "het_job_offset": noVal(off)}
			}
			p := "/slurm/" + bed.Parser + "/job/"
			srv.Handle("GET", p+"7", answer(task(9, 7, 2), task(7, 7, 5)))
			srv.Handle("GET", p+"20", answer(het(20, 20, 0), het(21, 20, 1)))
			srv.Handle("GET", p+"21", answer(het(21, 20, 1)))
			var escaped []string
			ok200 := func(w http.ResponseWriter, req *http.Request) {
				escaped = append(escaped, req.Method+" "+req.URL.EscapedPath())
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"errors":[],"warnings":[]}`))
			}
			srv.Handle("POST", p+"7", http.HandlerFunc(ok200))
			for _, path := range []string{"7_5", "20+0", "21"} {
				srv.Handle("DELETE", p+path, http.HandlerFunc(ok200))
				srv.Handle("POST", p+path, http.HandlerFunc(ok200))
				srv.Handle("GET", p+path+"/requeue", http.HandlerFunc(ok200))
			}
			scontrol, calls := fakeScontrol(t)
			c, err := slurmrest.New(ctx, slurmrest.Config{URL: srv.URL, User: "root",
				Tokens: slurmrest.StaticToken("replay-token"), Requeuer: slurmrest.ScontrolRequeuer{Path: scontrol}})
			if err != nil {
				t.Fatal(err)
			}
			want := map[int64]slurmrest.JobRef{7: "7_5", 20: "20+0", 21: "20+1"}
			refs := map[int64]slurmrest.JobRef{}
			for id := range want {
				j, err := c.Job(ctx, id)
				if err != nil {
					t.Fatalf("job %d: %v", id, err)
				}
				if j.ID != id {
					t.Errorf("job %d: got the record of job %d: want the one with the ID asked for", id, j.ID)
				}
				refs[id] = j.Ref()
			}
			if len(refs) != len(want) || refs[7] != want[7] || refs[20] != want[20] || refs[21] != want[21] {
				t.Errorf("refs = %v, want %v", refs, want)
			}
			if _, err := c.Job(ctx, 21); err != nil {
				t.Fatal(err)
			}
			if err := c.SignalRef(ctx, refs[7], "USR1", true); err != nil {
				t.Errorf("signal: %v", err)
			}
			if err := c.UpdateRef(ctx, slurmrest.RefOf(7), slurmrest.JobUpdate{AdminComment: ptr("strata: x")}); err != nil {
				t.Errorf("update: %v", err)
			}
			if err := c.CancelRef(ctx, refs[20]); err != nil {
				t.Errorf("cancel: %v", err)
			}
			if err := c.RequeueRef(ctx, refs[7], slurmrest.RequeueOptions{}); err != nil {
				t.Errorf("requeue: %v", err)
			}
			wantPaths := []string{"DELETE " + p + "7_5", "POST " + p + "7", "DELETE " + p + "20%2B0"}
			if bed.restRequeue {
				wantPaths = append(wantPaths, "GET "+p+"7_5/requeue")
			}
			if strings.Join(escaped, "\n") != strings.Join(wantPaths, "\n") {
				t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(escaped, "\n"), strings.Join(wantPaths, "\n"))
			}
			got, _ := os.ReadFile(calls)
			wantCall := "requeue 7_5 token=replay-token\n"
			if bed.restRequeue {
				wantCall = ""
			}
			if string(got) != wantCall {
				t.Errorf("scontrol calls = %q, want %q", got, wantCall)
			}
		})
	}
}

func TestRefOf(t *testing.T) {
	for j, want := range map[*slurmrest.Job]slurmrest.JobRef{
		{ID: 42, ArrayTaskID: -1}:                                "42",
		{ID: 42}:                                                 "42",
		{ID: 43, ArrayJobID: 40, ArrayTaskID: 3}:                 "40_3",
		{ID: 40, ArrayJobID: 40, ArrayTaskID: 0}:                 "40_0",
		{ID: 50, HetJobID: 50, HetJobOffset: 0}:                  "50+0",
		{ID: 52, HetJobID: 50, HetJobOffset: 2, ArrayTaskID: -1}: "50+2",
	} {
		if got := j.Ref(); got != want {
			t.Errorf("%+v: Ref() = %q, want %q", *j, got, want)
		}
	}
}
