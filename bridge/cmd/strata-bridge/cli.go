package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/strata-hpc/strata/bridge/internal/api"
	"github.com/strata-hpc/strata/bridge/internal/config"
	"github.com/strata-hpc/strata/bridge/internal/deploy"
	"github.com/strata-hpc/strata/bridge/internal/render"
	"github.com/strata-hpc/strata/bridge/internal/store"
	"github.com/strata-hpc/strata/internal/buildinfo"
	"github.com/strata-hpc/strata/internal/cliargs"
	"github.com/strata-hpc/strata/internal/clidoc"
	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/gensecret"
	"github.com/strata-hpc/strata/internal/servingquota"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

// Exit codes beyond 0 (done) and 1 (error).
const (
	exitRefused  = 3 // a check refused the deploy or rollback; nothing was created
	exitNotReady = 4 // applied, but the rollout timed out or failed
)

const description = `strata-bridge serves the model a finished Slurm job produced on Kubernetes:
a Deployment (or KServe InferenceService), Service and autoscaler in the tenant's
namespace, with the model mounted read-only from the shared file system.

A job asks to be served with --comment=strata:serve=<name> (its working directory
is the model) or by writing strata-serve.yaml in its working directory:

    name: llama-ft
    model: /shared/projects/llm/checkpoints/final
    runtime: vllm
    gpus: 2

The daemon (strata-bridge run) polls slurmrestd and deploys each such job once
when it completes with exit code 0. Admins use the verbs below; the portal uses
the daemon's JSON API. Every deploy is a version named after its job (job-<id>).

Before anything is created, the checks must pass: the job's account maps to a
tenant in serving.json (strata-policy render writes it); the model path exists,
is under models.allowed_roots and is readable; the name is not another tenant's;
and the tenant's serving quota (GPUs x replicas, replicas) has room. A refusal
names the check and the fix.

deploy, rollback and delete only show what they would do (a server-side dry run)
until given --apply.

Exit codes: 0 done, 1 error, 2 usage error (the message says what the verb takes),
3 refused by a check, 4 applied but not rolled out.`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var log *slog.Logger
	app := &cli.App{
		Name:        "strata-bridge",
		Usage:       "serve the models finished Slurm jobs produce on Kubernetes, with versions and rollback",
		Description: description,
		Version:     buildinfo.Version(),
		Writer:      stdout,
		ErrWriter:   stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Value: config.DefaultPath, Usage: "configuration file"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
			&cli.BoolFlag{Name: "json", Usage: "print results as JSON (the API's format)"},
		},
		Before: func(c *cli.Context) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(c.String("log-level"))); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
			return nil
		},
		ExitErrHandler: func(*cli.Context, error) {}, // cliexit prints and exits
		Commands: []*cli.Command{
			cliargs.Bind(&cli.Command{
				Name:  "deploy",
				Usage: "serve the model of a finished job (a dry run without --apply)",
				Description: `Runs the checks, renders the job's objects and applies them server-side
(with --apply), then waits for the rollout (kubernetes.rollout_timeout) and
records the version. Deploying the same job again changes nothing.

    strata-bridge deploy --job 4242            # what would change
    strata-bridge deploy --job 4242 --apply    # do it (or: strata-bridge deploy 4242 --apply)

A job that did not ask to be served can be served with --name: its working
directory is the model, as with --comment=strata:serve=<name>.`,
				Flags: []cli.Flag{
					&cli.Int64Flag{Name: "job", Usage: "the Slurm job id (or give it as the argument)"},
					&cli.StringFlag{Name: "name", Usage: "serve a job that did not ask to be served under this name"},
					&cli.BoolFlag{Name: "apply", Usage: "apply; without it nothing is changed"},
				},
				Action: func(c *cli.Context) error { return cmdDeploy(ctx, c, log) },
			}, cliargs.Arg{Name: "JOB", Flag: "job", Required: true}),
			{
				Name:   "list",
				Usage:  "list the deployments and their current versions",
				Action: func(c *cli.Context) error { return cmdList(ctx, c) },
			},
			cliargs.Bind(&cli.Command{
				Name:   "status",
				Usage:  "show one deployment: its versions, its events and its rollout in the cluster",
				Action: func(c *cli.Context) error { return cmdStatus(ctx, c, log) },
			}, nameArg),
			cliargs.Bind(&cli.Command{
				Name:  "rollback",
				Usage: "re-apply an earlier version (a dry run without --apply)",
				Description: `Re-applies the model's objects stored with an earlier version: by default the newest
version before the current one that rolled out, or the one named by --to. The
checks run again (the model must still be there; the quota must hold it).

    strata-bridge rollback llama-ft --apply
    strata-bridge rollback llama-ft --to job-4240 --apply`,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "to", Usage: "the version to restore, job-<id>"},
					&cli.BoolFlag{Name: "apply", Usage: "apply; without it nothing is changed"},
				},
				Action: func(c *cli.Context) error { return cmdRollback(ctx, c, log) },
			}, nameArg),
			cliargs.Bind(&cli.Command{
				Name:  "delete",
				Usage: "remove a deployment's objects (a dry run without --apply)",
				Description: `Deletes only the objects the bridge made for this name: those labelled
app.kubernetes.io/managed-by=strata and app.kubernetes.io/name=<name> in the
deployment's namespace. The tenant's Namespace and ResourceQuota stay, and so
do the versions in the store.`,
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "apply", Usage: "delete; without it nothing is changed"}},
				Action: func(c *cli.Context) error { return cmdDelete(ctx, c, log) },
			}, nameArg),
			cliargs.Bind(&cli.Command{
				Name:  "run",
				Usage: "run the daemon: poll slurmrestd and deploy, serve the API, /healthz and /metrics",
				Description: `Polls slurmrestd every slurm.poll_interval with one conditional request and
deploys each job that completed with exit code 0 and asked to be served, once.
When slurmrestd fails the cycle is skipped, logged, counted
(strata_bridge_poll_errors_total) and /healthz fails. SIGHUP reloads
serving.json and the API and slurmrestd tokens (a bad file keeps the one in force). Listens on
listen: GET /v1/deployments, GET /v1/deployments/{name}, POST /v1/deploy,
POST /v1/deployments/{name}/rollback, DELETE /v1/deployments/{name},
GET /healthz, GET /metrics. Every /v1 request carries
"Authorization: Bearer <the content of api.token_file>", names the API by an
allowed Host (api.allowed_hosts) and posts application/json.

A secret file (slurm.token_file, api.token_file, a kubeconfig with
credentials) that every user can read stops the daemon before it starts.`,
				Action: func(c *cli.Context) error { return cmdRun(ctx, c, log) },
			}, configArg),
			cliargs.Bind(&cli.Command{
				Name:   "check-config",
				Usage:  "load the configuration, serving.json, the default runtime, the kubeconfig and the secrets' modes, and report every problem",
				Action: cmdCheck,
			}, configArg),
		},
	}
	app.Commands = append(app.Commands, gensecret.Command(gensecret.Spec{Name: "gen-token",
		Usage: "make the API token (api.token_file) when it does not exist",
		What:  "the bearer token every request to the bridge's API carries (copy it to each portal that calls this bridge: its clusters' bridge_token_file)",
		Group: "strata-bridge", Files: func(c *cli.Context) ([]string, error) {
			cfg, err := config.Load(c.String("config"))
			if err != nil {
				return nil, err
			}
			return []string{cfg.API.TokenFile}, nil
		}}))
	app.Commands = append(app.Commands, clidoc.Command(app, clidoc.Spec{Section: 8, Configs: []clidoc.Config{{Name: "bridge.yaml", Summary: "configuration of strata-bridge, which serves the models of finished Slurm jobs on Kubernetes"}}}))
	cliargs.Enforce(app)
	err := app.RunContext(ctx, args)
	var ref *deploy.Refusal
	if errors.As(err, &ref) {
		return cliexit.Wrap(exitRefused, err)
	}
	return err
}

// The arguments of the verbs: a deployment's name (strata-bridge list
// shows them); the configuration, also --config.
var (
	nameArg   = cliargs.Arg{Name: "NAME", Required: true}
	configArg = cliargs.Arg{Name: "CONFIG", Flag: "config"}
)

// env is what the verbs that touch the cluster share.
type env struct {
	cfg     *config.Config
	store   *store.Store
	kube    *deploy.Kube
	slurm   *slurmrest.Client
	serving *servingquota.File
	dep     *deploy.Deployer
}

func (e *env) close() {
	if e.store != nil {
		_ = e.store.Close()
	}
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes.kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// open loads the configuration and opens what the verb needs: the store
// always, the cluster and the deployer when kube is true, slurmrestd when
// slurm is true, with tokens (nil: slurm.token_file as a FileToken).
func open(ctx context.Context, c *cli.Context, log *slog.Logger, kube, slurm bool, metrics *deploy.Metrics,
	tokens slurmrest.TokenSource) (*env, error) {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return nil, err
	}
	e := &env{cfg: cfg}
	if e.store, err = openStore(ctx, cfg); err != nil {
		return nil, err
	}
	if !kube {
		return e, nil
	}
	if err := e.connect(ctx, log, slurm, tokens); err != nil {
		e.close()
		return nil, err
	}
	serving := e.serving
	dcfg := deployerConfig(cfg, e.kube, e.store, func() *servingquota.File { return serving }, log, metrics)
	if e.slurm != nil {
		dcfg.Jobs = e.slurm
	}
	if e.dep, err = deploy.New(dcfg); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// connect reads serving.json and connects to the cluster, and to
// slurmrestd when slurm is true, with tokens (nil: slurm.token_file as a
// FileToken).
func (e *env) connect(ctx context.Context, log *slog.Logger, slurm bool, tokens slurmrest.TokenSource) error {
	cfg := e.cfg
	var err error
	if e.serving, err = servingquota.Load(cfg.Policy.ServingFile); err != nil {
		return fmt.Errorf("policy.serving_file: %w", err)
	}
	rc, err := restConfig(cfg.Kubernetes.Kubeconfig)
	if err != nil {
		return err
	}
	if e.kube, err = deploy.NewKube(rc, cfg.Kubernetes.FieldManager); err != nil {
		return err
	}
	if slurm {
		if e.slurm, err = dialSlurm(ctx, cfg, log, tokens); err != nil {
			return err
		}
	}
	return nil
}

// dialSlurm connects to slurmrestd and picks its data parser, with tokens
// (nil: slurm.token_file as a FileToken).
func dialSlurm(ctx context.Context, cfg *config.Config, log *slog.Logger, tokens slurmrest.TokenSource) (*slurmrest.Client, error) {
	if tokens == nil {
		tokens = &slurmrest.FileToken{Path: cfg.Slurm.TokenFile}
	}
	return slurmrest.New(ctx, slurmrest.Config{URL: cfg.Slurm.URL, User: cfg.Slurm.User,
		Tokens: tokens, Logger: log, MaxAnswerBytes: int64(cfg.Slurm.MaxAnswerMiB) << 20,
		MaxAnswerSetting: "slurm.max_answer_mib in the bridge's configuration"})
}

// openStore opens the store the configuration names: PostgreSQL when
// store.database is set, SQLite at store.path otherwise.
func openStore(ctx context.Context, cfg *config.Config) (*store.Store, error) {
	return store.OpenDatabase(ctx, store.Database{Path: cfg.Store.Path, URL: cfg.Store.Database,
		PasswordFile: cfg.Store.DatabasePasswordFile, Rule: secretRule})
}

// holder names this process in the lease: the host, the process and a
// random part, so that a restarted bridge is a new holder (a new
// generation) and never takes over what its former self started.
func holder(what string) string {
	host, _ := os.Hostname()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return fmt.Sprintf("%s %s pid %d %s", what, host, os.Getpid(), hex.EncodeToString(rnd[:]))
}

// takeLease makes a verb that changes the cluster hold the store's lease
// for its run, on PostgreSQL, so that it never acts beside a running
// bridge: while the daemon holds it, the verb is refused and says to use
// the API. Release is deferred by the caller.
func (e *env) takeLease(ctx context.Context) (release func(), err error) {
	if !e.cfg.Store.Postgres() {
		return func() {}, nil
	}
	l := e.store.NewLease(holder("strata-bridge CLI"), e.cfg.Store.LeaseTTL)
	e.store.SetLease(l)
	e.dep.SetLease(l)
	ok, err := l.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		st, _ := l.State(ctx)
		return nil, fmt.Errorf("the bridge %q holds the lease of %s (generation %d): a verb that changes the cluster runs only when no bridge does; "+
			"use the running bridge's API (strata-portal-api's deployments pages, or POST /v1/deploy), or stop it first",
			st.Holder, e.cfg.Store.Database, st.Generation)
	}
	// Renew while the verb runs (a rollout may outlast the lease).
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(e.cfg.Store.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
				_, _ = l.Acquire(rctx)
			}
		}
	}()
	return func() {
		cancel()
		<-done
		_ = l.Release(context.WithoutCancel(ctx))
	}, nil
}

func deployerConfig(cfg *config.Config, kube *deploy.Kube, st *store.Store, serving func() *servingquota.File, log *slog.Logger,
	metrics *deploy.Metrics) deploy.Config {
	return deploy.Config{Kube: kube, Store: st, Serving: serving, AllowedRoots: cfg.Models.AllowedRoots, Mount: cfg.Models.Mount,
		RuntimesDir: cfg.Runtimes.Dir, Defaults: cfg.Defaults, KServe: cfg.KServe, KServeDeploymentMode: cfg.KServeDeploymentMode,
		SpreadKey: cfg.Spread.TopologyKey, HostRoot: cfg.Models.HostRoot,
		RolloutTimeout: cfg.Kubernetes.RolloutTimeout, Log: log, Metrics: metrics}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func cmdDeploy(ctx context.Context, c *cli.Context, log *slog.Logger) error {
	e, err := open(ctx, c, log, true, true, nil, nil)
	if err != nil {
		return err
	}
	defer e.close()
	release, err := e.takeLease(ctx)
	if err != nil {
		return err
	}
	defer release()
	res, err := e.dep.DeployJob(ctx, c.Int64("job"), c.String("name"), deploy.Options{DryRun: !c.Bool("apply"), Reason: "strata-bridge deploy"})
	if err != nil {
		return err
	}
	return printResult(c, res)
}

func cmdRollback(ctx context.Context, c *cli.Context, log *slog.Logger) error {
	name := cliargs.Get(c, "NAME")
	var to int64
	var err error
	if s := c.String("to"); s != "" {
		if to, err = api.ParseVersion(s); err != nil {
			return fmt.Errorf("--to: %w", err)
		}
	}
	e, err := open(ctx, c, log, true, false, nil, nil)
	if err != nil {
		return err
	}
	defer e.close()
	release, err := e.takeLease(ctx)
	if err != nil {
		return err
	}
	defer release()
	res, err := e.dep.Rollback(ctx, name, to, deploy.Options{DryRun: !c.Bool("apply"), Reason: "strata-bridge rollback"})
	if err != nil {
		return err
	}
	return printResult(c, res)
}

// printResult prints a deploy or rollback and turns a rollout that did not
// finish into exit code 4.
func printResult(c *cli.Context, res *deploy.Result) error {
	w := c.App.Writer
	if c.Bool("json") {
		if err := printJSON(w, res); err != nil {
			return err
		}
	} else {
		what := res.Action
		if res.DryRun {
			what += " (dry run)"
		}
		fmt.Fprintf(w, "%s %s %s in namespace %s (tenant %s)\n", what, res.Name, res.Version, res.Namespace, res.Tenant)
		if res.Rollout != "" {
			fmt.Fprintf(w, "rollout: %s\n", res.Rollout)
		}
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		for _, o := range res.Objects {
			act := o.Action
			if res.DryRun && act != deploy.ActionUnchanged {
				act = "would be " + act
			}
			fmt.Fprintf(tw, "  %s\t%s\n", o.ObjectRef, act)
		}
		for _, o := range res.Pruned {
			act := "pruned"
			if res.DryRun {
				act = "would be pruned"
			}
			fmt.Fprintf(tw, "  %s\t%s\n", o, act)
		}
		tw.Flush()
		fmt.Fprintf(w, "%s: %s\n", res.Outcome, res.Message)
		if res.DryRun {
			fmt.Fprintln(w, "Nothing was changed: run again with --apply to do it.")
		}
	}
	if res.Outcome == store.OutcomeTimeout || res.Outcome == store.OutcomeFailed {
		return cliexit.Error{Code: exitNotReady, Msg: fmt.Sprintf("%s %s: %s", res.Name, res.Version, res.Outcome)}
	}
	return nil
}

func cmdList(ctx context.Context, c *cli.Context) error {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return err
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	ds, err := st.Deployments(ctx)
	if err != nil {
		return err
	}
	type row struct {
		store.Deployment
		Version string `json:"version,omitempty"`
		Outcome string `json:"outcome,omitempty"`
	}
	rows := []row{}
	for _, d := range ds {
		r := row{Deployment: d}
		if d.Current != 0 {
			r.Version = render.Version(d.Current)
			if v, err := st.Version(ctx, d.Current); err == nil {
				r.Outcome = v.Outcome
			}
		}
		rows = append(rows, r)
	}
	w := c.App.Writer
	if c.Bool("json") {
		return printJSON(w, map[string]any{"deployments": rows})
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "no deployments")
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tNAMESPACE\tTENANT\tSTATE\tVERSION\tOUTCOME\tUPDATED")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Namespace, r.Tenant, r.State, dash(r.Version), dash(r.Outcome),
			r.UpdatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cmdStatus(ctx context.Context, c *cli.Context, log *slog.Logger) error {
	name := cliargs.Get(c, "NAME")
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return err
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	d, err := st.Deployment(ctx, name)
	if err != nil {
		return fmt.Errorf("%w (strata-bridge list shows the deployments)", err)
	}
	versions, err := st.Versions(ctx, name)
	if err != nil {
		return err
	}
	events, err := st.Events(ctx, name)
	if err != nil {
		return err
	}
	live := liveStatus(ctx, cfg, d, log)
	w := c.App.Writer
	if c.Bool("json") {
		for i := range versions {
			versions[i].Objects = nil
		}
		return printJSON(w, map[string]any{"deployment": d, "versions": versions, "events": events, "cluster": live})
	}
	fmt.Fprintf(w, "%s in namespace %s (tenant %s", d.Name, d.Namespace, d.Tenant)
	if d.Project != "" {
		fmt.Fprintf(w, ", project %s", d.Project)
	}
	fmt.Fprintf(w, "): %s", d.State)
	if d.Current != 0 {
		fmt.Fprintf(w, ", current version %s", render.Version(d.Current))
	}
	fmt.Fprintf(w, "\ncluster: %s\n\nversions:\n", live)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, v := range versions {
		mark := " "
		if v.JobID == d.Current {
			mark = "*"
		}
		gpus := fmt.Sprintf("%d GPUs", v.GPUs)
		if v.Tier != "" && v.Tier != servingquota.TierDedicated && v.GPUs > 0 {
			gpus = fmt.Sprintf("%d %s", v.GPUs, v.Tier)
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s x %d\t%s\t%s\n", mark, render.Version(v.JobID), v.Outcome, v.User, gpus, v.MaxReplicas,
			v.ModelPath, v.CreatedAt.Format(time.RFC3339))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nevents:")
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, e := range events {
		ver := "-"
		if e.JobID != 0 {
			ver = render.Version(e.JobID)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.At.Format(time.RFC3339), e.Action, ver, e.Outcome, e.Message)
	}
	return tw.Flush()
}

// liveStatus reads the deployment's workload from the cluster and says
// where its rollout stands; a cluster it cannot reach is said, not fatal.
func liveStatus(ctx context.Context, cfg *config.Config, d store.Deployment, log *slog.Logger) string {
	if d.State != store.StateActive {
		return "no objects (deleted)"
	}
	rc, err := restConfig(cfg.Kubernetes.Kubeconfig)
	if err != nil {
		return "unknown: " + err.Error()
	}
	k, err := deploy.NewKube(rc, cfg.Kubernetes.FieldManager)
	if err != nil {
		return "unknown: " + err.Error()
	}
	kinds := []deploy.ObjectRef{{APIVersion: "apps/v1", Kind: "Deployment"}}
	if cfg.KServe {
		kinds = append([]deploy.ObjectRef{{APIVersion: "serving.kserve.io/v1beta1", Kind: "InferenceService"}}, kinds...)
	}
	for _, ref := range kinds {
		ref.Namespace, ref.Name = d.Namespace, d.Name
		obj, err := k.Get(ctx, ref)
		if err != nil {
			log.Debug("reading the workload failed", "ref", ref.String(), "error", err)
			continue
		}
		if obj == nil {
			continue
		}
		ro := deploy.RolloutStatus(obj)
		state := "rolling out"
		switch {
		case ro.Done:
			state = "rolled out"
		case ro.Failed:
			state = "failed"
		}
		return fmt.Sprintf("%s %s, version %s: %s (%s)", ref.Kind, ref.Name, dash(obj.GetLabels()[render.LabelVersion]), state, ro.Message)
	}
	return "no workload found in namespace " + d.Namespace
}

func cmdDelete(ctx context.Context, c *cli.Context, log *slog.Logger) error {
	name := cliargs.Get(c, "NAME")
	e, err := open(ctx, c, log, true, false, nil, nil)
	if err != nil {
		return err
	}
	defer e.close()
	release, err := e.takeLease(ctx)
	if err != nil {
		return err
	}
	defer release()
	res, err := e.dep.Delete(ctx, name, deploy.Options{DryRun: !c.Bool("apply"), Reason: "strata-bridge delete"})
	if err != nil {
		return err
	}
	w := c.App.Writer
	if c.Bool("json") {
		return printJSON(w, res)
	}
	verb := "deleted"
	if res.DryRun {
		verb = "would delete"
	}
	fmt.Fprintf(w, "%s %d objects of %s in namespace %s:\n", verb, len(res.Deleted), res.Name, res.Namespace)
	for _, r := range res.Deleted {
		fmt.Fprintf(w, "  %s\n", r)
	}
	if res.DryRun {
		fmt.Fprintln(w, "Nothing was changed: run again with --apply to do it.")
	}
	return nil
}

func cmdCheck(c *cli.Context) error {
	path := c.String("config")
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	warnings, serving, err := preflight(path, cfg)
	for _, w := range warnings {
		fmt.Fprintf(c.App.ErrWriter, "WARNING: %s\n", w)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%s: %d tenants\n", cfg.Policy.ServingFile, len(serving.Tenants))
	fmt.Fprintf(c.App.Writer, "%s is valid (%s every %s, field manager %s, store %s)\n", path, cfg.Slurm.URL, cfg.Slurm.PollInterval,
		cfg.Kubernetes.FieldManager, cfg.Store.Path)
	return nil
}

// preflight checks every file and folder the configuration names (the
// serving quotas, the default runtime, the model roots, the kubeconfig,
// the secrets), all problems at once. check-config and run both call it
// first, after config.Load, so that the two can never disagree; warnings
// are what run logs and starts anyway with.
func preflight(path string, cfg *config.Config) (warnings []string, serving *servingquota.File, err error) {
	var problems []string
	if serving, err = servingquota.Load(cfg.Policy.ServingFile); err != nil {
		problems = append(problems, fmt.Sprintf("policy.serving_file: %v", err))
	}
	if _, err := render.LoadRuntime(cfg.Runtimes.Dir, cfg.Defaults.Runtime); err != nil {
		problems = append(problems, fmt.Sprintf("defaults.runtime %q in %s: %v", cfg.Defaults.Runtime, cfg.Runtimes.Dir, err))
	}
	for i, r := range cfg.Models.AllowedRoots {
		here := filepath.Join(cfg.Models.HostRoot, r) // where this host sees it (models.host_root)
		if st, err := os.Stat(here); err != nil || !st.IsDir() {
			problems = append(problems, fmt.Sprintf("models.allowed_roots[%d]: %s is not a folder on this host (%v): the bridge checks models there", i, here, err))
		}
	}
	if _, err := restConfig(cfg.Kubernetes.Kubeconfig); err != nil {
		problems = append(problems, err.Error())
	}
	warnings, secretProblems := checkSecrets(cfg)
	problems = append(problems, secretProblems...)
	if w := listenWarning(cfg); w != "" {
		warnings = append(warnings, w)
	}
	if len(problems) > 0 {
		noun := "problems"
		if len(problems) == 1 {
			noun = "problem"
		}
		return warnings, nil, fmt.Errorf("%s: %d %s:\n  %s", path, len(problems), noun, strings.Join(problems, "\n  "))
	}
	return warnings, serving, nil
}
