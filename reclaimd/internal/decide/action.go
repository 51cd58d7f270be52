package decide

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// MarkerPrefix starts every text reclaimd writes into a job (admin comment
// or reason), so that Strata's marks are told apart from an admin's.
const MarkerPrefix = "strata: "

// Marker is the text the daemon writes into the job's admin comment when
// it carries out the action: "strata: reclaimed (requeue, rule llm): 8 of
// 8 GPUs idle …" for requeues and cancels, "strata: reclaim warn (rule
// llm): …" for the others.
func (a Action) Marker() string {
	if a.Kind == Requeue || a.Kind == RequeueHold || a.Kind == Cancel {
		return fmt.Sprintf("%sreclaimed (%s, rule %s): %s", MarkerPrefix, a.Kind, a.Rule, a.Reason)
	}
	return fmt.Sprintf("%sreclaim %s (rule %s): %s", MarkerPrefix, a.Kind, a.Rule, a.Reason)
}

// markerSep separates Strata's mark from what an admin wrote before it.
const markerSep = " | "

// WithMarker returns a job's admin comment with Strata's mark appended:
// what an admin wrote is kept, and only an earlier Strata mark (always the
// last part, after " | ", or the whole comment) is replaced, so that a
// warning's mark does not pile up under the requeue's.
func WithMarker(comment, mark string) string {
	keep := comment
	if strings.HasPrefix(keep, MarkerPrefix) {
		keep = ""
	} else if i := strings.Index(keep, markerSep+MarkerPrefix); i >= 0 {
		keep = keep[:i]
	}
	if keep = strings.TrimSpace(keep); keep == "" {
		return mark
	}
	return keep + markerSep + mark
}

// LogValue makes an action one structured log line with its evidence:
// logger.Info("reclaim action", "action", a).
func (a Action) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.Int64("job_id", a.JobID),
		slog.String("kind", string(a.Kind)),
		slog.String("rule", a.Rule),
		slog.Bool("dry_run", a.DryRun),
	)
	if a.Signal != "" {
		attrs = append(attrs, slog.String("signal", a.Signal))
	}
	return slog.GroupValue(append(attrs,
		slog.String("reason", a.Reason),
		slog.Int("idle_gpus", a.Evidence.IdleGPUs),
		slog.Int("total_gpus", a.Evidence.TotalGPUs),
		slog.Time("window_start", a.Evidence.WindowStart),
		slog.Time("window_end", a.Evidence.WindowEnd),
		slog.String("gpus", a.Evidence.Summary()),
	)...)
}

// Summary lists what each GPU showed, for logs: "gpu-001:0 idle util
// 0.0% mem 0.3% coverage 100%, gpu-001:1 busy util 87.0% …".
func (e Evidence) Summary() string {
	var b strings.Builder
	for i, g := range e.GPUs {
		if i > 0 {
			b.WriteString(", ")
		}
		state := "busy"
		if g.Idle {
			state = "idle"
		}
		fmt.Fprintf(&b, "%s %s util %.1f%% mem %.1f%% coverage %.0f%%", g.GPU, state, g.MaxUtilPercent, g.MaxMemActivityPercent, 100*g.Coverage)
	}
	return b.String()
}

// ErrJobChanged says that a job is no longer the run an action was decided
// for: it was requeued and runs again, or holds other GPUs.
var ErrJobChanged = errors.New("job changed since the decision")

// StillApplies checks, before the daemon acts, that j (the job as re-read
// from Slurm just now) is the run the action was decided for: same id,
// same start, same GPUs. It returns an error wrapping ErrJobChanged when
// not. That the job is still running is for the caller to check: Job has
// no state.
func (a Action) StillApplies(j Job) error {
	if j.ID != a.JobID {
		return fmt.Errorf("%w: job %d is not job %d", ErrJobChanged, j.ID, a.JobID)
	}
	if !j.Start.Equal(a.Evidence.JobStart) {
		return fmt.Errorf("%w: job %d started again at %s (decided for the run started at %s)",
			ErrJobChanged, j.ID, j.Start.Format(time.RFC3339), a.Evidence.JobStart.Format(time.RFC3339))
	}
	judged := make([]GPUKey, len(a.Evidence.GPUs))
	for i, g := range a.Evidence.GPUs {
		judged[i] = g.GPU
	}
	now := slices.Clone(j.GPUs)
	sortKeys(judged)
	sortKeys(now)
	if !slices.Equal(judged, now) {
		return fmt.Errorf("%w: job %d holds %s, decided for %s", ErrJobChanged, j.ID, keys(now), keys(judged))
	}
	return nil
}

func sortKeys(k []GPUKey) {
	slices.SortFunc(k, func(a, b GPUKey) int {
		if c := strings.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return a.Index - b.Index
	})
}

func keys(k []GPUKey) string {
	s := make([]string, len(k))
	for i, g := range k {
		s[i] = g.String()
	}
	return strings.Join(s, ",")
}
