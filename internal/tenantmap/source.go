package tenantmap

import (
	"fmt"
	"sync"
)

// Source is a tenant map file as a daemon holds it: loaded at start,
// reloaded on SIGHUP, and a bad new file keeps the map in force. It is
// safe for concurrent use.
type Source struct {
	path string

	mu sync.RWMutex
	m  *Map
}

// Open loads the tenant map at path. A daemon refuses to start without a
// valid map: every tenant label and decision would be wrong.
func Open(path string) (*Source, error) {
	m, err := Load(path)
	if err != nil {
		return nil, err
	}
	return &Source{path: path, m: m}, nil
}

// Path is the file the source reads.
func (s *Source) Path() string { return s.path }

// Map returns the map in force.
func (s *Source) Map() *Map {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m
}

// Reload reads the file again. On failure the map in force stays and the
// error says why; on success the new map is in force and returned.
func (s *Source) Reload() (*Map, error) {
	m, err := Load(s.path)
	if err != nil {
		return nil, fmt.Errorf("tenant map reload failed, keeping the map in force: %w", err)
	}
	s.mu.Lock()
	s.m = m
	s.mu.Unlock()
	return m, nil
}
