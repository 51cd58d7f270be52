package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"
)

// Lease is one cluster's poll lease, shared by the portals of one
// database (store.PollLease): at most one of them polls slurmrestd, so
// that slurmctld reads the same load from two portals as from one.
type Lease interface {
	// Acquire takes or renews the lease: true while this portal holds it.
	Acquire(ctx context.Context) (bool, error)
	// Publish keeps a snapshot for the other portals; false when the
	// lease was lost meanwhile (nothing was written).
	Publish(ctx context.Context, snapshot []byte, at time.Time) (bool, error)
	// Latest is the holder's last snapshot and when it was read; nil
	// when there is none yet.
	Latest(ctx context.Context) ([]byte, time.Time, error)
}

// shared is a snapshot as the portals share it: what a poll read, the
// jobs' last update time included, so a portal that takes the lease over
// goes on with conditional listings where the last holder stopped.
type shared struct {
	Snapshot
	Updated time.Time `json:"updated"`
}

// JSON has no infinity, and Slurm's "infinite" limits are +Inf in a
// snapshot (slurmrest's noval). The slurmrest parsers refuse numbers
// beyond 1e18, so ±MaxFloat64 is free to stand for ±Inf in the shared
// copy. (gob keeps infinities but loses a pointer to zero, such as a QOS
// whose priority is set to 0.)
func toFinite(f float64) float64 {
	switch {
	case math.IsInf(f, 1):
		return math.MaxFloat64
	case math.IsInf(f, -1):
		return -math.MaxFloat64
	}
	return f
}

func fromFinite(f float64) float64 {
	switch f {
	case math.MaxFloat64:
		return math.Inf(1)
	case -math.MaxFloat64:
		return math.Inf(-1)
	}
	return f
}

func encodeSnapshot(s *Snapshot) ([]byte, error) {
	// A copy: a published snapshot is shared by readers and never changed.
	c := mapFloats(reflect.ValueOf(*s), toFinite).Interface().(Snapshot)
	return json.Marshal(shared{Snapshot: c, Updated: s.updated})
}

func decodeSnapshot(data []byte) (*Snapshot, error) {
	var sh shared
	if err := json.Unmarshal(data, &sh); err != nil {
		return nil, err
	}
	sh.Snapshot = mapFloats(reflect.ValueOf(sh.Snapshot), fromFinite).Interface().(Snapshot)
	s := sh.Snapshot
	s.updated = sh.Updated
	return &s, nil
}

// Leader says whether this portal polled the cluster itself at its last
// poll (it holds the lease, or there is no lease).
func (p *Poller) Leader() bool {
	if p.cfg.Lease == nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leader
}

func (p *Poller) setLeader(held bool) {
	p.mu.Lock()
	was := p.leader
	p.leader = held
	p.mu.Unlock()
	if held != was {
		if held {
			p.cfg.Log.Info("polling the cluster: this portal holds its poll lease", "cluster", p.cfg.Name)
		} else {
			p.cfg.Log.Info("reading the cluster's snapshot from the portal that holds its poll lease", "cluster", p.cfg.Name)
		}
	}
}

// errNoSnapshot: the portal that holds the lease has published none yet.
var errNoSnapshot = errors.New("the portal that polls it has published no snapshot yet")

// follow reads the snapshot the lease's holder published; one no newer
// than the last is not published again.
func (p *Poller) follow(ctx context.Context) error {
	data, at, err := p.cfg.Lease.Latest(ctx)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", p.cfg.Name, err)
	}
	if data == nil {
		return fmt.Errorf("cluster %s: %w", p.cfg.Name, errNoSnapshot)
	}
	if prev := p.snap.Load(); prev != nil && !at.After(prev.At) {
		return nil
	}
	next, err := decodeSnapshot(data)
	if err != nil {
		return fmt.Errorf("cluster %s: the shared snapshot: %w", p.cfg.Name, err)
	}
	next.At = at // the holder's read: its age is the cluster's
	p.snap.Store(next)
	p.mu.Lock()
	hooks := p.onSnap
	p.mu.Unlock()
	for _, f := range hooks {
		f(next)
	}
	return nil
}

// publish hands the snapshot to the other portals.
func (p *Poller) publish(ctx context.Context, s *Snapshot) error {
	data, err := encodeSnapshot(s)
	if err != nil {
		return fmt.Errorf("cluster %s: share the snapshot: %w", p.cfg.Name, err)
	}
	ok, err := p.cfg.Lease.Publish(ctx, data, s.At)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", p.cfg.Name, err)
	}
	if !ok {
		p.setLeader(false)
	}
	return nil
}

// mapFloats is a deep copy of v with f applied to every float in it, in
// exported fields, slices, maps and pointers; what it cannot reach (an
// unexported field, such as a time's) is copied as it is.
func mapFloats(v reflect.Value, f func(float64) float64) reflect.Value {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		out := reflect.New(v.Type()).Elem()
		out.SetFloat(f(v.Float()))
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(mapFloats(v.Elem(), f))
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(mapFloats(v.Index(i), f))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(mapFloats(v.Index(i), f))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), mapFloats(it.Value(), f))
		}
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out.Field(i).Set(mapFloats(v.Field(i), f))
			}
		}
		return out
	}
	return v
}
