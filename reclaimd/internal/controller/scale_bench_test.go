package controller_test

import (
	"bufio"
	"bytes"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
	"github.com/strata-hpc/strata/reclaimd/internal/agent"
	"github.com/strata-hpc/strata/reclaimd/internal/collect"
	"github.com/strata-hpc/strata/reclaimd/internal/controller"
	"github.com/strata-hpc/strata/reclaimd/internal/source"
	"github.com/strata-hpc/strata/reclaimd/internal/store"
)

// The scale benchmark's cluster: nodes × 8 GPUs, two running jobs per node
// (every 4 nodes: one job of 16 GPUs over 2 nodes, and jobs of 1, 1, 2, 4
// and 2, 2, 4 GPUs on the other two), agents sampling every 10 s and
// keeping two hours (Prometheus's window as long; the tests choose
// their own), the controller cycling every 30 s under a 30-minute
// rule in dry-run mode (every decision is recorded in SQLite, nothing is
// sent to Slurm).
const (
	scaleAgentInterval = 10 * time.Second
	scaleBenchWindow   = 2 * time.Hour // BenchmarkCycleScale's
	scaleCycle         = 30 * time.Second
	scalePromStep      = 30 * time.Second
	scaleRules         = `{"apiVersion": "strata/v1", "kind": "ReclaimRules", "dry_run": true,
	  "rules": [{"name": "train", "idle": {"max_util_percent": 5, "max_mem_activity_percent": 5, "window": "30m"},
	    "warn": "15m", "signal": {"name": "USR1", "wait": "5m", "mode": "batch"}, "action": "requeue"}]}`
)

// scaleJob is one job of the scale cluster.
type scaleJob struct {
	id    int64
	nodes []int // node numbers
	first int   // first GPU index on each node
	count int   // GPUs on each node
}

func scaleNode(n int) string { return fmt.Sprintf("gpu-%04d", n) }

// scaleJobs lays out the jobs of a cluster of nodes.
func scaleJobs(nodes int) []scaleJob {
	var jobs []scaleJob
	add := func(ns []int, first, count int) {
		jobs = append(jobs, scaleJob{id: int64(1000 + len(jobs)), nodes: ns, first: first, count: count})
	}
	n := 0
	for ; n+4 <= nodes; n += 4 {
		add([]int{n, n + 1}, 0, 8)
		add([]int{n + 2}, 0, 1)
		add([]int{n + 2}, 1, 1)
		add([]int{n + 2}, 2, 2)
		add([]int{n + 2}, 4, 4)
		add([]int{n + 3}, 0, 2)
		add([]int{n + 3}, 2, 2)
		add([]int{n + 3}, 4, 4)
	}
	for ; n < nodes; n++ { // the rest: two jobs of 4 GPUs a node
		add([]int{n}, 0, 4)
		add([]int{n}, 4, 4)
	}
	return jobs
}

// scaleUtil is what GPU gpu of node n shows at t: in turn by job, busy,
// idle (but for 5 minutes in 40 or 70), bursty (busy one sample in 12),
// memory-bound and idle but for one GPU of the job. It is the same function of time for the agents and for
// Prometheus.
func scaleUtil(job scaleJob, gpu int, t time.Time) (util, mem float64) {
	switch job.id % 5 {
	case 0:
		return 90, 50
	case 1: // busy 5 minutes in 40 or 70 (seen by agents replaying that long)
		if period := 40 + 30*(job.id/5%2); (t.Unix()/60+job.id)%period < 5 {
			return 60, 30
		}
		return 0, 0.2
	case 2:
		if t.Unix()/10%12 == 0 {
			return 40, 10
		}
		return 0.5, 0
	case 3:
		return 3, 60
	}
	if gpu == job.first {
		return 70, 20
	}
	return 0, 0
}

// scaleJobList is slurmrestd's answer to GET /jobs/ for the cluster: the
// captured record of a running job, once per job with its id, nodes,
// GPUs and start changed.
func scaleJobList(tb testing.TB, jobs []scaleJob, start time.Time) []byte {
	tb.Helper()
	rec := loadRecord(tb, "26.05", "jobs")
	var ans map[string]any
	if err := json.Unmarshal(rec.Response, &ans); err != nil {
		tb.Fatal(err)
	}
	proto, err := json.Marshal(ans["jobs"].([]any)[0])
	if err != nil {
		tb.Fatal(err)
	}
	list := make([]any, 0, len(jobs))
	for _, j := range jobs {
		var m map[string]any
		if err := json.Unmarshal(proto, &m); err != nil {
			tb.Fatal(err)
		}
		names := make([]string, len(j.nodes))
		detail := make([]any, len(j.nodes))
		for i, n := range j.nodes {
			names[i] = scaleNode(n)
			idx := strconv.Itoa(j.first)
			if j.count > 1 {
				idx += "-" + strconv.Itoa(j.first+j.count-1)
			}
			detail[i] = fmt.Sprintf("gpu:h100:%d(IDX:%s)", j.count, idx)
		}
		m["job_id"] = j.id
		m["nodes"] = strings.Join(names, ",")
		m["batch_host"] = names[0]
		m["gres_detail"] = detail
		m["node_count"] = map[string]any{"set": true, "infinite": false, "number": len(names)}
		m["time_limit"] = map[string]any{"set": true, "infinite": false, "number": 24 * 60}
		st := start.Add(-time.Duration(j.id%60) * time.Minute).Unix()
		m["start_time"] = map[string]any{"set": true, "infinite": false, "number": st}
		if res, ok := m["job_resources"].(map[string]any); ok {
			if nodes, ok := res["nodes"].(map[string]any); ok {
				nodes["list"] = strings.Join(names, ",")
				nodes["count"] = len(names)
				if alloc, ok := nodes["allocation"].([]any); ok && len(alloc) > 0 {
					var out []any
					for i, name := range names {
						b, _ := json.Marshal(alloc[0])
						var a map[string]any
						_ = json.Unmarshal(b, &a)
						a["index"], a["name"] = i, name
						out = append(out, a)
					}
					nodes["allocation"] = out
				}
			}
		}
		list = append(list, m)
	}
	ans["jobs"] = list
	body, err := json.Marshal(ans)
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

func loadRecord(tb testing.TB, release, name string) slurmresttest.Record {
	tb.Helper()
	recs, err := slurmresttest.Load(slurmresttest.Dir(release))
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range recs {
		if r.Name == name {
			return r
		}
	}
	tb.Fatalf("no record %q", name)
	return slurmresttest.Record{}
}

// scaleBed is a controller over a cluster of nodes: slurmrestd replayed
// with a job list of the cluster's size, real agents (or a Prometheus
// answering from the same utilisation), a real SQLite store.
type scaleBed struct {
	tb     testing.TB
	ctl    *controller.Controller
	slurm  *slurmrest.Client
	rules  reclaimrules.Rules
	agents []*agent.Agent
	// newAgent starts node n's agent afresh (a restart: its window empty).
	newAgent func(n int) *agent.Agent
	coll     controller.Collector // the controller's
	// store is the controller's store; lastStore the last one controller
	// made.
	store, lastStore *store.Store
	nodes            int
	byGPU            map[string]scaleJob
	promURL          string
	agentsURL        string

	// window is what the agents (and Prometheus queries) keep, cycle the
	// time between cycles (newScaleBedWith's).
	window, cycle time.Duration

	mu       sync.Mutex
	now      time.Time
	handlers []http.Handler // node's agent handler
	down     map[int]bool   // nodes whose agent answers 503

	// answers holds the stand-ins' answers made ahead, for a benchmark
	// that counts the controller's work only.
	answers answers
}

// answers is what the stand-ins of agents and Prometheus answer, made
// before a benchmark's timed part: recording, each answer a stand-in
// makes is kept under its request (path, query and form; not the nonce).
// The benchmark then serves the kept answers from a process of its own
// (serveAnswers), each written as it is (an agent's signed for the
// request's nonce, the agent's work: one HMAC of a few KB). In production
// the agents and Prometheus run on other machines; what they spend making
// an answer is not the controller's.
type answers struct {
	mu        sync.Mutex
	recording bool
	kept      map[string][]byte
	missed    int // requests with no answer kept
}

// serveKept writes a's kept answer to r, signed with secret where the
// request carries a nonce; false when there is none.
func (a *answers) serveKept(w http.ResponseWriter, r *http.Request, secret []byte) bool {
	key, err := answerKey(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return true
	}
	a.mu.Lock()
	body, ok := a.kept[key]
	if !ok {
		a.missed++
	}
	a.mu.Unlock()
	if !ok {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	if n := r.Header.Get(agent.HeaderNonce); n != "" {
		w.Header().Set(agent.HeaderSignature, agent.Sign(secret, n, body))
	}
	w.Write(body)
	return true
}

func (a *answers) record(on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recording = on
	if a.kept == nil {
		a.kept = map[string][]byte{}
	}
}

func (a *answers) misses() int { a.mu.Lock(); defer a.mu.Unlock(); return a.missed }

// answerKey names a request by what its answer depends on.
func answerKey(r *http.Request) (string, error) {
	if err := r.ParseForm(); err != nil {
		return "", err
	}
	return r.URL.Path + "?" + r.Form.Encode(), nil
}

// wrap serves h's answers, and keeps them while recording.
func (a *answers) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		recording := a.recording
		a.mu.Unlock()
		if !recording {
			h.ServeHTTP(w, r)
			return
		}
		key, err := answerKey(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code == http.StatusOK {
			a.mu.Lock()
			a.kept[key] = rec.Body.Bytes()
			a.mu.Unlock()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

func (s *scaleBed) clock() time.Time { s.mu.Lock(); defer s.mu.Unlock(); return s.now }

// newScaleBedWith builds the bed with the agents' windows (or
// Prometheus's history) full, given the agents' window (and Prometheus's)
// and the time between cycles. The agents replay a recording of loop (a
// short one keeps the setup of a thousand agents short).
func newScaleBedWith(tb testing.TB, nodes int, mode string, loop, window, cycle time.Duration) *scaleBed {
	tb.Helper()
	ctx := tb.Context()
	start := time.Unix(1795983272, 0).UTC()
	s := &scaleBed{tb: tb, now: start.Add(2 * time.Hour), window: window, cycle: cycle}
	jobs := scaleJobs(nodes)
	byGPU := map[string]scaleJob{} // "node/index"
	for _, j := range jobs {
		for _, n := range j.nodes {
			for g := j.first; g < j.first+j.count; g++ {
				byGPU[fmt.Sprintf("%d/%d", n, g)] = j
			}
		}
	}

	srv := slurmresttest.NewServer(tb, slurmresttest.Dir("26.05"))
	list := scaleJobList(tb, jobs, start)
	// Every cycle gets the whole list, as when any job changed since the
	// last: the cost of a busy cluster.
	srv.Handle(http.MethodGet, "/slurm/v0.0.45/jobs/", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(list)
	}))
	var err error
	s.slurm, err = slurmrest.New(ctx, slurmrest.Config{URL: srv.URL, User: "root", Tokens: slurmrest.StaticToken("replay-token")})
	if err != nil {
		tb.Fatal(err)
	}
	if s.rules, err = reclaimrules.Parse([]byte(scaleRules)); err != nil {
		tb.Fatal(err)
	}
	s.byGPU = byGPU
	var coll controller.Collector
	switch mode {
	case "agents":
		coll = s.startAgents(nodes, loop, false)
	case "prometheus":
		prom := httptest.NewServer(s.answers.wrap(promHandler(byGPU)))
		tb.Cleanup(prom.Close)
		s.promURL = prom.URL
		coll = s.prometheus(false)
	default:
		tb.Fatalf("mode %q", mode)
	}
	s.coll, s.nodes = coll, nodes
	s.ctl = s.controller(coll)
	s.store = s.lastStore
	return s
}

// controller makes a controller with a store of its own over the bed.
func (s *scaleBed) controller(coll controller.Collector) *controller.Controller {
	tb := s.tb
	st, err := store.Open(tb.Context(), filepath.Join(tb.TempDir(), "reclaimd.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	s.lastStore = st
	return s.controllerOn(coll, st, slog.New(slog.DiscardHandler))
}

// controllerOn makes a controller over the bed with the store st (a
// restart: the store of the controller before).
func (s *scaleBed) controllerOn(coll controller.Collector, st *store.Store, log *slog.Logger) *controller.Controller {
	ctl, err := controller.New(controller.Config{Slurm: s.slurm, Collector: coll, Store: st,
		Rules: func() reclaimrules.Rules { return s.rules }, Now: s.clock, Log: log})
	if err != nil {
		s.tb.Fatal(err)
	}
	return ctl
}

// prometheus is a Prometheus collector of the bed; whole asks for whole
// windows every cycle.
func (s *scaleBed) prometheus(whole bool) *collect.Prometheus {
	return &collect.Prometheus{URL: s.promURL, Step: scalePromStep, Window: s.window, Now: s.clock,
		Whole: whole} // the default 64 MiB: a first read at 8,000 GPUs is asked in halves
}

// startAgents starts one real agent per node, each replaying a recording
// of its GPUs, all served by one httptest server under /<node>/, and fills
// their windows up to the clock. It returns the agents collector (whole:
// asking for whole windows); s.agentsCollector makes more.
func (s *scaleBed) startAgents(nodes int, loop time.Duration, whole bool) *collect.Agents {
	tb := s.tb
	mux := http.NewServeMux()
	procs := agent.ProcFS{Root: tb.TempDir()}
	// A recording of loop, sampled every 10 s, played in a loop from a
	// start on a multiple of it, so its offsets are the clock's.
	origin := s.now.Add(-2 * s.window).Truncate(loop)
	recs := make([]*source.Recording, nodes)
	for n := range nodes {
		var csv strings.Builder
		csv.WriteString("offset_seconds,gpu,util,mem_activity,mem_used_mib\n")
		for off := time.Duration(0); off < loop; off += scaleAgentInterval {
			for g := range 8 {
				u, m := scaleUtil(s.byGPU[fmt.Sprintf("%d/%d", n, g)], g, origin.Add(off))
				fmt.Fprintf(&csv, "%d,%d,%g,%g,30000\n", int(off.Seconds()), g, u, m)
			}
		}
		rec, err := source.ParseRecording(scaleNode(n), strings.NewReader(csv.String()))
		if err != nil {
			tb.Fatal(err)
		}
		recs[n] = rec
	}
	s.newAgent = func(n int) *agent.Agent {
		a, err := agent.New(agent.Config{Node: scaleNode(n), Source: source.NewReplay(recs[n], origin, true),
			Interval: scaleAgentInterval, Window: s.window, Now: s.clock, Procs: procs,
			Logger: slog.New(slog.DiscardHandler), Secret: agentSecret})
		if err != nil {
			tb.Fatal(err)
		}
		s.mu.Lock()
		s.agents[n] = a
		s.handlers[n] = http.StripPrefix("/"+scaleNode(n), a.Handler())
		s.mu.Unlock()
		return a
	}
	s.agents, s.handlers, s.down = make([]*agent.Agent, nodes), make([]http.Handler, nodes), map[int]bool{}
	for n := range nodes {
		s.newAgent(n)
		mux.Handle("/"+scaleNode(n)+"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			h, down := s.handlers[n], s.down[n]
			s.mu.Unlock()
			if down {
				http.Error(w, "agent down", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		}))
	}
	srv := httptest.NewServer(s.answers.wrap(mux))
	tb.Cleanup(srv.Close)
	s.agentsURL = srv.URL
	end := s.now
	for at := end.Add(-s.window); !at.After(end); at = at.Add(scaleAgentInterval) {
		s.mu.Lock()
		s.now = at
		s.mu.Unlock()
		s.sample()
	}
	return s.agentsCollector(whole)
}

// agentsCollector reads the bed's agents; whole asks for whole windows.
func (s *scaleBed) agentsCollector(whole bool) *collect.Agents {
	// One connection kept per agent, as a controller keeps one to each
	// node (here every agent is behind the one server).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 0, 32
	return &collect.Agents{URL: func(node string) string { return s.agentsURL + "/" + node }, Client: &http.Client{Transport: tr},
		Whole: whole, Secret: agentSecret}
}

func (s *scaleBed) sample() {
	s.mu.Lock()
	agents := slices.Clone(s.agents)
	s.mu.Unlock()
	for _, a := range agents {
		if err := a.SampleOnce(s.tb.Context()); err != nil {
			s.tb.Fatal(err)
		}
	}
}

// advance moves the clock one cycle on, the agents sampling on the way.
func (s *scaleBed) advance() {
	for range s.cycle / scaleAgentInterval {
		s.mu.Lock()
		s.now = s.now.Add(scaleAgentInterval)
		s.mu.Unlock()
		s.sample()
	}
}

// promHandler answers query_range as Prometheus would for reclaimd's
// query (max_over_time of each metric over one step, by Hostname and
// gpu) over the utilisation of scaleUtil, for the nodes the query's
// matcher names.
func promHandler(byGPU map[string]scaleJob) http.Handler {
	matcher := regexp.MustCompile(`Hostname=~"((?:[^"\\]|\\.)*)"`)
	metrics := []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_DEV_FB_USED"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		start, _ := strconv.ParseFloat(r.Form.Get("start"), 64)
		end, _ := strconv.ParseFloat(r.Form.Get("end"), 64)
		step, _ := strconv.ParseFloat(r.Form.Get("step"), 64)
		m := matcher.FindStringSubmatch(r.Form.Get("query"))
		if m == nil || step <= 0 {
			http.Error(w, `{"status":"error","errorType":"bad_data","error":"no Hostname matcher"}`, http.StatusBadRequest)
			return
		}
		re, err := regexp.Compile("^(?:" + strings.ReplaceAll(m[1], `\\`, `\`) + ")$")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var b bytes.Buffer
		b.WriteString(`{"status":"success","data":{"resultType":"matrix","result":[`)
		first := true
		for key, job := range byGPU {
			ns, gs, _ := strings.Cut(key, "/")
			n, _ := strconv.Atoi(ns)
			g, _ := strconv.Atoi(gs)
			node := scaleNode(n)
			if !re.MatchString(node) {
				continue
			}
			for mi, metric := range metrics {
				if !first {
					b.WriteByte(',')
				}
				first = false
				fmt.Fprintf(&b, `{"metric":{"Hostname":%q,"gpu":"%d","strata_metric":%q},"values":[`, node, g, metric)
				for k, t := 0, start; t <= end+1e-9; k, t = k+1, t+step {
					if k > 0 {
						b.WriteByte(',')
					}
					at := time.UnixMilli(int64(t * 1e3))
					// The maximum over the step: the agent's 10 s samples in it.
					var v float64
					for s := at.Add(-scalePromStep + scaleAgentInterval); !s.After(at); s = s.Add(scaleAgentInterval) {
						u, mem := scaleUtil(job, g, s.Truncate(scaleAgentInterval))
						switch mi {
						case 0:
							v = max(v, u)
						case 1:
							v = max(v, mem/100)
						default:
							v = 30000
						}
					}
					b.WriteByte('[')
					b.WriteString(strconv.FormatFloat(t, 'f', 3, 64))
					b.WriteString(`,"`)
					b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
					b.WriteString(`"]`)
				}
				b.WriteString(`]}`)
			}
		}
		b.WriteString(`]}}`)
		w.Header().Set("Content-Type", "application/json")
		w.Write(b.Bytes())
	})
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scaleBaseline holds the CPU per cycle of the smaller cluster, by mode,
// for the ratio the larger one reports; scaleSteady the CPU per steady
// cycle by mode and size ("agents/8000"), for the ratio a first cycle
// after a restart reports.
var (
	scaleBaseline = map[string]float64{}
	scaleSteady   = map[string]float64{}
)

// heapPeak polls the live heap (runtime/metrics, which does not stop the
// world) every half millisecond until stop is called, and returns the
// highest value seen.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	done, finished := make(chan struct{}), make(chan struct{})
	read := func() {
		metrics.Read(sample)
		peak = max(peak, sample[0].Value.Uint64())
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(500 * time.Microsecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-done:
				read()
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); <-finished; return peak }
}

// liveHeap is the live heap after a collection.
func liveHeap() uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// BenchmarkCycleScale runs whole controller cycles (the job list from
// slurmrestd and its decode, every GPU's samples from the agents or from
// Prometheus, the decision, the states and dry-run records in SQLite) at
// 2,000 and 8,000 GPUs, with 500 and 2,000 running jobs, and reports the
// controller's cost per cycle: CPU time (cpu-ms/cycle) and memory
// allocated (MB/cycle), and for the larger cluster the ratio of its CPU
// time to the smaller's (x-cpu-vs-2000: 4 is linear). Each size has a
// first-cycle case too (benchFirstCycle): a restart's cycle, resuming
// the windows the controller before kept in the store (…/first), or
// reading every node's whole window (…/first-cold). Windows are two
// hours. The steady case reports the size of the windows kept in the
// store each cycle too (kept-store-MB/cycle). The goal is 300 ms and
// 50 MB at 8,000 GPUs for a steady cycle, and for a first cycle 3 × a
// steady cycle's CPU and 100 MB of peak heap:
//
//	go test -run '^$' -bench CycleScale -benchtime 10x ./reclaimd/internal/controller/
//
// The stand-ins of the other machines make their answers before the timed
// part: the agents sample and answer, and Prometheus answers, to a second
// collector of the same kind that asks what the controller will ask; in
// the timed part a process of its own (TestScaleStandIn) serves those
// bytes over loopback (the agents' signed for the controller's nonce). The
// figures are this process's (rusage, and the MemStats total around each
// Cycle), so they hold all of the controller's work, its HTTP client
// included, and none of the agents' or Prometheus's. The one stand-in left
// in this process is slurmrestd's, which writes a job list made once (a
// single write of a few MB a cycle).
func BenchmarkCycleScale(b *testing.B) {
	for _, mode := range []string{"agents", "prometheus"} {
		for _, gpus := range []int{2000, 8000} {
			b.Run(fmt.Sprintf("%s/gpus=%d", mode, gpus), func(b *testing.B) {
				benchSteady(b, mode, gpus, true)
			})
			b.Run(fmt.Sprintf("%s/gpus=%d/unkept", mode, gpus), func(b *testing.B) {
				benchSteady(b, mode, gpus, false)
			})
			b.Run(fmt.Sprintf("%s/gpus=%d/first", mode, gpus), func(b *testing.B) {
				benchFirstCycle(b, mode, gpus, true)
			})
			b.Run(fmt.Sprintf("%s/gpus=%d/first-cold", mode, gpus), func(b *testing.B) {
				benchFirstCycle(b, mode, gpus, false)
			})
		}
	}
}

// benchSteady is BenchmarkCycleScale's steady case: cycles of a
// controller that has run before; keep false hides the collector's
// Resumable (…/unkept), so that the controller keeps no windows in its
// store, for what keeping them costs a cycle (x-cpu-kept-vs-unkept, when
// the case that keeps them ran before it).
func benchSteady(b *testing.B, mode string, gpus int, keep bool) {
	s := newScaleBedWith(b, gpus/8, mode, 2*time.Minute, scaleBenchWindow, scaleCycle)
	if !keep {
		s.ctl = s.controller(unkept{s.coll})
	}
	ctx := b.Context()
	// ahead asks the stand-ins what the controller's collector
	// will ask, a cycle before it does.
	var ahead controller.Collector
	if mode == "agents" {
		ahead = s.agentsCollector(false)
	} else {
		ahead = s.prometheus(false)
	}
	nodes := make([]string, s.nodes)
	for n := range s.nodes {
		nodes[n] = scaleNode(n)
	}
	// A first cycle reads the whole windows and fills the store.
	s.advance()
	if _, err := ahead.Collect(ctx, nodes); err != nil {
		b.Fatal(err)
	}
	if _, err := s.ctl.Cycle(ctx); err != nil {
		b.Fatal(err)
	}
	// Every timed cycle's answers, made now.
	times := make([]time.Time, b.N)
	s.answers.record(true)
	for i := range b.N {
		s.advance()
		times[i] = s.clock()
		if _, err := ahead.Collect(ctx, nodes); err != nil {
			b.Fatal(err)
		}
	}
	s.answers.record(false)
	url := s.serveAnswers()
	if mode == "agents" {
		s.agentsURL = url
	} else {
		s.coll.(*collect.Prometheus).URL = url
	}
	runtime.GC()
	var cpu time.Duration
	var alloc uint64
	var ms runtime.MemStats
	b.ResetTimer()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		s.mu.Lock()
		s.now = times[i]
		s.mu.Unlock()
		runtime.ReadMemStats(&ms)
		before, c0 := ms.TotalAlloc, cpuTime(b)
		b.StartTimer()
		d, err := s.ctl.Cycle(ctx)
		b.StopTimer()
		cpu += cpuTime(b) - c0
		runtime.ReadMemStats(&ms)
		alloc += ms.TotalAlloc - before
		if err != nil {
			b.Fatal(err)
		}
		if len(d.States) != gpus/4 {
			b.Fatalf("%d jobs judged, want %d", len(d.States), gpus/4)
		}
	}
	if n := standInMisses(b, url); n > 0 {
		b.Fatalf("%d requests had no answer made ahead", n)
	}
	perCycle := float64(cpu.Microseconds()) / 1e3 / float64(b.N)
	b.ReportMetric(perCycle, "cpu-ms/cycle")
	b.ReportMetric(float64(alloc)/float64(b.N)/1e6, "MB/cycle")
	key := fmt.Sprintf("%s/%d", mode, gpus)
	if !keep {
		// What keeping the windows costs a steady cycle.
		if kept := scaleSteady[key]; kept > 0 {
			b.ReportMetric(kept/perCycle, "x-cpu-kept-vs-unkept")
		}
		return
	}
	if gpus == 2000 {
		scaleBaseline[mode] = perCycle
	} else if base := scaleBaseline[mode]; base > 0 {
		b.ReportMetric(perCycle/base, "x-cpu-vs-2000")
	}
	scaleSteady[key] = perCycle
	b.ReportMetric(float64(heldBytes(s.coll.(collect.Resumable).Held(nil)))/1e6, "kept-store-MB/cycle")
}

// heldBytes is the size of the nodes' states a cycle writes to the store.
func heldBytes(held map[string][]byte) int {
	n := 0
	for node, b := range held {
		n += len(node) + len(b)
	}
	return n
}

// unkept hides a collector's Resumable: a controller over it keeps no
// windows in its store, as before restarts resumed.
type unkept struct{ controller.Collector }

// benchFirstCycle is a restart's first cycle: a controller that has just
// started, its collector holding no window. With resume (…/first), it
// starts over the store of the one before, which kept its windows there
// at the end of the cycle before (30 s earlier), so its first cycle reads
// them back and asks each source only for what is newer; without
// (…/first-cold: a first start, or windows kept under other settings or
// older than the window), it reads every node's whole window (the
// agents' two hours, or Prometheus's). It reports the CPU time and
// memory allocated per first cycle, their CPU's ratio to a steady cycle
// of the same cluster (x-cpu-vs-steady, when the steady case ran before
// it), the peak of the heap during the cycle over the live heap before it
// (peak-heap-MB: what the restart holds at its highest, the windows it
// keeps included, none of the agents' (which run in this process too);
// it counts garbage the collector has not reclaimed yet, so it is an
// upper bound), and what the controller holds once the cycle is over
// (kept-MB: the live heap after a collection, over the one before: the
// windows it keeps for the next cycles).
func benchFirstCycle(b *testing.B, mode string, gpus int, resume bool) {
	s := newScaleBedWith(b, gpus/8, mode, 2*time.Minute, scaleBenchWindow, scaleCycle)
	ctx := b.Context()
	nodes := make([]string, s.nodes)
	for n := range s.nodes {
		nodes[n] = scaleNode(n)
	}
	fresh := func() controller.Collector {
		if mode == "agents" {
			return s.agentsCollector(false)
		}
		return s.prometheus(false)
	}
	// ahead asks the stand-ins what each restart will ask: a restart
	// resumed from the windows kept a cycle before asks what a steady
	// cycle asks (the cursor, or the last step, of the cycle before).
	ahead := fresh()
	// The controller before the restart: a cycle fills the store.
	s.advance()
	if _, err := s.ctl.Cycle(ctx); err != nil {
		b.Fatal(err)
	}
	// Each restart starts over a store of its own: a copy of the one that
	// controller left (resumed: its windows kept at its cycle, a cycle
	// before the restart), or an empty one, so that no restart reads what
	// the one before it wrote (which keeps only a tenth of the nodes'
	// windows at its first save).
	kept := filepath.Join(b.TempDir(), "kept.db")
	if resume {
		if _, err := s.store.DB().ExecContext(ctx, `VACUUM INTO ?`, kept); err != nil {
			b.Fatal(err)
		}
	}
	openStore := func(i int) *store.Store {
		path := filepath.Join(b.TempDir(), fmt.Sprintf("restart-%d.db", i))
		if resume {
			data, err := os.ReadFile(kept)
			if err == nil {
				err = os.WriteFile(path, data, 0o600)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		st, err := store.Open(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		return st
	}
	if _, err := ahead.Collect(ctx, nodes); err != nil {
		b.Fatal(err)
	}
	// The answers, made now: every restart happens at one moment, a cycle
	// after the controller before's.
	s.answers.record(true)
	s.advance()
	if resume {
		if _, err := ahead.Collect(ctx, nodes); err != nil {
			b.Fatal(err)
		}
	} else if _, err := fresh().Collect(ctx, nodes); err != nil {
		b.Fatal(err)
	}
	restartAt := s.clock()
	s.answers.record(false)
	url := s.serveAnswers()
	if mode == "agents" {
		s.agentsURL = url
	} else {
		s.promURL = url
	}
	// From here the stand-in process answers. What made its answers (a
	// thousand agents and their windows, the collector that asked ahead)
	// and the controller before the restart (a process that has ended)
	// are let go, so that the heap, and the collector's goal, are the
	// restarted controller's own, as in reclaimd's process. Kept, they
	// set the goal so high that no collection came during the cycle, and
	// the peak was all the cycle allocated. (ahead is not used again, so
	// it holds nothing from here.)
	s.mu.Lock()
	s.agents, s.handlers, s.newAgent = nil, nil, nil
	s.mu.Unlock()
	s.ctl, s.coll = nil, nil
	var cpu time.Duration
	var alloc, peak, keptHeap uint64
	var ms runtime.MemStats
	b.ResetTimer()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		s.mu.Lock()
		s.now = restartAt
		s.mu.Unlock()
		st := openStore(i)
		coll := fresh()
		if !resume {
			coll = unkept{coll}
		}
		ctl, err := controller.New(controller.Config{Slurm: s.slurm, Collector: coll, Store: st,
			Rules: func() reclaimrules.Rules { return s.rules }, Now: s.clock, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		base := liveHeap()
		runtime.ReadMemStats(&ms)
		before, c0 := ms.TotalAlloc, cpuTime(b)
		stop := heapPeak()
		b.StartTimer()
		d, err := ctl.Cycle(ctx)
		b.StopTimer()
		p := stop()
		cpu += cpuTime(b) - c0
		runtime.ReadMemStats(&ms)
		alloc += ms.TotalAlloc - before
		if p > base {
			peak = max(peak, p-base)
		}
		if err != nil {
			b.Fatal(err)
		}
		if len(d.States) != gpus/4 {
			b.Fatalf("%d jobs judged, want %d", len(d.States), gpus/4)
		}
		if after := liveHeap(); after > base {
			keptHeap = max(keptHeap, after-base)
		}
		runtime.KeepAlive(ctl)
		runtime.KeepAlive(coll)
	}
	if n := standInMisses(b, url); n > 0 {
		b.Fatalf("%d requests had no answer made ahead", n)
	}
	perCycle := float64(cpu.Microseconds()) / 1e3 / float64(b.N)
	b.ReportMetric(perCycle, "cpu-ms/cycle")
	b.ReportMetric(float64(alloc)/float64(b.N)/1e6, "MB/cycle")
	b.ReportMetric(float64(peak)/1e6, "peak-heap-MB")
	b.ReportMetric(float64(keptHeap)/1e6, "kept-MB")
	if steady := scaleSteady[fmt.Sprintf("%s/%d", mode, gpus)]; steady > 0 {
		b.ReportMetric(perCycle/steady, "x-cpu-vs-steady")
	}
}

// standInEnv names the file of kept answers that TestScaleStandIn serves.
const standInEnv = "STRATA_SCALE_STANDIN"

// serveAnswers starts this test binary again as a process that serves
// the answers kept so far (TestScaleStandIn), so that the benchmark's
// rusage and MemStats hold none of the stand-ins' work, as in production
// where agents and Prometheus answer from other machines; it returns the
// process's base URL.
func (s *scaleBed) serveAnswers() string {
	tb := s.tb
	file := filepath.Join(tb.TempDir(), "answers.gob")
	var buf bytes.Buffer
	s.answers.mu.Lock()
	err := gob.NewEncoder(&buf).Encode(s.answers.kept)
	s.answers.kept = map[string][]byte{}
	s.answers.mu.Unlock()
	if err == nil {
		err = os.WriteFile(file, buf.Bytes(), 0o600)
	}
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestScaleStandIn$", "-test.v")
	cmd.Env = append(os.Environ(), standInEnv+"="+file)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stdin.Close(); cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "stand-in serving "); ok {
			go io.Copy(io.Discard, stdout)
			return u
		}
	}
	tb.Fatalf("stand-in process gave no URL: %v", sc.Err())
	return ""
}

// standInMisses asks the stand-in process how many requests it had no
// answer for.
func standInMisses(tb testing.TB, url string) int {
	resp, err := http.Get(url + "/misses")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		tb.Fatalf("stand-in misses: %q", b)
	}
	return n
}

// TestScaleStandIn is the stand-in process of BenchmarkCycleScale: it
// serves the answers of the file named in $STRATA_SCALE_STANDIN until its
// standard input closes. Without it, it skips.
func TestScaleStandIn(t *testing.T) {
	file := os.Getenv(standInEnv)
	if file == "" {
		t.Skip("the scale benchmark's stand-in process, started by BenchmarkCycleScale")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	a := &answers{}
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&a.kept); err != nil {
		t.Fatal(err)
	}
	secret, _ := agentSecret()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/misses" {
			fmt.Fprintln(w, a.misses())
			return
		}
		if !a.serveKept(w, r, secret) {
			http.Error(w, "no answer kept for this request", http.StatusNotFound)
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Printf("stand-in serving http://%s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
}

// setDown makes node n's agent answer 503, or answer again.
func (s *scaleBed) setDown(n int, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down[n] = down
}
