package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/buildinfo"
	"github.com/strata-hpc/strata/internal/cliargs"
	"github.com/strata-hpc/strata/internal/clidoc"
	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/duration"
	"github.com/strata-hpc/strata/internal/gensecret"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/config"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

const description = `strata-portal-api serves one JSON API (portal-api/openapi.yaml, also at
/v1/openapi.yaml) over every cluster of the configuration: the jobs each caller
may see, why a job waits, the queue, and cancel, hold, release and requeue, which
run in Slurm as the caller with a token minted for them and are written to an
audit log first.

One poller per cluster reads slurmrestd on an interval; every request is answered
from its snapshot, so slurmctld's load does not grow with the portal's users. A
cluster that stops answering is served from its last snapshot, marked stale.

Callers are known by an OIDC ID token of the configured issuer, a personal token
(strata-portal-api token create), or a header set by a trusted reverse proxy. What
they may do follows their roles in each cluster's tenants.json.

Exit codes: 0 done, 1 error, 2 usage error.`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var log *slog.Logger
	configArg := cliargs.Arg{Name: "FILE", Flag: "config"}
	app := &cli.App{
		Name:        "strata-portal-api",
		Usage:       "one API for researchers and operators over every cluster",
		Description: description,
		Version:     buildinfo.Version(),
		Writer:      stdout,
		ErrWriter:   stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Value: config.DefaultPath, Usage: "configuration file"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
		},
		Before: func(c *cli.Context) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(c.String("log-level"))); err != nil {
				return cliexit.Usagef("--log-level: %v", err)
			}
			log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
			return nil
		},
		ExitErrHandler: func(*cli.Context, error) {}, // cliexit prints and exits
		Commands: []*cli.Command{
			{
				Name:  "serve",
				Usage: "serve the API, /healthz and /metrics; poll every cluster",
				Description: `Runs until SIGTERM (then finishes the requests in flight); SIGHUP reads each
cluster's tenants.json again (a bad file keeps the one in force). Tells systemd
when it is ready (Type=notify).`,
				Action: func(c *cli.Context) error { return cmdServe(ctx, c, log) },
			},
			cliargs.Bind(&cli.Command{
				Name:   "check-config",
				Usage:  "load the configuration and every cluster's tenants.json and jwt key, and report every problem",
				Action: func(c *cli.Context) error { return cmdCheck(c) },
			}, configArg),
			{
				Name:  "login-link",
				Usage: "print a one-time sign-in URL for the pages",
				Description: `For sites and demos without an identity provider:
    strata-portal-api login-link --user alice
prints <pages.public_url>/signin/link?t=<secret>. It signs in once, within
pages.login_link_lifetime (15m unless set); the database keeps only the secret's
SHA-256 hash. Hand it to the user over a channel you trust.`,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "user", Required: true, Usage: "the Slurm user the link signs in"},
				},
				Action: func(c *cli.Context) error { return cmdLoginLink(ctx, c) },
			},
			{
				Name:  "token",
				Usage: "personal API tokens: create, list, revoke",
				Description: `A personal token stands for its user in scripts: send it as
Authorization: Bearer <token>. It is shown once, when it is made; the database
keeps only its SHA-256 hash.`,
				Subcommands: []*cli.Command{
					{
						Name:        "create",
						Usage:       "make a token for a user and print it (once)",
						Description: `    strata-portal-api token create --user alice --expires 30d --note "laptop"`,
						Flags: []cli.Flag{
							&cli.StringFlag{Name: "user", Required: true, Usage: "the Slurm user the token stands for"},
							&cli.StringFlag{Name: "expires", Value: "30d", Usage: "lifetime: 12h, 30d, ... (at most auth.tokens.max_lifetime)"},
							&cli.StringFlag{Name: "note", Usage: "what the token is for, shown by token list"},
						},
						Action: func(c *cli.Context) error { return cmdTokenCreate(ctx, c) },
					},
					{
						Name:   "list",
						Usage:  "list tokens (never the tokens themselves)",
						Flags:  []cli.Flag{&cli.StringFlag{Name: "user", Usage: "only this user's"}},
						Action: func(c *cli.Context) error { return cmdTokenList(ctx, c) },
					},
					cliargs.Bind(&cli.Command{
						Name:   "revoke",
						Usage:  "revoke a token by its id (token list shows it)",
						Action: func(c *cli.Context) error { return cmdTokenRevoke(ctx, c) },
					}, cliargs.Arg{Name: "ID", Required: true}),
					cliargs.Bind(&cli.Command{
						Name:  "revoke-user",
						Usage: "revoke every token of a user, and end every session cookie made for them before now",
						Description: `Takes effect at once in every running portal on this database: a session
cookie made from one of the user's tokens, or for the user signed in any other
way, is refused on its next request.`,
						Action: func(c *cli.Context) error { return cmdTokenRevokeUser(ctx, c) },
					}, cliargs.Arg{Name: "USER", Required: true}),
				},
			},
		},
	}
	app.Commands = append(app.Commands, migrateStoreCommand(ctx))
	app.Commands = append(app.Commands, gensecret.Command(gensecret.Spec{Name: "gen-key",
		Usage: "make the key that signs the sessions' cookies (sessions.cookie_key_file) when it does not exist",
		What:  "the key that signs the sessions' browser cookies (the same file on every portal behind one address)",
		Group: "strata-portal-api", Files: func(c *cli.Context) ([]string, error) {
			cfg, err := config.Load(c.String("config"))
			if err != nil {
				return nil, err
			}
			if cfg.Sessions.CookieKeyFile == "" {
				return nil, nil
			}
			return []string{cfg.Sessions.CookieKeyFile}, nil
		}}))
	app.Commands = append(app.Commands, clidoc.Command(app, clidoc.Spec{Section: 8, Configs: []clidoc.Config{{Name: "portal-api.yaml", Summary: "configuration of strata-portal-api, the portal API over every cluster"}}}))
	cliargs.Enforce(app)
	return app.RunContext(ctx, args)
}

func cmdCheck(c *cli.Context) error {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return err
	}
	warnings, err := preflight(cfg)
	for _, w := range warnings {
		fmt.Fprintf(c.App.ErrWriter, "WARNING: %s\n", w)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%s: ok (%d clusters)\n", c.String("config"), len(cfg.Clusters))
	return nil
}

func openStore(ctx context.Context, c *cli.Context) (*config.Config, *store.Store, error) {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return nil, nil, err
	}
	st, err := openDatabase(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, st, nil
}

func cmdTokenCreate(ctx context.Context, c *cli.Context) error {
	ttl, err := duration.Parse(c.String("expires"))
	if err != nil {
		return cliexit.Usagef("--expires: %v", err)
	}
	cfg, st, err := openStore(ctx, c)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }() // read-only use, or the write is committed
	if ttl <= 0 || ttl > cfg.Auth.Tokens.MaxLifetime {
		return cliexit.Usagef("--expires %s: give a lifetime up to auth.tokens.max_lifetime (%s)", c.String("expires"), duration.Format(cfg.Auth.Tokens.MaxLifetime))
	}
	tok, rec, err := st.CreateToken(ctx, c.String("user"), c.String("note"), ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.App.Writer, tok)
	fmt.Fprintf(c.App.ErrWriter, "token %d for %s, expires %s: it is shown only now\n", rec.ID, rec.User, rec.ExpiresAt.Format(time.RFC3339))
	return nil
}

func cmdLoginLink(ctx context.Context, c *cli.Context) error {
	user := c.String("user")
	if !loginUser.MatchString(user) {
		return cliexit.Usagef("--user %q: give a Slurm user name", user)
	}
	cfg, st, err := openStore(ctx, c)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }() // the write is committed
	tok, exp, err := st.CreateLoginLink(ctx, user, cfg.Pages.LoginLinkLifetime)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%s/signin/link?t=%s\n", strings.TrimRight(cfg.Pages.PublicURL, "/"), tok)
	where := ""
	if cfg.Pages.PublicURL == "" {
		where = "; prefix the portal's address (set pages.public_url to have it printed)"
	}
	fmt.Fprintf(c.App.ErrWriter, "sign-in link for %s, once, until %s%s\n", user, exp.Format(time.RFC3339), where)
	return nil
}

var loginUser = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)

func cmdTokenList(ctx context.Context, c *cli.Context) error {
	_, st, err := openStore(ctx, c)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }() // read-only use, or the write is committed
	list, err := st.Tokens(ctx, c.String("user"))
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUSER\tCREATED\tEXPIRES\tSTATE\tNOTE")
	now := time.Now()
	for _, t := range list {
		state := "valid"
		switch {
		case !t.RevokedAt.IsZero():
			state = "revoked"
		case !now.Before(t.ExpiresAt):
			state = "expired"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.User, t.CreatedAt.Format(time.RFC3339), t.ExpiresAt.Format(time.RFC3339), state, t.Note)
	}
	return tw.Flush()
}

func cmdTokenRevokeUser(ctx context.Context, c *cli.Context) error {
	user := cliargs.Get(c, "USER")
	_, st, err := openStore(ctx, c)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	n, err := st.RevokeUser(ctx, user)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "user %s revoked: %d token(s), and every session cookie made for them before now\n", user, n)
	return nil
}

func cmdTokenRevoke(ctx context.Context, c *cli.Context) error {
	id, err := strconv.ParseInt(cliargs.Get(c, "ID"), 10, 64)
	if err != nil {
		return cliexit.Usagef("token revoke: %q is not a token id (token list shows them)", cliargs.Get(c, "ID"))
	}
	_, st, err := openStore(ctx, c)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }() // read-only use, or the write is committed
	if err := st.RevokeToken(ctx, id); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "token %d revoked\n", id)
	return nil
}

// loadTenants reads a cluster's tenants.json, at start, on reload and in
// check-config alike, and refuses one that describes another cluster: its
// tenants, admins and accounts are that cluster's, not this one's.
func loadTenants(cl config.Cluster) (*tenantmap.Map, error) {
	m, err := tenantmap.Load(cl.TenantsFile)
	if err != nil {
		return nil, err
	}
	if m.Cluster != cl.SlurmCluster {
		return nil, fmt.Errorf("%s describes cluster %q, not %q: give clusters[].tenants_file the tenants.json that "+
			"strata-policy render wrote for %s, or set clusters[].slurm_cluster to the cluster's Slurm ClusterName if it differs from its name in the portal",
			cl.TenantsFile, m.Cluster, cl.SlurmCluster, cl.SlurmCluster)
	}
	return m, nil
}
