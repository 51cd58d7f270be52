package spec

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/strictyaml"
)

// MaxSize is the largest policy file Load and Parse read, by default. A
// policy of 1,000 projects of 50 members is about 2 MiB; checking a file
// costs some 40 times its size in memory (YAML nodes and the position of
// every value), so 16 MiB (some 500,000 memberships) is far above any
// site and still checks in well under a gigabyte.
const MaxSize int64 = 16 << 20

// Load reads and parses a policy file (see [Parse]) of at most MaxSize
// bytes. A file that cannot be read is an error wrapping the os error; a
// file with problems is [Diagnostics].
func Load(path string) (*Policy, error) { return LoadMax(path, MaxSize) }

// LoadMax is Load with another bound on the file's size (0: MaxSize); a
// larger file is a diagnostic that says so, and is not read further.
func LoadMax(path string, maxBytes int64) (*Policy, error) {
	if maxBytes <= 0 {
		maxBytes = MaxSize
	}
	data, err := strictyaml.ReadLimited(path, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	opts := decodeOptions
	opts.MaxBytes = maxBytes
	return parse(path, data, opts)
}

// Parse decodes a policy file strictly, validates it, and returns it with
// its defaults filled in (see [Policy.ApplyDefaults]) and the position of
// every value in Positions. file names the file in diagnostics.
//
// Strict means that YAML syntax errors, a second document, an unknown key
// (with the known key it is closest to, if any), a key given twice, a
// required key left out, a value of the wrong type (a string where a
// number belongs, "yes" for true, a number where a duration belongs) and
// YAML merge keys are errors, as is everything [Policy.Validate] finds.
// On any problem Parse returns nil and all the problems as [Diagnostics],
// each with its line and column, sorted. Validation problems of a value
// that could not be decoded are left out: they would only repeat it.
// A syntax error stops the decoding, so it comes alone.
func Parse(file string, data []byte) (*Policy, error) { return parse(file, data, decodeOptions) }

func parse(file string, data []byte, opts strictyaml.Options) (*Policy, error) {
	var p Policy
	r := strictyaml.Decode(file, data, &p, opts)
	p.Positions, p.File = r.Pos, file
	r.Add(p.Validate(file))
	if err := r.Err(); err != nil {
		return nil, err
	}
	p.ApplyDefaults()
	return &p, nil
}

// decodeOptions say how a policy file is read: its nouns, the keys of a
// reclaim rule that strata-policy fills, and bounds sized for a policy of
// a large site.
var decodeOptions = strictyaml.Options{
	What:           "a policy",
	File:           "policy file",
	Example:        "start with apiVersion: " + APIVersion + " and kind: " + Kind + " (see etc/strata/policy.yaml)",
	Nouns:          nouns,
	Forbidden:      map[reflect.Type]map[string]string{ruleType: ruleForbidden},
	RequiredHint:   requiredHint,
	QuoteNumbers:   true,
	MaxDiagnostics: 100,
	MaxExpanded:    100_000,
	MaxBytes:       MaxSize,
	MaxBytesHint: "a policy this large is most likely not the policy (a generated or concatenated file?); " +
		"if it is, raise the bound with strata-policy --max-policy-size",
}

var ruleType = reflect.TypeFor[reclaimrules.Rule]()

// requiredHint says what to write for a required key left out.
func requiredHint(path, key string) string {
	switch key {
	case "apiVersion":
		return "start the file with apiVersion: " + APIVersion
	case "kind":
		return "add kind: " + Kind
	case "cluster":
		return "add cluster: with name: the ClusterName of slurm.conf"
	case "classes":
		return "add the workload classes (train, batch, interactive, serve): every job runs in one"
	case "tenants":
		return "add at least one tenant with its projects"
	case "partition":
		return "add partition: the Slurm partition the jobs of this class run in"
	case "projects":
		return "add projects: (the tenant's jobs run in its projects' accounts)"
	case "members":
		return "add members: (an empty list [] for none yet)"
	case "user":
		return "add user: the Unix user name"
	case "gpus", "replicas":
		return "add gpus: and replicas: (0 for none)"
	case "path":
		return "add path: the absolute path of the project directory"
	case "filesystem":
		return "add filesystem: xfs or lustre"
	case "hard_gb":
		return "add hard_gb: the hard limit in GiB"
	case "nodes":
		return "add nodes: the NodeNames of slurm.conf in the partition, such as gpu[001-032]"
	case "name":
		if strings.HasPrefix(path, "cluster") {
			return "add name: the ClusterName of slurm.conf"
		}
		return "add name: lowercase letters, digits, '_' and '-', starting with a letter"
	}
	return "add " + key + ":"
}

// nouns name the structs in messages.
var nouns = map[reflect.Type]string{
	reflect.TypeFor[Policy]():                   "the policy",
	reflect.TypeFor[Cluster]():                  "cluster",
	reflect.TypeFor[Partition]():                "a partition",
	reflect.TypeFor[Class]():                    "a class",
	reflect.TypeFor[Tenant]():                   "a tenant",
	reflect.TypeFor[Project]():                  "a project",
	reflect.TypeFor[Member]():                   "a member",
	reflect.TypeFor[Limits]():                   "limits",
	reflect.TypeFor[Serving]():                  "serving",
	reflect.TypeFor[Disk]():                     "disk",
	ruleType:                                    "a reclaim rule",
	reflect.TypeFor[reclaimrules.IdleDef]():     "idle",
	reflect.TypeFor[reclaimrules.PartialIdle](): "partial_idle",
	reflect.TypeFor[reclaimrules.Signal]():      "signal",
}

// ruleForbidden are the keys of a reclaim rule that strata-policy fills.
var ruleForbidden = map[string]string{
	"name":  "remove it: strata-policy names the rule after its class",
	"match": "remove it: strata-policy matches the rule to the jobs of its class",
}
