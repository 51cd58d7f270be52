package render

import (
	"testing"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// TestReclaimRulesDryRun: rendered rules are a dry run unless the policy
// says reclaim.dry_run: false, so that new rules are watched before they
// act; the shipped example is a dry run.
func TestReclaimRulesDryRun(t *testing.T) {
	example, _ := loadExample(t)
	no, yes := false, true
	for name, tc := range map[string]struct {
		reclaim *spec.Reclaim // replaces the example's; nil: as shipped
		keep    bool          // the example as shipped
		want    bool
	}{
		"shipped example":        {keep: true, want: true},
		"no reclaim section":     {want: true},
		"dry_run left out":       {reclaim: &spec.Reclaim{}, want: true},
		"dry_run: false":         {reclaim: &spec.Reclaim{DryRun: &no}, want: false},
		"dry_run: true, written": {reclaim: &spec.Reclaim{DryRun: &yes}, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			p := *example
			if !tc.keep {
				p.Reclaim = tc.reclaim
			}
			b, err := ReclaimRules(&p)
			if err != nil {
				t.Fatal(err)
			}
			r, err := reclaimrules.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			if r.DryRun != tc.want {
				t.Errorf("dry_run = %v, want %v", r.DryRun, tc.want)
			}
		})
	}
}
