// Package servingquota is the contract between strata-policy and
// strata-bridge: serving.json, which maps every Slurm account of the
// policy to its tenant and project, and gives each tenant's Kubernetes
// namespace and serving quota: replicas, whole GPUs (the dedicated tier)
// and the GPU sharing tiers it may use with their quotas (see [Tier]).
// strata-policy render writes it; the bridge reads it before it deploys
// anything.
//
// Version strata/v2 added the sharing tiers and isolation; a strata/v1
// file (whole GPUs only) is still read, as a file whose tenants use the
// dedicated tier alone.
//
// A tenant without a serving: block in the policy is listed with a zero
// quota, so the bridge can tell "this tenant may not serve" from "this
// account is not in the policy".
//
// Its accounts are those of the tenant map (internal/tenantmap,
// tenants.json), rendered from the same policy by the same all-or-none
// render. The bridge reads this file alone on purpose: an account, its
// tenant's namespace and its quota must come from one snapshot, and two
// files reloaded one after the other could pair an account with another
// render's quota. A bridge feature that needs members or roles reads the
// tenant map.
package servingquota

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
)

// APIVersion and Kind head every serving.json; APIVersionV1 is the
// version before the sharing tiers, still read.
const (
	APIVersion   = "strata/v2"
	APIVersionV1 = "strata/v1"
	Kind         = "ServingQuotas"
)

// File is serving.json.
type File struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Tenants    []Tenant `json:"tenants"`
}

// Tenant is one tenant's namespace, quota and projects.
type Tenant struct {
	Name string `json:"name"`
	// Namespace is the tenant's Kubernetes namespace.
	Namespace string `json:"namespace"`
	// GPUs and Replicas are the serving quota: the most whole GPUs
	// (nvidia.com/gpu, the dedicated tier) and model-server replicas the
	// tenant's deployments may ask for together. GPUs, Replicas and
	// Tiers all empty: the tenant may not serve.
	GPUs     int `json:"gpus"`
	Replicas int `json:"replicas"`
	// Isolation: the tenant asked that its replicas never share a GPU
	// without isolation, so it has no time-sliced tier.
	Isolation bool `json:"isolation,omitempty"`
	// Tiers are the GPU sharing tiers the tenant may use besides whole
	// GPUs, each with its quota; a tier not listed is refused.
	Tiers    []Tier    `json:"tiers,omitempty"`
	Projects []Project `json:"projects"`
	// Line is the tenant's line in the policy file (0: unknown), and
	// ServingLine that of its serving: block.
	Line        int `json:"line,omitempty"`
	ServingLine int `json:"servingLine,omitempty"`
}

// Tier is a GPU sharing tier a tenant may use and its quota.
type Tier struct {
	// Name is the tier: mig-<profile>, mps or time-sliced (see
	// [Resource]).
	Name string `json:"name"`
	// Resource is the extended resource a replica of the tier requests,
	// Resource(Name).
	Resource string `json:"resource"`
	// Quota is the most of Resource the tenant's deployments may ask
	// for together (1 or more).
	Quota int `json:"quota"`
	// Line is the tier's line in the policy file (0: unknown).
	Line int `json:"line,omitempty"`
}

// Allowed returns the tier named name of the tenant, the dedicated tier
// being its GPUs; false when the tenant may not use it.
func (t *Tenant) Allowed(name string) (Tier, bool) {
	if name == TierDedicated {
		return Tier{Name: TierDedicated, Resource: ResourceGPU, Quota: t.GPUs, Line: t.ServingLine}, t.GPUs > 0
	}
	for _, tr := range t.Tiers {
		if tr.Name == name {
			return tr, true
		}
	}
	return Tier{}, false
}

// TierNames lists the tiers the tenant may use, dedicated first.
func (t *Tenant) TierNames() []string {
	var names []string
	if t.GPUs > 0 {
		names = append(names, TierDedicated)
	}
	for _, tr := range t.Tiers {
		names = append(names, tr.Name)
	}
	return names
}

// MayServe reports whether the tenant has any serving quota.
func (t *Tenant) MayServe() bool { return t.GPUs > 0 || t.Replicas > 0 || len(t.Tiers) > 0 }

// Project is a project and its Slurm account.
type Project struct {
	Name    string `json:"name"`
	Account string `json:"account"`
}

// Owner is what an account belongs to.
type Owner struct {
	Tenant  *Tenant
	Project string // "" for the tenant's own account
}

// Lookup finds the tenant and project of a Slurm account.
func (f *File) Lookup(account string) (Owner, bool) {
	for i := range f.Tenants {
		t := &f.Tenants[i]
		if t.Name == account {
			return Owner{Tenant: t}, true
		}
		for _, p := range t.Projects {
			if p.Account == account {
				return Owner{Tenant: t, Project: p.Name}, true
			}
		}
	}
	return Owner{}, false
}

// Tenant returns the tenant named name.
func (f *File) Tenant(name string) (*Tenant, bool) {
	for i := range f.Tenants {
		if f.Tenants[i].Name == name {
			return &f.Tenants[i], true
		}
	}
	return nil, false
}

// Validate checks the header, that names and namespaces are set and
// unique, that accounts map to one project, and that quotas are not
// negative.
func (f *File) Validate() error {
	if (f.APIVersion != APIVersion && f.APIVersion != APIVersionV1) || f.Kind != Kind {
		return fmt.Errorf("not a %s %s file (apiVersion %q, kind %q)", APIVersion, Kind, f.APIVersion, f.Kind)
	}
	tenants, namespaces, accounts := map[string]bool{}, map[string]string{}, map[string]string{}
	for i, t := range f.Tenants {
		switch {
		case t.Name == "":
			return fmt.Errorf("tenants[%d]: no name", i)
		case tenants[t.Name]:
			return fmt.Errorf("tenants[%d]: tenant %q listed twice", i, t.Name)
		case t.Namespace == "":
			return fmt.Errorf("tenant %s: no namespace", t.Name)
		case namespaces[t.Namespace] != "":
			return fmt.Errorf("tenant %s: namespace %q is also tenant %s's", t.Name, t.Namespace, namespaces[t.Namespace])
		case t.GPUs < 0 || t.Replicas < 0:
			return fmt.Errorf("tenant %s: negative serving quota", t.Name)
		}
		tenants[t.Name], namespaces[t.Namespace] = true, t.Name
		if f.APIVersion == APIVersionV1 && (t.Isolation || len(t.Tiers) > 0) {
			return fmt.Errorf("tenant %s: tiers and isolation need apiVersion %s", t.Name, APIVersion)
		}
		if err := t.validateTiers(); err != nil {
			return fmt.Errorf("tenant %s: %w", t.Name, err)
		}
		for _, p := range t.Projects {
			if p.Name == "" || p.Account == "" {
				return fmt.Errorf("tenant %s: a project without name or account", t.Name)
			}
			if o := accounts[p.Account]; o != "" {
				return fmt.Errorf("tenant %s: account %q is also %s's", t.Name, p.Account, o)
			}
			accounts[p.Account] = t.Name + "/" + p.Name
		}
	}
	// A tenant's own account is its name: a project account of the same
	// name would make Lookup answer for one of them only.
	for _, t := range f.Tenants {
		if o := accounts[t.Name]; o != "" {
			return fmt.Errorf("tenant %s: its account %q is also %s's", t.Name, t.Name, o)
		}
	}
	return nil
}

// Parse decodes and validates serving.json; unknown fields are errors.
func Parse(data []byte) (*File, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("serving quotas: %w", err)
	}
	if dec.More() {
		return nil, errors.New("serving quotas: more than one JSON value (a file written twice into one?)")
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("serving quotas: %w", err)
	}
	return &f, nil
}

// Load reads and parses a serving.json file.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Marshal writes f as indented JSON, tenants and projects sorted by name.
func (f *File) Marshal() ([]byte, error) {
	c := *f
	c.Tenants = append([]Tenant(nil), f.Tenants...)
	sort.Slice(c.Tenants, func(i, j int) bool { return c.Tenants[i].Name < c.Tenants[j].Name })
	for i := range c.Tenants {
		ps := append([]Project(nil), c.Tenants[i].Projects...)
		sort.Slice(ps, func(a, b int) bool { return ps[a].Name < ps[b].Name })
		c.Tenants[i].Projects = ps
	}
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
