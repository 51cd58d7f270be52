package slurmrest_test

func ptr[T any](v T) *T { return &v }

// trapScript is a GPU job that reports its GPUs, its restart count and
// each SIGUSR1 it gets.
const trapScript = `#!/bin/bash
trap 'echo "got USR1 restart=${SLURM_RESTART_COUNT:-0}"' USR1
echo "start restart=${SLURM_RESTART_COUNT:-0} gpus=${CUDA_VISIBLE_DEVICES}"
for i in $(seq 900); do sleep 1; done
`
