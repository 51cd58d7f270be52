package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// faultOpts are the inputs of the live GPU fault (strata-demo -fault).
type faultOpts struct {
	reclaimd string // the reclaimd binary
	tenants  string // tenants.json rendered by strata-policy
	work     string // configs, fault files, logs and the state file go here
	user     string // submits the job that loses its GPU
	account  string
	timeout  time.Duration
}

// faultRules retry a gpu_fault twice excluding the node (the default
// recovery rule of every class) and reclaim nothing.
const faultRules = `{"apiVersion": "strata/v1", "kind": "ReclaimRules", "rules": [],
  "recovery": [{"name": "all", "match": {}}]}
`

// gpuLostScript runs until its GPU is lost on the node it runs on (the
// demo writes a file named for the node in the job's folder when it
// injects the Xid), then fails as a CUDA program does when its GPU falls
// off the bus. On another node it runs on.
const gpuLostScript = `#!/bin/sh
echo "run on $SLURMD_NODENAME, CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
while [ ! -e "%s/$SLURMD_NODENAME" ]; do sleep 1; done
echo "RuntimeError: CUDA error: unspecified launch failure" >&2
exit 1
`

// healthCheck stands in for `dcgmi diag -r 1` on the node: it passes.
const healthCheck = `#!/bin/sh
# strata-demo: stands in for ssh "$1" dcgmi diag -r 1 (the bed has no real GPUs)
echo "diag of $1: pass"
`

// liveFault runs reclaimd with GPU node health and recovery on the test
// bed: a requeueable job on a node of its own (exclusive, so the node is
// empty once the job has left and its health check can run), an Xid 79
// on its GPU through that node's agent, the node drained with the
// reason Slurm shows, the failure classed gpu_fault with its evidence
// (GET /v1/jobs/{id}/attempts), the job running again on another node
// and the node resumed by its health command.
func liveFault(ctx context.Context, b *testbed.Bed, admin, asUser *slurmrest.Client, o faultOpts, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := os.MkdirAll(o.work, 0o755); err != nil {
		return err
	}
	fail := func(step, format string, args ...any) error {
		return fmt.Errorf("live GPU fault, step %q: %s", step, fmt.Sprintf(format, args...))
	}

	step := "two free nodes"
	nodes, err := admin.Nodes(ctx)
	if err != nil {
		return fail(step, "list nodes: %v", err)
	}
	free := 0
	for _, n := range nodes {
		if slices.Contains(n.State, "DRAIN") {
			return fail(step, "%s is drained (%q): resume it first (%s/scontrol update nodename=%s state=resume)", n.Name, n.Reason, b.Bin, n.Name)
		}
		if n.AllocCPUs == 0 && n.GPUsUsed == 0 {
			free++
		}
	}
	if free < 2 {
		return fail(step, "%d of %d nodes have no job: the job needs one to fail on and one to run again on", free, len(nodes))
	}

	step = "reclaimd: agents and controller"
	secret := filepath.Join(o.work, "agent.token")
	if err := os.WriteFile(secret, []byte(demoAgentSecret), 0o600); err != nil {
		return err
	}
	ds := newDaemons(o.reclaimd, o.work, fail)
	defer ds.stop()
	died, start := ds.died, func(name string, args ...string) error { return ds.start(step, name, args...) }
	faultFile := func(node string) string { return filepath.Join(o.work, "faults-"+node+".csv") }
	for _, node := range b.Nodes {
		if err := os.WriteFile(faultFile(node), nil, 0o644); err != nil {
			return err
		}
	}
	agents, err := startAgents(b, o.work, secret, start, func(node string) ([]byte, string) {
		return replayOf(node, b.GPUsPerNode, nil, 0), "  faults_file: " + faultFile(node) + "\n"
	})
	if err != nil {
		return err
	}
	proxy, err := agentProxy(agents)
	if err != nil {
		return err
	}
	defer proxy.Close()
	rules := filepath.Join(o.work, "reclaim-rules.json")
	if err := os.WriteFile(rules, []byte(faultRules), 0o644); err != nil {
		return err
	}
	check := filepath.Join(o.work, "health-check")
	if err := os.WriteFile(check, []byte(healthCheck), 0o755); err != nil {
		return err
	}
	ctlCfg, ctlAddr, err := controllerConfig(b, o.work, rules, o.tenants, proxy.Addr, secret, fmt.Sprintf(`health:
  enabled: true
  max_drained_share: 0.25
  # stands in for [ssh, -o, BatchMode=yes, "{node}", dcgmi, diag, -r, "1"]
  check_command: [%s, "{node}"]
  check_interval: 1m
recovery:
  log_root: %s
`, check, b.Root))
	if err != nil {
		return err
	}
	if err := start("controller", "--config", ctlCfg, "run"); err != nil {
		return err
	}
	api := "http://" + ctlAddr
	fmt.Fprintf(out, "   reclaimd controller on %s with health and recovery on, 4 agents with fault files (logs, configs: %s)\n", ctlAddr, o.work)
	fmt.Fprintf(out, "   health check command: %s {node} (passes; stands in for dcgmi diag -r 1 over ssh)\n", check)

	step = "a requeueable job on a node of its own"
	name := fmt.Sprintf("gpulost-%d", time.Now().Unix())
	lost := b.JobDir + "/" + name
	if err := os.MkdirAll(b.HostPath(lost), 0o777); err != nil {
		return err
	}
	_ = os.Chmod(b.HostPath(lost), 0o777)
	requeue := true
	res, err := asUser.Submit(ctx, o.user, slurmrest.JobSpec{
		Name: name, Script: fmt.Sprintf(gpuLostScript, lost), Account: o.account, Partition: b.Partition,
		TRESPerNode: "gres/gpu:1", TimeLimit: 10 * time.Minute, WorkDir: lost, Exclusive: true, Requeue: &requeue,
		StdOut: lost + "/out-%j.txt", StdErr: lost + "/err-%j.txt",
	})
	if err != nil {
		return fail(step, "submit as %s: %v", o.user, err)
	}
	id := res.JobID
	defer func() { _ = admin.Cancel(context.WithoutCancel(ctx), id) }() // the demo's jobs are not left behind
	j, err := waitRunning(ctx, admin, id)
	if err != nil {
		return fail(step, "job %d: %v", id, err)
	}
	if len(j.Nodes) != 1 || len(j.GPUs) == 0 {
		return fail(step, "job %d runs on %s with GPUs %v: want GPUs of one node", id, j.NodeList, j.GPUs)
	}
	// Exclusive, the job holds every GPU of its node; the fault hits its
	// first one (CUDA_VISIBLE_DEVICES' first, where a program starts).
	node, gpu := j.GPUs[0].Node, j.GPUs[0].Index
	fmt.Fprintf(out, "   job %d (%s, %s, requeueable, exclusive: %d GPUs of %s) runs on %s; the fault goes to its GPU %d\n",
		id, o.user, o.account, len(j.GPUs), node, node, gpu)
	// The controller sees it running on that GPU before the fault.
	if err := sleep(ctx, 6*time.Second); err != nil {
		return fail(step, "%v", err)
	}
	if err := died(); err != nil {
		return err
	}

	step = "Xid 79 injected"
	f, err := os.OpenFile(faultFile(node), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "%d,xid,79\n", gpu)
	if err := f.Close(); err != nil {
		return err
	}
	injected := time.Now()
	if err := os.WriteFile(filepath.Join(b.HostPath(lost), node), nil, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "   %s  $ echo %d,xid,79 >>%s   (the agent on %s reads it as NVML's Xid event)\n",
		injected.Format("15:04:05"), gpu, faultFile(node), node)

	step = "node drained"
	var drained slurmrest.Node
	for {
		if err := died(); err != nil {
			return err
		}
		if n, err := nodeNamed(ctx, admin, node); err == nil && slices.Contains(n.State, "DRAIN") {
			drained = n
			break
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return fail(step, "%s not drained after the Xid (see %s/controller.log)", node, o.work)
		}
	}
	want := fmt.Sprintf("strata: Xid 79 on GPU %d (GPU fell off the bus)", gpu)
	fmt.Fprintf(out, "   +%-5s %s %s, reason (sinfo -R): %s\n", since(injected), node, strings.Join(drained.State, "+"), drained.Reason)
	if drained.Reason != want {
		return fail(step, "%s drained with reason %q, want %q", node, drained.Reason, want)
	}

	step = "failure classed gpu_fault"
	var at attempt
	for {
		if err := died(); err != nil {
			return err
		}
		as, err := attempts(ctx, api, id)
		if err == nil && len(as) > 0 {
			at = as[0]
			break
		}
		if err := sleep(ctx, time.Second); err != nil {
			return fail(step, "GET /v1/jobs/%d/attempts has no failure (%v; see %s/controller.log)", id, err, o.work)
		}
	}
	fmt.Fprintf(out, "   +%-5s $ curl %s/v1/jobs/%d/attempts\n", since(injected), api, id)
	fmt.Fprintf(out, "          class %s, action %s: %s\n", at.Class, at.Action, at.Reason)
	var compact bytes.Buffer
	if err := json.Compact(&compact, at.Evidence); err != nil {
		return fail(step, "evidence %q: %v", at.Evidence, err)
	}
	fmt.Fprintf(out, "          evidence %s\n", compact.String())
	if tail, err := os.ReadFile(b.HostPath(fmt.Sprintf("%s/err-%d.txt", lost, id))); err == nil && len(bytes.TrimSpace(tail)) > 0 {
		fmt.Fprintf(out, "          the job's stderr, its GPU gone: %s\n", strings.TrimSpace(string(tail)))
	}
	if at.Class != "gpu_fault" || at.Action != "retry" {
		return fail(step, "job %d's failure is %s, %s (%s), want gpu_fault retried", id, at.Class, at.Action, at.Reason)
	}
	var ev struct {
		Node string `json:"node"`
		GPU  *int   `json:"gpu"`
		Xid  int    `json:"xid"`
	}
	if err := json.Unmarshal(at.Evidence, &ev); err != nil || ev.Node != node || ev.GPU == nil || *ev.GPU != gpu || ev.Xid != 79 {
		return fail(step, "evidence %s (%v), want node %s, GPU %d, Xid 79", at.Evidence, err, node, gpu)
	}

	step = "running again on another node"
	var again slurmrest.Job
	for {
		if err := died(); err != nil {
			return err
		}
		if j, err := admin.Job(ctx, id); err == nil && j.Running() && j.RestartCount >= 1 {
			again = j
			break
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			j, jerr := admin.Job(ctx, id)
			return fail(step, "job %d is %s (%s), restarts %d (%v)", id, j.State, j.StateReason, j.RestartCount, jerr)
		}
	}
	fmt.Fprintf(out, "   +%-5s job %d %s again on %s (excluded: %s), restarts %d; admin comment: %s\n",
		since(injected), id, again.State, again.NodeList, again.ExcludedNodes, again.RestartCount, again.AdminComment)
	if slices.Contains(again.Nodes, node) {
		return fail(step, "job %d runs again on %s, the node that failed", id, node)
	}
	fmt.Fprintf(out, "   measured: %s from the Xid to the job running again\n", time.Since(injected).Round(100*time.Millisecond))

	step = "node resumed after its health check"
	for {
		if err := died(); err != nil {
			return err
		}
		if n, err := nodeNamed(ctx, admin, node); err == nil && !slices.Contains(n.State, "DRAIN") {
			fmt.Fprintf(out, "   +%-5s %s %s: the health check passed and reclaimd resumed it\n", since(injected), node, strings.Join(n.State, "+"))
			if lc, err := lastCheck(ctx, api, node); err == nil {
				fmt.Fprintf(out, "          $ curl -H 'Authorization: Bearer <api.token_file>' %s/v1/nodes/health?node=%s: last check passed %v, output %q\n", api, node, lc.Passed, strings.TrimSpace(lc.Output))
			}
			break
		}
		if err := sleep(ctx, time.Second); err != nil {
			return fail(step, "%s still drained (see %s/controller.log)", node, o.work)
		}
	}
	return nil
}

func since(t time.Time) string { return time.Since(t).Round(time.Second).String() }

func nodeNamed(ctx context.Context, c *slurmrest.Client, name string) (slurmrest.Node, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return slurmrest.Node{}, err
	}
	for _, n := range nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return slurmrest.Node{}, fmt.Errorf("no node %s", name)
}

// attempt is one item of GET /v1/jobs/{id}/attempts.
type attempt struct {
	Class    string          `json:"class"`
	Action   string          `json:"action"`
	Reason   string          `json:"reason"`
	Evidence json.RawMessage `json:"evidence"`
}

func attempts(ctx context.Context, api string, id int64) ([]attempt, error) {
	req, err := apiRequest(ctx, fmt.Sprintf("%s/v1/jobs/%d/attempts", api, id))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/jobs/%d/attempts: %s", id, resp.Status)
	}
	var body struct {
		Attempts []attempt `json:"attempts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	return body.Attempts, nil
}

// lastCheckResult is a node's last health check in GET /v1/nodes/health.
type lastCheckResult struct {
	Passed bool   `json:"passed"`
	Output string `json:"output"`
}

func lastCheck(ctx context.Context, api, node string) (lastCheckResult, error) {
	req, err := apiRequest(ctx, api+"/v1/nodes/health?node="+node)
	if err != nil {
		return lastCheckResult{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return lastCheckResult{}, err
	}
	defer resp.Body.Close()
	var body struct {
		Nodes []struct {
			LastCheck *lastCheckResult `json:"last_check"`
		} `json:"nodes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return lastCheckResult{}, err
	}
	if len(body.Nodes) != 1 || body.Nodes[0].LastCheck == nil {
		return lastCheckResult{}, fmt.Errorf("GET /v1/nodes/health?node=%s: no check", node)
	}
	return *body.Nodes[0].LastCheck, nil
}
