package collect

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-hpc/strata/internal/dcgmprom"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// The defaults of the Prometheus fields: dcgm-exporter's metric and label
// names.
const (
	defaultPromWindow      = time.Hour // the longest rule window
	defaultPromStep        = 30 * time.Second
	defaultPromNodeLabel   = dcgmprom.NodeLabel
	defaultPromGPULabel    = dcgmprom.GPULabel
	defaultPromUtil        = dcgmprom.UtilMetric
	defaultPromMemActivity = dcgmprom.MemActivityMetric
	defaultPromFBUsed      = dcgmprom.FBUsedMetric
	defaultPromJobLabel    = dcgmprom.JobLabel
	defaultPromMaxBytes    = dcgmprom.DefaultMaxBytes
	// memCopyUtil is dcgm-exporter's other memory-activity metric, a
	// percentage (DRAM_ACTIVE is a ratio); the one a site without the
	// profiling metrics (DCP) uses.
	memCopyUtil = dcgmprom.MemCopyUtilMetric
	// migUtil is what a MIG device's utilisation is read from:
	// dcgm-exporter has no DCGM_FI_DEV_GPU_UTIL of a GPU instance, and
	// reports its graphics engines' activity (a 0–1 ratio) instead.
	migUtil = dcgmprom.MIGUtilMetric
	// migLabel holds a series' GPU instance id (a MIG device's);
	// migProfileLabel its profile ("1g.10gb").
	migLabel        = dcgmprom.GPUInstanceLabel
	migProfileLabel = dcgmprom.GPUInstanceProfileLabel
	// metricLabel names each answer series' metric (see Prometheus.Query).
	metricLabel = "strata_metric"
)

// Prometheus reads the GPU samples from a Prometheus that scrapes
// dcgm-exporter on the GPU nodes, with one range query per cycle for all
// the nodes asked for (see [Prometheus.Query]). Steps fall on multiples of
// Step in Unix time, so that every cycle's steps are the same instants:
// a node's first read asks for the whole Window, and each later one only
// for the steps since (the last step read again, for scrapes that landed
// late), the rest kept from before, older than Window dropped. A node
// not asked for in a cycle is forgotten, and read whole when it is
// asked for again.
//
// Each sample at time t is the maximum of each metric over the Step before
// t (max_over_time), not the last value Prometheus holds at t: decide reads
// a sample as standing for the interval before it and judges the maximum,
// so a burst between two steps must count, and a gap in the scrapes must
// stay a gap (a plain selector would fill up to five minutes of it with
// the last value, which may read as idle). Step must therefore be at least
// dcgm-exporter's scrape interval, or GPUs show gaps and read as stale.
//
// Prometheus is safe for concurrent use once its fields are set; Collects
// take turns, each building on the last.
type Prometheus struct {
	// URL is Prometheus's base URL, e.g. "http://prometheus:9090" (a path
	// prefix such as "/prometheus" is kept).
	URL string
	// Client makes the request; one with a 30s timeout when nil.
	Client *http.Client
	// Window is how far back each query reaches (default 1h, the longest
	// rule window).
	Window time.Duration
	// Step is the query resolution and so the sample interval reported to
	// decide (default 30s); at least the scrape interval.
	Step time.Duration
	// NodeLabel is the label that names the Slurm node (default
	// "Hostname", dcgm-exporter's own). With "instance", a ":port" suffix
	// is allowed in the query and stripped from the answer.
	NodeLabel string
	// GPULabel is the label that holds the GPU index as Slurm numbers it
	// (default "gpu").
	GPULabel string
	// UtilMetric is the GPU utilisation in percent (default
	// DCGM_FI_DEV_GPU_UTIL).
	UtilMetric string
	// MemActivityMetric is the memory activity (default
	// DCGM_FI_PROF_DRAM_ACTIVE, a 0–1 ratio); DCGM_FI_DEV_MEM_COPY_UTIL
	// (a percentage) where the profiling metrics are not collected.
	MemActivityMetric string
	// MemActivityScale turns MemActivityMetric into percent; when 0, 1
	// for DCGM_FI_DEV_MEM_COPY_UTIL and 100 for anything else (a ratio).
	MemActivityScale float64
	// FBUsedMetric is the frame buffer in use, in MiB (default
	// DCGM_FI_DEV_FB_USED). It is evidence only: where it is missing a
	// sample records 0.
	FBUsedMetric string
	// JobLabel is the label by which dcgm-exporter's HPC job mapping
	// names the Slurm job on a GPU (default "hpc_job"; a site whose
	// exporter has no job mapping has no such label, and nothing
	// changes). Where a GPU's newest samples carry it, it is the source's
	// job↔GPU map, checked against Slurm's placement as the agents'
	// map is (Result.Holders); "-" reads no label.
	JobLabel string
	// MaxResponseBytes bounds each answer read (default 64 MiB). A range
	// whose answer is larger is asked again in halves, down to one step;
	// only the first read of a node's window is ever that large.
	MaxResponseBytes int64
	// PieceBytes is about how large each answer of a whole window's read
	// is made (default 8 MiB): the window is asked for in pieces of
	// steps, each taken into the windows before the next.
	PieceBytes int64
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Whole asks for every node's whole Window each cycle, as before the
	// collector kept windows (for comparison and debugging).
	Whole bool

	state *promState // made by the first Collect
}

// promState is what Prometheus keeps between cycles.
type promState struct {
	// collecting makes Collects take turns: each builds on the last.
	collecting sync.Mutex
	mu         sync.Mutex
	held       map[string]*promNode // by node

	// Kept from answer to answer, under collecting: the buffer the
	// answers are read into (nothing decoded from one refers to it),
	// and the sizes of the last, to size the next one's arrays.
	body  []byte
	sizes promSizes
	// heldBuf is Held's, kept from call to call (under collecting).
	heldBuf []byte
}

// promStates guards the making of each Prometheus's state, so that a
// Prometheus stays a plain struct that callers may copy before its first
// Collect.
var promStates sync.Mutex

func (p *Prometheus) held() *promState {
	promStates.Lock()
	defer promStates.Unlock()
	if p.state == nil {
		p.state = &promState{}
	}
	return p.state
}

// A whole window's read asks for pieces of steps whose answers are about
// PieceBytes (default wholePieceBytes): the first sized by a guess of
// pointBytes a point, each next by the last answer.
const (
	wholePieceBytes = 8 << 20
	pointBytes      = 32 // `[1795896390,"97"],` and the series' labels
)

// promNode is what Prometheus keeps of one node between cycles: the
// samples of its GPUs, and the last step they reach.
type promNode struct {
	last int64 // Unix ms of the newest step read; 0: none
	// gpus holds each GPU's window reduced to what the decision reads of
	// it (decide.Window): a whole window costs a few bytes a step.
	gpus map[int]*decide.Window
	// holders are the jobs dcgm-exporter's job labels put on each GPU
	// at its newest step, from the last answer; nil: no label.
	holders map[int][]int64
	seen    *nodeSeen // what the node's last answer held, for Failed
	// layout is the node's MIG layout in its last answer (see migSlots;
	// "" without MIG): where it changes, the GPU keys name other devices,
	// and the node starts over.
	layout string
}

// APIError is an answer from Prometheus that is not a result: an HTTP
// error, a "status":"error" answer, or a body that is not Prometheus's
// JSON (the product's one Prometheus client, internal/dcgmprom).
type APIError = dcgmprom.APIError

// promConfig is a Prometheus with the defaults filled in.
type promConfig struct {
	window, step         time.Duration
	nodeLabel, gpuLabel  string
	jobLabel             string // "": none read
	util, mem, fb        string
	memScale             float64
	maxBytes, pieceBytes int64
	stripPort            bool // the node label is "instance": host:port
	client               *http.Client
	now                  func() time.Time
}

func (p *Prometheus) config() promConfig {
	c := promConfig{
		window: p.Window, step: p.Step, nodeLabel: p.NodeLabel, gpuLabel: p.GPULabel, jobLabel: p.JobLabel,
		util: p.UtilMetric, mem: p.MemActivityMetric, fb: p.FBUsedMetric,
		memScale: p.MemActivityScale, maxBytes: p.MaxResponseBytes, pieceBytes: p.PieceBytes, client: p.Client, now: p.Now,
	}
	if c.window <= 0 {
		c.window = defaultPromWindow
	}
	if c.step <= 0 {
		c.step = defaultPromStep
	}
	c.step = max(c.step, time.Millisecond) // Prometheus's resolution
	c.nodeLabel = cmpOr(c.nodeLabel, defaultPromNodeLabel)
	c.gpuLabel = cmpOr(c.gpuLabel, defaultPromGPULabel)
	c.jobLabel = cmpOr(c.jobLabel, defaultPromJobLabel)
	if c.jobLabel == "-" {
		c.jobLabel = ""
	}
	c.util = cmpOr(c.util, defaultPromUtil)
	c.mem = cmpOr(c.mem, defaultPromMemActivity)
	c.fb = cmpOr(c.fb, defaultPromFBUsed)
	if c.memScale == 0 {
		c.memScale = 100
		if c.mem == memCopyUtil {
			c.memScale = 1
		}
	}
	if c.pieceBytes <= 0 {
		c.pieceBytes = wholePieceBytes
	}
	if c.maxBytes <= 0 {
		c.maxBytes = defaultPromMaxBytes
	}
	if c.client == nil {
		c.client = &http.Client{Timeout: 30 * time.Second}
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.stripPort = c.nodeLabel == "instance"
	return c
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Query is the PromQL range query Collect sends for these nodes: paste it
// into Prometheus's graph page to see what reclaimd sees. For the defaults
// and nodes gpu1 and gpu2 (one line, wrapped here):
//
//	label_replace(max_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu1|gpu2"}[30s]),
//	  "strata_metric", "DCGM_FI_DEV_GPU_UTIL", "", "")
//	or label_replace(max_over_time(DCGM_FI_PROF_DRAM_ACTIVE{Hostname=~"gpu1|gpu2"}[30s]),
//	  "strata_metric", "DCGM_FI_PROF_DRAM_ACTIVE", "", "")
//	or label_replace(max_over_time(DCGM_FI_DEV_FB_USED{Hostname=~"gpu1|gpu2"}[30s]),
//	  "strata_metric", "DCGM_FI_DEV_FB_USED", "", "")
//
// max_over_time drops the metric name, so label_replace names each series'
// metric in a label of its own, strata_metric. (Not __name__ again: "or"
// matches series on their labels without the name, so it would keep only
// the first metric of each GPU.)
func (p *Prometheus) Query(nodes []string) string {
	return p.config().query(normNodes(nodes))
}

func (c promConfig) query(nodes []string) string {
	quoted := make([]string, len(nodes))
	for i, n := range nodes {
		quoted[i] = regexp.QuoteMeta(n)
	}
	re := strings.Join(quoted, "|")
	if c.stripPort {
		re = "(?:" + re + ")(?::[0-9]+)?"
	}
	matcher := c.nodeLabel + "=~" + strconv.Quote(re)
	rng := promDuration(c.step)
	parts := make([]string, 0, 4)
	for _, m := range []string{c.util, c.mem, c.fb} {
		parts = append(parts, fmt.Sprintf(`label_replace(max_over_time(%s{%s}[%s]), %q, %s, "", "")`,
			m, matcher, rng, metricLabel, strconv.Quote(m)))
	}
	// MIG devices' utilisation: only series of a GPU instance, so a site
	// without MIG gets nothing more.
	parts = append(parts, fmt.Sprintf(`label_replace(max_over_time(%s{%s,%s!=""}[%s]), %q, %s, "", "")`,
		migUtil, matcher, migLabel, rng, metricLabel, strconv.Quote(migUtil)))
	return strings.Join(parts, " or ")
}

// promDuration writes d as a PromQL duration: whole seconds where it can,
// else milliseconds (older Prometheus does not parse "1m30s").
func promDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// normNodes sorts the nodes and drops duplicates and empty names, so the
// query is the same whatever order the controller gives them in.
func normNodes(nodes []string) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Collect queries Prometheus for the samples of the GPUs on the given
// nodes over the last Window: the steps since the last cycle for nodes
// read before, the whole Window for the others. A node without a single
// series, or without the utilisation or memory-activity metric, is in
// Failed with what to check; a time at which a GPU has no utilisation or
// no memory activity is left out, so it reads as a gap (stale), never as
// idle. Collect returns an error when a query fails or no node has
// samples.
func (p *Prometheus) Collect(ctx context.Context, nodes []string) (Result, error) {
	res := Result{Windows: map[decide.GPUKey]*decide.Window{}, Failed: map[string]string{}}
	nodes = normNodes(nodes)
	if len(nodes) == 0 {
		return res, nil
	}
	c := p.config()
	res.Interval = c.step
	if p.URL == "" {
		return res, errors.New("prometheus: no URL set: give Prometheus's base URL, e.g. http://prometheus:9090")
	}
	stepMs := c.step.Milliseconds()
	end := c.now().UnixMilli() / stepMs * stepMs
	// The first step of a whole window: samples before it are dropped.
	first := end - c.window.Milliseconds() + stepMs - 1
	first -= first % stepMs

	st := p.held()
	st.collecting.Lock()
	defer st.collecting.Unlock()
	st.mu.Lock()
	if st.held == nil || p.Whole {
		st.held = map[string]*promNode{}
	}
	kept := make(map[string]*promNode, len(nodes))
	groups := map[int64][]string{} // by the first step to ask for
	for _, n := range nodes {
		h := st.held[n]
		if h == nil || h.last < first {
			h = &promNode{gpus: map[int]*decide.Window{}}
		}
		kept[n] = h
		from := first
		if h.last > 0 {
			from = h.last // read again: scrapes may land after a step's time
		}
		groups[from] = append(groups[from], n)
	}
	st.held = kept
	st.mu.Unlock()

	for _, from := range slices.Sorted(maps.Keys(groups)) {
		group := groups[from]
		// A whole window is read in pieces of steps, oldest first, each
		// merged into the windows before the next is asked for: what a
		// first read holds at once is one piece's answer, not the
		// window's.
		steps := (end-from)/stepMs + 1
		if from == first {
			// Until an answer says better: 8 GPUs a node, 3 metrics.
			steps = max(1, min(steps, c.pieceBytes/(int64(len(group))*8*3*pointBytes)))
		}
		for at := from; at <= end; {
			to := min(end, at+(steps-1)*stepMs)
			series, err := p.queryRange(ctx, c, st, group, at, to)
			if err != nil {
				return res, err
			}
			if n := (to-at)/stepMs + 1; len(st.body) > 0 {
				// The next pieces sized by this one's answer.
				steps = max(1, c.pieceBytes*n/int64(len(st.body)))
			}
			samples, seen, holders, layouts := c.join(series, group)
			for _, n := range group {
				h := kept[n]
				if layouts[n] != h.layout {
					h.gpus, h.layout = map[int]*decide.Window{}, layouts[n]
				}
				h.merge(samples[n], at, first, c.step)
				if seen[n] != nil || at == from {
					h.seen = seen[n]
				}
				// The labels of each GPU's newest step are the map.
				if at == from {
					h.holders = holders[n]
				} else {
					for idx, jobs := range holders[n] {
						if h.holders == nil {
							h.holders = map[int][]int64{}
						}
						h.holders[idx] = jobs
					}
				}
			}
			at = to + stepMs
		}
		for _, n := range group {
			kept[n].last = end // every read reaches the newest step
		}
	}
	c.collected(nodes, kept, &res)
	if len(res.Failed) == len(nodes) {
		return res, fmt.Errorf("prometheus: no samples for any of the %d nodes (e.g. %s)", len(nodes), firstFailure(res.Failed))
	}
	return res, nil
}

// collected gives res the samples held of each node, or why it has none.
func (c promConfig) collected(nodes []string, held map[string]*promNode, res *Result) {
	for _, n := range nodes {
		h := held[n]
		if len(h.gpus) == 0 {
			res.Failed[n] = c.whyNoSamples(n, h.seen)
			continue
		}
		for idx, w := range h.gpus {
			res.Windows[decide.GPUKey{Node: n, Index: idx}] = w
			if at := w.Newest(); at.After(res.Newest) {
				res.Newest = at
			}
		}
		for idx, jobs := range h.holders {
			if res.Holders == nil {
				res.Holders = map[decide.GPUKey][]int64{}
				res.MapFrom = MapFromDCGM
			}
			res.Holders[decide.GPUKey{Node: n, Index: idx}] = jobs
		}
	}
}

// merge puts a node's answer for the steps from..end in place of what it
// held for them, and drops the samples before first. The steps read again
// are the newest (from is the last step read), in each window's tail; a
// window that cannot drop them (more than decide.WindowTail steps read
// again) starts over from the answer, short of samples (stale) until it
// fills again, never judged on samples it should have dropped.
func (h *promNode) merge(answer map[int][]decide.Sample, from, first int64, step time.Duration) {
	for idx, w := range h.gpus {
		w.DropBefore(time.UnixMilli(first))
		if !w.DropFrom(time.UnixMilli(from)) {
			h.gpus[idx] = &decide.Window{}
		}
	}
	for idx, ss := range answer {
		w := h.gpus[idx]
		if w == nil {
			w = &decide.Window{}
			h.gpus[idx] = w
		}
		w.SetInterval(step)
		w.Grow(len(ss))
		w.Add(ss...)
	}
	for idx, w := range h.gpus {
		if w.Len() == 0 {
			delete(h.gpus, idx)
		}
	}
}

// queryRange asks for the steps from..end (Unix ms) of the nodes, in
// halves of the range where an answer is larger than the limit.
func (p *Prometheus) queryRange(ctx context.Context, c promConfig, st *promState, nodes []string, from, end int64) ([]promSeries, error) {
	query := c.query(nodes)
	body, err := c.fetch(ctx, p.URL, query, time.UnixMilli(from), time.UnixMilli(end), st.body)
	st.body = body
	var big *tooLarge
	if errors.As(err, &big) {
		stepMs := c.step.Milliseconds()
		if steps := (end - from) / stepMs; steps >= 1 {
			mid := from + (steps+1)/2*stepMs
			a, err := p.queryRange(ctx, c, st, nodes, from, mid-stepMs)
			if err != nil {
				return nil, err
			}
			b, err := p.queryRange(ctx, c, st, nodes, mid, end)
			if err != nil {
				return nil, err
			}
			return append(a, b...), nil
		}
		return nil, big.err
	}
	if err != nil {
		return nil, err
	}
	series, err := parseQueryRangeSized(body, &st.sizes)
	if err != nil {
		apiErr := &APIError{Message: err.Error()}
		errors.As(err, &apiErr) // a "status":"error" answer
		apiErr.Query, apiErr.HTTPStatus = query, http.StatusOK
		return nil, apiErr
	}
	return series, nil
}

// tooLarge is an answer over the size limit: asked again in halves.
type tooLarge struct{ err *APIError }

func (t *tooLarge) Error() string { return t.err.Error() }

// fetch POSTs the query through the product's one Prometheus client
// (internal/dcgmprom) and returns the body of a 200 answer, read into buf.
func (c promConfig) fetch(ctx context.Context, base, query string, start, end time.Time, buf []byte) ([]byte, error) {
	form := url.Values{
		"query": {query},
		"start": {promTime(start)},
		"end":   {promTime(end)},
		"step":  {strconv.FormatFloat(c.step.Seconds(), 'f', -1, 64)},
	}
	cl := dcgmprom.Client{URL: base, HTTP: c.client, MaxBytes: c.maxBytes}
	body, err := cl.Fetch(ctx, "query_range", form, buf)
	var big *dcgmprom.TooLargeError
	if errors.As(err, &big) {
		big.Message = fmt.Sprintf("the answer for one step is larger than %d bytes: raise prometheus.max_response_mib, or ask for fewer nodes", c.maxBytes)
		return nil, &tooLarge{big.APIError}
	}
	return body, err
}

// promTime writes t as Prometheus's API takes it: Unix seconds, to the
// millisecond.
func promTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1e3, 'f', 3, 64)
}

func snippet(b []byte) string { return dcgmprom.Snippet(b) }

// promSeries is one series of a matrix result.
type promSeries struct {
	Metric promLabels `json:"metric"`
	Values promValues `json:"values"`
}

// promPoint is one [unix_seconds, "value"] pair.
type promPoint struct {
	ms int64 // Unix milliseconds
	v  float64
}

// promValues is a series' values: [[1795900000.25,"42"],...].
type promValues []promPoint

// parseQueryRange reads a successful /api/v1/query_range answer: the
// series of its matrix. It is a pure function of the body, so it is
// fuzzed.
func parseQueryRange(body []byte) ([]promSeries, error) {
	return parseQueryRangeSized(body, nil)
}

// parseQueryRangeSized is parseQueryRange with its arrays sized by the
// last answer's sizes, which it updates.
func parseQueryRangeSized(body []byte, sizes *promSizes) ([]promSeries, error) {
	ans, err := decodePromAnswer(body, sizes)
	if err != nil {
		if !json.Valid(body) {
			var v any
			if err := json.Unmarshal(body, &v); err != nil { // for encoding/json's word on it
				return nil, fmt.Errorf("answer is not Prometheus API JSON: %w (body %s)", err, snippet(body))
			}
		}
		return nil, fmt.Errorf("unreadable answer: %w", err)
	}
	switch ans.status {
	case "success":
	case "error":
		return nil, &APIError{Type: ans.errorType, Message: ans.error}
	default:
		return nil, fmt.Errorf("answer has status %q, want \"success\" (body %s)", ans.status, snippet(body))
	}
	if ans.resultType != "matrix" {
		return nil, fmt.Errorf("answer's resultType is %q, want \"matrix\": is the URL a Prometheus API?", ans.resultType)
	}
	return ans.result, nil
}

// promAcc gathers one GPU's three metrics at one time.
type promAcc struct {
	util, mem, fb          float64
	hasUtil, hasMem, hasFB bool
}

// merge keeps the larger value where a GPU has two series of one metric
// (labels that changed in the window, two exporters): the maximum is
// what decide judges, so taking it never makes a GPU look idler. NaN wins,
// so decide reads the GPU as stale.
func merge(v *float64, has *bool, x float64) {
	if !*has || math.IsNaN(x) || x > *v {
		*v = x
	}
	*has = true
}

// nodeSeen is what the answer held for one node, for the Failed reason.
type nodeSeen struct {
	util, mem, fb bool
	badGPU        string // a gpu label value that is not an index
}

// join groups the series by node and GPU and joins the three metrics by
// timestamp into samples; it returns them by node and GPU index, with
// what the answer held of each node, and the jobs dcgm-exporter's job
// mapping labels put on each GPU at its newest step (by node and GPU;
// only GPUs with a label).
//
// The job mapping copies each series of a GPU once per job listed for it
// (the copies differ only in the job label), so a GPU's values are the
// same in each copy, and a series of a job that ended stops before the
// GPU's newest step: the jobs of the series that reach it hold the GPU
// now. A label that is not a Slurm job id says nothing.
//
// A GPU in MIG mode (series with a GPU_I_ID label) is judged per MIG
// device: each GPU instance's series (its graphics engines' activity as
// utilisation, its DRAM activity and memory used) are its samples, under
// Slurm's index of the MIG device (migSlotsOf: the node's GPUs in order,
// each MIG GPU replaced by its instances in the order of their ids); the
// whole GPU's series are not judged. The job labels of a MIG device are
// its GPU's (the exporter maps jobs to GPU indices), so they say nothing
// of which instance a job holds and are not read. It also returns each
// node's MIG layout ("" without MIG).
func (c promConfig) join(series []promSeries, nodes []string) (map[string]map[int][]decide.Sample, map[string]*nodeSeen, map[string]map[int][]int64, map[string]string) {
	want := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		want[n] = true
	}
	seen := map[string]*nodeSeen{}
	// The series of each GPU, in the answer's order, as lists threaded
	// through next: no map or slice of its own per GPU.
	type gpuSeries struct {
		key         decide.GPUKey // by Slurm's index, once migSlots is known
		slot        promSlot
		first, last int32
		newest      int64 // Unix ms of the newest point of its series
		labelled    bool  // a series of it has a job label
	}
	groups := make([]gpuSeries, 0, len(series)/3+1)
	byKey := make(map[promSlot]int32, len(series)/3+1)
	var migGPUs map[string]map[int][]int // by node and GPU: the GPU instances seen
	next := make([]int32, len(series))
	which := make([]uint8, len(series))
	points := 0
	for i, s := range series {
		next[i] = -1
		node := s.Metric.get(c.nodeLabel)
		if c.stripPort {
			if h, _, err := net.SplitHostPort(node); err == nil {
				node = h
			}
		}
		if !want[node] {
			continue
		}
		ns := seen[node]
		if ns == nil {
			ns = &nodeSeen{}
			seen[node] = ns
		}
		idx, err := strconv.Atoi(s.Metric.get(c.gpuLabel))
		if err != nil || idx < 0 {
			ns.badGPU = s.Metric.get(c.gpuLabel)
			continue
		}
		gi := -1
		if v := s.Metric.get(migLabel); v != "" {
			if gi, err = strconv.Atoi(v); err != nil || gi < 0 {
				continue // no GPU instance it can be judged as
			}
		}
		switch s.Metric.get(metricLabel) {
		case c.util:
			which[i], ns.util = 0, true
		case c.mem:
			which[i], ns.mem = 1, true
		case c.fb:
			which[i], ns.fb = 2, true
		case migUtil:
			which[i] = 3
		default:
			continue
		}
		if gi >= 0 {
			if migGPUs == nil {
				migGPUs = map[string]map[int][]int{}
			}
			if migGPUs[node] == nil {
				migGPUs[node] = map[int][]int{}
			}
			if !slices.Contains(migGPUs[node][idx], gi) {
				migGPUs[node][idx] = append(migGPUs[node][idx], gi)
			}
		}
		slot := promSlot{node: node, gpu: idx, gi: gi}
		g, ok := byKey[slot]
		if !ok {
			g = int32(len(groups))
			byKey[slot] = g
			groups = append(groups, gpuSeries{key: decide.GPUKey{Node: node, Index: idx}, slot: slot, first: int32(i), last: int32(i)})
		} else {
			next[groups[g].last] = int32(i)
			groups[g].last = int32(i)
		}
		if n := len(s.Values); n > 0 {
			groups[g].newest = max(groups[g].newest, s.Values[n-1].ms)
		}
		if c.jobLabel != "" && gi < 0 && s.Metric.get(c.jobLabel) != "" {
			groups[g].labelled = true
		}
		points += len(s.Values)
	}
	// On a node with MIG GPUs, every GPU and MIG device is judged under
	// Slurm's index of it; a MIG GPU's own series are not judged.
	layouts := map[string]string{}
	for node, mig := range migGPUs {
		var idx []int
		for _, g := range groups {
			if g.slot.node == node {
				idx = append(idx, g.slot.gpu)
			}
		}
		for _, gis := range mig {
			slices.Sort(gis)
		}
		var slots map[migSlot]int
		slots, layouts[node] = migSlotsOf(idx, mig)
		for k := range groups {
			g := &groups[k]
			if g.slot.node != node {
				continue
			}
			n, ok := slots[migSlot{g.slot.gpu, g.slot.gi}]
			if !ok {
				g.key.Index = -1 // a MIG GPU as a whole: not judged
				continue
			}
			g.key.Index = n
		}
	}
	var holders map[string]map[int][]int64
	for _, g := range groups {
		if !g.labelled || g.key.Index < 0 {
			continue
		}
		var jobs []int64
		for i := g.first; i >= 0; i = next[i] {
			s := series[i]
			if n := len(s.Values); n == 0 || s.Values[n-1].ms != g.newest {
				continue // a job that has left the GPU
			}
			if id, err := strconv.ParseInt(s.Metric.get(c.jobLabel), 10, 64); err == nil && id > 0 {
				jobs = append(jobs, id)
			}
		}
		slices.Sort(jobs)
		jobs = slices.Compact(jobs)
		if holders == nil {
			holders = map[string]map[int][]int64{}
		}
		if holders[g.key.Node] == nil {
			holders[g.key.Node] = map[int][]int64{}
		}
		holders[g.key.Node][g.key.Index] = jobs
	}
	out := map[string]map[int][]decide.Sample{}
	// Every GPU's samples are carved from one array; the accumulators of
	// one GPU are reused from GPU to GPU.
	arena := make([]decide.Sample, 0, points/2+1)
	var accs []promAt
	for _, g := range groups {
		if g.key.Index < 0 {
			continue
		}
		mig := g.slot.gi >= 0
		accs = accs[:0]
		for i := g.first; i >= 0; i = next[i] {
			for _, pt := range series[i].Values {
				accs = append(accs, promAt{ms: pt.ms, which: which[i], v: pt.v})
			}
		}
		// Stable: a GPU's values at one time are merged in the answer's
		// order, as they were read.
		slices.SortStableFunc(accs, func(a, b promAt) int { return cmp.Compare(a.ms, b.ms) })
		start := len(arena)
		for k := 0; k < len(accs); {
			ms := accs[k].ms
			var a promAcc
			for ; k < len(accs) && accs[k].ms == ms; k++ {
				switch v := accs[k].v; accs[k].which {
				case 0:
					if !mig {
						merge(&a.util, &a.hasUtil, v)
					}
				case 3:
					if mig {
						merge(&a.util, &a.hasUtil, v*100)
					}
				case 1:
					merge(&a.mem, &a.hasMem, v*c.memScale)
				case 2:
					merge(&a.fb, &a.hasFB, v)
				}
			}
			if !a.hasUtil || !a.hasMem {
				continue // a gap: stale, never idle
			}
			fb := a.fb
			if !a.hasFB || math.IsNaN(fb) || math.IsInf(fb, 0) {
				fb = 0 // evidence only; a NaN here would spoil the action's record
			}
			arena = append(arena, decide.Sample{At: time.UnixMilli(ms), UtilPercent: finiteOrNaN(a.util),
				MemActivityPercent: finiteOrNaN(a.mem), MemUsedMiB: fb})
		}
		if len(arena) == start {
			continue
		}
		if out[g.key.Node] == nil {
			out[g.key.Node] = map[int][]decide.Sample{}
		}
		out[g.key.Node][g.key.Index] = arena[start:len(arena):len(arena)]
	}
	return out, seen, holders, layouts
}

// promSlot is one GPU (gi -1) or MIG device of a node, as the answer
// names it.
type promSlot struct {
	node    string
	gpu, gi int
}

// promAt is one value of one of a GPU's metrics at one time.
type promAt struct {
	ms    int64
	which uint8 // 0 utilisation, 1 memory activity, 2 memory used, 3 a MIG device's utilisation
	v     float64
}

// finiteOrNaN reads ±Inf as NaN: a value DCGM could not have measured,
// which decide reads as stale.
func finiteOrNaN(v float64) float64 {
	if math.IsInf(v, 0) {
		return math.NaN()
	}
	return v
}

// whyNoSamples says why a node has no samples, and what to check.
func (c promConfig) whyNoSamples(node string, ns *nodeSeen) string {
	switch {
	case ns == nil:
		return fmt.Sprintf("Prometheus has no DCGM series for node %s in the last %s: is dcgm-exporter running there, "+
			"and is its %s label the Slurm node name?", node, c.window, c.nodeLabel)
	case !ns.util && !ns.mem && !ns.fb && ns.badGPU != "":
		return fmt.Sprintf("Prometheus's DCGM series for node %s have %s=%q, not a GPU index: set the GPU label",
			node, c.gpuLabel, ns.badGPU)
	case !ns.util:
		return fmt.Sprintf("Prometheus has no %s series for node %s: is the field in dcgm-exporter's counters file?",
			c.util, node)
	case !ns.mem && c.mem != memCopyUtil:
		return fmt.Sprintf("Prometheus has no %s series for node %s: enable it in dcgm-exporter's counters file, "+
			"or use %s (needs no profiling metrics)", c.mem, node, memCopyUtil)
	case !ns.mem:
		return fmt.Sprintf("Prometheus has no %s series for node %s: is the field in dcgm-exporter's counters file?",
			c.mem, node)
	default:
		return fmt.Sprintf("Prometheus has %s and %s for node %s, but never at the same time", c.util, c.mem, node)
	}
}
