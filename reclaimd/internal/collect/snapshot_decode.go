package collect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/agent"
)

// snapshot is the part of an agent's Snapshot (agent/snapshot.go) that
// the controller reads, decoded with no field it does not use: at a
// thousand nodes, decoding every sample's eleven fields through
// encoding/json into pointers cost the controller most of its cycle.
// Its JSON names are agent.Snapshot's.
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
}

// samples is a GPU's samples, read by a scanner of its own (the bulk of
// every answer).
type samples []point

// UnmarshalJSON reads an array of agent.Point objects, as encoding/json
// would read them into agent.Point: keys matched without regard to case,
// the last of a repeated key kept, other keys skipped, a value of the
// wrong type an error. encoding/json has checked that b is valid JSON.
func (ss *samples) UnmarshalJSON(b []byte) error {
	sc := pointScanner{b: b}
	if sc.literal("null") {
		return nil // as encoding/json leaves a slice on null
	}
	if !sc.expect('[') {
		return sc.fail("samples: want an array")
	}
	out := make(samples, 0, bytes.Count(b, []byte(`"at"`)))
	if sc.expect(']') {
		*ss = out
		return nil
	}
	for {
		p, err := sc.agentPoint()
		if err != nil {
			return err
		}
		out = append(out, p)
		if sc.expect(']') {
			break
		}
		if !sc.expect(',') {
			return sc.fail("samples: want , or ]")
		}
	}
	*ss = out
	return nil
}

// agentPoint reads one sample object.
func (sc *pointScanner) agentPoint() (point, error) {
	var p point
	if !sc.expect('{') {
		return p, sc.fail("sample: want an object")
	}
	if sc.expect('}') {
		return p, nil
	}
	for {
		key, err := sc.key()
		if err != nil {
			return p, err
		}
		if !sc.expect(':') {
			return p, sc.fail("sample: want :")
		}
		sc.space()
		start := sc.off
		if err := sc.skipValue(); err != nil {
			return p, err
		}
		v := sc.b[start:sc.off]
		switch {
		case bytes.EqualFold(key, []byte("at")):
			if err := p.At.UnmarshalJSON(v); err != nil {
				return p, fmt.Errorf("sample: at: %w", err)
			}
		case bytes.EqualFold(key, []byte("util")):
			p.Util, p.hasUtil, err = optFloat(v, "util")
		case bytes.EqualFold(key, []byte("mem_activity")):
			p.MemActivity, p.hasMemAct, err = optFloat(v, "mem_activity")
		case bytes.EqualFold(key, []byte("mem_used_mib")):
			var has bool
			var f float64
			if f, has, err = optFloat(v, "mem_used_mib"); has {
				p.MemUsedMiB = f
			}
		case bytes.EqualFold(key, []byte("job_ids")):
			p.JobIDs, err = jobIDs(v)
		}
		if err != nil {
			return p, err
		}
		if sc.expect('}') {
			return p, nil
		}
		if !sc.expect(',') {
			return p, sc.fail("sample: want , or }")
		}
	}
}

// key reads an object key; one with escapes is unquoted.
func (sc *pointScanner) key() ([]byte, error) {
	sc.space()
	start := sc.off
	if sc.off >= len(sc.b) || sc.b[sc.off] != '"' {
		return nil, sc.fail("want a key")
	}
	if err := sc.skipValue(); err != nil {
		return nil, err
	}
	raw := sc.b[start:sc.off]
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1], nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// skipValue moves past one JSON value, which encoding/json has checked.
func (sc *pointScanner) skipValue() error {
	sc.space()
	depth := 0
	for sc.off < len(sc.b) {
		switch sc.b[sc.off] {
		case '"':
			sc.off++
			for sc.off < len(sc.b) && sc.b[sc.off] != '"' {
				if sc.b[sc.off] == '\\' {
					sc.off++
				}
				sc.off++
			}
			if sc.off >= len(sc.b) {
				return sc.fail("value: unterminated string")
			}
			sc.off++
		case '[', '{':
			depth++
			sc.off++
			continue
		case ']', '}':
			if depth == 0 {
				return sc.fail("value: want a value")
			}
			depth--
			sc.off++
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return sc.fail("value: want a value")
			}
			sc.off++
			continue
		default: // a number or a literal
			start := sc.off
			for sc.off < len(sc.b) && bytes.IndexByte([]byte(" \t\r\n,:]}[{\""), sc.b[sc.off]) < 0 {
				sc.off++
			}
			if sc.off == start {
				return sc.fail("value: want a value")
			}
		}
		if depth == 0 {
			return nil
		}
	}
	return sc.fail("value: unexpected end")
}

// optFloat reads a number or null (false) as encoding/json reads a
// *float64.
func optFloat(v []byte, name string) (float64, bool, error) {
	if bytes.Equal(v, []byte("null")) {
		return 0, false, nil
	}
	if len(v) == 0 || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return 0, false, fmt.Errorf("sample: %s: %s is not a number", name, v)
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return 0, false, fmt.Errorf("sample: %s: %w", name, err)
	}
	return f, true, nil
}

// jobIDs reads an array of integers or null, as encoding/json reads a
// []int64.
func jobIDs(v []byte) ([]int64, error) {
	if bytes.Equal(v, []byte("null")) {
		return nil, nil
	}
	if bytes.Equal(v, []byte("[]")) {
		return []int64{}, nil
	}
	var ids []int64
	if err := json.Unmarshal(v, &ids); err != nil {
		return nil, fmt.Errorf("sample: job_ids: %w", err)
	}
	return ids, nil
}

// decodeSnapshot reads an agent's answer as json.Unmarshal would read it
// into a snapshot, with one check of the body (json.Valid) and one scan:
// through encoding/json the samples, the bulk of it, were scanned three
// times over before they were read.
func decodeSnapshot(body []byte) (snapshot, error) {
	var s snapshot
	if !json.Valid(body) {
		err := json.Unmarshal(body, &s) // for its syntax error
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return s, err
	}
	sc := pointScanner{b: body}
	if sc.literal("null") {
		return s, nil
	}
	fields := []struct {
		name string
		v    any
	}{{"node", &s.Node}, {"taken_at", &s.TakenAt}, {"interval_seconds", &s.IntervalSeconds},
		{"window_seconds", &s.WindowSeconds}, {"source_ok", &s.SourceOK}, {"last_error", &s.LastError},
		{"version", &s.Version}, {"cursor", &s.Cursor}, {"full", &s.Full}, {"after", &s.After},
		{"max_samples", &s.MaxSamples}, {"started_at", &s.StartedAt}, {"faults", &s.Faults}}
	err := sc.object("snapshot", func(key, v []byte) error {
		if bytes.EqualFold(key, []byte("gpus")) {
			return decodeGPUs(v, &s.GPUs)
		}
		for _, f := range fields {
			if bytes.EqualFold(key, []byte(f.name)) {
				return json.Unmarshal(v, f.v) // a scalar: cheap
			}
		}
		return nil
	})
	return s, err
}

// decodeGPUs reads the gpus array as encoding/json would into gs.
func decodeGPUs(v []byte, gs *[]gpuWindow) error {
	sc := pointScanner{b: v}
	if sc.literal("null") {
		*gs = nil
		return nil
	}
	if !sc.expect('[') {
		return sc.fail("gpus: want an array")
	}
	out := []gpuWindow{}
	if sc.expect(']') {
		*gs = out
		return nil
	}
	for {
		var g gpuWindow
		err := sc.object("gpu", func(key, v []byte) error {
			switch {
			case bytes.EqualFold(key, []byte("index")):
				return json.Unmarshal(v, &g.Index)
			case bytes.EqualFold(key, []byte("mig")):
				return json.Unmarshal(v, &g.MIG)
			case bytes.EqualFold(key, []byte("samples")):
				return g.Samples.UnmarshalJSON(v)
			}
			return nil
		})
		if err != nil {
			return err
		}
		out = append(out, g)
		if sc.expect(']') {
			break
		}
		if !sc.expect(',') {
			return sc.fail("gpus: want , or ]")
		}
	}
	*gs = out
	return nil
}

// object reads an object, giving each key and the bytes of its value to
// field in turn.
func (sc *pointScanner) object(what string, field func(key, v []byte) error) error {
	if !sc.expect('{') {
		return sc.fail(what + ": want an object")
	}
	if sc.expect('}') {
		return nil
	}
	for {
		key, err := sc.key()
		if err != nil {
			return err
		}
		if !sc.expect(':') {
			return sc.fail(what + ": want :")
		}
		sc.space()
		start := sc.off
		if err := sc.skipValue(); err != nil {
			return err
		}
		if err := field(key, sc.b[start:sc.off]); err != nil {
			return fmt.Errorf("%s: %s: %w", what, key, err)
		}
		if sc.expect('}') {
			return nil
		}
		if !sc.expect(',') {
			return sc.fail(what + ": want , or }")
		}
	}
}
