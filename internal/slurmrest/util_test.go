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

// trapScript is a GPU job that reports its GPUs, its restart count and
// each SIGUSR1 it gets.
const trapScript = `#!/bin/bash
trap 'echo "got USR1 restart=${SLURM_RESTART_COUNT:-0}"' USR1
echo "start restart=${SLURM_RESTART_COUNT:-0} gpus=${CUDA_VISIBLE_DEVICES}"
for i in $(seq 900); do sleep 1; done
`
