// Package clustertest is a slurmrestd for the portal's tests, at the
// network edge: the exchanges captured from a real slurmrestd
// (internal/slurmrest/slurmresttest), with the jobs listing made of any
// number of jobs cut from the captured job record (so that tests have
// several tenants' jobs in the shape slurmrestd really sends), a
// conditional listing that answers "unchanged" as slurmrestd does, job
// control requests recorded and accepted, and a switch that makes the
// cluster stop answering.
package clustertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
)

// Job is one job of the listing; the rest of its record is the captured one.
type Job struct {
	ID      int64
	User    string
	Account string
	// State is Slurm's base state: RUNNING, PENDING, COMPLETED, ...
	State string
	// Reason is a pending job's reason (Priority, QOSGrpGRES, ...).
	Reason    string
	Name      string
	Comment   string
	Partition string
	QOS       string
	Hold      bool
	// UID is the user's id; WorkDir, StdOut and StdErr the job's paths
	// as slurmrestd gives them ("": the record's own).
	UID                     int64
	WorkDir, StdOut, StdErr string
	// CPUOnly: the job holds no GPUs (the captured record holds two).
	CPUOnly bool
	// Priority, Nice, AccrueTime, StartTime and EndTime (Unix seconds)
	// replace the record's when set.
	Priority, Nice, AccrueTime, StartTime, EndTime int64
}

// Control is a job control request the bed was sent.
type Control struct {
	User, Method, Path, Query string
	Body                      []byte
}

// Bed is one fake cluster.
type Bed struct {
	*httptest.Server
	Replay  *slurmresttest.Server
	Release string
	Parser  string

	mu       sync.Mutex
	template map[string]any
	jobs     []Job
	update   int64 // the listing's last_update
	down     bool
	controls []Control
	submits  []Control
	nextID   int64
	// answer is the record that answers a job's control ("": "cancel").
	answer string
	// finished are slurmdbd's jobs (see history.go).
	finished       []Finished
	dbTemplate     map[string]any
	historyQueries []string
}

// AnswerControls makes the record of that name (of the release's replay
// records: "cancel-refused" is a cancel Slurm refused) answer every
// control of a job from now on; "" gives back the captured cancel's
// answer.
func (b *Bed) AnswerControls(record string) {
	b.mu.Lock()
	b.answer = record
	b.mu.Unlock()
}

var submitPath = regexp.MustCompile(`^/slurm/v0\.0\.\d+/job/submit$`)

var nodePath = regexp.MustCompile(`^/slurm/v0\.0\.\d+/node/[^/]+$`)

var jobPath = regexp.MustCompile(`^/slurm/v0\.0\.\d+/job/\d+(/requeue)?$`)

// New starts a bed replaying release ("26.05", "24.11") with jobs.
func New(t testing.TB, release string, jobs ...Job) *Bed {
	t.Helper()
	dir := slurmresttest.Dir(release)
	rs := slurmresttest.NewServer(t, dir)
	info, err := readInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := &Bed{Replay: rs, Release: release, Parser: info.Parser, update: 1795983272}
	rec, ok := rs.Record("jobs")
	if !ok {
		t.Fatal("clustertest: no jobs record")
	}
	var list map[string]any
	if err := json.Unmarshal(rec.Response, &list); err != nil {
		t.Fatal(err)
	}
	b.template = list["jobs"].([]any)[0].(map[string]any)
	b.jobs = jobs
	jobsPath := "/slurm/" + info.Parser + "/jobs/"
	rs.Handle("GET", jobsPath, http.HandlerFunc(b.serveJobs))
	if rec, ok := rs.Record("history"); ok {
		var list map[string]any
		if err := json.Unmarshal(rec.Response, &list); err != nil {
			t.Fatal(err)
		}
		b.dbTemplate = list["jobs"].([]any)[0].(map[string]any)
		rs.Handle("GET", "/slurmdb/"+info.Parser+"/jobs/", http.HandlerFunc(b.serveHistory))
	}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		down := b.down
		b.mu.Unlock()
		if down {
			slurmresttest.Drop().ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodPost && nodePath.MatchString(r.URL.Path) {
			b.control(w, r)
			return
		}
		if r.Method == http.MethodPost && submitPath.MatchString(r.URL.Path) {
			b.submit(w, r)
			return
		}
		if r.Method == http.MethodGet && b.dbTemplate != nil && dbJobPath.MatchString(r.URL.Path) {
			b.serveFinished(w, r)
			return
		}
		if (r.Method == http.MethodDelete || r.Method == http.MethodPost || r.Method == http.MethodGet) && jobPath.MatchString(r.URL.Path) &&
			(r.Method != http.MethodGet || bytes.HasSuffix([]byte(r.URL.Path), []byte("/requeue"))) {
			b.control(w, r)
			return
		}
		rs.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(b.Close)
	return b
}

type bedInfo struct {
	Parser  string `json:"parser"`
	Release string `json:"release"`
	Cluster string `json:"cluster"`
}

func readInfo(dir string) (bedInfo, error) {
	var info bedInfo
	data, err := os.ReadFile(filepath.Join(dir, slurmresttest.InfoFile))
	if err != nil {
		return info, fmt.Errorf("clustertest: %w", err)
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return info, fmt.Errorf("clustertest: %s: %w", slurmresttest.InfoFile, err)
	}
	return info, nil
}

// SetJobs replaces the listing; the next conditional listing sees the change.
func (b *Bed) SetJobs(jobs ...Job) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.jobs = jobs
	b.update++
}

// Stop makes the cluster drop every connection; Start makes it answer again.
func (b *Bed) Stop()  { b.set(true) }
func (b *Bed) Start() { b.set(false) }

func (b *Bed) set(down bool) {
	b.mu.Lock()
	b.down = down
	b.mu.Unlock()
}

// Controls returns the job and node control requests served so far.
func (b *Bed) Controls() []Control {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Control(nil), b.controls...)
}

// Submits returns the submissions served so far.
func (b *Bed) Submits() []Control {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Control(nil), b.submits...)
}

// submit accepts a submission as slurmrestd's captured answer does, with
// a job id of its own for each.
func (b *Bed) submit(w http.ResponseWriter, r *http.Request) {
	var body bytes.Buffer
	_, _ = body.ReadFrom(r.Body) // a body cut short is recorded as it came
	b.mu.Lock()
	b.submits = append(b.submits, Control{User: r.Header.Get("X-SLURM-USER-NAME"), Method: r.Method, Path: r.URL.Path, Body: body.Bytes()})
	if b.nextID == 0 {
		b.nextID = 930000
	}
	b.nextID++
	id := b.nextID
	b.mu.Unlock()
	rec, _ := b.Replay.Record("submit")
	var m map[string]any
	mustUnmarshal(rec.Response, &m)
	m["job_id"] = id
	m["step_id"] = "batch"
	writeJSON(w, m)
}

// JobsRequests counts the job listings served.
func (b *Bed) JobsRequests() int { return b.Replay.Count("GET", "/slurm/"+b.Parser+"/jobs/") }

func (b *Bed) control(w http.ResponseWriter, r *http.Request) {
	var body bytes.Buffer
	_, _ = body.ReadFrom(r.Body) // a body cut short is recorded as it came
	b.mu.Lock()
	b.controls = append(b.controls, Control{User: r.Header.Get("X-SLURM-USER-NAME"), Method: r.Method, Path: r.URL.Path,
		Query: r.URL.RawQuery, Body: body.Bytes()})
	name := b.answer
	b.mu.Unlock()
	if name == "" || !jobPath.MatchString(r.URL.Path) {
		name = "cancel"
	}
	rec, ok := b.Replay.Record(name)
	if !ok {
		http.Error(w, "clustertest: no record "+name, 599)
		return
	}
	slurmresttest.Reply(rec).ServeHTTP(w, r)
}

func noval(n int64) map[string]any {
	return map[string]any{"set": true, "infinite": false, "number": n}
}

func (b *Bed) serveJobs(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ut := r.URL.Query().Get("update_time"); ut != "" {
		if n, err := strconv.ParseInt(ut, 10, 64); err == nil && n >= b.update {
			// As slurmrestd answers: no jobs, and a last_update of 0.
			rec, _ := b.Replay.Record("jobs-unchanged")
			slurmresttest.Reply(rec).ServeHTTP(w, r)
			return
		}
	}
	rec, _ := b.Replay.Record("jobs")
	var list map[string]any
	mustUnmarshal(rec.Response, &list)
	var jobs []any
	for _, j := range b.jobs {
		jobs = append(jobs, b.record(j))
	}
	if jobs == nil {
		jobs = []any{}
	}
	list["jobs"] = jobs
	list["last_update"] = noval(b.update)
	writeJSON(w, list)
}

func (b *Bed) record(j Job) map[string]any {
	raw, _ := json.Marshal(b.template)
	var m map[string]any
	mustUnmarshal(raw, &m)
	m["job_id"] = j.ID
	if j.User != "" {
		m["user_name"] = j.User
		m["group_name"] = j.User
	}
	if j.Account != "" {
		m["account"] = j.Account
	}
	if j.Name != "" {
		m["name"] = j.Name
	}
	if j.Partition != "" {
		m["partition"] = j.Partition
	}
	if j.QOS != "" {
		m["qos"] = j.QOS
	}
	m["comment"] = j.Comment
	if j.UID != 0 {
		m["user_id"] = j.UID
	}
	for k, v := range map[string]string{"current_working_directory": j.WorkDir, "standard_output": j.StdOut, "standard_error": j.StdErr} {
		if v != "" {
			m[k] = v
		}
	}
	m["hold"] = j.Hold
	if j.CPUOnly {
		m["gres_detail"] = []string{}
		m["tres_alloc_str"] = "cpu=1,mem=1000M,node=1,billing=1"
		m["tres_req_str"] = "cpu=1,mem=1000M,node=1,billing=1"
		m["tres_per_node"] = ""
	}
	if j.Priority != 0 {
		m["priority"] = noval(j.Priority)
	}
	if j.Nice != 0 {
		m["nice"] = j.Nice
	}
	if j.AccrueTime != 0 {
		m["accrue_time"] = noval(j.AccrueTime)
	}
	if j.StartTime != 0 {
		m["start_time"] = noval(j.StartTime)
	}
	if j.EndTime != 0 {
		m["end_time"] = noval(j.EndTime)
	}
	state := j.State
	if state == "" {
		state = "RUNNING"
	}
	m["job_state"] = []string{state}
	if j.Reason != "" {
		m["state_reason"] = j.Reason
	} else {
		m["state_reason"] = "None"
	}
	if state == "PENDING" {
		m["nodes"] = ""
		m["gres_detail"] = []string{}
		m["start_time"] = noval(0)
		m["end_time"] = noval(0)
		m["batch_host"] = ""
		delete(m, "job_resources")
	}
	return m
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v) // the client may be gone
}

// mustUnmarshal decodes a captured record, which is JSON by construction.
func mustUnmarshal(data []byte, v any) {
	if err := json.Unmarshal(data, v); err != nil {
		panic("clustertest: a captured record does not decode: " + err.Error())
	}
}
