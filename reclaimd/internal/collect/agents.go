// Package collect gives the reclaimd controller the GPU samples of the
// GPUs its jobs hold: from the node agents over HTTP (GET /v1/snapshot,
// one request per node per cycle), or from Prometheus where sites run
// dcgm-exporter (one range query per cycle). A value that was not measured
// is dropped, never read as 0: a GPU with too few samples is not idle.
package collect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/agent"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// Agents reads the node agents.
type Agents struct {
	// URL gives an agent's base URL from the node name; URLTemplate
	// "http://{node}:9810" when nil.
	URL         func(node string) string
	URLTemplate string
	Client      *http.Client
	// Parallel bounds the requests in flight (default 32).
	Parallel int
	// Secret gives the secret shared with the agents (agents.token_file,
	// a secretfile.File's Get): a snapshot not signed with it for this
	// request is refused (agent/auth.go). nil refuses every snapshot.
	Secret func() ([]byte, error)
}

// Result is what one collection gives.
type Result struct {
	Samples  map[decide.GPUKey][]decide.Sample
	Interval time.Duration // the agents' sample period
	// Newest is the time of the newest sample seen (for the data-age metric).
	Newest time.Time
	// Failed names the nodes whose agent did not answer, with why. Their
	// GPUs have no samples, so their jobs are judged stale, never idle.
	Failed map[string]string
	// Refused names the nodes (also in Failed) whose answer was refused:
	// RefusedSignature or RefusedHistory.
	Refused map[string]string
	// Holders is the agents' own map of which job holds which GPU, by the
	// GPU's NVML index: the jobs of the processes on it in its newest
	// sample (empty: no job's process), from each process's cgroup. GPUs
	// in MIG mode are left out (Slurm numbers their MIG devices), and so
	// is every GPU of a source that has no such map (Prometheus): nil.
	Holders map[decide.GPUKey][]int64
}

// Collect asks the agents of the given nodes for their windows.
func (a *Agents) Collect(ctx context.Context, nodes []string) (Result, error) {
	res := Result{Samples: map[decide.GPUKey][]decide.Sample{}, Failed: map[string]string{}, Refused: map[string]string{}, Holders: map[decide.GPUKey][]int64{}}
	if len(nodes) == 0 {
		return res, nil
	}
	client := a.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	par := a.Parallel
	if par <= 0 {
		par = 32
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	for _, n := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func(node string) {
			defer wg.Done()
			defer func() { <-sem }()
			snap, err := a.fetch(ctx, client, node)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.Failed[node] = err.Error()
				if r := (*refusal)(nil); errors.As(err, &r) {
					res.Refused[node] = r.reason
				}
				return
			}
			if !snap.SourceOK {
				res.Failed[node] = "agent's source failing: " + snap.LastError
			}
			if iv := time.Duration(snap.IntervalSeconds * float64(time.Second)); iv > res.Interval {
				res.Interval = iv
			}
			for _, g := range snap.GPUs {
				key := decide.GPUKey{Node: node, Index: g.Index}
				for _, p := range g.Samples {
					if p.Util == nil || p.MemActivity == nil {
						continue // not measured: leaves a gap, which reads as stale
					}
					res.Samples[key] = append(res.Samples[key], decide.Sample{At: p.At, UtilPercent: *p.Util,
						MemActivityPercent: *p.MemActivity, MemUsedMiB: p.MemUsedMiB})
					if p.At.After(res.Newest) {
						res.Newest = p.At
					}
				}
				sort.Slice(res.Samples[key], func(i, j int) bool { return res.Samples[key][i].At.Before(res.Samples[key][j].At) })
				if n := len(g.Samples); n > 0 && !g.MIG {
					res.Holders[key] = slices.Clone(g.Samples[n-1].JobIDs)
				}
			}
		}(n)
	}
	wg.Wait()
	if len(res.Failed) == len(nodes) {
		return res, fmt.Errorf("no node agent answered (%d nodes; e.g. %s)", len(nodes), firstFailure(res.Failed))
	}
	return res, nil
}

func firstFailure(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys[0] + ": " + m[keys[0]]
}

func (a *Agents) base(node string) string {
	if a.URL != nil {
		return a.URL(node)
	}
	t := a.URLTemplate
	if t == "" {
		t = "http://{node}:9810"
	}
	return strings.ReplaceAll(t, "{node}", node)
}

// maxSnapshot bounds an agent's answer.
const maxSnapshot = 64 << 20

func (a *Agents) fetch(ctx context.Context, client *http.Client, node string) (agent.Snapshot, error) {
	var snap agent.Snapshot
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(a.base(node), "/")+"/v1/snapshot", nil)
	if err != nil {
		return snap, err
	}
	n, err := nonce()
	if err != nil {
		return snap, err
	}
	req.Header.Set(agent.HeaderNonce, n)
	resp, err := client.Do(req)
	if err != nil {
		return snap, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return snap, fmt.Errorf("agent answered HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSnapshot+1))
	switch {
	case err != nil:
		return snap, fmt.Errorf("agent snapshot: %w", err)
	case len(body) > maxSnapshot:
		return snap, fmt.Errorf("agent snapshot: larger than %d bytes", maxSnapshot)
	}
	// Nothing of the body is read before its signature holds.
	if err := a.verify(n, resp.Header, body); err != nil {
		return snap, err
	}
	if err := json.Unmarshal(body, &snap); err != nil {
		return snap, fmt.Errorf("agent snapshot: %w", err)
	}
	if err := checkHistory(snap); err != nil {
		return snap, err
	}
	if err := checkSnapshot(&snap); err != nil {
		return snap, err
	}
	if snap.Node != "" && snap.Node != node {
		return snap, errors.New("agent reports node " + snap.Node + ", not " + node + ": check the agent URL template")
	}
	return snap, nil
}
