// Package slurmplugins holds the tests of Strata's Slurm plugins, which
// are not Go: job_submit.lua (beside this file) runs inside slurmctld's
// job_submit/lua and reads the policy data strata-policy renders
// (/etc/slurm/strata/policy.lua); dcgm-job-map-prolog.sh and
// dcgm-job-map-epilog.sh run in slurmd and write the GPU-to-job files
// dcgm-exporter reads (--hpc-job-mapping-dir).
//
// The unit tests run job_submit.lua in a Lua interpreter with the table
// slurmctld gives it, against the data rendered from the shipped example
// policy (policy/internal/render/testdata/jobsubmit.golden), and the
// prolog and epilog as slurmd runs them, with its environment and no
// PATH. The integration tests (build tag integration) apply a policy to the test
// beds' slurmdbd, install its data file and submit jobs with sbatch to
// the real slurmctld of Slurm 24.11 and 26.05.
package slurmplugins
