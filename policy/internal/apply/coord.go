package apply

import (
	"context"
	"fmt"

	"github.com/strata-hpc/strata/policy/internal/plan"
)

// Coordinators sets the coordinators of accounts (*slurmrest.Client, which
// writes the account's whole list through POST /accounts and reads it
// back).
type Coordinators interface {
	AddCoordinators(ctx context.Context, account string, users ...string) error
	RemoveCoordinators(ctx context.Context, account string, users ...string) error
}

// coordinator adds or removes one coordinator.
func coordinator(ctx context.Context, s Slurm, c plan.Change) error {
	co, ok := s.(Coordinators)
	if !ok || c.Coordinator == nil {
		return fmt.Errorf("%s coordinator %s: not supported by this writer", c.Op, c.Name)
	}
	if c.Op == plan.OpRemove {
		return co.RemoveCoordinators(ctx, c.Coordinator.Account, c.Coordinator.User)
	}
	return co.AddCoordinators(ctx, c.Coordinator.Account, c.Coordinator.User)
}
