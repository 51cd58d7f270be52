package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/pgsql"
	"github.com/strata-hpc/strata/portal-api/internal/config"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

func migrateStoreCommand(ctx context.Context) *cli.Command {
	return &cli.Command{
		Name:  "migrate-store",
		Usage: "copy a portal's SQLite file into an empty PostgreSQL database (a dry run unless --apply)",
		Description: `Moving from one portal host to several on PostgreSQL: stop the portal, then
    strata-portal-api migrate-store --from /var/lib/strata/portal-api/portal.db
shows, per table, the rows the file holds and the rows the database holds
(--to, else the configuration's database and database_password_file), and
changes nothing. With --apply it brings the database's schema up to date and
copies every row, ids included, in one transaction: tokens, the audit log,
submissions, sessions, page sessions and sign-in links. The poll leases and
portal instances, the state of running portals, are not copied. Refused: a
SQLite file of another schema version than this release's, a database of a
newer release, and a database that already holds portal data. The SQLite file
is only read: keep it.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from", Required: true, Usage: "the portal's SQLite file"},
			&cli.StringFlag{Name: "to", Usage: "postgres://user@host[:port]/database (default: the configuration's database)"},
			&cli.StringFlag{Name: "to-password-file", Usage: "the PostgreSQL password (default with the configuration's database: its database_password_file)"},
			&cli.BoolFlag{Name: "apply", Usage: "copy; without it, only say what would be copied"},
		},
		Action: func(c *cli.Context) error { return cmdMigrateStore(ctx, c) },
	}
}

func cmdMigrateStore(ctx context.Context, c *cli.Context) error {
	to := store.Database{Setting: c.String("to"), PasswordFile: c.String("to-password-file"), Rule: secretRule}
	if to.Setting == "" {
		cfg, err := config.Load(c.String("config"))
		if err != nil {
			return err
		}
		if !pgsql.IsURL(cfg.Database) {
			return cliexit.Usagef("--to: give the PostgreSQL database (%s's database is the SQLite file %s)", c.String("config"), cfg.Database)
		}
		to.Setting = cfg.Database
		if to.PasswordFile == "" {
			to.PasswordFile = cfg.DatabasePasswordFile
		}
	} else if err := pgsql.CheckURL(to.Setting); err != nil {
		return cliexit.Usagef("--to: %v", err)
	}
	from := c.String("from")
	plan, err := store.CopyToPostgres(ctx, from, to, c.Bool("apply"))
	if plan == nil {
		return err
	}
	w := c.App.Writer
	fmt.Fprintf(w, "from %s: schema version %d\n", from, plan.SourceVersion)
	target := fmt.Sprintf("schema version %d", plan.TargetVersion)
	if plan.TargetVersion == 0 {
		target = "empty"
	}
	fmt.Fprintf(w, "to   %s: %s (this release's schema version: %d)\n", to.Setting, target, plan.Want)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tSQLITE\tPOSTGRESQL\t")
	for _, t := range plan.Tables {
		if t.Runtime {
			fmt.Fprintf(tw, "%s\t%d\t-\tnot copied: the state of running portals\n", t.Name, t.Source)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", t.Name, t.Source, t.Target)
	}
	_ = tw.Flush() // to the writer above
	switch {
	case errors.Is(err, store.ErrTargetNotEmpty):
		return fmt.Errorf("%w: the POSTGRESQL column counts what it holds (a copy done before, or portals started on it)", err)
	case err != nil:
		return err
	case plan.Applied:
		fmt.Fprintf(w, "copied %d rows in one transaction; the POSTGRESQL column counts them there. Start the portals on PostgreSQL; keep %s.\n", plan.Rows(), from)
	default:
		more := ""
		if plan.TargetVersion < plan.Want {
			more = fmt.Sprintf(", after bringing the database's schema from version %d to %d", plan.TargetVersion, plan.Want)
		}
		fmt.Fprintf(w, "dry run, nothing changed: --apply copies %d rows in one transaction%s\n", plan.Rows(), more)
	}
	return nil
}
