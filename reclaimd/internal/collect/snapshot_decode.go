package collect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/agent"
)

// snapshot is the part of an agent's Snapshot (agent/snapshot.go) that
// the controller reads, decoded with no field it does not use: at a
// thousand nodes, decoding every sample's eleven fields through
// encoding/json into pointers cost the controller most of its cycle.
// Its JSON names are agent.Snapshot's; decodeSnapshot reads it.
type snapshot struct {
	Node            string      `json:"node"`
	TakenAt         time.Time   `json:"taken_at"`
	IntervalSeconds float64     `json:"interval_seconds"`
	WindowSeconds   float64     `json:"window_seconds"`
	SourceOK        bool        `json:"source_ok"`
	LastError       string      `json:"last_error"`
	GPUs            []gpuWindow `json:"gpus"`
	Version         int         `json:"version"`
	Cursor          string      `json:"cursor"`
	Full            bool        `json:"full"`
	After           string      `json:"after"`
	MaxSamples      int         `json:"max_samples"`
	StartedAt       *time.Time  `json:"started_at"`
	// Faults are few (none on a healthy node): decoded by encoding/json.
	Faults []agent.FaultEvent `json:"faults"`
}

// gpuWindow is the part of agent.GPUWindow the controller reads.
type gpuWindow struct {
	Index   int     `json:"index"`
	MIG     bool    `json:"mig"`
	Samples samples `json:"samples"`
}

// point is the part of agent.Point the controller reads; a value that
// was not measured (null) has its has… false.
type point struct {
	At                 time.Time
	Util, MemActivity  float64
	hasUtil, hasMemAct bool
	MemUsedMiB         float64
	JobIDs             []int64
	// Processes and Unattributed are agent.Point's: the processes on the
	// GPU, and those of no job the agent could find.
	Processes, Unattributed int
	// MIG are the GPU's MIG devices in MIG mode (agent.MIGPoint).
	MIG []migPoint
}

// migPoint is the part of agent.MIGPoint the controller reads.
type migPoint struct {
	GPUInstance        int
	Util, MemActivity  float64
	hasUtil, hasMemAct bool
	MemUsedMiB         float64
	Processes          int
	JobIDs             []int64
}

// samples is a GPU's samples (the bulk of every answer).
type samples []point

// snapshotBuf holds what decoding one answer needs, kept from answer to
// answer (snapshotBufs): the body, and the backing arrays of its samples
// and job ids, so that a cycle at a thousand agents does not allocate
// them afresh for every answer. A snapshot decoded into it lives until
// the buffer is put back.
type snapshotBuf struct {
	body []byte
	pts  []point
	ids  []int64
}

var snapshotBufs = sync.Pool{New: func() any { return new(snapshotBuf) }}

// decodeSnapshot reads an agent's answer as json.Unmarshal would read it
// into an agent.Snapshot, keeping what snapshot holds, in one pass that
// also checks the syntax (jscan). Keys are matched without regard to
// case, the last of a repeated key is kept (into the values before it,
// as encoding/json decodes into a slice it has filled before), null
// leaves a value as it was (a slice or pointer nil), other keys are
// checked and passed over, a value of the wrong type is an error. The
// snapshot's samples and job ids live in buf, when one is given, until it
// is put back.
func decodeSnapshot(body []byte, buf *snapshotBuf) (snapshot, error) {
	var s snapshot
	if buf == nil {
		buf = new(snapshotBuf)
	}
	// Not nil, so that an empty list read into them is not nil either.
	if buf.pts == nil {
		buf.pts = make([]point, 0, 64)
	}
	if buf.ids == nil {
		buf.ids = make([]int64, 0, 64)
	}
	buf.pts, buf.ids = buf.pts[:0], buf.ids[:0]
	d := snapDecoder{jscan: jscan{b: body}, buf: buf}
	err := d.snapshot(&s)
	if err == nil {
		err = d.end()
	}
	return s, err
}

// snapDecoder reads a snapshot from its document.
type snapDecoder struct {
	jscan
	buf *snapshotBuf
}

func (d *snapDecoder) snapshot(s *snapshot) error {
	if d.null() {
		return nil
	}
	if d.peek() != '{' {
		return d.skipType("snapshot")
	}
	empty, err := d.enter('{', "snapshot")
	if err != nil || empty {
		return err
	}
	for {
		key, err := d.key()
		if err != nil {
			return err
		}
		switch {
		case keyIs(key, "gpus"):
			err = d.gpus(&s.GPUs)
		case keyIs(key, "node"):
			err = d.readString(&s.Node, "snapshot: node")
		case keyIs(key, "taken_at"):
			err = d.readTime(&s.TakenAt, "snapshot: taken_at")
		case keyIs(key, "interval_seconds"):
			_, err = d.readFloat(&s.IntervalSeconds, "snapshot: interval_seconds")
		case keyIs(key, "window_seconds"):
			_, err = d.readFloat(&s.WindowSeconds, "snapshot: window_seconds")
		case keyIs(key, "source_ok"):
			err = d.readBool(&s.SourceOK, "snapshot: source_ok")
		case keyIs(key, "last_error"):
			err = d.readString(&s.LastError, "snapshot: last_error")
		case keyIs(key, "version"):
			err = d.readIntOf(&s.Version, "snapshot: version")
		case keyIs(key, "cursor"):
			err = d.readString(&s.Cursor, "snapshot: cursor")
		case keyIs(key, "full"):
			err = d.readBool(&s.Full, "snapshot: full")
		case keyIs(key, "after"):
			err = d.readString(&s.After, "snapshot: after")
		case keyIs(key, "max_samples"):
			err = d.readIntOf(&s.MaxSamples, "snapshot: max_samples")
		case keyIs(key, "started_at"):
			switch {
			case d.null():
				s.StartedAt = nil
			case s.StartedAt == nil:
				var t time.Time
				if err = d.readTime(&t, "snapshot: started_at"); err == nil {
					s.StartedAt = &t
				}
			default:
				err = d.readTime(s.StartedAt, "snapshot: started_at")
			}
		case keyIs(key, "faults"):
			// Few (none on a healthy node): the value's bytes, checked by
			// the scan, decoded by encoding/json.
			d.ws()
			start := d.off
			if err = d.skip(); err == nil {
				err = json.Unmarshal(d.b[start:d.off], &s.Faults)
			}
		default:
			err = d.skip()
		}
		if err != nil {
			return err
		}
		if more, err := d.more('}'); err != nil || !more {
			return err
		}
	}
}

// readIntOf reads an int as readInt does.
func (d *snapDecoder) readIntOf(dst *int, what string) error {
	v := int64(*dst)
	err := d.readInt(&v, what)
	*dst = int(v)
	return err
}

// gpus reads the gpus array into *gs: element i decoded into the one
// that a repeated key left there (as encoding/json does), null gives nil.
func (d *snapDecoder) gpus(gs *[]gpuWindow) error {
	if d.null() {
		*gs = nil
		return nil
	}
	if d.peek() != '[' {
		return d.skipType("gpus")
	}
	old := *gs
	empty, err := d.enter('[', "gpus")
	if err != nil {
		return err
	}
	if empty {
		*gs = []gpuWindow{}
		return nil
	}
	out := old[:0]
	if out == nil {
		out = make([]gpuWindow, 0, 8)
	}
	for i := 0; ; i++ {
		var g gpuWindow
		if i < cap(old) {
			g = old[:cap(old)][i]
		}
		if err := d.gpu(&g); err != nil {
			return err
		}
		out = append(out, g)
		if more, err := d.more(']'); err != nil || !more {
			*gs = out
			return err
		}
	}
}

func (d *snapDecoder) gpu(g *gpuWindow) error {
	if d.null() {
		return nil
	}
	if d.peek() != '{' {
		return d.skipType("gpu")
	}
	empty, err := d.enter('{', "gpu")
	if err != nil || empty {
		return err
	}
	for {
		key, err := d.key()
		if err != nil {
			return err
		}
		switch {
		case keyIs(key, "samples"):
			err = d.samples(&g.Samples)
		case keyIs(key, "index"):
			err = d.readIntOf(&g.Index, "gpu: index")
		case keyIs(key, "mig"):
			err = d.readBool(&g.MIG, "gpu: mig")
		default:
			err = d.skip()
		}
		if err != nil {
			return fmt.Errorf("GPU %d: %w", g.Index, err)
		}
		if more, err := d.more('}'); err != nil || !more {
			return err
		}
	}
}

// samples reads a samples array into the buffer's points, as gpus does.
func (d *snapDecoder) samples(ss *samples) error {
	if d.null() {
		*ss = nil
		return nil
	}
	if d.peek() != '[' {
		return d.skipType("samples")
	}
	old := *ss
	empty, err := d.enter('[', "samples")
	if err != nil {
		return err
	}
	start := len(d.buf.pts)
	if !empty {
		for i := 0; ; i++ {
			var p point
			if i < cap(old) {
				p = old[:cap(old)][i]
			}
			if err := d.point(&p); err != nil {
				return err
			}
			d.buf.pts = append(d.buf.pts, p)
			more, err := d.more(']')
			if err != nil {
				return err
			}
			if !more {
				break
			}
		}
	}
	*ss = carve(&d.buf.pts, start, old)
	return nil
}

// carve returns the elements of *arena from start on as a slice of their
// own. Where the array read held fewer elements than old (the array of
// a key before it) had room for, the rest of old follows them, beyond
// the slice's length: encoding/json shortens a slice it decodes into, and
// a longer array read into it later finds them there. An empty array
// read gives an empty slice with no room.
func carve[T any](arena *[]T, start int, old []T) []T {
	n := len(*arena) - start
	if n == 0 {
		return (*arena)[start:start:start]
	}
	if n < cap(old) {
		*arena = append(*arena, old[n:cap(old)]...)
	}
	return (*arena)[start : start+n : len(*arena)]
}

// point reads one sample object.
func (d *snapDecoder) point(p *point) error {
	if d.null() {
		return nil
	}
	if d.peek() != '{' {
		return d.skipType("sample")
	}
	empty, err := d.enter('{', "sample")
	if err != nil || empty {
		return err
	}
	for {
		key, err := d.key()
		if err != nil {
			return err
		}
		// The bulk of every answer: each key is matched once, by a switch
		// on its bytes, not tried against each name in turn (keyIs).
		switch pointKey(key) {
		case "at":
			err = d.readTime(&p.At, "sample: at")
		case "util":
			err = d.optFloat(&p.Util, &p.hasUtil, "sample: util")
		case "mem_activity":
			err = d.optFloat(&p.MemActivity, &p.hasMemAct, "sample: mem_activity")
		case "mem_used_mib":
			_, err = d.readFloat(&p.MemUsedMiB, "sample: mem_used_mib")
		case "job_ids":
			err = d.jobIDs(&p.JobIDs)
		case "processes":
			err = d.readIntOf(&p.Processes, "sample: processes")
		case "unattributed_processes":
			err = d.readIntOf(&p.Unattributed, "sample: unattributed_processes")
		case "mig_instances":
			err = d.migs(&p.MIG)
		default:
			err = d.skip()
		}
		if err != nil {
			return err
		}
		if more, err := d.more('}'); err != nil || !more {
			return err
		}
	}
}

// migs reads a sample's mig_instances array as encoding/json reads it
// into a []agent.MIGPoint: each element into the one an earlier array of
// the same key left at its place (MIG samples are few: allocated, not
// carved from the buffer).
func (d *snapDecoder) migs(ms *[]migPoint) error {
	if d.null() {
		*ms = nil
		return nil
	}
	if d.peek() != '[' {
		return d.skipType("sample: mig_instances")
	}
	old := *ms
	empty, err := d.enter('[', "sample: mig_instances")
	if err != nil {
		return err
	}
	if empty {
		*ms = []migPoint{}
		return nil
	}
	var out []migPoint
	for i := 0; ; i++ {
		var m migPoint
		if i < cap(old) {
			m = old[:cap(old)][i]
		}
		if err := d.mig(&m); err != nil {
			return err
		}
		out = append(out, m)
		more, err := d.more(']')
		if err != nil {
			return err
		}
		if !more {
			break
		}
	}
	if n := len(out); n < cap(old) {
		out = append(out, old[n:cap(old)]...)[:n]
	}
	*ms = out
	return nil
}

// mig reads one MIG device object of a sample.
func (d *snapDecoder) mig(m *migPoint) error {
	if d.null() {
		return nil
	}
	if d.peek() != '{' {
		return d.skipType("sample: mig_instances")
	}
	empty, err := d.enter('{', "sample: mig_instances")
	if err != nil || empty {
		return err
	}
	for {
		key, err := d.key()
		if err != nil {
			return err
		}
		switch {
		case keyIs(key, "gpu_instance"):
			err = d.readIntOf(&m.GPUInstance, "mig: gpu_instance")
		case keyIs(key, "util"):
			err = d.optFloat(&m.Util, &m.hasUtil, "mig: util")
		case keyIs(key, "mem_activity"):
			err = d.optFloat(&m.MemActivity, &m.hasMemAct, "mig: mem_activity")
		case keyIs(key, "mem_used_mib"):
			_, err = d.readFloat(&m.MemUsedMiB, "mig: mem_used_mib")
		case keyIs(key, "processes"):
			err = d.readIntOf(&m.Processes, "mig: processes")
		case keyIs(key, "job_ids"):
			err = d.jobIDs(&m.JobIDs)
		default:
			err = d.skip()
		}
		if err != nil {
			return err
		}
		if more, err := d.more('}'); err != nil || !more {
			return err
		}
	}
}

// pointKeys are the keys of a sample that the controller reads.
var pointKeys = []string{"at", "util", "mem_activity", "mem_used_mib", "job_ids", "processes", "unattributed_processes", "mig_instances"}

// pointKey returns the name of pointKeys that key matches as keyIs
// matches it, or "" for none.
func pointKey(key []byte) string {
	if !lowerASCII(key) {
		for _, n := range pointKeys {
			if bytes.EqualFold(key, []byte(n)) {
				return n
			}
		}
		return ""
	}
	switch string(key) { // no copy: a lower-case ASCII key matches only itself
	case "at":
		return "at"
	case "util":
		return "util"
	case "mem_activity":
		return "mem_activity"
	case "mem_used_mib":
		return "mem_used_mib"
	case "job_ids":
		return "job_ids"
	case "processes":
		return "processes"
	case "unattributed_processes":
		return "unattributed_processes"
	case "mig_instances":
		return "mig_instances"
	}
	return ""
}

// optFloat reads a number or null as encoding/json reads a *float64:
// null is no value.
func (d *snapDecoder) optFloat(v *float64, has *bool, what string) error {
	if d.null() {
		*v, *has = 0, false
		return nil
	}
	var err error
	*has, err = d.readFloat(v, what)
	return err
}

// jobIDs reads an array of integers or null into the buffer's ids, as
// encoding/json reads a []int64 (a null element leaves the one there).
func (d *snapDecoder) jobIDs(ids *[]int64) error {
	if d.null() {
		*ids = nil
		return nil
	}
	if d.peek() != '[' {
		return d.skipType("sample: job_ids")
	}
	old := *ids
	empty, err := d.enter('[', "sample: job_ids")
	if err != nil {
		return err
	}
	start := len(d.buf.ids)
	if !empty {
		for i := 0; ; i++ {
			var id int64
			if i < cap(old) {
				id = old[:cap(old)][i]
			}
			if err := d.readInt(&id, "sample: job_ids"); err != nil {
				return err
			}
			d.buf.ids = append(d.buf.ids, id)
			more, err := d.more(']')
			if err != nil {
				return err
			}
			if !more {
				break
			}
		}
	}
	*ids = carve(&d.buf.ids, start, old)
	return nil
}
