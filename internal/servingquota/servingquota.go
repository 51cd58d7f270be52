// Package servingquota is the contract between strata-policy and
// strata-bridge: serving.json, which maps every Slurm account of the
// policy to its tenant and project, and gives each tenant's Kubernetes
// namespace and serving quota (GPUs and replicas). strata-policy render
// writes it; the bridge reads it before it deploys anything.
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

// APIVersion and Kind head every serving.json.
const (
	APIVersion = "strata/v1"
	Kind       = "ServingQuotas"
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
	// GPUs and Replicas are the serving quota: the most nvidia.com/gpu
	// and model-server replicas the tenant's deployments may ask for
	// together. Both 0: the tenant may not serve.
	GPUs     int       `json:"gpus"`
	Replicas int       `json:"replicas"`
	Projects []Project `json:"projects"`
	// Line is the tenant's line in the policy file (0: unknown).
	Line int `json:"line,omitempty"`
}

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
	if f.APIVersion != APIVersion || f.Kind != Kind {
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
