package spec

import (
	"maps"
	"slices"
	"strings"

	"github.com/strata-hpc/strata/internal/servingquota"
)

// servingTierKeyRE is the schema's pattern of the keys of serving.tiers;
// servingquota.CheckTier is the full check.
const servingTierKeyRE = `^(mig-[1-7]g\.[1-9][0-9]{0,3}gb|mps|time-sliced)$`

// servingTiers checks a tenant's sharing tiers: each a tier other than
// dedicated (which is serving.gpus), with a quota from 0 to maxCount, and
// no time-sliced tier for a tenant that asks for isolation.
func (v *validator) servingTiers(sp string, s *Serving) {
	for _, name := range slices.Sorted(maps.Keys(s.Tiers)) {
		path := sp + ".tiers." + name
		switch err := servingquota.CheckTier(name); {
		case err != nil:
			hint := "use " + servingquota.TierExamples
			if strings.HasPrefix(name, servingquota.TierMIGPrefix) {
				hint = "name a MIG profile as NVIDIA's device plugin does, such as mig-1g.10gb, mig-3g.40gb or mig-7g.80gb"
			}
			v.add(path, hint, "%v", err)
			continue
		case name == servingquota.TierDedicated:
			v.add(path, "give whole GPUs as serving.gpus", "tier dedicated is serving.gpus, not one of serving.tiers")
			continue
		}
		v.count(path, s.Tiers[name], "give 0 or more; 0, or leaving the tier out, forbids it")
		if name == servingquota.TierTimeSliced && s.Isolation && s.Tiers[name] > 0 {
			v.add(path, "remove the time-sliced tier, or give the tenant mig-<profile> or mps tiers, which isolate memory",
				"tier time-sliced shares GPUs with no isolation, and the tenant asks for isolation (serving.isolation)")
		}
	}
}
