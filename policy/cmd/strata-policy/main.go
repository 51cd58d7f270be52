// Command strata-policy makes Slurm match one declarative tenant policy:
// accounts, fair-share, limits and QOS, with plan, apply and drift.
package main

import "github.com/strata-hpc/strata/internal/cliexit"

func main() { cliexit.Main("strata-policy", run) }
