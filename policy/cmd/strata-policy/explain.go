package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/cliargs"
	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/explain"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/policy/internal/render"
)

const explainDoc = `Explains, from the policy file and what Slurm reports now:

  explain user <name>      the user's projects and default account, the per-user GPU limit and
                           the account limits above it, fair-share at each level, running and
                           pending jobs with why each pending one waits
  explain account <name>   a tenant or project: its limits (policy value, the line it comes from,
                           Slurm's value; DRIFT where they differ), what its running jobs hold,
                           the GPU-hour budget used, fair-share from root down
  explain job <id>         a job: what it asks for, the limits on its way up, and for a pending
                           job Slurm's reason in plain words with the numbers behind it, e.g.
                           "AssocGrpGRES: project acme-llm uses 60 of its 64 GPUs; this job asks for 8"

Text for people by default; --json gives the same report for programs (the portal).
Nothing is written. Exit 1 when the name is in neither the policy nor Slurm.`

// explainCommand is the explain verb with one subcommand per kind of name.
func explainCommand(ctx context.Context, flags []cli.Flag, log func() *slog.Logger) *cli.Command {
	flags = append(flags, &cli.BoolFlag{Name: "json", Usage: "print the report as JSON"})
	sub := func(name, arg, usage string) *cli.Command {
		return cliargs.Bind(&cli.Command{Name: name, Usage: usage, Flags: flags,
			Action: func(c *cli.Context) error { return cmdExplain(ctx, c, log()) }}, cliargs.Arg{Name: arg, Required: true})
	}
	return &cli.Command{Name: "explain", Usage: "why a job waits; the limits, usage and fair-share of a user or an account",
		Description: explainDoc, Subcommands: []*cli.Command{
			sub("user", "NAME", "explain a user"),
			sub("account", "NAME", "explain an account (tenant or project)"),
			sub("job", "ID", "explain a job"),
		}}
}

// restOnly picks the flags that reach the policy and slurmrestd.
func restOnly(flags []cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, f := range flags {
		if slices.ContainsFunc(f.Names(), func(n string) bool {
			return n == "policy" || n == "url" || n == "user" || n == "token-file"
		}) {
			out = append(out, f)
		}
	}
	return out
}

func cmdExplain(ctx context.Context, c *cli.Context, log *slog.Logger) error {
	name := cliargs.Get(c, "NAME")
	var id int64
	if c.Command.Name == "job" {
		var err error
		if id, err = strconv.ParseInt(cliargs.Get(c, "ID"), 10, 64); err != nil || id <= 0 {
			return cliexit.Usagef("explain job: %q is not a job id (a number such as 1234)", cliargs.Get(c, "ID"))
		}
	}
	p, err := load(c)
	if err != nil {
		return err
	}
	client, err := slurmrest.New(ctx, slurmrest.Config{URL: c.String("url"), User: c.String("user"),
		Tokens: &slurmrest.FileToken{Path: c.String("token-file")}, Logger: log})
	if err != nil {
		return failure(err)
	}
	live, err := explain.Read(ctx, client, log)
	if err != nil {
		return failure(err)
	}
	// The tenant map render writes, built in memory: the portal explains
	// from the same map read from tenants.json.
	in := explain.Input{Tenants: render.Tenants(p), Live: live}
	var report any
	switch c.Command.Name {
	case "user":
		report, err = explain.User(in, name)
	case "account":
		report, err = explain.Account(in, name)
	default:
		report, err = explain.Job(in, id)
	}
	if err != nil {
		return failure(err)
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return explain.Text(c.App.Writer, report)
}
