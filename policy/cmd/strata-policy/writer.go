package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/policy/internal/apply"
	"github.com/strata-hpc/strata/policy/internal/plan"
)

// writer is what apply writes through: slurmrestd for everything it can
// write, sacctmgr for the rest (see the README's table of paths).
type writer struct {
	*slurmrest.Client
	*apply.Sacctmgr
}

// newWriter runs sacctmgr at path, authenticated with the token of the
// client's user.
func newWriter(c *slurmrest.Client, tokens slurmrest.TokenSource, path string, log *slog.Logger) writer {
	return writer{Client: c, Sacctmgr: &apply.Sacctmgr{Path: path, Log: log,
		Token: func(ctx context.Context) (string, error) { return tokens.Token(ctx, c.User()) }}}
}

// reportSkipped says which removals running or pending jobs held back.
func reportSkipped(w io.Writer, changes []plan.Change) {
	n := len(changes) - len(plan.Actionable(changes))
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "\nSkipped %d removals: what they remove still has running or pending jobs. Run again when the jobs end,\n"+
		"or add --force-busy to cancel them first.\n", n)
}
