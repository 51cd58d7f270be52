// Command reclaimd finds jobs whose allocated GPUs sit idle, warns their
// owners, signals them, then requeues or cancels them through slurmrestd
// under per-tenant rules, and says why. `reclaimd run` is the controller
// (one per cluster); `reclaimd agent` samples a GPU node (one per node).
package main

import "github.com/strata-hpc/strata/internal/cliexit"

func main() { cliexit.Main("reclaimd", run) }
