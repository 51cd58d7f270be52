package controller_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/reclaimd/internal/failure"
)

// gpuFaultRules retry by the classes' defaults (gpu_fault: twice,
// excluding the node); no job is idle, so no reclaim rule acts.
const gpuFaultRules = `{"apiVersion": "strata/v1", "kind": "ReclaimRules",
  "rules": [{"name": "test", "idle": {"max_util_percent": 5, "max_mem_activity_percent": 5, "window": "1m"},
    "warn": "10s", "signal": {"name": "USR1", "wait": "10s", "mode": "batch"}, "action": "requeue"}],
  "recovery": [{"name": "all", "match": {}}]}`

// onGPU3 moves job 1 to gpu3, holding its GPU 3 alone.
func onGPU3(j map[string]any) {
	j["nodes"], j["batch_host"] = "gpu3", "gpu3"
	j["gres_detail"] = []any{"gpu:h100:1(IDX:3)"}
	j["tres_req_str"] = "cpu=1,mem=1000M,node=1,billing=1,gres/gpu=1"
	j["tres_alloc_str"] = "cpu=1,mem=1000M,node=1,billing=1,gres/gpu=1,gres/gpu:h100=1"
	if res, ok := j["job_resources"].(map[string]any); ok {
		if nodes, ok := res["nodes"].(map[string]any); ok {
			nodes["list"] = "gpu3"
			for _, a := range nodes["allocation"].([]any) {
				a.(map[string]any)["name"] = "gpu3"
			}
		}
	}
}

// An Xid 79 on GPU 3 of gpu3 while job 1 runs there, then job 1 fails:
// the run is a gpu_fault with the fault as its evidence, retried
// excluding gpu3 with the fault in its mark, whether node health is off
// (the faults are kept for recovery alone) or on (gpu3 is drained too).
// Recovery reads the faults from the store unless told otherwise: with
// no fault source the same run would be a user_error.
func TestGPUFaultFailedRunRetriedElsewhere(t *testing.T) {
	for _, release := range releases {
		for _, health := range []bool{false, true} {
			name := release + "/health-off"
			if health {
				name = release + "/health-on"
			}
			t.Run(name, func(t *testing.T) {
				hb := newHealthBedWith(t, release, 0.25, gpuFaultRules, func(node string, gpu int) bool { return node == "gpu3" && gpu == 3 })
				if !health {
					hb.health = nil
					hb.ctl = hb.newController()
				}
				hb.serveJob(onGPU3)
				hb.tick() // job 1 seen running on gpu3's GPU 3
				hb.inject("gpu3", "3,xid,79\n")
				hb.tick()
				wantNodes := []string(nil)
				if health {
					wantNodes = []string{"gpu3 DRAIN " + xid79Reason}
				}
				if diff := cmp.Diff(wantNodes, hb.nodeUpdates()); diff != "" {
					t.Errorf("node updates after the Xid (-want +got):\n%s", diff)
				}
				if got := hb.changes(); len(got) != 0 {
					t.Errorf("changes %q while job 1 still runs", got)
				}

				// The job dies of it. Slurm shows an ended job's nodes but
				// no gres_detail: its GPUs are those it was seen running on.
				end := hb.clock().Add(5 * time.Second)
				hb.serveJob(func(j map[string]any) {
					onGPU3(j)
					failed(j)
					j["gres_detail"] = []any{}
					j["end_time"] = map[string]any{"set": true, "infinite": false, "number": end.Unix()}
				})
				hb.tick()
				const mark = "strata: retry 1/2 after gpu_fault on gpu3 (Xid 79)"
				want := withRequeue(release, "update excluded_nodes=[gpu3] admin_comment="+mark, "update hold=false")
				if diff := cmp.Diff(want, hb.changes()); diff != "" {
					t.Errorf("changes (-want +got):\n%s\nlog:\n%s", diff, hb.logs.String())
				}
				fs := hb.failures()
				if len(fs) != 1 || fs[0].Class != string(failure.GPUFault) || fs[0].Action != "retry" || fs[0].Reason != mark[len("strata: "):] {
					for _, f := range fs {
						t.Logf("failure: %s %s %q, evidence %s", f.Class, f.Action, f.Reason, f.Evidence)
					}
					t.Fatalf("%d failures, want one gpu_fault retried", len(fs))
				}
				var ev failure.Evidence
				if err := json.Unmarshal(fs[0].Evidence, &ev); err != nil {
					t.Fatal(err)
				}
				if ev.Node != "gpu3" || ev.GPU == nil || *ev.GPU != 3 || ev.Xid != 79 {
					t.Errorf("evidence %s, want gpu3's GPU 3 and Xid 79", fs[0].Evidence)
				}
				if diff := cmp.Diff([]string{"retry:done"}, hb.outcomes(jobID)); diff != "" {
					t.Errorf("records (-want +got):\n%s", diff)
				}
				if n := counter(t, hb.metrics.RecoveryRetries.WithLabelValues("gpu_fault", "requeued")); n != 1 {
					t.Errorf("retries{gpu_fault,requeued} %v, want 1", n)
				}
				if diff := cmp.Diff(wantNodes, hb.nodeUpdates()); diff != "" {
					t.Errorf("node updates after the retry (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// An Xid 13 (graphics engine exception: the program's own error) on GPU
// 3 of gpu3 while job 1 runs there, then job 1 exits 1: gpu3 is not
// drained, and the run is a user_error (not retried) with the Xid as
// evidence, not a gpu_fault that would requeue it elsewhere.
func TestApplicationXidIsTheJobsError(t *testing.T) {
	for _, release := range releases {
		t.Run(release, func(t *testing.T) {
			hb := newHealthBedWith(t, release, 0.25, gpuFaultRules, func(node string, gpu int) bool { return node == "gpu3" && gpu == 3 })
			hb.serveJob(onGPU3)
			hb.tick()
			hb.inject("gpu3", "3,xid,13\n")
			hb.tick()
			if got := hb.nodeUpdates(); len(got) != 0 {
				t.Errorf("node updates %q after an application Xid", got)
			}
			end := hb.clock().Add(5 * time.Second)
			hb.serveJob(func(j map[string]any) {
				onGPU3(j)
				failed(j)
				j["gres_detail"] = []any{}
				j["end_time"] = map[string]any{"set": true, "infinite": false, "number": end.Unix()}
			})
			hb.tick()
			if got := hb.changes(); len(got) != 0 {
				t.Errorf("changes %q: a user_error is not retried", got)
			}
			fs := hb.failures()
			if len(fs) != 1 || fs[0].Class != string(failure.UserError) {
				t.Fatalf("failures %+v, want one user_error", fs)
			}
			var ev failure.Evidence
			if err := json.Unmarshal(fs[0].Evidence, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Xid != 0 || ev.Node != "" || ev.ApplicationXid == nil || ev.ApplicationXid.Code != 13 || ev.ApplicationXid.Node != "gpu3" {
				t.Errorf("evidence %s, want the Xid 13 on gpu3 as application_xid and no node at fault", fs[0].Evidence)
			}
			if got := hb.nodeUpdates(); len(got) != 0 {
				t.Errorf("node updates %q after the job's end", got)
			}
		})
	}
}
