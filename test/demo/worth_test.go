package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/reclaimapi"
)

// TestWaitWorthPrintsObservedBesideBound: the demo reads reclaimd's
// /v1/worth with the API token and the time the controller started, asks
// again until the reclaimed job's GPUs have been handed to a waiting job,
// and prints the observed GPU-hours beside the bound, per reclaim and per
// tenant and rule, each figure from the answer.
func TestWaitWorthPrintsObservedBesideBound(t *testing.T) {
	since := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	at := since.Add(90 * time.Second)
	limitEnd := at.Add(29*time.Minute + 11*time.Second)
	start := at.Add(4 * time.Second)
	reclaim := reclaimapi.ReclaimWorth{RecordID: 3, JobID: 41, Tenant: "physics", Rule: "train", Kind: "requeue",
		At: at, LimitEnd: &limitEnd, GPUs: []reclaimapi.GPU{{Node: "gpu1", Index: 0}, {Node: "gpu1", Index: 1}},
		BoundGPUSeconds: 2 * limitEnd.Sub(at).Seconds()}
	before := reclaimapi.Worth{Reclaims: []reclaimapi.ReclaimWorth{reclaim},
		Totals: []reclaimapi.WorthTotal{{Tenant: "physics", Rule: "train", Reclaims: 1, BoundGPUSeconds: reclaim.BoundGPUSeconds}}}
	reclaim.HandedTo = []reclaimapi.Handover{{JobID: 43, Tenant: "chemistry", GPU: reclaimapi.GPU{Node: "gpu1", Index: 1},
		Start: start, CountedUntil: start.Add(36 * time.Second), GPUSeconds: 36, StartGainSeconds: limitEnd.Sub(start).Seconds()}}
	reclaim.ObservedGPUSeconds = 36
	after := reclaimapi.Worth{Reclaims: []reclaimapi.ReclaimWorth{reclaim},
		Totals: []reclaimapi.WorthTotal{{Tenant: "physics", Rule: "train", Reclaims: 1, BoundGPUSeconds: reclaim.BoundGPUSeconds,
			ObservedGPUSeconds: 36, Beneficiaries: 1, StartGainSeconds: limitEnd.Sub(start).Seconds()}}}

	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != reclaimapi.PathWorth || r.Header.Get("Authorization") != "Bearer "+demoAPIToken {
			http.Error(w, "unexpected request", http.StatusUnauthorized)
			return
		}
		if got, err := time.Parse(time.RFC3339, r.URL.Query().Get("since")); err != nil || !got.Equal(since) {
			http.Error(w, "since: "+r.URL.Query().Get("since"), http.StatusBadRequest)
			return
		}
		answer := before // the first cycles have seen no waiting job start
		if asked.Add(1) > 1 {
			answer = after
		}
		_ = json.NewEncoder(w).Encode(answer)
	}))
	defer srv.Close()

	w, err := waitWorth(t.Context(), srv.URL, since, 41, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("asked %d times, want 2: until the reclaim had a handover", n)
	}
	var out bytes.Buffer
	writeWorth(&out, w)
	want := []string{
		"   reclaim of job 41 (requeue, tenant physics, rule train): 0.01 GPU-hours observed so far, bound 0.97",
		"     job 43 (tenant chemistry) on gpu1:1 since " + start.Local().Format("15:04:05") + ": 0.01 GPU-hours (measured), started 29m7s sooner (estimated)",
		"   GPU-hours reclaimed, tenant physics, rule train: observed 0.01, bound 0.97 (GET /v1/worth; metrics strata_reclaim_observed_gpu_seconds_total and strata_reclaim_reclaimed_gpu_seconds_total)",
	}
	if d := cmp.Diff(want, strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")); d != "" {
		t.Errorf("printed (-want +got):\n%s", d)
	}
}

// TestWriteWorthNothingObserved: a reclaim whose GPUs no waiting job took
// (yet) shows its bound and says that nothing was observed, and an answer
// with no reclaim says so, rather than printing nothing.
func TestWriteWorthNothingObserved(t *testing.T) {
	for name, tc := range map[string]struct {
		w    reclaimapi.Worth
		want string
	}{
		"no handover": {
			w: reclaimapi.Worth{Reclaims: []reclaimapi.ReclaimWorth{{JobID: 7, Kind: "cancel", Tenant: "t", BoundGPUSeconds: 7200}},
				Totals: []reclaimapi.WorthTotal{{Tenant: "t", Reclaims: 1, BoundGPUSeconds: 7200}}},
			want: "   reclaim of job 7 (cancel, tenant t, rule (none)): 0.00 GPU-hours observed so far, bound 2.00\n" +
				"     no waiting job has started on its GPUs yet: nothing observed\n" +
				"   GPU-hours reclaimed, tenant t, rule (none): observed 0.00, bound 2.00 (GET /v1/worth; metrics strata_reclaim_observed_gpu_seconds_total and strata_reclaim_reclaimed_gpu_seconds_total)\n",
		},
		"no reclaim": {want: "   GPU-hours reclaimed: no reclaim in GET /v1/worth\n"},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			writeWorth(&out, tc.w)
			if d := cmp.Diff(tc.want, out.String()); d != "" {
				t.Errorf("printed (-want +got):\n%s", d)
			}
		})
	}
}
