package render

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/jobpolicy"

	"github.com/strata-hpc/strata/internal/luastr"
	"github.com/strata-hpc/strata/internal/luatest"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// The package's golden files are rewritten with -update. The flag is
// defined here only when no other test file of the package defines it.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files in testdata (review the diff)")
	}
}

func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

const (
	exampleFile     = "../../../etc/strata/policy.yaml"
	jobSubmitGolden = "testdata/jobsubmit.golden"
)

func loadExample(t *testing.T) (*spec.Policy, []string) {
	t.Helper()
	p, err := spec.Load(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatal(err)
	}
	return p, strings.Split(string(data), "\n")
}

// TestJobSubmitGolden renders the shipped example; the golden file is
// reviewed in the diff (TestJobSubmitModel says why its values are right).
func TestJobSubmitGolden(t *testing.T) {
	p, _ := loadExample(t)
	got, err := JobSubmitData(p)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := JobSubmitData(p); !bytes.Equal(got, again) {
		t.Fatal("two renders of one policy differ")
	}
	if updating() {
		if err := os.WriteFile(jobSubmitGolden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(jobSubmitGolden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestJobSubmitGolden -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("rendered data differs from %s (-golden +got; run with -update and review):\n%s", jobSubmitGolden, diff)
	}
	var found bool
	for _, f := range Files() {
		if f.Name == "strata/policy.lua" && f.Dir == DirSlurm && f.Mode == 0o644 {
			found = true
		}
	}
	if !found {
		t.Errorf("strata/policy.lua is not registered for --slurm-dir")
	}
}

// TestJobSubmitModel checks the example's values against what its
// comments say, and that every line a message will cite is the line of
// the key it names.
func TestJobSubmitModel(t *testing.T) {
	p, lines := loadExample(t)
	m := JobSubmitModel(p)
	at := func(line int) string {
		if line < 1 || line > len(lines) {
			return fmt.Sprintf("<no line %d>", line)
		}
		return strings.TrimSpace(lines[line-1])
	}
	for name, tc := range map[string]struct {
		got, want any
	}{
		// bob is a member of llm (default: true) and vision; carol only of
		// vision ("a user's first project is their default"); dave is only
		// a viewer, so he has no default account.
		"users": {m.Users, map[string]string{"alice": "acme-llm", "bob": "acme-llm", "carol": "acme-vision", "erin": "globex-rl", "frank": "globex-rl"}},
		// gpu is the partition of train (first) and batch (the default
		// class): the default class wins.
		"partitions":    {m.Partitions, map[string]string{"gpu": "batch", "interactive": "interactive", "serve": "serve"}},
		"default class": {m.DefaultClass, "batch"},
		// train: 24h and 7d, requeue, whole nodes under one switch, 256 GPUs.
		"train": {[]any{m.Classes["train"].DefaultTime, m.Classes["train"].MaxTime, m.Classes["train"].Requeue, m.Classes["train"].WholeNodes,
			m.Classes["train"].Switches, m.Classes["train"].MaxGPUsPerJob}, []any{int64(24 * 60), int64(7 * 24 * 60), true, true, 1, 256}},
		// interactive is not requeueable (requeue defaults to false for it).
		"interactive": {[]any{m.Classes["interactive"].DefaultTime, m.Classes["interactive"].MaxTime, m.Classes["interactive"].Requeue,
			m.Classes["interactive"].MaxGPUsPerJob}, []any{int64(120), int64(720), false, 2}},
		"members of acme-llm":  {m.Accounts["acme-llm"].Members, []string{"alice", "bob"}},
		"viewers of acme-llm":  {sortedKeys(m.Accounts["acme-llm"].Viewers), []string{"dave"}},
		"classes of vision":    {m.Accounts["acme-vision"].Classes, []string{"batch", "interactive"}},
		"classes of globex-rl": {m.Accounts["globex-rl"].Classes, []string{"batch", "interactive", "train"}},
		// acme-llm's own 48 is below acme's 64; globex-rl has no limit of
		// its own, so globex's 32 holds.
		"GPUs of acme-llm":  {*m.Accounts["acme-llm"].GPUs, jobpolicy.Limit{Limit: 48, Owner: "account acme-llm", Line: m.Accounts["acme-llm"].GPUs.Line}},
		"GPUs of globex-rl": {*m.Accounts["globex-rl"].GPUs, jobpolicy.Limit{Limit: 32, Owner: "tenant globex", Line: m.Accounts["globex-rl"].GPUs.Line}},
		// vision limits a100 to 24 itself and inherits acme's h100: 48;
		// globex forbids h100 (0).
		"types of acme-vision": {limits(m.Accounts["acme-vision"].GPUsByType), map[string]string{"a100": "24 account acme-vision", "h100": "48 tenant acme"}},
		"types of globex-rl":   {limits(m.Accounts["globex-rl"].GPUsByType), map[string]string{"a100": "32 tenant globex", "h100": "0 tenant globex"}},
		// The lines messages cite hold the key they name.
		"line of train":              {at(m.Classes["train"].Line), "- name: train"},
		"line of train max_time":     {at(m.Classes["train"].MaxTimeLine), "max_time: 7d"},
		"line of train whole_nodes":  {at(m.Classes["train"].WholeNodesLine), "whole_nodes: true"},
		"line of interactive GPUs":   {at(m.Classes["interactive"].MaxGPUsLine), "max_gpus_per_job: 2"},
		"line of acme-llm":           {at(m.Accounts["acme-llm"].Line), "- name: llm"},
		"line of vision classes":     {at(m.Accounts["acme-vision"].ClassesLine), "classes: [batch, interactive]"},
		"line of globex-rl classes":  {at(m.Accounts["globex-rl"].ClassesLine), "classes: [train, batch, interactive]"},
		"line of acme-llm GPUs":      {at(m.Accounts["acme-llm"].GPUs.Line), "gpus: 48"},
		"line of globex-rl GPUs":     {at(m.Accounts["globex-rl"].GPUs.Line), "gpus: 32"},
		"line of globex-rl h100":     {at(m.Accounts["globex-rl"].GPUsByType["h100"].Line), "h100: 0"},
		"line of dave (viewer)":      {at(m.Accounts["acme-llm"].Viewers["dave"]), "- user: dave"},
		"line of acme-vision h100":   {at(m.Accounts["acme-vision"].GPUsByType["h100"].Line), "h100: 48"},
		"line of acme-vision a100":   {at(m.Accounts["acme-vision"].GPUsByType["a100"].Line), "a100: 24"},
		"line of the classes":        {at(m.ClassesLine), "- name: train"},
		"cluster name from the file": {m.Cluster, "gpu"},
	} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func limits(m map[string]jobpolicy.Limit) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprintf("%d %s", v.Limit, v.Owner)
	}
	return out
}

// TestJobSubmitModelInCode: a policy built in code (no positions, no
// ApplyDefaults) still gets every user a default account, every project
// all classes, and lines from the Line fields.
func TestJobSubmitModelInCode(t *testing.T) {
	p := &spec.Policy{Cluster: spec.Cluster{Name: "c"},
		Classes: []spec.Class{{Name: "batch", Partition: "p1", Line: 7}, {Name: "big", Partition: "p1", MaxGPUsPerJob: 4, Line: 9}},
		Tenants: []spec.Tenant{{Name: "t", Limits: spec.Limits{GPUs: 8}, Projects: []spec.Project{
			{Name: "a", Line: 20, Members: []spec.Member{{User: "u", Line: 21}, {User: "v", Role: spec.RoleViewer, Line: 22}}},
			{Name: "b", Line: 30, Limits: spec.Limits{GPUs: 8}, Members: []spec.Member{{User: "u", Default: true}}},
		}}}}
	m := JobSubmitModel(p)
	for name, tc := range map[string]struct{ got, want any }{
		// u's membership of t-b says default: true, even though t-a comes first.
		"users":       {m.Users, map[string]string{"u": "t-b"}},
		"partitions":  {m.Partitions, map[string]string{"p1": "batch"}},
		"classes":     {m.Accounts["t-a"].Classes, []string{"batch", "big"}},
		"viewer line": {m.Accounts["t-a"].Viewers, map[string]int{"v": 22}},
		"class line":  {m.Classes["big"].MaxGPUsLine, 9},
		// The tenant's 8 holds for t-a; t-b's own 8 ties and wins.
		"gpus of t-a": {*m.Accounts["t-a"].GPUs, jobpolicy.Limit{Limit: 8, Owner: "tenant t", Line: 0}},
		"gpus of t-b": {*m.Accounts["t-b"].GPUs, jobpolicy.Limit{Limit: 8, Owner: "account t-b", Line: 30}},
	} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if _, err := JobSubmitData(p); err != nil {
		t.Fatal(err)
	}
	p.Cluster.DefaultClass = "nosuch"
	if _, err := JobSubmitData(p); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("a default class that is no class: err = %v", err)
	}
}

// luaDump loads a data file as job_submit.lua does (text only, an empty
// environment) and prints every value as path=value, sorted.
const luaDump = `
local dir = arg[1]
local f = assert(io.open(dir .. "/data.lua", "rb"))
local text = f:read("*a")
f:close()
local fn, err
if setfenv and loadstring then
  fn, err = loadstring(text, "=data.lua")
  if fn then setfenv(fn, {}) end
else
  fn, err = load(text, "=data.lua", "t", {})
end
if not fn then io.stderr:write(err, "\n") os.exit(1) end
local out = {}
local function walk(v, path)
  if type(v) == "table" then
    for k, x in pairs(v) do walk(x, path == "" and tostring(k) or (path .. "." .. tostring(k))) end
  else
    out[#out + 1] = path .. "=" .. tostring(v)
  end
end
walk(fn(), "")
table.sort(out)
print(table.concat(out, "\n"))
`

// TestJobSubmitGoldenIsLua loads the golden file in a Lua interpreter and
// compares every value Lua reads with the model it was rendered from.
func TestJobSubmitGoldenIsLua(t *testing.T) {
	lua := luatest.Require(t)
	data, err := os.ReadFile(jobSubmitGolden)
	if err != nil {
		t.Fatal(err)
	}
	out, err := lua.Run(t.Context(), luaDump, map[string][]byte{"data.lua": data})
	if err != nil {
		t.Fatalf("%s does not load in %s: %v", jobSubmitGolden, lua.Version, err)
	}
	p, _ := loadExample(t)
	want := flatten(JobSubmitModel(p))
	if diff := cmp.Diff(want, strings.Split(strings.TrimSpace(out), "\n")); diff != "" {
		t.Errorf("what Lua reads differs from the model (-model +lua):\n%s", diff)
	}
}

// flatten writes a model as luaDump prints the rendered file.
func flatten(m *jobpolicy.Policy) []string {
	var out []string
	add := func(path string, v any) { out = append(out, fmt.Sprintf("%s=%v", path, v)) }
	add("version", JobSubmitFormat)
	add("source", jobSubmitSource)
	add("cluster", m.Cluster)
	if m.DefaultClass != "" {
		add("default_class", m.DefaultClass)
	}
	add("classes_line", m.ClassesLine)
	for n, c := range m.Classes {
		pre := "classes." + n + "."
		add(pre+"partition", c.Partition)
		add(pre+"default_time", c.DefaultTime)
		add(pre+"max_time", c.MaxTime)
		add(pre+"requeue", c.Requeue)
		add(pre+"whole_nodes", c.WholeNodes)
		add(pre+"switches", c.Switches)
		add(pre+"max_gpus_per_job", c.MaxGPUsPerJob)
		add(pre+"line", c.Line)
		add(pre+"max_time_line", c.MaxTimeLine)
		add(pre+"max_gpus_line", c.MaxGPUsLine)
		add(pre+"whole_nodes_line", c.WholeNodesLine)
	}
	for part, c := range m.Partitions {
		add("partitions."+part, c)
	}
	limit := func(pre string, l jobpolicy.Limit) {
		add(pre+".limit", l.Limit)
		add(pre+".owner", l.Owner)
		add(pre+".line", l.Line)
	}
	for n, a := range m.Accounts {
		pre := "accounts." + n + "."
		add(pre+"tenant", a.Tenant)
		add(pre+"project", a.Project)
		add(pre+"line", a.Line)
		add(pre+"classes_line", a.ClassesLine)
		for _, c := range a.Classes {
			add(pre+"classes."+c, true)
		}
		if a.GPUs != nil {
			limit(pre+"gpus", *a.GPUs)
		}
		for typ, l := range a.GPUsByType {
			limit(pre+"gpus_by_type."+typ, l)
		}
		for _, u := range a.Members {
			add(pre+"members."+u, true)
		}
		for u, line := range a.Viewers {
			add(pre+"viewers."+u, line)
		}
		for i, img := range a.Images {
			add(fmt.Sprintf("%simages.%d", pre, i+1), img)
		}
		if a.ImagesLine > 0 {
			add(pre+"images_line", a.ImagesLine)
		}
	}
	for u, a := range m.Users {
		add("users."+u, a)
	}
	if m.OCIBundles != "" {
		add("oci_bundles", m.OCIBundles)
	}
	sort.Strings(out)
	return out
}

// TestLuaQuoting: keys and strings with quotes, backslashes, control
// bytes, UTF-8 and Lua keywords come back from Lua as they went in.
func TestLuaQuoting(t *testing.T) {
	lua := luatest.Require(t)
	cases := map[string]string{
		"plain":     "gpu",
		"dash":      "acme-llm",
		"quote":     `a"b`,
		"backslash": `a\b`,
		"newline":   "a\nb",
		"nul":       "a\x00b",
		"utf8":      "Zürich",
		"keyword":   "end",
		"digit":     "1abc",
		"empty":     "",
	}
	var src strings.Builder
	src.WriteString("return {\n")
	for _, v := range cases {
		src.WriteString("  " + luaKey(v) + " = " + luastr.Quote(v) + ",\n")
	}
	src.WriteString("}\n")
	const script = `
local f = assert(io.open(arg[1] .. "/data.lua", "rb"))
local t = assert((loadstring or load)(f:read("*a")))()
local keys = {}
for k, v in pairs(t) do
  assert(k == v, "key and value differ")
  keys[#keys + 1] = k
end
table.sort(keys)
for _, k in ipairs(keys) do
  io.write((k:gsub(".", function(c) return string.format("%02x", c:byte()) end)), "\n")
end
`
	out, err := lua.Run(t.Context(), script, map[string][]byte{"data.lua": []byte(src.String())})
	if err != nil {
		t.Fatalf("%v\n%s", err, src.String())
	}
	var want []string
	for _, v := range cases {
		want = append(want, fmt.Sprintf("%x", v))
	}
	sort.Strings(want)
	got := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("strings after a trip through Lua (-want +got, hex):\n%s", diff)
	}
}

// FuzzLuaString: whatever the bytes, the quoted string is printable ASCII
// and reads back, by Lua's rules for "\\", "\"" and "\ddd", as the input;
// luaKey is a plain identifier or a quoted key. TestLuaQuoting checks the
// same in a real Lua.
func FuzzLuaString(f *testing.F) {
	for _, s := range []string{"gpu", "acme-llm", `a"b`, `a\b`, "a\nb", "a\x00b", "Zürich", "end", "1abc", "", "\x7f\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := luastr.Quote(s)
		for i := 0; i < len(q); i++ {
			if q[i] < 0x20 || q[i] >= 0x7f {
				t.Fatalf("luastr.Quote(%q) = %q: byte %#x is not printable ASCII", s, q, q[i])
			}
		}
		if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
			t.Fatalf("luastr.Quote(%q) = %q: not quoted", s, q)
		}
		var back []byte
		body := q[1 : len(q)-1]
		for i := 0; i < len(body); i++ {
			c := body[i]
			switch {
			case c == '"':
				t.Fatalf("luastr.Quote(%q) = %q: an unescaped quote", s, q)
			case c != '\\':
				back = append(back, c)
			case i+1 < len(body) && (body[i+1] == '\\' || body[i+1] == '"'):
				back = append(back, body[i+1])
				i++
			case i+3 < len(body) && isDigits(body[i+1:i+4]):
				var n int
				fmt.Sscanf(body[i+1:i+4], "%d", &n)
				if n > 255 {
					t.Fatalf("luastr.Quote(%q) = %q: escape \\%s is above 255", s, q, body[i+1:i+4])
				}
				back = append(back, byte(n))
				i += 3
			default:
				t.Fatalf("luastr.Quote(%q) = %q: a backslash Lua would not read", s, q)
			}
		}
		if string(back) != s {
			t.Fatalf("luastr.Quote(%q) = %q reads back as %q", s, q, back)
		}
		if k := luaKey(s); k != q && k != "["+q+"]" && k != s {
			t.Fatalf("luaKey(%q) = %q", s, k)
		}
	})
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// TestJobPolicyJSON: jobpolicy.json, registered beside policy.lua, is the
// same model policy.lua is written from, and jobpolicy.Parse (what the
// portal reads it with) reads it back to that model.
func TestJobPolicyJSON(t *testing.T) {
	p, _ := loadExample(t)
	out, err := JobPolicyJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := jobpolicy.Parse(out)
	if err != nil {
		t.Fatalf("the portal cannot read what policy renders: %v\n%s", err, out)
	}
	if diff := cmp.Diff(flatten(JobSubmitModel(p)), flatten(got)); diff != "" {
		t.Errorf("jobpolicy.json differs from the model of policy.lua (-model +json):\n%s", diff)
	}
	var found bool
	for _, f := range Files() {
		if f.Name == "strata/jobpolicy.json" && f.Dir == DirSlurm && f.Mode == 0o644 {
			found = true
		}
	}
	if !found {
		t.Errorf("strata/jobpolicy.json is not registered beside policy.lua")
	}
}
