package apply

import (
	"context"
	"fmt"
	"strings"

	"github.com/strata-hpc/strata/policy/internal/plan"
)

// PreemptClearer empties a QOS's preempt list (*Sacctmgr): slurmrestd
// keeps a list that is posted empty.
type PreemptClearer interface {
	ClearQOSPreempt(ctx context.Context, qos string) error
}

// setQOS writes one class QOS: the REST write, and sacctmgr when its
// preempt list empties.
func setQOS(ctx context.Context, s Slurm, c plan.Change) error {
	if err := s.SetQOS(ctx, qosOf(c.QOS)); err != nil {
		return err
	}
	return clearPreempts(ctx, s, []plan.Change{c})
}

// clearPreempts empties the preempt lists of the QOS changes that ask for
// it (plan.Change.ClearPreempt), after their REST write.
func clearPreempts(ctx context.Context, s Slurm, cs []plan.Change) error {
	for _, c := range cs {
		if !c.ClearPreempt {
			continue
		}
		pc, ok := s.(PreemptClearer)
		if !ok {
			return fmt.Errorf("QOS %s: emptying its preempt list needs sacctmgr, which is not configured", c.Name)
		}
		if err := pc.ClearQOSPreempt(ctx, c.Name); err != nil {
			return err
		}
	}
	return nil
}

// preemptMode is Slurm's spelling of a class's preempt mode: "requeue" is
// ["REQUEUE"], "" is ["DISABLED"] (the cluster's PreemptMode), which is
// sent rather than left out so the write says what it means (slurmdbd
// would reset a mode left out to DISABLED all the same).
func preemptMode(m string) []string {
	if m == "" {
		return []string{"DISABLED"}
	}
	return []string{strings.ToUpper(m)}
}

// orClear is a count to write where 0 means none: -1, which slurmdbd
// takes as "clear the limit".
func orClear(n int64) *int64 {
	if n == 0 {
		n = -1
	}
	return &n
}
