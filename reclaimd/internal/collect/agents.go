// Package collect gives the reclaimd controller the GPU samples of the
// GPUs its jobs hold: from the node agents over HTTP (GET /v1/snapshot,
// one request per node per cycle, for what the agent sampled since the
// last), or from Prometheus where sites run dcgm-exporter (one range
// query per cycle, for the steps since the last). A value that was not measured
// is dropped, never read as 0: a GPU with too few samples is not idle.
package collect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/strata-hpc/strata/internal/dcgmprom"
	"github.com/strata-hpc/strata/reclaimd/internal/agent"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
	"github.com/strata-hpc/strata/reclaimd/internal/source"
)

// Agents reads the node agents. It keeps each node's windows between
// cycles and asks each agent only for the samples taken since its last
// answer (GET /v1/snapshot?after=CURSOR, snapshot version 2): a few
// samples per GPU instead of the whole window, whose decode cost the
// controller seconds and gigabytes a cycle at a thousand nodes. It drops
// what it holds as the agent does (older than the agent's window, the
// oldest beyond its max_samples), so the samples it gives are the ones a
// whole-window read would. An agent that cannot answer the cursor (it
// restarted, a GPU was replaced) sends its whole window and Agents starts
// the node over; an agent older than version 2 always sends the whole
// window, and is read as before, at the old cost; an agent of a newer
// version than this controller knows is refused (the node counts as
// failed, its jobs stale).
type Agents struct {
	// URL gives an agent's base URL from the node name; URLTemplate
	// "http://{node}:9810" when nil.
	URL         func(node string) string
	URLTemplate string
	Client      *http.Client
	// Parallel bounds the requests in flight (default 32).
	Parallel int
	// Secret gives the secret shared with the agents (agents.token_file,
	// a secretfile.File's Get): a snapshot not signed with it for this
	// request is refused (agent/auth.go). nil refuses every snapshot.
	Secret func() ([]byte, error)
	// Whole asks for every agent's whole window each cycle, as
	// controllers did before cursors (for comparison and debugging).
	Whole bool

	// collecting makes Collects take turns: each builds on the last.
	collecting sync.Mutex
	mu         sync.Mutex
	held       map[string]*heldNode // by node
	gpus       int                  // the GPUs of the last Collect, to size the next one's maps
	heldBuf    []byte               // Held's, kept from call to call
}

// heldNode is what Agents keeps of one node between cycles.
type heldNode struct {
	cursor string // the agent's cursor of its last answer; "" for none
	// gpus holds each GPU's window reduced to what the decision reads of
	// it (decide.Window): a restart's first read keeps a few bytes a
	// sample, not the samples.
	gpus map[int]*decide.Window
	// holders are the jobs of the processes on each GPU in its newest
	// sample (agent.Point.JobIDs), kept like gpus: an answer with no new
	// sample for a GPU leaves its holders as they were.
	holders map[int][]int64
	// unattributed counts, per GPU, the processes of its newest sample
	// that the agent could tie to no job (kept like holders).
	unattributed map[int]int
	// On a node with a GPU in MIG mode, the maps above are keyed by
	// Slurm's index of each GPU and MIG device (migSlots), not NVML's
	// index of the GPU: mig holds each MIG GPU's GPU instances as its
	// newest sample listed them, layout the order they make.
	mig    map[int][]int
	layout string
	// taken and keeps are the time of the agent's last answer and the
	// window it keeps: a state kept across a restart (Resume) older than
	// the window is not resumed.
	taken time.Time
	keeps time.Duration
}

// migSlot is a GPU (gi -1) or one MIG device of a GPU, by its GPU instance.
type migSlot struct{ gpu, gi int }

// migSlots numbers the GPUs and MIG devices of a node as Slurm numbers
// its GPU gres when some of them are MIG devices: the GPUs by NVML
// index, a GPU in MIG mode replaced by its MIG devices in the order of
// their GPU instance ids. nil when no GPU is in MIG mode: then each GPU
// keeps its NVML index, as Slurm's index. It also returns the layout's
// signature, to see it change.
func migSlots(gpus []gpuWindow, mig map[int][]int) (map[migSlot]int, string) {
	idx := make([]int, 0, len(gpus))
	for _, g := range gpus {
		idx = append(idx, g.Index)
	}
	return migSlotsOf(idx, mig)
}

// migSlotsOf is migSlots over the GPUs' NVML indices, and the GPU
// instance ids (sorted) of those in MIG mode; it is the one numbering of
// both sources.
func migSlotsOf(idx []int, mig map[int][]int) (map[migSlot]int, string) {
	if len(mig) == 0 {
		return nil, ""
	}
	idx = slices.Clone(idx)
	slices.Sort(idx)
	idx = slices.Compact(idx)
	slots := make(map[migSlot]int, len(idx))
	var sig strings.Builder
	n := 0
	for _, i := range idx {
		gis, ok := mig[i]
		if !ok {
			slots[migSlot{i, -1}] = n
			n++
			fmt.Fprintf(&sig, "%d;", i)
			continue
		}
		for _, gi := range gis {
			slots[migSlot{i, gi}] = n
			n++
		}
		fmt.Fprintf(&sig, "%d:%v;", i, gis)
	}
	return slots, sig.String()
}

// Result is what one collection gives.
type Result struct {
	// Samples holds each GPU's samples, oldest first. The slices may be
	// the collector's own, kept for the next cycle: read them, and do
	// not change or keep them past the cycle (the same holds for the
	// slices of Holders).
	Samples map[decide.GPUKey][]decide.Sample
	// Windows holds each GPU's window reduced to what the decision reads
	// (decide.Window), where the source keeps it so (the agents); a GPU
	// is in Samples or in Windows. The windows are the collector's own,
	// kept for the next cycle: read them during the cycle, never change
	// them.
	Windows  map[decide.GPUKey]*decide.Window
	Interval time.Duration // the agents' sample period
	// Newest is the time of the newest sample seen (for the data-age metric).
	Newest time.Time
	// Failed names the nodes whose agent did not answer, with why. Their
	// GPUs have no samples, so their jobs are judged stale, never idle.
	Failed map[string]string
	// Refused names the nodes (also in Failed) whose answer was refused:
	// RefusedSignature or RefusedHistory.
	Refused map[string]string
	// Holders is the agents' own map of which job holds which GPU, by the
	// GPU's NVML index: the jobs of the processes on it in its newest
	// sample (empty: no job's process), from each process's cgroup. On a
	// node with GPUs in MIG mode, every GPU and MIG device is keyed by
	// Slurm's index of it (migSlots), with the MIG device's own jobs. The
	// Prometheus source gives the jobs of dcgm-exporter's job mapping
	// labels (hpc_job), by its gpu label, where they exist; nil where
	// none does.
	Holders map[decide.GPUKey][]int64
	// MapFrom says whose map Holders is: MapFromAgent (the zero value) or
	// MapFromDCGM (dcgm-exporter's job mapping labels, by its gpu label).
	MapFrom MapSource
	// Unattributed counts, by the GPU's NVML index, the processes in its
	// newest sample that the agent could tie to no Slurm job (from an
	// agent that does not count them: all of a GPU's processes when it
	// names no job). While a GPU of a node has any, nobody can say whose
	// work its samples show. nil for Prometheus.
	Unattributed map[decide.GPUKey]int
	// Faults are the GPU fault events the agents reported in this
	// collection (agent.FaultEvent), oldest first by node. A whole answer
	// repeats the faults its agent keeps: the reader takes a fault seen
	// twice (same node, GPU, kind, code and time) as one. A fault of an
	// unknown kind (a newer agent), of no GPU index, or with a code out
	// of range is left out. The Prometheus source gives none.
	Faults []Fault
}

// MapSource says where a Result's job↔GPU map comes from.
type MapSource int

const (
	// MapFromAgent: the node agents, from each GPU process's cgroup.
	MapFromAgent MapSource = iota
	// MapFromDCGM: dcgm-exporter's HPC job mapping labels (hpc_job).
	MapFromDCGM
)

// Fault is one GPU fault event an agent reported.
type Fault struct {
	Node string
	At   time.Time
	GPU  int
	UUID string
	Kind source.FaultKind
	Code int
}

// faultsOf returns the faults of an answer that can be believed.
func faultsOf(node string, events []agent.FaultEvent) []Fault {
	var out []Fault
	for _, e := range events {
		k := source.FaultKind(e.Kind)
		if !k.Known() || e.GPU < 0 || e.GPU > 1023 || e.Code < 0 || e.Code > source.MaxFaultCode || e.At.IsZero() ||
			(k == source.FaultXid) != (e.Code != 0) {
			continue
		}
		out = append(out, Fault{Node: node, At: e.At, GPU: e.GPU, UUID: e.UUID, Kind: k, Code: e.Code})
	}
	return out
}

// Collect asks the agents of the given nodes for their windows, or for
// what they sampled since the last cycle.
func (a *Agents) Collect(ctx context.Context, nodes []string) (Result, error) {
	a.collecting.Lock()
	defer a.collecting.Unlock()
	a.mu.Lock()
	res := Result{Windows: make(map[decide.GPUKey]*decide.Window, a.gpus), Failed: map[string]string{}, Refused: map[string]string{},
		Holders: make(map[decide.GPUKey][]int64, a.gpus)}
	if a.held == nil {
		a.held = map[string]*heldNode{}
	}
	asked := make(map[string]*heldNode, len(nodes))
	for _, n := range nodes {
		h := a.held[n]
		if h == nil || a.Whole {
			h = &heldNode{}
		}
		asked[n] = h
	}
	// A node not asked for is forgotten: its next read is whole, so no
	// gap in between is read as samples.
	a.held = asked
	a.mu.Unlock()
	if len(nodes) == 0 {
		return res, nil
	}
	client := a.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	par := a.Parallel
	if par <= 0 {
		par = 32
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	for _, n := range nodes {
		h := asked[n]
		wg.Add(1)
		sem <- struct{}{}
		go func(node string) {
			defer wg.Done()
			defer func() { <-sem }()
			// The answer's buffer is put back when nothing of it is read
			// any more: update copies what it keeps.
			buf := snapshotBufs.Get().(*snapshotBuf)
			defer snapshotBufs.Put(buf)
			snap, err := a.fetch(ctx, client, node, h.cursor, buf)
			if err == nil {
				err = h.update(snap)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.Failed[node] = err.Error()
				if r := (*refusal)(nil); errors.As(err, &r) {
					res.Refused[node] = r.reason
				}
				return
			}
			if !snap.SourceOK {
				res.Failed[node] = "agent's source failing: " + snap.LastError
			}
			if iv := time.Duration(snap.IntervalSeconds * float64(time.Second)); iv > res.Interval {
				res.Interval = iv
			}
			for idx, w := range h.gpus {
				res.Windows[decide.GPUKey{Node: node, Index: idx}] = w
				if last := w.Newest(); last.After(res.Newest) {
					res.Newest = last
				}
			}
			res.Faults = append(res.Faults, faultsOf(node, snap.Faults)...)
			for idx, jobs := range h.holders {
				// update replaces a GPU's holders, never changes them.
				res.Holders[decide.GPUKey{Node: node, Index: idx}] = jobs
			}
			for idx, n := range h.unattributed {
				if res.Unattributed == nil {
					res.Unattributed = map[decide.GPUKey]int{}
				}
				res.Unattributed[decide.GPUKey{Node: node, Index: idx}] = n
			}
		}(n)
	}
	wg.Wait()
	slices.SortStableFunc(res.Faults, func(x, y Fault) int {
		if c := strings.Compare(x.Node, y.Node); c != 0 {
			return c
		}
		return x.At.Compare(y.At)
	})
	a.mu.Lock()
	a.gpus = len(res.Windows)
	a.mu.Unlock()
	if len(res.Failed) == len(nodes) {
		return res, fmt.Errorf("no node agent answered (%d nodes; e.g. %s)", len(nodes), firstFailure(res.Failed))
	}
	return res, nil
}

// updateMIG takes in the samples of one GPU in MIG mode: each MIG
// device's activity (agent.MIGPoint's util and mem_activity) as the
// samples of its own slot, and its jobs and processes of no job in its
// newest sample as its holders. A MIG device whose activity was not
// measured leaves a gap (stale).
func (h *heldNode) updateMIG(g gpuWindow, slots map[migSlot]int, iv time.Duration) {
	for _, p := range g.Samples {
		for _, m := range p.MIG {
			key, ok := slots[migSlot{g.Index, m.GPUInstance}]
			if !ok || !m.hasUtil || !m.hasMemAct {
				continue
			}
			h.window(key, iv).Add(decide.Sample{At: p.At, UtilPercent: m.Util, MemActivityPercent: m.MemActivity, MemUsedMiB: m.MemUsedMiB})
		}
	}
	n := len(g.Samples)
	if n == 0 {
		return
	}
	for _, m := range g.Samples[n-1].MIG {
		key, ok := slots[migSlot{g.Index, m.GPUInstance}]
		if !ok {
			continue
		}
		if h.holders == nil {
			h.holders = map[int][]int64{}
		}
		if old, ok := h.holders[key]; !ok || !slices.Equal(old, m.JobIDs) || (old == nil) != (m.JobIDs == nil) {
			h.holders[key] = slices.Clone(m.JobIDs)
		}
		if m.Processes > 0 && len(m.JobIDs) == 0 {
			if h.unattributed == nil {
				h.unattributed = map[int]int{}
			}
			h.unattributed[key] = m.Processes
		} else {
			delete(h.unattributed, key)
		}
	}
}

// update takes in one answer of the node's agent: the whole window, or
// the samples since h.cursor. An answer it cannot read leaves h empty, so
// that the next read is whole.
func (h *heldNode) update(snap snapshot) error {
	switch {
	case snap.Version > agent.SnapshotVersion:
		h.cursor, h.gpus, h.holders, h.unattributed = "", nil, nil, nil
		return fmt.Errorf("agent writes snapshot version %d; this controller reads up to version %d: upgrade reclaimd on the controller",
			snap.Version, agent.SnapshotVersion)
	case snap.Version < 2, snap.Full, h.cursor == "":
		// Version 1 (no cursors) or a whole window: start over from it.
		h.gpus = make(map[int]*decide.Window, len(snap.GPUs))
		h.holders = make(map[int][]int64, len(snap.GPUs))
		h.unattributed = nil
	case snap.After != h.cursor:
		h.cursor, h.gpus, h.holders, h.unattributed = "", nil, nil, nil
		return fmt.Errorf("agent answered for cursor %q, not %q: its next answer is read whole", snap.After, h.cursor)
	}
	h.cursor = ""
	if snap.Version >= 2 {
		h.cursor = snap.Cursor
	}
	h.taken, h.keeps = snap.TakenAt, time.Duration(snap.WindowSeconds*float64(time.Second))
	// MIG: each MIG device is judged for itself, under Slurm's index of
	// it. The layout comes from each MIG GPU's newest sample (what the
	// node held where an answer has none); where it changes (MIG
	// devices made or destroyed, a GPU put into MIG mode or out of it),
	// the keys no longer name the same devices, and the node starts over.
	var mig map[int][]int
	for _, g := range snap.GPUs {
		if !g.MIG {
			continue
		}
		if mig == nil {
			mig = map[int][]int{}
		}
		if n := len(g.Samples); n > 0 {
			gis := make([]int, 0, len(g.Samples[n-1].MIG))
			for _, m := range g.Samples[n-1].MIG {
				gis = append(gis, m.GPUInstance)
			}
			slices.Sort(gis)
			mig[g.Index] = slices.Compact(gis)
		} else {
			mig[g.Index] = h.mig[g.Index]
		}
	}
	slots, layout := migSlots(snap.GPUs, mig)
	iv := time.Duration(snap.IntervalSeconds * float64(time.Second))
	if layout != h.layout {
		h.gpus = make(map[int]*decide.Window, len(snap.GPUs))
		h.holders = make(map[int][]int64, len(snap.GPUs))
		h.unattributed = nil
	}
	h.mig, h.layout = mig, layout
	for _, g := range snap.GPUs {
		if slots != nil {
			if g.MIG {
				h.updateMIG(g, slots, iv)
				continue
			}
			g.Index = slots[migSlot{g.Index, -1}]
		}
		var held *decide.Window
		for _, p := range g.Samples {
			if !p.hasUtil || !p.hasMemAct {
				continue // not measured: leaves a gap, which reads as stale
			}
			if held == nil {
				held = h.window(g.Index, iv)
				held.Grow(len(g.Samples))
			}
			held.Add(decide.Sample{At: p.At, UtilPercent: p.Util, MemActivityPercent: p.MemActivity, MemUsedMiB: p.MemUsedMiB})
		}
		switch n := len(g.Samples); {
		case g.MIG:
			// A GPU in MIG mode reported as a whole: it has no activity of
			// its own, and its jobs are its MIG devices'.
			delete(h.holders, g.Index)
			delete(h.unattributed, g.Index)
		case n > 0:
			newest := g.Samples[n-1]
			u := newest.Unattributed
			if u == 0 && newest.Processes > 0 && len(newest.JobIDs) == 0 {
				u = newest.Processes
			}
			if u > 0 {
				if h.unattributed == nil {
					h.unattributed = map[int]int{}
				}
				h.unattributed[g.Index] = u
			} else {
				delete(h.unattributed, g.Index)
			}
			if h.holders == nil {
				h.holders = map[int][]int64{}
			}
			// The ids live in the answer's buffer: copied, unless the GPU's
			// jobs are those it had (the common case, cycle after cycle).
			ids := g.Samples[n-1].JobIDs
			if old, ok := h.holders[g.Index]; !ok || !slices.Equal(old, ids) || (old == nil) != (ids == nil) {
				h.holders[g.Index] = slices.Clone(ids)
			}
		}
	}
	// Drop what the agent has dropped: samples older than its window
	// before the answer, and the oldest beyond its max_samples.
	oldest := snap.TakenAt.Add(-time.Duration(snap.WindowSeconds * float64(time.Second)))
	for idx, held := range h.gpus {
		held.DropBefore(oldest)
		if snap.MaxSamples > 0 {
			held.KeepNewest(snap.MaxSamples)
		}
		if held.Len() == 0 {
			delete(h.gpus, idx)
			delete(h.holders, idx)
			delete(h.unattributed, idx)
		}
	}
	return nil
}

// window returns the window of the GPU (or MIG device) of Slurm's index
// idx, made when it has none.
func (h *heldNode) window(idx int, iv time.Duration) *decide.Window {
	w := h.gpus[idx]
	if w == nil {
		w = &decide.Window{}
		h.gpus[idx] = w
	}
	if iv > 0 {
		w.SetInterval(iv)
	}
	return w
}

// readBody reads at most limit+1 bytes of the answer into buf, grown to
// the answer's length where it says it.
func readBody(resp *http.Response, limit int64, buf []byte) ([]byte, error) {
	return dcgmprom.ReadBody(resp, limit, buf)
}

func firstFailure(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys[0] + ": " + m[keys[0]]
}

func (a *Agents) base(node string) string {
	if a.URL != nil {
		return a.URL(node)
	}
	t := a.URLTemplate
	if t == "" {
		t = "http://{node}:9810"
	}
	return strings.ReplaceAll(t, "{node}", node)
}

// maxSnapshot bounds an agent's answer.
const maxSnapshot = 64 << 20

// fetch asks one agent for its answer, read into buf: the snapshot lives
// in it until it is put back.
func (a *Agents) fetch(ctx context.Context, client *http.Client, node, cursor string, buf *snapshotBuf) (snapshot, error) {
	var snap snapshot
	u := strings.TrimRight(a.base(node), "/") + "/v1/snapshot"
	if cursor != "" {
		u += "?after=" + url.QueryEscape(cursor)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return snap, err
	}
	n, err := nonce()
	if err != nil {
		return snap, err
	}
	req.Header.Set(agent.HeaderNonce, n)
	// The agent answers only a controller that holds the shared secret:
	// it presents the node's read token, derived from the secret, never
	// the secret itself.
	if a.Secret != nil {
		if secret, err := a.Secret(); err == nil {
			req.Header.Set("Authorization", "Bearer "+string(agent.ReadToken(secret, node)))
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return snap, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return snap, fmt.Errorf("agent answered HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	body, err := readBody(resp, maxSnapshot, buf.body)
	buf.body = body
	switch {
	case err != nil:
		return snap, fmt.Errorf("agent snapshot: %w", err)
	case len(body) > maxSnapshot:
		return snap, fmt.Errorf("agent snapshot: larger than %d bytes", maxSnapshot)
	}
	// Nothing of the body is read before its signature holds.
	if err := a.verify(n, resp.Header, body); err != nil {
		return snap, err
	}
	if snap, err = decodeSnapshot(body, buf); err != nil {
		return snap, fmt.Errorf("agent snapshot: %w", err)
	}
	if err := checkHistory(snap); err != nil {
		return snap, err
	}
	if err := checkSnapshot(&snap); err != nil {
		return snap, err
	}
	if snap.Node != "" && snap.Node != node {
		return snap, errors.New("agent reports node " + snap.Node + ", not " + node + ": check the agent URL template")
	}
	return snap, nil
}
