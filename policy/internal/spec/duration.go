package spec

import "github.com/strata-hpc/strata/internal/duration"

// Duration is a job time limit, or any other length of time of a policy:
// a Go duration ("36h", "90m"), days ("7d", "1d12h") or Slurm's time
// ("1-00:00:00", "12:00:00", "30:00"), the one grammar of every Strata
// file (internal/duration). A bare number is an error: Slurm reads "30" as
// minutes, Go as nothing, and a reader as either. It is written back
// compactly ("36h", "1h30m").
type Duration = duration.Duration
