package slurmrest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FinishedJob is one job as slurmdbd keeps it (sacct's view): what it
// asked for, what it was given and how long it ran, after slurmctld has
// forgotten it (past MinJobAge).
type FinishedJob struct {
	ID             int64
	ArrayJobID     int64 // 0: not an array task
	ArrayTaskID    int64 // -1: not an array task
	HetJobID       int64 // 0: not a het job component
	HetJobOffset   int64
	Name, User     string
	Account        string
	Partition, QOS string
	Cluster        string
	State          JobState // "COMPLETED", "FAILED", "CANCELLED", ...; "RUNNING" while it runs
	StateReason    string
	SubmitTime     time.Time
	StartTime      time.Time // zero: never started
	EndTime        time.Time // zero: not ended
	Elapsed        time.Duration
	NodeList       string // "gpu[1-2]"; "None assigned" is ""
	AllocTRES      TRESList
	ExitCode       int
	ExitSignal     int
	WorkDir        string
}

// GPUs is how many GPUs the job was allocated (its gres/gpu TRES).
func (j FinishedJob) GPUs() int64 {
	n, _ := j.AllocTRES.Get("gres/gpu")
	return max(n, 0)
}

// GPUHours is the job's GPUs times its elapsed time, in hours: what sacct
// reports as its TRES usage of gres/gpu (ElapsedRaw × AllocTRES gres/gpu)
// divided by 3600.
func (j FinishedJob) GPUHours() float64 {
	return float64(j.GPUs()) * j.Elapsed.Seconds() / 3600
}

// Ended reports whether the job has ended: it has an end time and is no
// longer pending, running, suspended or requeued.
func (j FinishedJob) Ended() bool {
	if j.EndTime.IsZero() {
		return false
	}
	for _, s := range []string{"PENDING", "RUNNING", "SUSPENDED", "REQUEUED", "CONFIGURING", "COMPLETING"} {
		if j.State.Has(s) {
			return false
		}
	}
	return true
}

// HistoryFilter narrows History; the zero value asks for every job
// slurmdbd has of the last day.
type HistoryFilter struct {
	// Users and Accounts match any of their names; empty matches all.
	// Both set: a job must match both (as sacct's -u and -A).
	Users    []string
	Accounts []string
	// From and To are the window: jobs that were eligible, running or
	// ended in it (sacct's -S and -E). Zero From: a day before To; zero
	// To: now.
	From, To time.Time
}

// ErrBadFilter is a HistoryFilter that cannot be asked: a window that
// ends before it starts, or a name with a comma.
var ErrBadFilter = errors.New("bad history filter")

// params are the query's CSV lists and UNIX times.
func (f HistoryFilter) params(now time.Time) (users, accounts, start, end string, err error) {
	to := f.To
	if to.IsZero() {
		to = now
	}
	from := f.From
	if from.IsZero() {
		from = to.Add(-24 * time.Hour)
	}
	if to.Before(from) {
		return "", "", "", "", fmt.Errorf("%w: the window ends (%s) before it starts (%s)", ErrBadFilter, to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	for _, n := range slices.Concat(f.Users, f.Accounts) {
		if n == "" || strings.ContainsAny(n, ", ") {
			return "", "", "", "", fmt.Errorf("%w: name %q is empty or holds a comma or a space", ErrBadFilter, n)
		}
	}
	return strings.Join(f.Users, ","), strings.Join(f.Accounts, ","), strconv.FormatInt(from.Unix(), 10), strconv.FormatInt(to.Unix(), 10), nil
}

// History lists the jobs slurmdbd recorded in the filter's window, as
// sacct -X does (no steps), oldest submission first. Jobs still pending or
// running are in it too (see FinishedJob.Ended).
func (c *Client) History(ctx context.Context, f HistoryFilter) ([]FinishedJob, error) {
	users, accounts, start, end, err := f.params(time.Now())
	if err != nil {
		return nil, err
	}
	jobs, err := c.be.history(c.ctx(ctx), historyQuery{users: users, accounts: accounts, start: start, end: end})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(jobs, func(a, b FinishedJob) int {
		if c := a.SubmitTime.Compare(b.SubmitTime); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return jobs, nil
}

// FinishedJob is one job as slurmdbd keeps it; ErrNotFound when slurmdbd
// has no record of it. A requeued job has one record per run: this is the
// last.
func (c *Client) FinishedJob(ctx context.Context, id int64) (FinishedJob, error) {
	return c.be.finishedJob(c.ctx(ctx), id)
}

// historyQuery is History's filter as the query's strings ("" leaves a
// parameter out).
type historyQuery struct {
	users, accounts, start, end string
}

// lastRecord picks the record of id from slurmdbd's answer about it: the
// last run of a requeued job (slurmdbd lists each run), or ErrNotFound.
func lastRecord(op string, id int64, in []FinishedJob) (FinishedJob, error) {
	var out FinishedJob
	found := false
	for _, j := range in {
		if j.ID == id && (!found || !j.SubmitTime.Before(out.SubmitTime)) {
			out, found = j, true
		}
	}
	if !found {
		return FinishedJob{}, fmt.Errorf("%s: %w: slurmdbd has no record of it", op, ErrNotFound)
	}
	return out, nil
}

// unixTime is a slurmdbd time in seconds; 0 (never) is the zero time.
func unixTime(p *int64) time.Time {
	if p == nil || *p <= 0 {
		return time.Time{}
	}
	return time.Unix(*p, 0)
}

// seconds is a slurmdbd duration in seconds, never negative and at most
// what a time.Duration holds.
func seconds(p *int64) time.Duration {
	n := min(max(deref(p), 0), int64(math.MaxInt64/time.Second))
	return time.Duration(n) * time.Second
}
