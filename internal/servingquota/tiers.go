package servingquota

import (
	"fmt"
	"regexp"
	"strings"
)

// The GPU sharing tiers of serving, from the most isolated to the least.
// A replica of each requests one extended resource that NVIDIA's device
// plugin advertises (see [Resource]):
//
//   - dedicated: whole GPUs, nvidia.com/gpu.
//   - mig-<profile>: a MIG slice with its own memory, caches and compute
//     (hardware isolation), nvidia.com/mig-<profile> as the plugin
//     advertises it with the mixed MIG strategy.
//   - mps: a share of a GPU under the MPS daemon, which caps its memory
//     and compute but shares one fault domain, nvidia.com/gpu.mps (the
//     plugin's MPS sharing with the resource renamed so).
//   - time-sliced: a time slice of a GPU, no isolation at all (memory and
//     faults are shared), nvidia.com/gpu.shared (the plugin's time-slicing
//     with renameByDefault). Never for a tenant that asks for isolation.
const (
	TierDedicated  = "dedicated"
	TierMPS        = "mps"
	TierTimeSliced = "time-sliced"
	// TierMIGPrefix starts the name of a MIG tier: mig-1g.10gb.
	TierMIGPrefix = "mig-"
)

// The extended resources of the tiers.
const (
	ResourceGPU        = "nvidia.com/gpu"
	ResourceMPS        = "nvidia.com/gpu.mps"
	ResourceTimeSliced = "nvidia.com/gpu.shared"
	resourcePrefix     = "nvidia.com/"
)

// migTierRE matches a MIG tier: mig-<slices>g.<memory>gb, as NVIDIA names
// the profiles (1g.10gb, 3g.40gb, 7g.80gb, 1g.18gb on H200).
var migTierRE = regexp.MustCompile(`^mig-[1-7]g\.[1-9][0-9]{0,3}gb$`)

// TierExamples is said in messages about a tier name.
const TierExamples = "dedicated, mig-<profile> (such as mig-1g.10gb or mig-3g.40gb), mps or time-sliced"

// CheckTier returns an error for a name that is no tier.
func CheckTier(name string) error {
	switch {
	case name == TierDedicated, name == TierMPS, name == TierTimeSliced, migTierRE.MatchString(name):
		return nil
	case strings.HasPrefix(name, TierMIGPrefix):
		return fmt.Errorf("tier %q is not a MIG profile such as mig-1g.10gb or mig-3g.40gb", name)
	}
	return fmt.Errorf("tier %q is not one of %s", name, TierExamples)
}

// Resource returns the extended resource a replica of tier requests;
// "" for a name that is no tier.
func Resource(tier string) string {
	switch {
	case tier == TierDedicated:
		return ResourceGPU
	case tier == TierMPS:
		return ResourceMPS
	case tier == TierTimeSliced:
		return ResourceTimeSliced
	case migTierRE.MatchString(tier):
		return resourcePrefix + tier
	}
	return ""
}

// Family is the tier's family: the tier, or "mig" for every MIG profile.
func Family(tier string) string {
	if strings.HasPrefix(tier, TierMIGPrefix) {
		return "mig"
	}
	return tier
}

// PriorityClass is a PriorityClass the replicas of a tier family run at.
type PriorityClass struct {
	Name        string
	Value       int32
	Description string
}

// PriorityClasses are the PriorityClasses of the tier families, most
// isolated (and first scheduled) first. Their preemption policy is Never:
// the order decides which pending replica the scheduler places first,
// and no model server evicts another tenant's.
var PriorityClasses = []PriorityClass{
	{"strata-serving-dedicated", 4000, "Strata model servers on whole GPUs (nvidia.com/gpu)."},
	{"strata-serving-mig", 3000, "Strata model servers on MIG slices (nvidia.com/mig-<profile>): hardware isolation."},
	{"strata-serving-mps", 2000, "Strata model servers on MPS shares of a GPU (nvidia.com/gpu.mps): memory and compute caps, one fault domain."},
	{"strata-serving-time-sliced", 1000, "Strata model servers on time slices of a GPU (nvidia.com/gpu.shared): no isolation."},
}

// PriorityClassOf returns the PriorityClass of a tier's replicas.
func PriorityClassOf(tier string) (PriorityClass, bool) {
	if CheckTier(tier) != nil {
		return PriorityClass{}, false
	}
	name := "strata-serving-" + Family(tier)
	for _, pc := range PriorityClasses {
		if pc.Name == name {
			return pc, true
		}
	}
	return PriorityClass{}, false
}

// validateTiers checks a tenant's sharing tiers: known names, the resource
// of each name, a quota of 1 or more, each once, the dedicated tier only
// as GPUs, and no time-sliced tier with isolation.
func (t *Tenant) validateTiers() error {
	seen := map[string]bool{}
	for _, tr := range t.Tiers {
		switch err := CheckTier(tr.Name); {
		case err != nil:
			return err
		case tr.Name == TierDedicated:
			return fmt.Errorf("tier %s is the tenant's gpus, not one of its tiers", TierDedicated)
		case seen[tr.Name]:
			return fmt.Errorf("tier %s listed twice", tr.Name)
		case tr.Resource != Resource(tr.Name):
			return fmt.Errorf("tier %s: resource %q, want %q", tr.Name, tr.Resource, Resource(tr.Name))
		case tr.Quota < 1:
			return fmt.Errorf("tier %s: quota %d, want 1 or more (leave a tier out to forbid it)", tr.Name, tr.Quota)
		case tr.Name == TierTimeSliced && t.Isolation:
			return fmt.Errorf("tier %s has no isolation, and the tenant asks for isolation", TierTimeSliced)
		}
		seen[tr.Name] = true
	}
	return nil
}
