package plan

import (
	"slices"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

// holdBusy keeps removals from taking running or pending jobs with them.
// slurmdbd refuses to remove an association with such jobs (error 7001,
// "Job(s) active, cancel job(s) before remove"), and so the removal of a
// user who has them, and of an account that has them in it or below it.
// Such a removal becomes a skip that names the jobs, together with the
// default-account move made for it; with force, a cancel of the jobs goes
// before it instead, and the removal keeps the jobs in Busy (apply waits
// for slurmdbd to see them end).
func holdBusy(in []Change, jobs []slurmrest.Job, assoc map[string]slurmrest.Association, force bool) []Change {
	var active []slurmrest.Job
	for _, j := range jobs {
		if activeJob(j) {
			active = append(active, j)
		}
	}
	if len(active) == 0 {
		return in
	}
	children := map[string][]string{}
	for _, a := range assoc {
		if a.User == "" {
			children[a.Parent] = append(children[a.Parent], a.Account)
		}
	}
	find := func(match func(slurmrest.Job) bool) []int64 {
		var ids []int64
		for _, j := range active {
			if match(j) {
				ids = append(ids, j.ID)
			}
		}
		slices.Sort(ids)
		return ids
	}
	inAssoc := func(account, user string) []int64 {
		return find(func(j slurmrest.Job) bool {
			return strings.EqualFold(j.Account, account) && j.User == user
		})
	}
	blocking := func(c Change) []int64 {
		switch {
		case c.Op == "delete" && c.Kind == "account":
			tree := map[string]bool{}
			var walk func(string)
			walk = func(a string) {
				if !tree[a] {
					tree[a] = true
					for _, ch := range children[a] {
						walk(ch)
					}
				}
			}
			walk(strings.ToLower(c.Name))
			return find(func(j slurmrest.Job) bool { return tree[strings.ToLower(j.Account)] })
		case c.Op == "delete" && c.Kind == "association" && c.Assoc != nil:
			return inAssoc(c.Assoc.Account, c.Assoc.User)
		case c.Op == "delete" && c.Kind == "user":
			return find(func(j slurmrest.Job) bool { return j.User == c.Name })
		case c.DefaultOnly && len(c.Fields) > 0:
			// The move made so that the association it leaves can go.
			return inAssoc(c.Fields[0].Old, c.Name)
		}
		return nil
	}
	var out []Change
	cancelled := map[int64]bool{}
	for _, c := range in {
		ids := blocking(c)
		switch {
		case len(ids) == 0:
			out = append(out, c)
		case c.DefaultOnly && !force:
			// Held back with the association removal it prepares, whose
			// skip names the jobs.
		case c.DefaultOnly:
			out = append(out, c)
		case !force:
			out = append(out, Change{Op: OpSkip, Kind: c.Kind, Name: c.Name, Busy: ids})
		default:
			var fresh []int64
			for _, id := range ids {
				if !cancelled[id] {
					cancelled[id] = true
					fresh = append(fresh, id)
				}
			}
			if len(fresh) > 0 {
				out = append(out, Change{Op: OpCancel, Kind: KindJobs, Name: c.Name, Busy: fresh})
			}
			c.Busy = ids
			out = append(out, c)
		}
	}
	return out
}

// activeJob reports whether slurmdbd counts a job as active: pending,
// running or suspended.
func activeJob(j slurmrest.Job) bool {
	return j.State.Has("PENDING") || j.State.Has("RUNNING") || j.State.Has("SUSPENDED")
}

// Actionable are the changes apply makes: all but the skipped removals.
func Actionable(cs []Change) []Change {
	out := make([]Change, 0, len(cs))
	for _, c := range cs {
		if c.Op != OpSkip {
			out = append(out, c)
		}
	}
	return out
}

func jobIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ",")
}
