// Package apply puts a candidate topology file in place the way an admin
// who has lost a cluster to a bad topology.conf would: validate it first,
// write it atomically beside a timestamped backup, ask slurmctld to
// reconfigure, check that slurmctld still answers and that it now reports
// exactly the placement that was written, and otherwise restore the backup
// and reconfigure again.
package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/atomicfile"
	"github.com/strata-hpc/strata/topogen/internal/render"
)

// Controller is slurmctld as apply needs it.
type Controller interface {
	Reconfigure(ctx context.Context) error
	Ping(ctx context.Context) error
	ShowTopology(ctx context.Context) ([]byte, error)
}

// Restarter starts slurmctld again after it stopped (a bad topology makes
// slurmctld exit on reconfigure). Optional.
type Restarter interface {
	Restart(ctx context.Context) error
}

// Errors, each with its own exit code in topogen.
var (
	ErrInvalid        = errors.New("candidate topology is invalid")
	ErrRolledBack     = errors.New("slurmctld did not take the new topology: the previous file is back in place")
	ErrRollbackFailed = errors.New("rollback failed: slurmctld may be down or running an unknown topology")
)

// Options for Apply.
type Options struct {
	Path      string // the live topology.conf (or topology.yaml)
	Candidate []byte // what to put there
	// Expect, for a candidate that is not topology.conf syntax
	// (topology.yaml), is the same topology as topology.conf lines: it is
	// what gets validated and what `scontrol show topology` (which shows
	// the default topology) must report. Nil means the candidate itself.
	Expect []byte
	// YAML says the live file and the candidate are topology.yaml, which
	// the change budget reads as such (every topology in it).
	YAML       bool
	KnownNodes []string // the cluster's nodes, for validation; nil skips that check
	// SkipValidation writes a candidate that fails validation (or the
	// change budget) anyway (to test the rollback path; never in
	// production).
	SkipValidation bool
	// Settle is how long slurmctld gets after reconfigure before the
	// checks (a fatal topology error stops it a moment after reconfigure
	// has returned success). Default 3 s.
	Settle time.Duration
	// RollbackTimeout bounds the rollback's reconfigure and checks, which
	// run to the end even when ctx is canceled (a SIGTERM during the
	// settle wait): a restored file that slurmctld never reread would
	// leave it running the rejected topology. Default 2 min.
	RollbackTimeout time.Duration
	// MaxDrop is the largest share (0 to 1) of the live file's nodes, and
	// of its switches, that the candidate may drop (0: DefaultMaxDrop).
	// DuplicateGUIDs are GUIDs the fabric dump declared more than once.
	// Either refuses the apply with ErrBudget, unless Force.
	MaxDrop        float64
	DuplicateGUIDs []string
	Force          bool
	// KeepBackups is how many backups of the live file are kept, newest
	// first (0: DefaultKeepBackups; negative: all).
	KeepBackups int
	Ctl         Controller
	Restarter   Restarter
	Log         *slog.Logger
	Now         func() time.Time
}

// Result says what Apply did.
type Result struct {
	Changed    bool
	Backup     string // path of the backup of the previous file ("" if there was none)
	RolledBack bool
	Problems   []string // validation errors or why the rollback happened
}

// Validate parses and validates a candidate.
func Validate(candidate []byte, known []string) []string {
	tc, errs := render.ParseTopoConf(candidate)
	errs = append(errs, tc.Validate(known)...)
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// Apply runs the whole sequence. It returns ErrInvalid, ErrRolledBack or
// ErrRollbackFailed (wrapped) when it did not leave the candidate live.
func Apply(ctx context.Context, o Options) (Result, error) {
	var res Result
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Settle == 0 {
		o.Settle = 3 * time.Second
	}
	if o.RollbackTimeout <= 0 {
		o.RollbackTimeout = 2 * time.Minute
	}
	if o.MaxDrop <= 0 {
		o.MaxDrop = DefaultMaxDrop
	}
	if o.KeepBackups == 0 {
		o.KeepBackups = DefaultKeepBackups
	}
	expect := o.Candidate
	if o.Expect != nil {
		expect = o.Expect
	}
	if problems := Validate(expect, o.KnownNodes); len(problems) > 0 {
		res.Problems = problems
		if !o.SkipValidation {
			return res, fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
		}
		o.Log.Warn("writing a topology that failed validation, as asked", "problems", len(problems))
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("apply %s: %w", o.Path, err)
	}
	unlock, err := lockDir(filepath.Dir(o.Path))
	if err != nil {
		return res, err
	}
	defer unlock()
	// target is the file written: the live path, or the file a symbolic
	// link there points to (replacing the link would break the site's
	// layout).
	target, err := liveTarget(o.Path)
	if err != nil {
		return res, err
	}
	if target != o.Path {
		o.Log.Info("topology file is a symbolic link: writing through it", "path", o.Path, "target", target)
	}
	old, err := ReadTopology(target)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return res, fmt.Errorf("the live file: %w", err)
	}
	existed := err == nil
	if existed && bytes.Equal(old, o.Candidate) {
		o.Log.Info("topology unchanged: nothing to apply", "path", o.Path)
		return res, nil
	}
	// The change budget, in both formats. A live file it cannot read
	// refuses the apply too (unless forced): skipping the check there
	// would let a truncated candidate through without a word.
	var live []byte
	if existed {
		live = old
	}
	if problems := Budget(live, o.Candidate, o.YAML, o.MaxDrop, o.DuplicateGUIDs); len(problems) > 0 {
		if !o.Force && !o.SkipValidation {
			res.Problems = append(res.Problems, problems...)
			return res, fmt.Errorf("%w: %s; nothing was written (apply with --force if this is what the fabric now is)",
				ErrBudget, strings.Join(problems, "; "))
		}
		o.Log.Warn("applying beyond the change budget, as forced", "problems", strings.Join(problems, "; "))
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(target); err == nil {
		mode = st.Mode().Perm()
	}
	if existed {
		if res.Backup, err = newBackupName(o.Path, o.Now()); err != nil {
			return res, fmt.Errorf("back up %s: %w", o.Path, err)
		}
		if err := atomicfile.Write(res.Backup, old, mode); err != nil {
			return res, fmt.Errorf("back up %s: %w", o.Path, err)
		}
		if pruned, err := pruneBackups(o.Path, o.KeepBackups, res.Backup); err != nil {
			o.Log.Warn("old backups could not all be removed", "path", o.Path, "error", err)
		} else if len(pruned) > 0 {
			o.Log.Info("old backups removed", "path", o.Path, "removed", len(pruned), "kept", o.KeepBackups)
		}
	}
	if err := atomicfile.Write(target, o.Candidate, mode); err != nil {
		return res, fmt.Errorf("write %s: %w", o.Path, err)
	}
	res.Changed = true
	o.Log.Info("topology written", "path", o.Path, "backup", res.Backup)

	why := check(ctx, o, expect, false)
	if why == "" {
		o.Log.Info("slurmctld took the new topology", "path", o.Path)
		return res, nil
	}
	res.Problems = append(res.Problems, why)
	o.Log.Error("new topology failed: rolling back", "reason", why)
	res.RolledBack = true
	if existed {
		err = atomicfile.Write(target, old, mode)
	} else {
		err = os.Remove(target)
	}
	if err != nil {
		return res, fmt.Errorf("%w: restore %s: %w (first failure: %s)", ErrRollbackFailed, o.Path, err, why)
	}
	// The old file's placement can be compared only when it is
	// topology.conf syntax; for topology.yaml the rollback checks that
	// slurmctld answers.
	wantOld := old
	if o.Expect != nil || !existed {
		wantOld = nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.RollbackTimeout)
	defer cancel()
	if again := check(rctx, o, wantOld, true); again != "" {
		return res, fmt.Errorf("%w: after restoring %s: %s (first failure: %s)", ErrRollbackFailed, o.Path, again, why)
	}
	return res, fmt.Errorf("%w: %s", ErrRolledBack, why)
}

// check reconfigures and verifies that slurmctld answers and reports the
// placement of want. It returns why not, or "". A first check never
// restarts slurmctld (it would start on the bad file); the check after a
// rollback does, through the Restarter, since the file is good again.
func check(ctx context.Context, o Options, want []byte, rollback bool) string {
	restart := rollback && o.Restarter != nil
	down := ""
	if err := o.Ctl.Reconfigure(ctx); err != nil {
		if !restart {
			return "reconfigure: " + err.Error()
		}
		down = "reconfigure: " + err.Error()
	} else {
		select {
		case <-ctx.Done():
			return ctx.Err().Error()
		case <-time.After(o.Settle):
		}
		if err := o.Ctl.Ping(ctx); err != nil {
			down = "slurmctld stopped answering after reconfigure: " + err.Error()
			if !restart {
				return down
			}
		}
	}
	if down != "" {
		o.Log.Warn("slurmctld is down: starting it again", "reason", down)
		if err := o.Restarter.Restart(ctx); err != nil {
			return down + "; restart failed: " + err.Error()
		}
		if err := waitPing(ctx, o.Ctl, 60*time.Second); err != nil {
			return down + "; restarted, but it does not answer: " + err.Error()
		}
		o.Log.Info("slurmctld is up again")
	}
	if rollback && want == nil {
		// The rollback removed a file that did not exist before: there is
		// no placement to compare, but slurmctld must still answer.
		return ""
	}
	out, err := o.Ctl.ShowTopology(ctx)
	if err != nil {
		return err.Error() // Scontrol's errors already name the command
	}
	live, err := render.ParseShowTopology(out)
	if err != nil {
		return err.Error()
	}
	tc, _ := render.ParseTopoConf(want)
	if d := tc.Placement().Diff(live, 10); len(d) > 0 {
		return "slurmctld reports another placement than the file (written vs live): " + strings.Join(d, "; ")
	}
	return ""
}

func waitPing(ctx context.Context, c Controller, d time.Duration) error {
	end := time.Now().Add(d)
	var err error
	for time.Now().Before(end) {
		if err = c.Ping(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return err
}

// Backups lists the backups Apply made of path, newest first.
func Backups(path string) ([]string, error) {
	bs, err := listBackups(path)
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.path)
	}
	return out, err
}
