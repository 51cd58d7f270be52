package controller

import (
	"context"
	"fmt"

	"github.com/strata-hpc/strata/internal/lease"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

// A controller that shares its database with a standby (PostgreSQL)
// acts under a lease term (internal/lease): every call that changes a
// job or a node, and every notice, is made only while the term holds by
// this host's clock, and every write to the store is refused by the
// database once another controller took the lease over. The reads go
// through unfenced. On SQLite the term is lease.Always.

// fencedSlurm checks the term before every call that changes Slurm.
type fencedSlurm struct {
	Slurm
	term lease.Term
}

func (f fencedSlurm) valid(what string) error {
	if err := f.term.Valid(); err != nil {
		return fmt.Errorf("%s not sent: %w", what, err)
	}
	return nil
}

func (f fencedSlurm) UpdateRef(ctx context.Context, ref slurmrest.JobRef, u slurmrest.JobUpdate) error {
	if err := f.valid("update of job " + string(ref)); err != nil {
		return err
	}
	return f.Slurm.UpdateRef(ctx, ref, u)
}

func (f fencedSlurm) SignalRef(ctx context.Context, ref slurmrest.JobRef, sig string, batchOnly bool) error {
	if err := f.valid("signal to job " + string(ref)); err != nil {
		return err
	}
	return f.Slurm.SignalRef(ctx, ref, sig, batchOnly)
}

func (f fencedSlurm) RequeueRef(ctx context.Context, ref slurmrest.JobRef, opt slurmrest.RequeueOptions) error {
	if err := f.valid("requeue of job " + string(ref)); err != nil {
		return err
	}
	return f.Slurm.RequeueRef(ctx, ref, opt)
}

func (f fencedSlurm) CancelRef(ctx context.Context, ref slurmrest.JobRef) error {
	if err := f.valid("cancel of job " + string(ref)); err != nil {
		return err
	}
	return f.Slurm.CancelRef(ctx, ref)
}

func (f fencedSlurm) UpdateNode(ctx context.Context, name, state, reason string) error {
	if err := f.valid("update of node " + name); err != nil {
		return err
	}
	return f.Slurm.UpdateNode(ctx, name, state, reason)
}

// fencedNotifier checks the term before every notice.
type fencedNotifier struct {
	Notifier
	term lease.Term
}

func (f fencedNotifier) Notify(ctx context.Context, n Notice) error {
	if err := f.term.Valid(); err != nil {
		return fmt.Errorf("notice not sent: %w", err)
	}
	return f.Notifier.Notify(ctx, n)
}
