// Package nodebed holds the integration tests of the node bed
// (test/testbed/slurm/testbed.sh up --node-vm): Slurm's confinement of
// jobs shown on a compute node that runs under its own kernel, with cgroup
// v2. They find the bed through STRATA_NODEBEDS and skip without it,
// except under CI=true.
package nodebed
