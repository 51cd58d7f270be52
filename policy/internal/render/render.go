// Package render writes the files other parts read from a policy:
// reclaim-rules.json for reclaimd (one rule per workload class with a
// reclaim rule), the tenant map (tenants.json), and the other derived files
// each registered in [Files]. Every output is deterministic: the same
// policy renders the same bytes.
package render

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// The directories a rendered file goes to.
const (
	DirStrata = "strata" // /etc/strata/rendered (strata-policy render --output-dir)
	DirSlurm  = "slurm"  // /etc/slurm (strata-policy render --slurm-dir)
)

// File is one file render writes.
type File struct {
	// Name is the file's path relative to its directory.
	Name string
	// Dir is DirStrata or DirSlurm.
	Dir string
	// Mode is the file's permission bits.
	Mode fs.FileMode
	// Doc says who reads the file, for --help and logs.
	Doc string
	// Render renders the file from a policy that spec.Parse accepted.
	Render func(*spec.Policy) ([]byte, error)
}

var files []File

// register adds a file to [Files]; each output's own source file calls it
// from init.
func register(f File) { files = append(files, f) }

// Files returns every file render writes, sorted by directory and name.
func Files() []File {
	out := append([]File(nil), files...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Dir != out[j].Dir {
			return out[i].Dir < out[j].Dir
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func init() {
	register(File{Name: "reclaim-rules.json", Dir: DirStrata, Mode: 0o644, Doc: "reclaimd's idle rules, one per class with a reclaim rule", Render: ReclaimRules})
}

// ReclaimRules returns the reclaim rules of a policy: for every class with
// a reclaim rule, a rule named after the class that matches the class; a
// dry run unless the policy's reclaim.dry_run is false.
// The file is validated before it is returned.
func ReclaimRules(p *spec.Policy) ([]byte, error) {
	r := reclaimrules.Rules{APIVersion: reclaimrules.APIVersion, Kind: reclaimrules.Kind, DryRun: p.ReclaimDryRun()}
	for _, c := range p.Classes {
		if c.Reclaim == nil {
			continue
		}
		rule := *c.Reclaim
		rule.Name = c.Name
		rule.Match = reclaimrules.Match{Classes: []string{c.Name}}
		r.Rules = append(r.Rules, rule)
	}
	r.Recovery = recoveryRules(p)
	if errs := r.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("rendered reclaim rules are invalid: %v", errs)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
