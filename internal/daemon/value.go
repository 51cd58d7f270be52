package daemon

import (
	"context"
	"fmt"
	"sync"
)

// Value is a piece of configuration that SIGHUP reloads (the reclaim
// rules, serving.json): Get returns the one in force, and Reload replaces
// it only when its load function succeeds. A *Value is a Reloader.
type Value[T any] struct {
	name   string
	load   func(context.Context) (T, error)
	loaded func(T) // optional: called after each successful reload

	mu sync.RWMutex
	v  T
}

// Load loads a value for the first time; its error is the load function's,
// wrapped with name.
func Load[T any](ctx context.Context, name string, load func(context.Context) (T, error)) (*Value[T], error) {
	v, err := load(ctx)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	return NewValue(name, v, load), nil
}

// NewValue holds v, which the caller loaded already; load reloads it.
func NewValue[T any](name string, v T, load func(context.Context) (T, error)) *Value[T] {
	return &Value[T]{name: name, load: load, v: v}
}

// OnReload sets a function called with each value a reload puts in force
// (to log what it holds). It returns v.
func (v *Value[T]) OnReload(f func(T)) *Value[T] {
	v.loaded = f
	return v
}

// Get returns the value in force.
func (v *Value[T]) Get() T {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.v
}

// Reload loads the value again and puts it in force; when loading fails
// the old value stays and the error says which value kept it.
func (v *Value[T]) Reload(ctx context.Context) error {
	nv, err := v.load(ctx)
	if err != nil {
		return fmt.Errorf("reload %s (the one loaded before stays in force): %w", v.name, err)
	}
	v.mu.Lock()
	v.v = nv
	v.mu.Unlock()
	if v.loaded != nil {
		v.loaded(nv)
	}
	return nil
}
