package web

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
)

// JobHistory is the core's finished jobs (slurmdbd's), for the caller.
func (s coreSource) JobHistory(ctx context.Context, id auth.Identity, p api.ListJobHistoryParams) (api.JobHistory, error) {
	out, pr := s.c.JobHistory(ctx, id, p)
	return out, errOf(pr)
}

// The finished jobs page's window: whole days in UTC, 7 by default, at
// most 31 (the core's bound).
const (
	dateForm          = "2006-01-02"
	finishedDays      = 7
	finishedMaxWindow = 31 * 24 * time.Hour
)

type finishedData struct {
	Rows []api.FinishedJob
	// Projects are the caller's projects' names, for the filter.
	Projects []string
	// Project, From, To and All are the filter as asked (From and To as
	// dates).
	Project, From, To string
	All               bool
	// GPUHours is the rows' total.
	GPUHours    float64
	Truncated   bool
	Unavailable []string
	// BadWindow: the dates asked are not a window of at most 31 days.
	BadWindow bool
	Error     bool
}

// finished lists the caller's finished jobs (all they may read with
// all=1) in a window of days, from each cluster's slurmdbd.
func (h *Handler) finished(w http.ResponseWriter, r *http.Request, v visitor) {
	id := identityOf(v)
	q := r.URL.Query()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	d := finishedData{Project: q.Get("project"), All: q.Get("all") == "1",
		From: today.AddDate(0, 0, 1-finishedDays).Format(dateForm), To: today.Format(dateForm)}
	if s := q.Get("from"); s != "" {
		d.From = s
	}
	if s := q.Get("to"); s != "" {
		d.To = s
	}
	from, errFrom := time.Parse(dateForm, d.From)
	to, errTo := time.Parse(dateForm, d.To)
	to = to.AddDate(0, 0, 1) // the whole last day
	if now := time.Now(); to.After(now) {
		to = now
	}
	code := http.StatusOK
	if errFrom != nil || errTo != nil || !from.Before(to) || to.Sub(from) > finishedMaxWindow {
		d.BadWindow, code = true, http.StatusBadRequest
	}
	if pl, err := h.cfg.Source.Projects(r.Context(), id); err == nil {
		for _, p := range pl.Projects {
			if p.Project != "" && !slices.Contains(d.Projects, p.Project) {
				d.Projects = append(d.Projects, p.Project)
			}
		}
		slices.Sort(d.Projects)
	}
	if !d.BadWindow {
		p := api.ListJobHistoryParams{From: &from, To: &to}
		if d.Project != "" {
			p.Project = &d.Project
		}
		hist, err := h.cfg.Source.JobHistory(r.Context(), id, p)
		if err != nil {
			h.log.Warn("finished jobs page: history unavailable", "user", id.User, "error", err)
			d.Error = true
		}
		for _, j := range hist.Jobs {
			if !d.All && j.User != id.User {
				continue // "my jobs", as the live list; all=1 shows what the caller may read
			}
			d.Rows = append(d.Rows, j)
			d.GPUHours += j.GpuHours
		}
		d.Truncated = hist.Truncated != nil && *hist.Truncated
		if hist.UnavailableClusters != nil {
			d.Unavailable = *hist.UnavailableClusters
		}
	}
	h.render(w, r, code, "jobs_finished", h.page(r, v, "finished.title", "jobs", d))
}

// elapsed writes seconds as hours and minutes.
func elapsed(secs int64) string {
	d := time.Duration(secs) * time.Second
	return fmt.Sprintf("%d:%02d", int(d.Hours()), int(d.Minutes())%60)
}
