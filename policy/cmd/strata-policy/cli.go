package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/buildinfo"
	"github.com/strata-hpc/strata/internal/cliargs"
	"github.com/strata-hpc/strata/internal/clidoc"
	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/policy/internal/apply"
	"github.com/strata-hpc/strata/policy/internal/compile"
	"github.com/strata-hpc/strata/policy/internal/generation"
	"github.com/strata-hpc/strata/policy/internal/plan"
	"github.com/strata-hpc/strata/policy/internal/render"
	"github.com/strata-hpc/strata/policy/internal/sacctmgr"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// Exit codes, stable for cron and monitoring: 2 is a usage error and
// nothing else, so a typo in a cron line never reads as drift.
const (
	exitOK      = 0                   // done; plan, drift: Slurm matches the policy
	exitFailure = 1                   // could not run
	exitUsage   = cliexit.ExitUsage   // an argument or flag the verb does not take, or a bad flag value
	exitChanges = cliexit.ExitChanges // plan, drift, apply without --apply: Slurm differs from the policy
	exitInvalid = 4                   // the policy file has errors; nothing was read or written
)

// exitCodesHelp ends every --help.
const exitCodesHelp = `EXIT CODES:
   0   done; plan, drift, apply without --apply: Slurm matches the policy
   1   could not run: slurmrestd or sacctmgr failing, a write that failed or did not stay,
       another apply holding the lock, a file render could not write
   2   usage error: an argument or flag the command does not take, or a flag's value it cannot use
   3   plan, drift, apply without --apply: Slurm differs from the policy (changes found)
   4   the policy file has problems; nothing was read or written`

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
strata-policy plan               show the ordered changes Slurm needs (exit 3 when there are some)
strata-policy apply --apply      make them (without --apply: the plan only)
strata-policy drift              exit 0 when Slurm matches the policy, 3 when not (for cron)
strata-policy explain job 1234   why a job waits, in plain words (also: explain user|account <name>)

check, plan, apply, drift and render read the policy named by their argument or --policy
(default /etc/strata/policy.yaml). An argument or flag a command does not take is a usage
error: exit 2, with a message on stderr that says what the command takes (see EXIT CODES).

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
				return cliexit.Usagef("--log-level %q: give debug, info, warn or error", c.String("log-level"))
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
				&cli.IntFlag{Name: "batch-size", Value: apply.DefaultBatchSize, Usage: "most changes in one batch of list requests (1: one change at a time)"},
				&cli.StringFlag{Name: "lock-dir", Value: "/run/lock", Usage: "where --apply takes its lock, strata-policy-<cluster>.lock: a second apply of the cluster on this host is refused while one runs"}),
				Action: func(c *cli.Context) error { return cmdPlan(ctx, c, log, c.Bool("apply")) }}, policyArg),
			cliargs.Bind(&cli.Command{Name: "drift", Usage: "exit 3 when Slurm differs from the policy", Flags: restFlags,
				Action: func(c *cli.Context) error { return cmdPlan(ctx, c, log, false) }}, policyArg),
			explainCommand(ctx, restOnly(restFlags), func() *slog.Logger { return log }),
			cliargs.Bind(&cli.Command{Name: "render", Usage: "write the files other parts read (see render --help)", Description: renderDoc(), Flags: []cli.Flag{restFlags[0],
				&cli.StringFlag{Name: "output-dir", Aliases: []string{"o"}, Value: defaultOutputDir, Usage: "where Strata's files go, and every render's generation (no package owns this folder)"},
				&cli.StringFlag{Name: "slurm-dir", Value: "/etc/slurm", Usage: "where Slurm's files go (job_submit data, partitions include)"}}, Action: cmdRender},
				policyArg),
		},
	}
	app.CustomAppHelpTemplate = cli.AppHelpTemplate + "\n" + exitCodesHelp + "\n"
	app.Commands = append(app.Commands, clidoc.Command(app, clidoc.Spec{Section: 1, Configs: []clidoc.Config{{Name: "policy.yaml", Summary: "the tenant policy of a Slurm cluster, which strata-policy checks, plans, applies and renders"}}}))
	cliargs.Enforce(app)
	return app.RunContext(ctx, args)
}

// defaultOutputDir is render's --output-dir: a folder no package ships a
// file in.
const defaultOutputDir = "/etc/strata/rendered"

// legacyDir is where releases before generations rendered Strata's files,
// among the packages' configuration files.
const legacyDir = "/etc/strata"

func cmdRender(c *cli.Context) error {
	p, err := load(c)
	if err != nil {
		return err
	}
	out, slurmDir := c.String("output-dir"), c.String("slurm-dir")
	var files []generation.File
	for _, f := range render.Files() {
		data, err := f.Render(p)
		if err != nil {
			return failure(fmt.Errorf("render %s: %w", f.Name, err))
		}
		g := generation.File{Rel: f.Name, Link: filepath.Join(out, f.Name), Data: data, Mode: f.Mode,
			// What the file-by-file writes of earlier releases left when killed.
			Legacy: []string{"." + filepath.Base(f.Name) + ".old-*"}}
		if f.Dir == render.DirSlurm {
			g.Rel, g.Link = path.Join("slurm", f.Name), filepath.Join(slurmDir, f.Name)
		}
		files = append(files, g)
	}
	// Everything rendered before anything is written; then one new
	// generation, switched to with one rename (see package generation).
	store := &generation.Store{Root: out}
	gen, err := store.Commit(files)
	if err != nil {
		if gen == "" {
			return failure(fmt.Errorf("render: no file was changed: %w", err))
		}
		return failure(fmt.Errorf("render: generation %s is in place: %w", gen, err))
	}
	for _, f := range files {
		fmt.Fprintf(c.App.Writer, "wrote %s\n", f.Link)
	}
	fmt.Fprintf(c.App.Writer, "generation %s is current in %s\n", gen, out)
	warnLegacy(c.App.ErrWriter, out, files)
	return nil
}

// warnLegacy says so when Strata's files of an earlier release are still
// in /etc/strata while this render wrote elsewhere: a reader configured
// with the old path would keep reading a file no render updates.
func warnLegacy(w io.Writer, out string, files []generation.File) {
	abs, err := filepath.Abs(out)
	if err != nil || abs == legacyDir {
		return
	}
	for _, f := range files {
		old := filepath.Join(legacyDir, f.Rel)
		if f.Rel == path.Base(f.Rel) && !strings.HasPrefix(f.Rel, "slurm/") {
			if st, err := os.Lstat(old); err == nil && st.Mode().IsRegular() {
				fmt.Fprintf(w, "strata-policy: warning: %s is from an earlier release and no longer rendered: point its reader at %s, then remove it\n", old, f.Link)
			}
		}
	}
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
	b.WriteString(`Renders every derived file, all or none. Each render writes a new generation,
--output-dir/.generations/<time>-<id>/, and switches --output-dir/current to it with one
rename; the paths below are links through current, so readers see the old render or the
new one, never a mix, even when render is killed. Slurm's files are links to
--output-dir/current/slurm/. A render removes what a killed one left, and the generations
before the current one. Mode and owner an admin gives a file (chmod of its path) are kept.
--output-dir (/etc/strata/rendered) belongs to no package: readers are configured to read
these paths, and package upgrades never touch them.

`)
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
	if m := c.String("read-with"); m != readAuto && m != readSacctmgr && m != readREST {
		return cliexit.Usagef("--read-with %q: give %s, %s or %s", m, readAuto, readSacctmgr, readREST)
	}
	if c.Command.Name == "apply" && c.Int("batch-size") < 1 {
		return cliexit.Usagef("--batch-size %d: give 1 or more", c.Int("batch-size"))
	}
	if write {
		// Before the first read: the plan must be made against a Slurm
		// that no other apply is changing.
		unlock, err := apply.Lock(c.String("lock-dir"), want.Cluster)
		if err != nil {
			return failure(err)
		}
		defer unlock()
		log.Info("took the apply lock", "file", apply.LockPath(c.String("lock-dir"), want.Cluster))
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
		return exitErr(exitChanges, "")
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
		if ctx.Err() != nil {
			return failure(fmt.Errorf("interrupted: %d changes are applied, a prefix of the plan; the batch in progress may have left account "+
				"and user records without their settings, which no job can run in; run again to finish (%w)", len(res.Applied), res.Err))
		}
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
