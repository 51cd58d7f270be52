package slurmrest_test

import (
	"os"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p != nil {
		return *p
	}
	return zero
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
