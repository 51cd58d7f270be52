package main

import (
	"fmt"
	"io"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/policy/internal/plan"
	"github.com/strata-hpc/strata/policy/internal/sacctmgr"
)

// writer is what apply writes through: slurmrestd for everything it can
// write, sacctmgr for the rest (see the README's table of paths).
type writer struct {
	*slurmrest.Client
	*sacctmgr.Command
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
