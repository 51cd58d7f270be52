package slurmrest

import (
	"fmt"
	"slices"
)

// preemptJSON is a QOS's preempt object for a write, or "" when there is
// nothing to send. slurmdbd keeps the preempt list when the list is empty
// or absent (clear it with sacctmgr), and resets the mode to DISABLED when
// the mode is absent. An empty name in the list is refused here: slurmrestd
// 26.05 crashes on "list":[""].
func preemptJSON(list, mode []string) (string, error) {
	if slices.Contains(list, "") {
		return "", fmt.Errorf("preempt list %q: empty QOS name", list)
	}
	switch {
	case len(list) > 0 && mode != nil:
		return fmt.Sprintf(`{"list":%s,"mode":%s}`, mustJSON(list), mustJSON(mode)), nil
	case len(list) > 0:
		return fmt.Sprintf(`{"list":%s}`, mustJSON(list)), nil
	case mode != nil:
		return fmt.Sprintf(`{"mode":%s}`, mustJSON(mode)), nil
	}
	return "", nil
}

// assocMaxJSON is an association's max object for a write, or "" when it
// sets no limit. A nil list or count is left alone; -1 clears.
func assocMaxJSON(x Association) string {
	if x.GrpTRES == nil && x.MaxTRESJob == nil && x.GrpTRESMin == nil && x.MaxJobs == nil {
		return ""
	}
	tres, jobs := "null", "null"
	if x.GrpTRES != nil || x.MaxTRESJob != nil || x.GrpTRESMin != nil {
		tres = fmt.Sprintf(`{"total":%s,"per":{"job":%s},"group":{"minutes":%s}}`,
			tresJSON(x.GrpTRES), tresJSON(x.MaxTRESJob), tresJSON(x.GrpTRESMin))
	}
	if x.MaxJobs != nil {
		jobs = fmt.Sprintf(`{"per":{"count":{"set":true,"number":%d}}}`, *x.MaxJobs)
	}
	return fmt.Sprintf(`{"tres":%s,"jobs":%s}`, tres, jobs)
}
