// Command topogen discovers the fabric (InfiniBand from ibnetdiscover dumps,
// NVLink domains from NVML) and keeps Slurm's topology.conf, topology.yaml
// and gres.conf true, with plan, validation, safe apply and rollback.
package main

import "github.com/strata-hpc/strata/internal/cliexit"

func main() { cliexit.Main("topogen", run) }
