// Package jobpolicy is the job_submit contract: what slurm-plugins'
// job_submit.lua knows of a policy, and the same check in Go.
//
// strata-policy render writes one [Policy] twice, beside each other in
// /etc/slurm/strata/: as policy.lua, the Lua table job_submit.lua reads
// inside slurmctld, and as jobpolicy.json (apiVersion strata/v1, kind
// JobPolicy), which [Parse] reads strictly, every problem at once with its
// line, column and JSON path. The portal checks a job before it submits it
// with [Policy.Check], which decides as job_submit.lua does (the same
// class, the same refusal, the same message and policy line), so that a
// user learns why a template's job would be refused without a round trip
// through slurmctld; slurm-plugins' cross-test runs a table of jobs
// through both and fails on any difference.
//
//	{
//	  "apiVersion": "strata/v1", "kind": "JobPolicy",
//	  "source": "policy.yaml", "cluster": "gpu", "default_class": "batch", "classes_line": 40,
//	  "classes": {"batch": {"partition": "gpu", "default_time": 240, "max_time": 2880, ...}},
//	  "partitions": {"gpu": "batch"},
//	  "accounts": {"acme-llm": {"tenant": "acme", "project": "llm", "classes": ["batch", "train"],
//	    "gpus": {"limit": 48, "owner": "account acme-llm", "line": 80}, "members": ["alice"], ...}},
//	  "users": {"alice": "acme-llm"}
//	}
package jobpolicy

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/strata-hpc/strata/internal/strictjson"
)

// APIVersion and Kind head every jobpolicy.json.
const (
	APIVersion = "strata/v1"
	Kind       = "JobPolicy"
)

// FileName is the file's name beside policy.lua (/etc/slurm/strata/).
const FileName = "jobpolicy.json"

// Policy is what job_submit.lua knows of a policy. Times are in minutes
// (Slurm's unit), 0 for no rule; lines are lines of the policy file (0
// when unknown), for messages.
type Policy struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Source is the file name messages cite ("policy.yaml:123").
	Source       string           `json:"source"`
	Cluster      string           `json:"cluster"`
	DefaultClass string           `json:"default_class,omitempty"`
	ClassesLine  int              `json:"classes_line"`
	Classes      map[string]Class `json:"classes"`
	// Partitions maps a partition to the class of jobs that name only the
	// partition: the default class when it runs there, else the first
	// class of the file that does.
	Partitions map[string]string `json:"partitions"`
	// Accounts are the project accounts ("<tenant>-<project>").
	Accounts map[string]Account `json:"accounts"`
	// Users maps a user to their default account.
	Users map[string]string `json:"users"`
	// OCIBundles is the directory of the OCI bundles a job's --container
	// names, <oci_bundles>/<image> ("": [DefaultOCIBundles]).
	OCIBundles string `json:"oci_bundles,omitempty"`
}

// Class is a workload class as the plugin applies it.
type Class struct {
	Partition   string `json:"partition"`
	DefaultTime int64  `json:"default_time"`
	MaxTime     int64  `json:"max_time"`
	Requeue     bool   `json:"requeue"`
	WholeNodes  bool   `json:"whole_nodes"`
	// Switches is the class's topology rule for jobs on several nodes:
	// at most this many leaf switches (sbatch --switches); 0 for none.
	Switches       int `json:"switches"`
	MaxGPUsPerJob  int `json:"max_gpus_per_job"`
	Line           int `json:"line"`
	MaxTimeLine    int `json:"max_time_line"`
	MaxGPUsLine    int `json:"max_gpus_line"`
	WholeNodesLine int `json:"whole_nodes_line"`
}

// Account is a project account.
type Account struct {
	Tenant  string `json:"tenant"`
	Project string `json:"project"`
	Line    int    `json:"line"`
	// Classes are the classes the project may use.
	Classes     []string `json:"classes"`
	ClassesLine int      `json:"classes_line"`
	// GPUs is the tightest GPU limit of the project and its tenant (nil:
	// none); GPUsByType the tightest per GPU type, where 0 forbids it.
	GPUs       *Limit           `json:"gpus,omitempty"`
	GPUsByType map[string]Limit `json:"gpus_by_type"`
	// Members may submit under the account; Viewers (user -> line) may
	// not.
	Members []string       `json:"members"`
	Viewers map[string]int `json:"viewers"`
	// Images is the tenant's image allow-list, in the order of the
	// policy file: images and prefix patterns ([ImageAllowed]); empty,
	// the project may run no container image. ImagesLine is the line of
	// the list (of the tenant when it has none).
	Images     []string `json:"images,omitempty"`
	ImagesLine int      `json:"images_line,omitempty"`
}

// Limit is a GPU limit and where it comes from: Owner is "account
// acme-llm" or "tenant acme".
type Limit struct {
	Limit int    `json:"limit"`
	Owner string `json:"owner"`
	Line  int    `json:"line"`
}

// Parse decodes a jobpolicy.json strictly and validates it. The error is
// an errors.Join of *strictjson.FieldError, one per line when printed,
// each "line:col: path: message".
func Parse(data []byte) (*Policy, error) {
	var p Policy
	doc, err := strictjson.Decode(data, &p, `want a JSON object with "apiVersion": "`+APIVersion+`" and "kind": "`+Kind+`"`)
	if err != nil {
		return nil, err
	}
	if errs := p.Validate(); len(errs) > 0 {
		return nil, doc.Locate(errs)
	}
	return &p, nil
}

// Load reads and parses a jobpolicy.json; every problem is prefixed with
// the file's name.
func Load(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("job policy: %w (strata-policy render writes it)", err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, strictjson.InFile(path, err)
	}
	return p, nil
}

// Validate returns every problem of p, each a *strictjson.FieldError with
// its JSON path: the header, the cluster, and the references job_submit.lua
// checks too (the default class and each partition's class are classes).
func (p *Policy) Validate() []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &strictjson.FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	switch p.APIVersion {
	case APIVersion:
	case "":
		bad("apiVersion", "missing: use %s", APIVersion)
	default:
		bad("apiVersion", "%q is not supported: use %s", p.APIVersion, APIVersion)
	}
	if p.Kind != Kind {
		bad("kind", "%q: want %s", p.Kind, Kind)
	}
	if p.Cluster == "" {
		bad("cluster", "required: the Slurm ClusterName the policy is of")
	}
	if p.Source == "" {
		bad("source", "required: the policy file's name, for messages")
	}
	if p.OCIBundles != "" && (!strings.HasPrefix(p.OCIBundles, "/") || path.Clean(p.OCIBundles) != p.OCIBundles || p.OCIBundles == "/") {
		bad("oci_bundles", "%q is not an absolute, clean directory other than /", p.OCIBundles)
	}
	if p.DefaultClass != "" {
		if _, ok := p.Classes[p.DefaultClass]; !ok {
			bad("default_class", "%q is not a class", p.DefaultClass)
		}
	}
	for _, part := range sortedKeys(p.Partitions) {
		if _, ok := p.Classes[p.Partitions[part]]; !ok {
			bad("partitions."+part, "%q is not a class", p.Partitions[part])
		}
	}
	for _, name := range sortedKeys(p.Accounts) {
		a := p.Accounts[name]
		errs = append(errs, strictjson.Unique("accounts."+name+".classes", a.Classes, "class")...)
		errs = append(errs, strictjson.Unique("accounts."+name+".members", a.Members, "user name")...)
		if a.GPUs != nil && a.GPUs.Limit < 0 {
			bad("accounts."+name+".gpus.limit", "%d is negative", a.GPUs.Limit)
		}
		for i, img := range a.Images {
			if !ValidImagePattern(img) {
				bad(fmt.Sprintf("accounts.%s.images[%d]", name, i), "%q is not an image or a prefix pattern (registry.example.com/acme/*)", img)
			}
		}
		for _, typ := range sortedKeys(a.GPUsByType) {
			if a.GPUsByType[typ].Limit < 0 {
				bad("accounts."+name+".gpus_by_type."+typ+".limit", "%d is negative", a.GPUsByType[typ].Limit)
			}
		}
	}
	for _, u := range sortedKeys(p.Users) {
		if _, ok := p.Accounts[p.Users[u]]; !ok {
			bad("users."+u, "%q is not an account of the policy", p.Users[u])
		}
	}
	return errs
}

// Marshal writes p as indented JSON with its header filled in; maps are
// written with sorted keys (encoding/json's order), empty ones as {} and
// empty lists as [], so that the same policy gives the same bytes.
func (p *Policy) Marshal() ([]byte, error) {
	c := *p
	c.APIVersion, c.Kind = APIVersion, Kind
	c.Classes = nonNilMap(c.Classes)
	c.Partitions = nonNilMap(c.Partitions)
	c.Users = nonNilMap(c.Users)
	accts := make(map[string]Account, len(c.Accounts))
	for name, a := range c.Accounts {
		if a.Classes == nil {
			a.Classes = []string{}
		}
		if a.Members == nil {
			a.Members = []string{}
		}
		a.GPUsByType = nonNilMap(a.GPUsByType)
		a.Viewers = nonNilMap(a.Viewers)
		accts[name] = a
	}
	c.Accounts = accts
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func nonNilMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
