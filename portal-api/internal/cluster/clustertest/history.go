package clustertest

import (
	"net/http"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Finished is one job of slurmdbd's record (GET /slurmdb/v0.0.NN/jobs/
// and /job/{id}); the rest of its record is the one TestHistory captured.
type Finished struct {
	ID      int64
	User    string
	Account string
	Name    string
	// State is its end state ("": COMPLETED).
	State string
	// Submit, Start and End are Unix seconds; the elapsed time is
	// End-Start.
	Submit, Start, End int64
	// GPUs is its allocated gres/gpu (0: none).
	GPUs int64
}

var dbJobPath = regexp.MustCompile(`^/slurmdb/v0\.0\.\d+/job/\d+$`)

// SetFinished replaces slurmdbd's jobs.
func (b *Bed) SetFinished(jobs ...Finished) {
	b.mu.Lock()
	b.finished = jobs
	b.mu.Unlock()
}

// HistoryQueries are the queries of slurmdbd's job listing the bed was
// sent, in order.
func (b *Bed) HistoryQueries() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.historyQueries)
}

// serveHistory answers as slurmdbd does: the jobs of the users and
// accounts asked (CSV, all when absent) that were eligible or running
// between start_time and end_time.
func (b *Bed) serveHistory(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.historyQueries = append(b.historyQueries, r.URL.RawQuery)
	q := r.URL.Query()
	in := func(key, v string) bool {
		return q.Get(key) == "" || slices.Contains(strings.Split(q.Get(key), ","), v)
	}
	unix := func(key string, def int64) int64 {
		if n, err := strconv.ParseInt(q.Get(key), 10, 64); err == nil {
			return n
		}
		return def
	}
	from, to := unix("start_time", 0), unix("end_time", 1<<62)
	jobs := []any{}
	for _, j := range b.finished {
		if in("users", j.User) && in("account", j.Account) && j.Submit <= to && j.End >= from {
			jobs = append(jobs, b.dbRecord(j))
		}
	}
	b.writeDB(w, "history", jobs)
}

func (b *Bed) serveFinished(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id, _ := strconv.ParseInt(path.Base(r.URL.Path), 10, 64)
	jobs := []any{}
	for _, j := range b.finished {
		if j.ID == id {
			jobs = append(jobs, b.dbRecord(j))
		}
	}
	b.writeDB(w, "finished-job", jobs)
}

func (b *Bed) writeDB(w http.ResponseWriter, record string, jobs []any) {
	rec, _ := b.Replay.Record(record)
	var list map[string]any
	mustUnmarshal(rec.Response, &list)
	list["jobs"] = jobs
	writeJSON(w, list)
}

func (b *Bed) dbRecord(j Finished) map[string]any {
	m := map[string]any{}
	for k, v := range b.dbTemplate {
		m[k] = v
	}
	m["job_id"] = j.ID
	m["user"], m["account"], m["name"] = j.User, j.Account, j.Name
	state := j.State
	if state == "" {
		state = "COMPLETED"
	}
	m["state"] = map[string]any{"current": []string{state}, "reason": "None"}
	m["time"] = map[string]any{"submission": j.Submit, "eligible": j.Submit, "start": j.Start, "end": j.End, "elapsed": max(j.End-j.Start, 0)}
	alloc := []any{map[string]any{"type": "cpu", "name": "", "id": 1, "count": 1}, map[string]any{"type": "node", "name": "", "id": 4, "count": 1}}
	if j.GPUs > 0 {
		alloc = append(alloc, map[string]any{"type": "gres", "name": "gpu", "id": 1001, "count": j.GPUs})
	}
	m["tres"] = map[string]any{"allocated": alloc, "requested": alloc}
	return m
}
