// Command strata-bridge serves the model a finished Slurm job produced on
// Kubernetes, in its tenant's namespace, with a version per job and
// rollback. `strata-bridge run` is the daemon (it polls slurmrestd and
// serves the JSON API, /healthz and /metrics); the other verbs are for
// admins: deploy, list, status, rollback, delete and check-config.
package main

import "github.com/strata-hpc/strata/internal/cliexit"

func main() { cliexit.Main("strata-bridge", run) }
