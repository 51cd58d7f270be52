package collect

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// Resumable is a collector whose windows a controller keeps across a
// restart (in its store): Held gives each node's windows and the point
// they are complete up to (the agent's cursor, Prometheus's last step),
// Resume takes them back into a collector that has not collected yet,
// whose first Collect then asks each source only for what is newer, as a
// steady cycle does, instead of reading every node's whole window.
type Resumable interface {
	// HeldKind names the source and the settings the windows depend
	// on: what was held under another kind is not resumed.
	HeldKind() string
	// Held returns the state of each node want wants (every node when
	// want is nil), written compactly (a node in MIG mode is left out: it
	// is read whole after a restart). The bytes are the collector's,
	// written into a buffer kept from call to call: valid until its next
	// Held.
	Held(want func(node string) bool) map[string][]byte
	// Resume takes in the states Held gave (by node), as at now: a
	// node's state older than its window, or unreadable, is left out
	// (that node is read whole). It returns the nodes resumed.
	Resume(states map[string][]byte, now time.Time) int
}

// heldEncoding is the version of the node states' format.
const heldEncoding = 1

// Agents and Prometheus keep their windows across a restart.
var (
	_ Resumable = (*Agents)(nil)
	_ Resumable = (*Prometheus)(nil)
)

// HeldKind is "agents": the agents say their window and interval in
// every answer, and a cursor they no longer know gets the whole window.
func (a *Agents) HeldKind() string { return "agents/v1" }

// Held returns each node's state: the agent's cursor, the time and window
// of its answer, and each GPU's window, holders and unattributed
// processes.
func (a *Agents) Held(want func(node string) bool) map[string][]byte {
	a.collecting.Lock()
	defer a.collecting.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string][]byte, len(a.held))
	b := a.heldBuf[:0]
	for n, h := range a.held {
		if h.cursor == "" || h.layout != "" || len(h.gpus) == 0 || (want != nil && !want(n)) {
			continue
		}
		start := len(b)
		b = append(b, heldEncoding)
		b = appendString(b, h.cursor)
		b = binary.AppendVarint(b, h.taken.UnixNano())
		b = binary.AppendVarint(b, int64(h.keeps))
		b = appendGPUs(b, h.gpus, h.holders)
		b = binary.AppendUvarint(b, uint64(len(h.unattributed)))
		for _, idx := range slices.Sorted(maps.Keys(h.unattributed)) {
			b = binary.AppendVarint(b, int64(idx))
			b = binary.AppendVarint(b, int64(h.unattributed[idx]))
		}
		out[n] = b[start:len(b):len(b)]
	}
	a.heldBuf = b
	return out
}

// Resume takes in the nodes' states; see Resumable.
func (a *Agents) Resume(states map[string][]byte, now time.Time) int {
	a.collecting.Lock()
	defer a.collecting.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held == nil {
		a.held = map[string]*heldNode{}
	}
	n := 0
	for node, b := range states {
		h, err := decodeAgentNode(b)
		// (The answer's time is the agent's clock: one ahead of the
		// controller's is no reason to read the node whole.)
		if err != nil || now.Sub(h.taken) >= h.keeps {
			continue
		}
		a.held[node] = h
		n++
	}
	return n
}

func decodeAgentNode(b []byte) (*heldNode, error) {
	r := &heldReader{b: b}
	if r.byte() != heldEncoding {
		return nil, errors.New("not a node state of this release")
	}
	h := &heldNode{cursor: r.string()}
	h.taken = time.Unix(0, r.varint()).UTC()
	h.keeps = time.Duration(r.varint())
	h.gpus, h.holders = r.gpus()
	if n := r.count(); n > 0 {
		h.unattributed = make(map[int]int, n)
		for range n {
			idx := int(r.varint())
			h.unattributed[idx] = int(r.varint())
		}
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = errors.New("bytes left over")
	}
	if r.err == nil && (h.cursor == "" || h.keeps <= 0) {
		r.err = errors.New("no cursor or window")
	}
	return h, r.err
}

// HeldKind names the query's settings: a window held under other
// metrics, labels, step or window is not resumed.
func (p *Prometheus) HeldKind() string {
	c := p.config()
	return fmt.Sprintf("prometheus/v1 window=%s step=%s node=%s gpu=%s job=%s util=%s mem=%s*%g fb=%s",
		c.window, c.step, c.nodeLabel, c.gpuLabel, c.jobLabel, c.util, c.mem, c.memScale, c.fb)
}

// Held returns each node's state: the last step read, each GPU's window
// and the jobs of its labels, and what the last answer held of the node.
func (p *Prometheus) Held(want func(node string) bool) map[string][]byte {
	st := p.held()
	st.collecting.Lock()
	defer st.collecting.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make(map[string][]byte, len(st.held))
	b := st.heldBuf[:0]
	for n, h := range st.held {
		if h.last == 0 || h.layout != "" || len(h.gpus) == 0 || (want != nil && !want(n)) {
			continue
		}
		start := len(b)
		b = append(b, heldEncoding)
		b = binary.AppendVarint(b, h.last)
		b = appendGPUs(b, h.gpus, h.holders)
		seen := byte(0)
		if h.holders == nil {
			seen |= 1 << 4
		}
		var bad string
		if s := h.seen; s != nil {
			seen |= 1 << 3
			for i, ok := range []bool{s.util, s.mem, s.fb} {
				if ok {
					seen |= 1 << i
				}
			}
			bad = s.badGPU
		}
		b = append(b, seen)
		b = appendString(b, bad)
		out[n] = b[start:len(b):len(b)]
	}
	st.heldBuf = b
	return out
}

// Resume takes in the nodes' states; see Resumable. A node whose last
// step is before the first of the window at now is left out.
func (p *Prometheus) Resume(states map[string][]byte, now time.Time) int {
	c := p.config()
	stepMs := c.step.Milliseconds()
	end := now.UnixMilli() / stepMs * stepMs
	first := end - c.window.Milliseconds() + stepMs - 1
	first -= first % stepMs
	st := p.held()
	st.collecting.Lock()
	defer st.collecting.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.held == nil {
		st.held = map[string]*promNode{}
	}
	n := 0
	for node, b := range states {
		h, err := decodePromNode(b)
		if err != nil || h.last < first || h.last > end {
			continue
		}
		st.held[node] = h
		n++
	}
	return n
}

func decodePromNode(b []byte) (*promNode, error) {
	r := &heldReader{b: b}
	if r.byte() != heldEncoding {
		return nil, errors.New("not a node state of this release")
	}
	h := &promNode{last: r.varint()}
	h.gpus, h.holders = r.gpus()
	seen := r.byte()
	bad := r.string()
	if seen&(1<<4) != 0 {
		h.holders = nil
	} else if h.holders == nil {
		h.holders = map[int][]int64{}
	}
	if seen&(1<<3) != 0 {
		h.seen = &nodeSeen{util: seen&1 != 0, mem: seen&2 != 0, fb: seen&4 != 0, badGPU: bad}
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = errors.New("bytes left over")
	}
	if r.err == nil && h.last <= 0 {
		r.err = errors.New("no last step")
	}
	return h, r.err
}

// appendGPUs writes each GPU's window and holders (nil kept apart from
// empty: an agent's GPU with no job's process holds an empty list).
func appendGPUs(b []byte, gpus map[int]*decide.Window, holders map[int][]int64) []byte {
	b = binary.AppendUvarint(b, uint64(len(gpus)))
	for _, idx := range slices.Sorted(maps.Keys(gpus)) {
		b = binary.AppendVarint(b, int64(idx))
		b = gpus[idx].AppendBinary(b)
	}
	b = binary.AppendUvarint(b, uint64(len(holders)))
	for _, idx := range slices.Sorted(maps.Keys(holders)) {
		b = binary.AppendVarint(b, int64(idx))
		jobs := holders[idx]
		if jobs == nil {
			b = binary.AppendUvarint(b, 0)
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(jobs))+1)
		for _, j := range jobs {
			b = binary.AppendVarint(b, j)
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// heldReader reads a node's state; the first error sticks.
type heldReader struct {
	b   []byte
	err error
}

var errCut = errors.New("cut short")

func (r *heldReader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = cmpOrErr(r.err, errCut)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *heldReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCut
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *heldReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errCut
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a length no longer than the bytes left.
func (r *heldReader) count() int {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = errCut
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

func (r *heldReader) string() string {
	n := r.count()
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *heldReader) gpus() (map[int]*decide.Window, map[int][]int64) {
	n := r.count()
	gpus := make(map[int]*decide.Window, n)
	for range n {
		idx := int(r.varint())
		if r.err != nil {
			break
		}
		w, rest, err := decide.DecodeWindow(r.b)
		if err != nil {
			r.err = fmt.Errorf("GPU %d: %w", idx, err)
			break
		}
		gpus[idx], r.b = w, rest
	}
	var holders map[int][]int64
	if n := r.count(); n > 0 {
		holders = make(map[int][]int64, n)
		for range n {
			idx := int(r.varint())
			m := r.count()
			if r.err != nil {
				break
			}
			if m == 0 {
				holders[idx] = nil
				continue
			}
			jobs := make([]int64, m-1)
			for i := range jobs {
				jobs[i] = r.varint()
			}
			holders[idx] = jobs
		}
	}
	return gpus, holders
}

func cmpOrErr(err, or error) error {
	if err != nil {
		return err
	}
	return or
}
