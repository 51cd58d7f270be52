package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// reclaimOpts are the inputs of the live reclaim (strata-demo -reclaim).
type reclaimOpts struct {
	reclaimd string // the reclaimd binary
	tenants  string // tenants.json rendered by strata-policy
	work     string // configs, replays, logs and the state file go here
	idle     int64  // the idle job to reclaim
	waiting  int64  // the job pending on its project's GPU limit
	busyUser string // submits the busy job beside it
	busyAcct string
	timeout  time.Duration
}

// demoRules judge idle in a minute (the shortest window rules take), then
// warn, signal and requeue 10 s apart: the ladder of the shipped train
// rule, in seconds instead of minutes.
const demoRules = `{
  "apiVersion": "strata/v1",
  "kind": "ReclaimRules",
  "rules": [
    {
      "name": "train",
      "match": {"classes": ["train"]},
      "idle": {"max_util_percent": 5, "max_mem_activity_percent": 5, "window": "1m"},
      "warn": "10s",
      "signal": {"name": "USR1", "wait": "10s", "mode": "skip-unless-requested"},
      "action": "requeue",
      "max_requeues": 2
    }
  ]
}
`

// stepError names the step of the live reclaim that did not happen.
func stepError(step string, format string, args ...any) error {
	return fmt.Errorf("live reclaim, step %q: %s", step, fmt.Sprintf(format, args...))
}

// liveReclaim runs reclaimd as the packages would, on the test bed: one
// agent per node replaying samples (the idle job's GPUs at 0%, every other
// job's busy) and the controller, with the rules above. It shows the idle
// job warned, signalled and requeued, the busy job untouched and the
// waiting job started, the time from the warning (the job idle beyond its
// window) to the waiting job running, and the GPU-hours reclaimed per
// tenant as reclaimd's /metrics reports them.
func liveReclaim(ctx context.Context, b *testbed.Bed, admin, asUser *slurmrest.Client, o reclaimOpts, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := os.MkdirAll(o.work, 0o755); err != nil {
		return err
	}
	step := "a busy job beside the idle one"
	res, err := asUser.Submit(ctx, o.busyUser, slurmrest.JobSpec{
		Name: "busy-8gpu", Script: "#!/bin/bash\nsleep 600\n", Account: o.busyAcct, Partition: b.Partition,
		TRESPerNode: fmt.Sprintf("gres/gpu:%d", b.GPUsPerNode), TimeLimit: 10 * time.Minute, Comment: "strata:class=train",
		WorkDir: b.JobDir, StdOut: "/dev/null",
	})
	if err != nil {
		return stepError(step, "submit as %s: %v", o.busyUser, err)
	}
	busy := res.JobID
	if _, err := waitRunning(ctx, admin, busy); err != nil {
		return stepError(step, "job %d: %v", busy, err)
	}
	list, err := admin.Jobs(ctx, time.Time{})
	if err != nil {
		return stepError(step, "list jobs: %v", err)
	}
	holders := map[string]map[int]int64{} // node -> GPU index -> job
	for _, j := range list.Jobs {
		if !j.Running() {
			continue
		}
		for _, g := range j.GPUs {
			if holders[g.Node] == nil {
				holders[g.Node] = map[int]int64{}
			}
			holders[g.Node][g.Index] = j.ID
		}
	}
	idleOn := ""
	for node, gpus := range holders {
		for _, id := range gpus {
			if id == o.idle {
				idleOn = node
			}
		}
	}
	if idleOn == "" {
		return stepError(step, "job %d, the idle one, holds no GPU", o.idle)
	}
	fmt.Fprintf(out, "   job %d (%s, %s) runs beside job %d; the agents replay its GPUs at 0%% and every other job's at 95%%\n",
		busy, o.busyUser, o.busyAcct, o.idle)

	step = "reclaimd: agents and controller"
	secret := filepath.Join(o.work, "agent.token")
	if err := os.WriteFile(secret, []byte(demoAgentSecret), 0o600); err != nil {
		return err
	}
	ds := newDaemons(o.reclaimd, o.work, stepError)
	defer ds.stop()
	died, start := ds.died, func(name string, args ...string) error { return ds.start(step, name, args...) }
	agents, err := startAgents(b, o.work, secret, start, func(node string) ([]byte, string) {
		return replayOf(node, b.GPUsPerNode, holders[node], o.idle), ""
	})
	if err != nil {
		return err
	}
	// The agents share this host: one address answers for all of them,
	// routing /<node>/... to that node's agent (agents.url_template).
	proxy, err := agentProxy(agents)
	if err != nil {
		return err
	}
	defer proxy.Close()
	rules := filepath.Join(o.work, "reclaim-rules.json")
	if err := os.WriteFile(rules, []byte(demoRules), 0o644); err != nil {
		return err
	}
	ctlCfg, ctlAddr, err := controllerConfig(b, o.work, rules, o.tenants, proxy.Addr, secret, "")
	if err != nil {
		return err
	}
	started := time.Now()
	if err := start("controller", "--config", ctlCfg, "run"); err != nil {
		return err
	}
	fmt.Fprintf(out, "   reclaimd controller on %s, 4 agents (logs, configs and rules: %s)\n", ctlAddr, o.work)
	fmt.Fprintf(out, "   rule train: idle (GPU and memory activity 5%% or less) for 1m, warn, 10s, signal USR1, 10s, requeue\n")

	api := "http://" + ctlAddr
	var warnedAt, requeuedAt time.Time
	seen := map[int64]bool{}
	for requeuedAt.IsZero() {
		if err := sleep(ctx, 2*time.Second); err != nil {
			if warnedAt.IsZero() {
				return stepError("idle job warned", "no warning for job %d after %s (see %s/controller.log)", o.idle, o.timeout, o.work)
			}
			return stepError("idle job requeued", "job %d was not requeued (see %s/controller.log)", o.idle, o.work)
		}
		if err := died(); err != nil {
			return err
		}
		recs, err := decisions(ctx, api, started)
		if err != nil {
			continue // the controller is starting
		}
		for _, r := range recs {
			if seen[r.ID] || r.Outcome == "intent" {
				continue
			}
			seen[r.ID] = true
			fmt.Fprintf(out, "   %s  %-7s job %d (tenant %s, %s): %s\n", r.DecidedAt.Format("15:04:05"), r.Action, r.JobID, r.Tenant, r.Outcome, r.Reason)
			if r.JobID == busy {
				return stepError("busy job untouched", "reclaimd decided %s for the busy job %d: %s", r.Action, busy, r.Reason)
			}
			if r.JobID != o.idle {
				continue
			}
			if r.Outcome == "failed" {
				return stepError("idle job "+r.Action, "job %d: %s", o.idle, r.Error)
			}
			switch r.Action {
			case "warn":
				warnedAt = r.DecidedAt
			case "requeue", "requeue-hold":
				requeuedAt = r.DecidedAt
			}
		}
	}

	step = "the waiting job runs"
	var ran slurmrest.Job
	for {
		j, jerr := admin.Job(ctx, o.waiting)
		if jerr == nil && j.Running() {
			ran = j
			break
		}
		if err := sleep(ctx, time.Second); err != nil {
			state := fmt.Sprint(jerr)
			if jerr == nil {
				state = fmt.Sprintf("%s (%s)", j.State, j.StateReason)
			}
			return stepError(step, "job %d did not start after the requeue: %s", o.waiting, state)
		}
	}
	idleJob, err := admin.Job(ctx, o.idle)
	if err != nil {
		return stepError(step, "job %d: %v", o.idle, err)
	}
	busyJob, err := admin.Job(ctx, busy)
	if err != nil || !busyJob.Running() || busyJob.RestartCount != 0 {
		return stepError("busy job untouched", "job %d: %s, restarts %d (%v)", busy, busyJob.State, busyJob.RestartCount, err)
	}
	fmt.Fprintf(out, "   job %d now %s (%s), requeued %d time(s); job %d still %s, never requeued\n",
		o.idle, idleJob.State, idleJob.StateReason, idleJob.RestartCount, busy, busyJob.State)
	fmt.Fprintf(out, "   job %d, pending on its project's GPU limit, runs since %s on %s\n", o.waiting, ran.StartTime.Format("15:04:05"), ran.NodeList)
	from := warnedAt
	if from.IsZero() {
		from = requeuedAt
	}
	fmt.Fprintf(out, "   measured: %s from the job judged idle beyond its window (the warning) to the waiting job running\n",
		ran.StartTime.Sub(from).Round(time.Second))

	step = "GPU-hours reclaimed"
	hours, err := reclaimedHours(ctx, api)
	if err != nil {
		return stepError(step, "%v", err)
	}
	if len(hours) == 0 {
		return stepError(step, "reclaimd's /metrics has no strata_reclaim_reclaimed_gpu_seconds_total")
	}
	// The observed figure needs a cycle that sees the waiting job running
	// on a freed GPU; the bound is there from the requeue on.
	w, err := waitWorth(ctx, api, started, o.idle, 30*time.Second)
	if err != nil {
		return stepError(step, "GET /v1/worth: %v", err)
	}
	writeWorth(out, w)
	// The next step (strata-demo -fault) needs two nodes with no job.
	if err := admin.Cancel(ctx, busy); err != nil {
		return stepError("busy job cancelled", "job %d: %v", busy, err)
	}
	fmt.Fprintf(out, "   job %d, the busy one, cancelled: its node is free for the next step\n", busy)
	return nil
}

// replayOf is a node's recording: each GPU at 0% when the idle job holds
// it or none does, at 95% when another job does, with its job.
func replayOf(node string, gpus int, holders map[int]int64, idle int64) []byte {
	var sb strings.Builder
	sb.WriteString("# strata-demo: node " + node + "\n")
	sb.WriteString("offset_seconds,gpu,uuid,model,util,mem_activity,sm_active,mem_used_mib,mem_total_mib,pids,jobs\n")
	n := strings.TrimLeft(node, "abcdefghijklmnopqrstuvwxyz")
	for off := range 2 {
		for g := range gpus {
			util, mem, job := 0, 2048, ""
			if id, ok := holders[g]; ok {
				job = strconv.FormatInt(id, 10)
				if id != idle {
					util, mem = 95, 60000
				}
			}
			fmt.Fprintf(&sb, "%d,%d,GPU-00000000-0000-4000-8000-%06s%06d,NVIDIA H100 80GB HBM3,%d,%d,,%d,81559,,%s\n",
				off, g, n, g, util, util/2, mem, job)
		}
	}
	return []byte(sb.String())
}

type proxyServer struct {
	Addr string
	srv  *http.Server
}

func (p *proxyServer) Close() { _ = p.srv.Close() }

func agentProxy(agents map[string]string) (*proxyServer, error) {
	mux := http.NewServeMux()
	for node, addr := range agents {
		target := &url.URL{Scheme: "http", Host: addr}
		rp := httputil.NewSingleHostReverseProxy(target)
		mux.Handle("/"+node+"/", http.StripPrefix("/"+node, rp))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return &proxyServer{Addr: l.Addr().String(), srv: srv}, nil
}

type decision struct {
	ID        int64     `json:"id"`
	JobID     int64     `json:"job_id"`
	Tenant    string    `json:"tenant"`
	Action    string    `json:"action"`
	Reason    string    `json:"reason"`
	Outcome   string    `json:"outcome"`
	Error     string    `json:"error"`
	DecidedAt time.Time `json:"decided_at"`
}

func decisions(ctx context.Context, api string, since time.Time) ([]decision, error) {
	req, err := apiRequest(ctx, api+"/v1/decisions?since="+url.QueryEscape(since.UTC().Format(time.RFC3339)))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/decisions: %s", resp.Status)
	}
	var body struct {
		Decisions []decision `json:"decisions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	sort.Slice(body.Decisions, func(i, j int) bool { return body.Decisions[i].ID < body.Decisions[j].ID })
	return body.Decisions, nil
}

// reclaimedLine is one tenant's (and rule's) series of the reclaimed bound.
var reclaimedLine = regexp.MustCompile(`^strata_reclaim_reclaimed_gpu_seconds_total\{(?:rule="[^"]*",)?tenant="([^"]*)"(?:,rule="[^"]*")?\} (\S+)$`)

func reclaimedHours(ctx context.Context, api string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := reclaimedLine.FindStringSubmatch(sc.Text()); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				return nil, err
			}
			out[m[1]] += v / 3600 // summed over the rules
		}
	}
	return out, sc.Err()
}

// startAgents starts a reclaimd agent for each of b's nodes, replaying
// what replay(node) says (and with its extra config lines, such as a
// faults_file), each on a free address of this host: it returns each
// node's address.
func startAgents(b *testbed.Bed, work, secret string, start func(name string, args ...string) error,
	replay func(node string) (samples []byte, extra string)) (map[string]string, error) {
	agents := map[string]string{} // node -> address
	for _, node := range b.Nodes {
		samples, extra := replay(node)
		file := filepath.Join(work, "replay-"+node+".csv")
		if err := os.WriteFile(file, samples, 0o644); err != nil {
			return nil, err
		}
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		agents[node] = addr
		cfg := filepath.Join(work, "agent-"+node+".yaml")
		if err := os.WriteFile(cfg, []byte(b.ReclaimdAgentConfig(node, addr, secret, file)+extra), 0o600); err != nil {
			return nil, err
		}
		if err := start("agent-"+node, "--config", cfg, "--log-level", "warn", "agent"); err != nil {
			return nil, err
		}
	}
	return agents, nil
}

// controllerConfig writes work/reclaimd.yaml, a controller of b with its
// API on a free address of this host, the rules and tenant map, the agents
// behind agentsAddr, and extra lines at its end (health, recovery), and
// removes the state of a run before it: it returns the file and the API's
// address.
func controllerConfig(b *testbed.Bed, work, rules, tenants, agentsAddr, secret, extra string) (string, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return "", "", err
	}
	cfg := filepath.Join(work, "reclaimd.yaml")
	_ = os.Remove(filepath.Join(work, "reclaimd.db"))
	token := filepath.Join(work, "reclaimd-api.token")
	if err := os.WriteFile(token, []byte(demoAPIToken+"\n"), 0o600); err != nil {
		return "", "", err
	}
	err = os.WriteFile(cfg, []byte(b.ReclaimdControllerConfig(addr, filepath.Join(work, "reclaimd.db"), rules, tenants, "http://"+agentsAddr, secret, token)+extra), 0o600)
	return cfg, addr, err
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return errors.New("timed out")
	case <-time.After(d):
		return nil
	}
}
