package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimapi"
)

// worth reads reclaimd's GET /v1/worth: the reclaims carried out since
// then, each with its bound and what was observed of it.
func worth(ctx context.Context, api string, since time.Time) (reclaimapi.Worth, error) {
	var w reclaimapi.Worth
	req, err := apiRequest(ctx, api+reclaimapi.PathWorth+"?since="+url.QueryEscape(since.UTC().Format(time.RFC3339)))
	if err != nil {
		return w, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return w, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return w, fmt.Errorf("GET %s: %s", reclaimapi.PathWorth, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil {
		return w, fmt.Errorf("GET %s: %w", reclaimapi.PathWorth, err)
	}
	return w, nil
}

// waitWorth reads /v1/worth until the reclaim of job has a job handed one
// of its GPUs, for at most patience: a handover is seen by the first cycle
// after the waiting job starts, and a demo that cannot show one still
// shows the bound (the observed figure 0, said so).
func waitWorth(ctx context.Context, api string, since time.Time, job int64, patience time.Duration) (reclaimapi.Worth, error) {
	deadline := time.Now().Add(patience)
	for {
		w, err := worth(ctx, api, since)
		if err != nil {
			return w, err
		}
		for _, r := range w.Reclaims {
			if r.JobID == job && len(r.HandedTo) > 0 {
				return w, nil
			}
		}
		if time.Now().After(deadline) {
			return w, nil
		}
		if err := sleep(ctx, 2*time.Second); err != nil {
			return w, nil
		}
	}
}

// writeWorth prints what each reclaim of w is worth: the GPU-hours
// observed (waiting jobs run on the freed GPUs so far, measured), beside
// the bound (the GPUs × what was left of the reclaimed job's time limit),
// the jobs handed the GPUs with how much sooner each started (estimated),
// and the totals by tenant and rule.
func writeWorth(out io.Writer, w reclaimapi.Worth) {
	for _, r := range w.Reclaims {
		fmt.Fprintf(out, "   reclaim of job %d (%s, tenant %s, rule %s): %s GPU-hours observed so far, bound %s\n",
			r.JobID, r.Kind, orNone(r.Tenant), orNone(r.Rule), gpuHours(r.ObservedGPUSeconds), gpuHours(r.BoundGPUSeconds))
		if len(r.HandedTo) == 0 {
			fmt.Fprintf(out, "     no waiting job has started on its GPUs yet: nothing observed\n")
		}
		for _, h := range r.HandedTo {
			fmt.Fprintf(out, "     job %d (tenant %s) on %s:%d since %s: %s GPU-hours (measured), started %s sooner (estimated)\n",
				h.JobID, orNone(h.Tenant), h.GPU.Node, h.GPU.Index, h.Start.Local().Format("15:04:05"), gpuHours(h.GPUSeconds),
				(time.Duration(h.StartGainSeconds) * time.Second).Round(time.Second))
		}
	}
	for _, t := range w.Totals {
		fmt.Fprintf(out, "   GPU-hours reclaimed, tenant %s, rule %s: observed %s, bound %s (GET /v1/worth; metrics strata_reclaim_observed_gpu_seconds_total and strata_reclaim_reclaimed_gpu_seconds_total)\n",
			orNone(t.Tenant), orNone(t.Rule), gpuHours(t.ObservedGPUSeconds), gpuHours(t.BoundGPUSeconds))
	}
	if len(w.Totals) == 0 {
		fmt.Fprintf(out, "   GPU-hours reclaimed: no reclaim in GET /v1/worth\n")
	}
}

// gpuHours formats GPU-seconds as GPU-hours with two decimals.
func gpuHours(gpuSeconds float64) string { return strconv.FormatFloat(gpuSeconds/3600, 'f', 2, 64) }

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
