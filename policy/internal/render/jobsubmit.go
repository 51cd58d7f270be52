package render

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/luastr"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

func init() {
	register(File{Name: "strata/policy.lua", Dir: DirSlurm, Mode: 0o644, Doc: "data for slurm's job_submit.lua", Render: JobSubmitData})
	register(File{Name: "strata/" + jobpolicy.FileName, Dir: DirSlurm, Mode: 0o644,
		Doc: "the same job_submit data as JSON, for the portal's check before it submits", Render: JobPolicyJSON})
}

// JobSubmitFormat is the version of the data file's layout. job_submit.lua
// lets every job through (and logs why) when the file has a version it does
// not know, so bump it whenever a field changes meaning or goes away.
const JobSubmitFormat = 1

// jobSubmitSource is the file name the plugin's messages cite
// ("policy.yaml:123"): the base name of /etc/strata/policy.yaml, where
// admins keep the policy. The renderer is given the policy, not its path.
const jobSubmitSource = "policy.yaml"

// JobSubmitModel computes what job_submit.lua needs of a policy that
// spec.Parse accepted: the contract both policy.lua and jobpolicy.json
// are written from. It reads the policy as given (ApplyDefaults has run
// in Parse) and fills nothing in it.
func JobSubmitModel(p *spec.Policy) *jobpolicy.Policy {
	m := &jobpolicy.Policy{APIVersion: jobpolicy.APIVersion, Kind: jobpolicy.Kind, Source: jobSubmitSource, Cluster: p.Cluster.Name, DefaultClass: p.Cluster.DefaultClass, ClassesLine: p.Positions.At("classes").Line,
		Classes: map[string]jobpolicy.Class{}, Partitions: map[string]string{}, Accounts: map[string]jobpolicy.Account{}, Users: map[string]string{}, OCIBundles: p.Cluster.OCIBundles}
	all := make([]string, 0, len(p.Classes))
	for i, c := range p.Classes {
		path := fmt.Sprintf("classes[%d]", i)
		line := func(key string) int { return lineOf(p, c.Line, path+"."+key, path) }
		m.Classes[c.Name] = jobpolicy.Class{Partition: c.Partition, DefaultTime: c.DefaultTime.Minutes(), MaxTime: c.MaxTime.Minutes(),
			Requeue: c.Requeueable(), WholeNodes: c.WholeNodes, Switches: c.Switches, MaxGPUsPerJob: c.MaxGPUsPerJob,
			Line: lineOf(p, c.Line, path), MaxTimeLine: line("max_time"), MaxGPUsLine: line("max_gpus_per_job"), WholeNodesLine: line("whole_nodes")}
		if _, ok := m.Partitions[c.Partition]; !ok {
			m.Partitions[c.Partition] = c.Name
		}
		all = append(all, c.Name)
	}
	if dc, ok := p.Class(m.DefaultClass); ok {
		m.Partitions[dc.Partition] = dc.Name
	}
	fallback := map[string]string{} // user -> first account as a non-viewer
	for ti, t := range p.Tenants {
		tpath := fmt.Sprintf("tenants[%d]", ti)
		for pi, pr := range t.Projects {
			ppath := fmt.Sprintf("%s.projects[%d]", tpath, pi)
			name := p.Account(t.Name, pr.Name)
			a := jobpolicy.Account{Tenant: t.Name, Project: pr.Name, Line: lineOf(p, pr.Line, ppath), Viewers: map[string]int{}, GPUsByType: map[string]jobpolicy.Limit{}}
			switch {
			case len(pr.Classes) > 0:
				a.Classes = pr.Classes
				a.ClassesLine = lineOf(p, a.Line, ppath+".classes", tpath+".classes", ppath)
			case len(t.Classes) > 0:
				a.Classes = t.Classes
				a.ClassesLine = lineOf(p, a.Line, tpath+".classes", ppath)
			default: // a policy built in code without ApplyDefaults
				a.Classes = all
				a.ClassesLine = a.Line
			}
			a.Classes = sortedCopy(a.Classes)
			a.Images = append([]string(nil), t.Images...)
			a.ImagesLine = lineOf(p, t.Line, tpath+".images", tpath)
			a.GPUs = tighter(
				limitOf(pr.Limits.GPUs, "account "+name, lineOf(p, a.Line, ppath+".limits.gpus", ppath)),
				limitOf(t.Limits.GPUs, "tenant "+t.Name, lineOf(p, t.Line, tpath+".limits.gpus", tpath)))
			for typ, n := range t.Limits.GPUsByType {
				a.GPUsByType[typ] = jobpolicy.Limit{Limit: n, Owner: "tenant " + t.Name, Line: lineOf(p, t.Line, tpath+".limits.gpus_by_type."+typ, tpath)}
			}
			for typ, n := range pr.Limits.GPUsByType {
				if old, ok := a.GPUsByType[typ]; !ok || n <= old.Limit {
					a.GPUsByType[typ] = jobpolicy.Limit{Limit: n, Owner: "account " + name, Line: lineOf(p, a.Line, ppath+".limits.gpus_by_type."+typ, ppath)}
				}
			}
			for mi, mem := range pr.Members {
				if mem.Role == spec.RoleViewer {
					a.Viewers[mem.User] = lineOf(p, mem.Line, fmt.Sprintf("%s.members[%d]", ppath, mi), ppath)
					continue
				}
				a.Members = append(a.Members, mem.User)
				if _, ok := fallback[mem.User]; !ok {
					fallback[mem.User] = name
				}
				if _, ok := m.Users[mem.User]; !ok && mem.Default {
					m.Users[mem.User] = name
				}
			}
			sort.Strings(a.Members)
			m.Accounts[name] = a
		}
	}
	for u, acct := range fallback { // ApplyDefaults marks one default; a policy built in code may not
		if _, ok := m.Users[u]; !ok {
			m.Users[u] = acct
		}
	}
	return m
}

// lineOf is the line of the first path present in the policy's positions,
// else of the last path's nearest enclosing value, else line (a policy
// built in code has no positions, only the Line fields).
func lineOf(p *spec.Policy, line int, paths ...string) int {
	for _, path := range paths {
		if pos, ok := p.Positions[path]; ok {
			return pos.Line
		}
	}
	if p.Positions != nil && len(paths) > 0 {
		if l := p.Positions.At(paths[len(paths)-1]).Line; l > 0 {
			return l
		}
	}
	return line
}

func limitOf(n int, owner string, line int) *jobpolicy.Limit {
	if n <= 0 {
		return nil // 0 is no limit
	}
	return &jobpolicy.Limit{Limit: n, Owner: owner, Line: line}
}

// tighter returns the smaller of two limits; a project's wins a tie, so
// the message names the account the job asked for.
func tighter(project, tenant *jobpolicy.Limit) *jobpolicy.Limit {
	switch {
	case project == nil:
		return tenant
	case tenant == nil || project.Limit <= tenant.Limit:
		return project
	default:
		return tenant
	}
}

func sortedCopy(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}

// JobSubmitData renders [JobSubmitModel] as the Lua data file
// job_submit.lua reads: one `return { ... }` of tables, strings, integers
// and booleans, with every key sorted, so the same policy gives the same
// bytes. It is valid Lua 5.1 through 5.4 (Slurm links whichever its build
// chose; Debian's is 5.1).
func JobSubmitData(p *spec.Policy) ([]byte, error) {
	m := JobSubmitModel(p)
	if m.DefaultClass != "" {
		if _, ok := m.Classes[m.DefaultClass]; !ok {
			return nil, fmt.Errorf("default class %q is not a class", m.DefaultClass)
		}
	}
	w := &luaWriter{}
	w.line(0, "-- Strata's policy for slurm-plugins/job_submit.lua, rendered by `strata-policy render`")
	w.line(0, "-- from "+jobSubmitSource+": do not edit, the next render overwrites it. Times are minutes,")
	w.line(0, "-- *_line fields are lines of the policy file. The layout is in slurm-plugins/README.md.")
	w.line(0, "return {")
	w.field(1, "version", luaInt(JobSubmitFormat))
	w.field(1, "source", luastr.Quote(m.Source))
	w.field(1, "cluster", luastr.Quote(m.Cluster))
	if m.DefaultClass != "" {
		w.field(1, "default_class", luastr.Quote(m.DefaultClass))
	}
	w.field(1, "classes_line", luaInt(m.ClassesLine))
	w.open(1, "classes")
	for _, name := range sortedKeys(m.Classes) {
		c := m.Classes[name]
		w.open(2, name)
		w.field(3, "partition", luastr.Quote(c.Partition))
		w.field(3, "default_time", luaInt(c.DefaultTime))
		w.field(3, "max_time", luaInt(c.MaxTime))
		w.field(3, "requeue", luaBool(c.Requeue))
		w.field(3, "whole_nodes", luaBool(c.WholeNodes))
		w.field(3, "switches", luaInt(c.Switches))
		w.field(3, "max_gpus_per_job", luaInt(c.MaxGPUsPerJob))
		w.field(3, "line", luaInt(c.Line))
		w.field(3, "max_time_line", luaInt(c.MaxTimeLine))
		w.field(3, "max_gpus_line", luaInt(c.MaxGPUsLine))
		w.field(3, "whole_nodes_line", luaInt(c.WholeNodesLine))
		w.close(2)
	}
	w.close(1)
	luaTable(w, 1, "partitions", m.Partitions, luastr.Quote)
	w.open(1, "accounts")
	for _, name := range sortedKeys(m.Accounts) {
		a := m.Accounts[name]
		w.open(2, name)
		w.field(3, "tenant", luastr.Quote(a.Tenant))
		w.field(3, "project", luastr.Quote(a.Project))
		w.field(3, "line", luaInt(a.Line))
		w.field(3, "classes", luaSet(a.Classes))
		w.field(3, "classes_line", luaInt(a.ClassesLine))
		if a.GPUs != nil {
			w.field(3, "gpus", luaLimit(*a.GPUs))
		}
		luaTable(w, 3, "gpus_by_type", a.GPUsByType, luaLimit)
		w.field(3, "members", luaSet(a.Members))
		luaTable(w, 3, "viewers", a.Viewers, luaInt[int])
		if len(a.Images) > 0 {
			w.field(3, "images", luaList(a.Images))
		}
		if a.ImagesLine > 0 {
			w.field(3, "images_line", luaInt(a.ImagesLine))
		}
		w.close(2)
	}
	w.close(1)
	luaTable(w, 1, "users", m.Users, luastr.Quote)
	if m.OCIBundles != "" {
		w.field(1, "oci_bundles", luastr.Quote(m.OCIBundles))
	}
	w.line(0, "}")
	return []byte(w.b.String()), nil
}

// JobPolicyJSON renders [JobSubmitModel] as jobpolicy.json, validated:
// the data policy.lua holds, for the Go twin of job_submit.lua's check
// (jobpolicy.Policy.Check).
func JobPolicyJSON(p *spec.Policy) ([]byte, error) {
	m := JobSubmitModel(p)
	if errs := m.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("rendered job policy is invalid: %w", errors.Join(errs...))
	}
	return m.Marshal()
}

// luaWriter writes a Lua table constructor, one field a line, indented by
// two spaces a level.
type luaWriter struct{ b strings.Builder }

func (w *luaWriter) line(depth int, s string) {
	w.b.WriteString(strings.Repeat("  ", depth))
	w.b.WriteString(s)
	w.b.WriteByte('\n')
}

// field writes `key = value,`; keys are written ["key"] unless they are
// plain identifiers, so any name is safe.
func (w *luaWriter) field(depth int, key, value string) {
	w.line(depth, luaKey(key)+" = "+value+",")
}

func (w *luaWriter) open(depth int, key string) { w.line(depth, luaKey(key)+" = {") }
func (w *luaWriter) close(depth int)            { w.line(depth, "},") }

// luaTable writes a map as a table with sorted keys, one field a line; an
// empty map is `key = {},`.
func luaTable[V any](w *luaWriter, depth int, key string, m map[string]V, value func(V) string) {
	if len(m) == 0 {
		w.field(depth, key, "{}")
		return
	}
	w.open(depth, key)
	for _, k := range sortedKeys(m) {
		w.field(depth+1, k, value(m[k]))
	}
	w.close(depth)
}

// luaKeywords cannot be bare keys.
var luaKeywords = map[string]bool{"and": true, "break": true, "do": true, "else": true, "elseif": true, "end": true,
	"false": true, "for": true, "function": true, "goto": true, "if": true, "in": true, "local": true, "nil": true,
	"not": true, "or": true, "repeat": true, "return": true, "then": true, "true": true, "until": true, "while": true}

func luaKey(k string) string {
	ident := k != "" && !luaKeywords[k] && (k[0] < '0' || k[0] > '9')
	for _, r := range k {
		if r != '_' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			ident = false
		}
	}
	if ident {
		return k
	}
	return "[" + luastr.Quote(k) + "]"
}

func luaInt[T ~int | ~int64](n T) string { return fmt.Sprint(int64(n)) }

func luaBool(v bool) string {
	if v {
		return "true"
	}
	return "false"
}

// luaSet writes names as a set: { ["a"] = true, ["b"] = true }.
func luaSet(names []string) string {
	if len(names) == 0 {
		return "{}"
	}
	sorted := sortedCopy(names)
	parts := make([]string, 0, len(sorted))
	for i, n := range sorted {
		if i > 0 && n == sorted[i-1] {
			continue
		}
		parts = append(parts, luaKey(n)+" = true")
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// luaList writes a list of strings in order: { "a", "b" }.
func luaList(list []string) string {
	parts := make([]string, len(list))
	for i, s := range list {
		parts[i] = luastr.Quote(s)
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

func luaLimit(l jobpolicy.Limit) string {
	return fmt.Sprintf("{ limit = %d, owner = %s, line = %d }", l.Limit, luastr.Quote(l.Owner), l.Line)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
