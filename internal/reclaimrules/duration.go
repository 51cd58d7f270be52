package reclaimrules

import "github.com/strata-hpc/strata/internal/duration"

// Duration is a length of time of a rule, in the one grammar of every
// Strata file (internal/duration): "30m", "1h30m", "1d", "1-00:00:00". A
// bare number is an error: "30" could mean seconds or minutes. It is
// written back compactly ("30m", "1h30m").
type Duration = duration.Duration
