// Command strata-demo shows a new user the local test cluster that
// `make demo` starts: its nodes and fake GPUs, a GPU job submitted as a
// normal user through slurmrestd, the GPU indices Slurm gave it, and how to
// look at it; test/demo/demo.sh shows the rest of the suite after it.
// With -reclaim it runs reclaimd live on the same bed (reclaim.go): an
// idle job reclaimed and a waiting job started; with -fault its GPU node
// health and recovery (fault.go): an Xid 79 under a job, the node drained,
// the job run again elsewhere and the node resumed. With -visit it
// checks the portal's pages in headless Chromium (pages.go): each signs
// in and renders, in English and Korean, its screenshots kept.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/strata-hpc/strata/internal/cliargs"
	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/test/fabricgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		switch msg := err.Error(); {
		case cliexit.CodeOf(err) == cliexit.ExitUsage:
			fmt.Fprintln(os.Stderr, msg) // names strata-demo already
		case msg != "":
			fmt.Fprintln(os.Stderr, "strata-demo:", msg)
		}
		os.Exit(cliexit.CodeOf(err))
	}
}

const demoScript = `#!/bin/bash
echo "job $SLURM_JOB_ID on $(hostname -s)/$SLURMD_NODENAME sees CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
sleep 600
`

// envArg is the test bed's environment file: the argument or -env.
var envArg = cliargs.Arg{Name: "ENV", Flag: "env"}

// parseArgs parses the flags and the one argument strata-demo takes, the
// environment file, which sets -env; anything else is a usage error.
func parseArgs(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	const usage = "strata-demo [options] [ENV]"
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(os.Stderr)
				fmt.Fprintln(os.Stderr, "usage: "+usage)
				fs.PrintDefaults()
				return cliexit.Error{Code: 0} // help asked for and given: nothing to run
			}
			return cliexit.Usagef("%v (usage: %s)", err, usage)
		}
		if fs.NArg() == 0 {
			break
		}
		// Flags may follow the argument.
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	vals, err := cliargs.Match("strata-demo", usage, pos, []cliargs.Arg{envArg}, func(name string) (string, bool) {
		return fs.Lookup(name).Value.String(), set[name]
	})
	if err != nil {
		return err
	}
	if v, ok := vals[envArg.Name]; ok {
		return fs.Set(envArg.Flag, v)
	}
	return nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("strata-demo", flag.ContinueOnError)
	envFile := fs.String("env", "/var/lib/strata/testbed/s2605/env", "environment file of the test bed (written by testbed.sh up)")
	user := fs.String("user", "alice", "user to submit the GPU job as")
	gpus := fs.Int("gpus", 2, "GPUs to ask for")
	topoDir := fs.String("topogen-dir", "", "write a generated fabric of the test bed's nodes and a topogen config here")
	var ro reclaimOpts
	reclaim := fs.Bool("reclaim", false, "run reclaimd live instead: reclaim -idle-job and see -waiting-job start")
	fs.Int64Var(&ro.idle, "idle-job", 0, "with -reclaim: the running job whose GPUs the agents replay as idle")
	fs.Int64Var(&ro.waiting, "waiting-job", 0, "with -reclaim: the job pending on its project's GPU limit")
	fs.StringVar(&ro.reclaimd, "reclaimd", "bin/reclaimd", "with -reclaim or -fault: the reclaimd binary")
	fs.StringVar(&ro.tenants, "tenants", "", "with -reclaim or -fault: tenants.json (strata-policy render)")
	fs.StringVar(&ro.work, "work", "", "with -reclaim or -fault: folder for reclaimd's configs, replays, logs and state")
	fs.StringVar(&ro.busyUser, "busy-user", "bob", "with -reclaim: user of the busy job submitted beside the idle one")
	fs.StringVar(&ro.busyAcct, "busy-account", "globex-rl", "with -reclaim: account of the busy job")
	fs.DurationVar(&ro.timeout, "reclaim-timeout", 4*time.Minute, "with -reclaim: how long the whole reclaim may take")
	var fo faultOpts
	fault := fs.Bool("fault", false, "run reclaimd's GPU node health and recovery live instead: an Xid 79 under a job, the node drained, the job run again elsewhere, the node resumed")
	fs.StringVar(&fo.user, "fault-user", "bob", "with -fault: user of the job that loses its GPU")
	fs.StringVar(&fo.account, "fault-account", "globex-rl", "with -fault: account of that job")
	fs.DurationVar(&fo.timeout, "fault-timeout", 4*time.Minute, "with -fault: how long the whole recovery may take")
	var vs visits
	fs.Var(&vs, "visit", `check the portal's pages instead, in headless Chromium: "NAME LINK PATHS", a one-time sign-in link (strata-portal-api login-link) and the pages to open, comma-separated; repeatable`)
	shots := fs.String("shots", "", "with -visit: folder for the pages' screenshots")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if len(vs) > 0 {
		if *shots == "" {
			return cliexit.Usagef("strata-demo: -visit needs -shots")
		}
		return checkPages(ctx, vs, *shots, out)
	}
	if *reclaim && (ro.idle == 0 || ro.waiting == 0 || ro.tenants == "" || ro.work == "") {
		return cliexit.Usagef("strata-demo: -reclaim needs -idle-job, -waiting-job, -tenants and -work")
	}
	if *fault && *reclaim {
		return cliexit.Usagef("strata-demo: -fault and -reclaim are two runs: give one")
	}
	if *fault && (ro.tenants == "" || ro.work == "") {
		return cliexit.Usagef("strata-demo: -fault needs -tenants and -work")
	}
	fo.reclaimd, fo.tenants, fo.work = ro.reclaimd, ro.tenants, ro.work
	b, err := testbed.Load(*envFile)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if *reclaim || *fault {
		level = slog.LevelWarn // the reclaim prints what happens itself
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg := b.Config()
	cfg.Logger = log
	admin, err := slurmrest.New(ctx, cfg)
	if err != nil {
		return err
	}
	if *reclaim || *fault {
		signer, err := slurmrest.NewKeySigner(b.JWTKey, 10*time.Minute)
		if err != nil {
			return err
		}
		cfg.Tokens = signer
		asUser, err := slurmrest.New(ctx, cfg)
		if err != nil {
			return err
		}
		if *fault {
			return liveFault(ctx, b, admin, asUser, fo, out)
		}
		return liveReclaim(ctx, b, admin, asUser, ro, out)
	}
	info := admin.Info()
	fmt.Fprintf(out, "\n== Cluster %s: Slurm %s, slurmrestd at %s (data parser %s; offered %s)\n\n",
		b.Cluster, info.Release, b.URL, info.Parser, strings.Join(info.Offered, ", "))
	note, err := confinement(b)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, note)

	nodes, err := admin.Nodes(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tCPUS\tGPUS (used/total)\tGRES")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d %s\t%s\n", n.Name, strings.Join(n.State, ","), n.CPUs, n.GPUsUsed, n.GPUs, n.GPUType, n.GRES)
	}
	tw.Flush()

	// The job goes in as a normal user, with a token minted from the
	// cluster's JWT key, as a portal would do it.
	signer, err := slurmrest.NewKeySigner(b.JWTKey, 10*time.Minute)
	if err != nil {
		return err
	}
	cfg.Tokens = signer
	asUser, err := slurmrest.New(ctx, cfg)
	if err != nil {
		return err
	}
	outFile := b.JobDir + "/demo-%j.out"
	res, err := asUser.Submit(ctx, *user, slurmrest.JobSpec{
		Name: "strata-demo", Script: demoScript, Account: b.Account, Partition: b.Partition,
		TRESPerNode: fmt.Sprintf("gres/gpu:%d", *gpus), TimeLimit: 10 * time.Minute,
		WorkDir: b.JobDir, StdOut: outFile,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n== Submitted job %d as %s through slurmrestd, asking for %d GPUs\n", res.JobID, *user, *gpus)
	job, err := waitRunning(ctx, admin, res.JobID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "   state %s on %s, account %s, partition %s\n", job.State, job.NodeList, job.Account, job.Partition)
	fmt.Fprintf(out, "   GPUs Slurm allocated (node:index):")
	for _, g := range job.GPUs {
		fmt.Fprintf(out, " %s", g)
	}
	fmt.Fprintln(out)
	path := b.HostPath(strings.ReplaceAll(outFile, "%j", fmt.Sprint(res.JobID)))
	if line, err := waitLine(ctx, path); err == nil {
		fmt.Fprintf(out, "   the job itself says: %s\n", line)
	}

	if *topoDir != "" {
		if err := writeTopogenInputs(*topoDir, b); err != nil {
			return err
		}
		fmt.Fprintf(out, "\n== topogen inputs for this cluster are in %s (a generated InfiniBand fabric: leaves gpu1+gpu3 and gpu2+gpu4)\n", *topoDir)
	}

	fmt.Fprintf(out, `
== Look at this job yourself
   Slurm commands of this cluster:  %[1]s/squeue   %[1]s/sinfo -N   %[1]s/scontrol show job %[2]d
   REST:  curl -H "X-SLURM-USER-TOKEN: $(cat %[3]s)" %[4]s/slurm/%[5]s/job/%[2]d
   job output: %[6]s
   cancel the job:  %[1]s/scancel %[2]d
`, b.Bin, res.JobID, b.TokenFile, b.URL, info.Parser, path)
	return nil
}

func waitRunning(ctx context.Context, c *slurmrest.Client, id int64) (slurmrest.Job, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		j, err := c.Job(ctx, id)
		if err == nil && j.Running() {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, fmt.Errorf("job %d did not start within 60 s (state %s, reason %q): %w", id, j.State, j.StateReason, errors.Join(err, ctx.Err()))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func waitLine(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		if data, err := os.ReadFile(path); err == nil && len(data) > 0 {
			line, _, _ := strings.Cut(string(data), "\n")
			return line, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// writeTopogenInputs writes an ibnetdiscover dump of a fabric made up for
// the test bed's nodes and a topogen config that plans against the test
// bed's topology.conf, so the demo can show topogen plan on a live cluster.
func writeTopogenInputs(dir string, b *testbed.Bed) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var leaves [][]string
	for i := 0; i < len(b.Nodes); i += 2 {
		leaf := []string{b.Nodes[i]}
		if i+2 < len(b.Nodes) {
			leaf = append(leaf, b.Nodes[i+2])
		}
		leaves = append(leaves, leaf)
	}
	if len(b.Nodes) >= 4 {
		leaves = [][]string{{b.Nodes[0], b.Nodes[2]}, {b.Nodes[1], b.Nodes[3]}}
	}
	var dump bytes.Buffer
	if err := fabricgen.Write(&dump, fabricgen.Spec{Leaves: leaves, Spines: 2, Seed: 1}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ibnetdiscover.out"), dump.Bytes(), 0o644); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`# topogen config for the demo test bed %s
apiVersion: strata/v1
kind: TopogenConfig
slurm:
  format: tree
  topology_file: %s
  scontrol: %s
  node_source: slurmrestd
  rest:
    url: %s
    user: %s
    token_file: %s
fabric:
  ibnetdiscover: %s
`, b.Name, b.HostPath("/etc/slurm/topology.conf"), b.Scontrol, b.URL, b.AdminUser, b.TokenFile, filepath.Join(dir, "ibnetdiscover.out"))
	return os.WriteFile(filepath.Join(dir, "topogen.yaml"), []byte(cfg), 0o644)
}
