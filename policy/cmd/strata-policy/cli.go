package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/atomicfile"
	"github.com/strata-hpc/strata/internal/buildinfo"
	"github.com/strata-hpc/strata/internal/cliargs"
	"github.com/strata-hpc/strata/internal/clidoc"
	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/policy/internal/apply"
	"github.com/strata-hpc/strata/policy/internal/compile"
	"github.com/strata-hpc/strata/policy/internal/plan"
	"github.com/strata-hpc/strata/policy/internal/render"
	"github.com/strata-hpc/strata/policy/internal/sacctmgr"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// Exit codes, stable for cron and monitoring.
const (
	exitOK      = 0 // done; drift: Slurm matches the policy
	exitFailure = 1 // could not run
	exitDrift   = 2 // drift: Slurm differs from the policy; plan: there are changes
	exitInvalid = 3 // the policy file has errors; nothing was read or written
)

// exitErr is an error with one of the exit codes above.
func exitErr(code int, msg string) error { return cliexit.Error{Code: code, Msg: msg} }

// failure is err with exit code 1, still reachable to errors.As.
func failure(err error) error { return cliexit.Wrap(exitFailure, err) }

// policyArg is the policy file a verb reads: an argument or --policy.
var policyArg = cliargs.Arg{Name: "POLICY", Flag: "policy"}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var log *slog.Logger
	restFlags := []cli.Flag{
		&cli.StringFlag{Name: "policy", Aliases: []string{"p"}, Value: "/etc/strata/policy.yaml", Usage: "the policy file"},
		&cli.StringFlag{Name: "url", Value: "http://127.0.0.1:6820", Usage: "slurmrestd", EnvVars: []string{"STRATA_SLURMRESTD"}},
		&cli.StringFlag{Name: "user", Value: "root", Usage: "Slurm administrator to act as"},
		&cli.StringFlag{Name: "token-file", Value: "/etc/strata/policy.jwt", Usage: "JWT of that administrator (re-read when it changes)"},
		&cli.BoolFlag{Name: "prune", Usage: "also remove Strata's objects the policy no longer has"},
		&cli.BoolFlag{Name: "force-busy", Usage: "with --prune, cancel the running and pending jobs of what it removes (without it, such removals are skipped and reported)"},
		&cli.StringFlag{Name: "read-with", Value: readAuto, Usage: "how to read the associations: " + readAuto + " (sacctmgr when it is found, slurmrestd when it is not or fails), " +
			readSacctmgr + " or " + readREST + " (slurmrestd for everything); of 42,000 associations sacctmgr reads all in 3 s, slurmrestd in 7 s when idle"},
		&cli.StringFlag{Name: "sacctmgr", Value: "sacctmgr", Usage: "sacctmgr to run, authenticated by the token: to read associations (see --read-with) and for what slurmrestd cannot write (emptying a QOS's preempt list)"},
	}
	app := &cli.App{
		Name:  "strata-policy",
		Usage: "make Slurm's accounts, fair-share, limits and QOS match one policy file",
		Description: `strata-policy check              validate the policy (every error as file:line:col with a hint)
strata-policy plan               show the ordered changes Slurm needs (exit 2 when there are some)
strata-policy apply --apply      make them (without --apply: the plan only)
strata-policy drift              exit 0 when Slurm matches the policy, 2 when not (for cron)
strata-policy explain job 1234   why a job waits, in plain words (also: explain user|account <name>)

check, plan, apply, drift and render read the policy named by their argument or --policy
(default /etc/strata/policy.yaml). An argument or flag a command does not take is a usage
error: exit 2 too, with a message on stderr that says what the command takes.

Strata marks what it creates (account organization "strata", QOS description "strata: ...")
and never changes or removes anything unmarked; removals need --prune. A removal that would
take running or pending jobs with it is skipped and reported, unless --force-busy cancels them.`,
		Version:   buildinfo.Version(),
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{&cli.StringFlag{Name: "log-level", Value: "info"},
			&cli.StringFlag{Name: "max-policy-size", Value: "16MiB", EnvVars: []string{"STRATA_POLICY_MAX_SIZE"},
				Usage: "the largest policy file read (KiB, MiB, GiB; a plain number is bytes): a larger one is refused before it is parsed, " +
					"as checking takes some 40 times the file's size in memory"}},
		Before: func(c *cli.Context) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(c.String("log-level"))); err != nil {
				return err
			}
			log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
			return nil
		},
		ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{
			cliargs.Bind(&cli.Command{Name: "check", Usage: "validate the policy file", Flags: restFlags[:1], Action: func(c *cli.Context) error {
				p, err := load(c)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "%s is valid: %d tenants, %d classes\n", c.String("policy"), len(p.Tenants), len(p.Classes))
				return nil
			}}, policyArg),
			cliargs.Bind(&cli.Command{Name: "plan", Usage: "show the changes", Flags: restFlags, Action: func(c *cli.Context) error { return cmdPlan(ctx, c, log, false) }},
				policyArg),
			cliargs.Bind(&cli.Command{Name: "apply", Usage: "make the changes (with --apply)", Description: applyDoc, Flags: append(restFlags, &cli.BoolFlag{Name: "apply", Usage: "really write"},
				&cli.IntFlag{Name: "batch-size", Value: apply.DefaultBatchSize, Usage: "most changes in one batch of list requests (1: one change at a time)"}),
				Action: func(c *cli.Context) error { return cmdPlan(ctx, c, log, c.Bool("apply")) }}, policyArg),
			cliargs.Bind(&cli.Command{Name: "drift", Usage: "exit 2 when Slurm differs from the policy", Flags: restFlags,
				Action: func(c *cli.Context) error { return cmdPlan(ctx, c, log, false) }}, policyArg),
			explainCommand(ctx, restOnly(restFlags), func() *slog.Logger { return log }),
			cliargs.Bind(&cli.Command{Name: "render", Usage: "write the files other parts read (see render --help)", Description: renderDoc(), Flags: []cli.Flag{restFlags[0],
				&cli.StringFlag{Name: "output-dir", Aliases: []string{"o"}, Value: "/etc/strata", Usage: "where Strata's files go"},
				&cli.StringFlag{Name: "slurm-dir", Value: "/etc/slurm", Usage: "where Slurm's files go (job_submit data, partitions include)"}}, Action: cmdRender},
				policyArg),
		},
	}
	app.CustomAppHelpTemplate = cli.AppHelpTemplate
	app.Commands = append(app.Commands, clidoc.Command(app, clidoc.Spec{Section: 1, Configs: []clidoc.Config{{Name: "policy.yaml", Summary: "the tenant policy of a Slurm cluster, which strata-policy checks, plans, applies and renders"}}}))
	cliargs.Enforce(app)
	return app.RunContext(ctx, args)
}

func cmdRender(c *cli.Context) error {
	p, err := load(c)
	if err != nil {
		return err
	}
	dirs := map[string]string{render.DirStrata: c.String("output-dir"), render.DirSlurm: c.String("slurm-dir")}
	type out struct {
		path string
		data []byte
		mode os.FileMode
	}
	var outs []out
	for _, f := range render.Files() {
		data, err := f.Render(p)
		if err != nil {
			return failure(fmt.Errorf("render %s: %w", f.Name, err))
		}
		outs = append(outs, out{filepath.Join(dirs[f.Dir], f.Name), data, f.Mode})
	}
	// Everything rendered before anything is written, and every file
	// written beside its target before any is renamed into place: a
	// policy that fails to render, or a file that cannot be written,
	// changes none.
	batch := atomicfile.NewBatch()
	for _, o := range outs {
		if err := os.MkdirAll(filepath.Dir(o.path), 0o755); err != nil {
			return failure(err)
		}
		batch.Add(o.path, o.data, o.mode)
	}
	if err := batch.Commit(); err != nil {
		return failure(fmt.Errorf("render: no file was changed: %w", err))
	}
	for _, o := range outs {
		fmt.Fprintf(c.App.Writer, "wrote %s\n", o.path)
	}
	return nil
}

// parseSize reads a size: bytes, or a number with KiB, MiB or GiB (K, M
// and G are the same).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("%q: want a size such as 16MiB, 64MiB or 1GiB", s)
	}
	return n * mult, nil
}

func renderDoc() string {
	var b strings.Builder
	b.WriteString("Renders every derived file, all or none:\n")
	for _, f := range render.Files() {
		dir := "--output-dir"
		if f.Dir == render.DirSlurm {
			dir = "--slurm-dir"
		}
		fmt.Fprintf(&b, "  %-12s %-28s %s\n", dir, f.Name, f.Doc)
	}
	return b.String()
}

func load(c *cli.Context) (*spec.Policy, error) {
	maxSize, err := parseSize(c.String("max-policy-size"))
	if err != nil {
		return nil, cliexit.Usagef("--max-policy-size: %v", err)
	}
	p, err := spec.LoadMax(c.String("policy"), maxSize)
	if err != nil {
		return nil, cliexit.Wrap(exitInvalid, err)
	}
	return p, nil
}

func cmdPlan(ctx context.Context, c *cli.Context, log *slog.Logger, write bool) error {
	p, err := load(c)
	if err != nil {
		return err
	}
	want, err := compile.Compile(p)
	if err != nil {
		return failure(err)
	}
	if c.Command.Name == "apply" && c.Int("batch-size") < 1 {
		return exitErr(exitFailure, fmt.Sprintf("--batch-size %d: give 1 or more", c.Int("batch-size")))
	}
	tokens := &slurmrest.FileToken{Path: c.String("token-file")}
	counter, start := &requestCounter{next: http.DefaultTransport, log: log}, time.Now()
	client, err := slurmrest.New(ctx, slurmrest.Config{URL: c.String("url"), User: c.String("user"),
		Tokens: tokens, Logger: log, HTTPClient: counter.client(requestTimeout)})
	if err != nil {
		return failure(err)
	}
	sm := &sacctmgr.Command{Path: c.String("sacctmgr"), Log: log,
		Token: func(ctx context.Context) (string, error) { return tokens.Token(ctx, client.User()) }}
	if c.Command.Name == "apply" {
		defer func() { fmt.Fprintf(c.App.Writer, "%s.\n", counter.summary(sm.Runs(), time.Since(start))) }()
	}
	reader, err := newLiveReader(client, sm, c.String("read-with"), log)
	if err != nil {
		return failure(err)
	}
	live, err := reader.read(ctx, want.Cluster, c.Bool("prune"))
	if err != nil {
		return failure(err)
	}
	changes := plan.Make(want, live, plan.Options{Prune: c.Bool("prune"), ForceBusy: c.Bool("force-busy")})
	w := c.App.Writer
	if len(changes) == 0 {
		fmt.Fprintf(w, "Slurm matches %s.\n", c.String("policy"))
		return nil
	}
	fmt.Fprintf(w, "%d changes:\n", len(changes))
	for _, ch := range changes {
		fmt.Fprintln(w, "  "+ch.String())
	}
	if !write {
		if c.Command.Name == "apply" {
			fmt.Fprintln(w, "\nNothing written: run with --apply to make these changes.")
		}
		return exitErr(exitDrift, "")
	}
	todo := plan.Actionable(changes)
	sw := writer{Client: client, Command: sm}
	opt := apply.Options{BatchSize: c.Int("batch-size")}
	if reader.sacctmgr != nil {
		// Where sacctmgr reads, it also loads: new accounts and users go
		// to slurmdbd as one flat file (--read-with rest never runs it).
		opt.Loader = sm
	}
	res := apply.ApplyWith(ctx, sw, want.Cluster, todo, opt, log)
	loads := ""
	if res.Loads > 0 {
		loads = fmt.Sprintf(" (%d of them sacctmgr loads)", res.Loads)
	}
	fmt.Fprintf(w, "\nApplied %d of %d changes in %d writes%s.\n", len(res.Applied), len(todo), res.Batches, loads)
	reportSkipped(w, changes)
	if res.Err != nil {
		return failure(fmt.Errorf("stopped at the first failed write: %w (the %d changes before it are applied; run again to continue)", res.Err, len(res.Applied)))
	}
	return verifyApplied(ctx, c, reader, want, len(todo))
}

// verifyApplied reads Slurm again after a successful apply and fails when
// slurmdbd did not keep what it accepted: some writes answer 200 and
// drop a part, such as a limit on a TRES slurmdbd does not track (a GPU
// type missing from AccountingStorageTRES), so "applied" is only said
// of what Slurm now holds.
func verifyApplied(ctx context.Context, c *cli.Context, reader *liveReader, want *compile.State, applied int) error {
	live, err := reader.read(ctx, want.Cluster, c.Bool("prune"))
	if err != nil {
		return failure(fmt.Errorf("applied, but could not read Slurm back to check it: %w", err))
	}
	left := plan.Actionable(plan.Make(want, live, plan.Options{Prune: c.Bool("prune"), ForceBusy: c.Bool("force-busy")}))
	if len(left) == 0 {
		fmt.Fprintf(c.App.Writer, "Checked: Slurm now matches %s.\n", c.String("policy"))
		return nil
	}
	var b strings.Builder
	for _, ch := range left {
		b.WriteString("\n  " + ch.String())
	}
	return exitErr(exitFailure, fmt.Sprintf("slurmdbd accepted the %d changes but does not hold %d of them:%s\n"+
		"(slurmdbd drops without an error a limit on a TRES it does not track: check that every gpu_types entry is in "+
		"AccountingStorageTRES of slurm.conf, such as gres/gpu:h100)", applied, len(left), b.String()))
}
