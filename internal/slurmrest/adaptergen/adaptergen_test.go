package adaptergen

import (
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParserNames(t *testing.T) {
	for version, want := range map[string]struct{ pkg, tag, adapter string }{
		"v0.0.45":  {"v0045", "V0045", "adapter_v0045.gen.go"},
		"v0.0.46":  {"v0046", "V0046", "adapter_v0046.gen.go"},
		"v0.0.100": {"v0100", "V0100", "adapter_v0100.gen.go"},
		"0.0.45":   {"", "V", "adapter_.gen.go"},
		"v0.1.0":   {"", "V", "adapter_.gen.go"},
		"v0.0.4":   {"", "V", "adapter_.gen.go"},
	} {
		p := Parser{Version: version}
		got := struct{ pkg, tag, adapter string }{p.Package(), p.Tag(), p.Adapter()}
		if got != want {
			t.Errorf("%s: got %+v, want %+v", version, got, want)
		}
	}
}

// next is a parser newer than every listed one, shaped like the newest.
func next() Parser {
	p := Parsers[0]
	p.Version, p.RawSpec, p.Releases = "v0.0.99", "slurm-99.05.json", "Slurm 99.05"
	q := &p.Quirks
	q.JobSharedEnum = strings.Replace(q.JobSharedEnum, Parsers[0].Tag(), "V0099", 1)
	q.QOSFlagEnum = strings.Replace(q.QOSFlagEnum, Parsers[0].Tag(), "V0099", 1)
	q.NodeStateEnum = strings.Replace(q.NodeStateEnum, Parsers[0].Tag(), "V0099", 1)
	return p
}

func TestValidate(t *testing.T) {
	good := next()
	for name, tc := range map[string]struct {
		parsers []Parser
		want    []string // one line each, in order
	}{
		"the list":   {parsers: Parsers},
		"a new one":  {parsers: append([]Parser{good}, Parsers...)},
		"empty list": {want: []string{"no parsers"}},
		"every problem at once": {
			parsers: []Parser{
				{Version: "0.0.47", RawSpec: "raw/slurm.json", Quirks: Quirks{PingStatus: "p.Status", JobSharedEnum: "string", QOSFlagEnum: "", NodeStateEnum: "string"}},
				good, Parsers[len(Parsers)-1], good,
			},
			want: []string{
				`parser 0 ("0.0.47"): version must look like v0.0.45`,
				`parser 0 ("0.0.47"): RawSpec "raw/slurm.json" must name a .json file under spec/raw`,
				`parser 0 ("0.0.47"): Releases is empty`,
				`parser 0 ("0.0.47"): Quirks.PingStatus "p.Status" is not a Go identifier`,
				`parser 0 ("0.0.47"): Quirks.QOSFlagEnum "" is not a Go identifier`,
				`parser 3 ("v0.0.99"): listed twice`,
				`parser 3 ("v0.0.99"): not older than ` + Parsers[len(Parsers)-1].Version + `: list parsers newest first`,
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var got []string
			if err := Validate(tc.parsers); err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// generatedRE is the line by which Go tools know a generated file.
var generatedRE = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// TestAdapterOnlyNamesItsParser renders a parser that is not listed: if the
// template named a listed parser anywhere, the new adapter would use that
// parser's client.
func TestAdapterOnlyNamesItsParser(t *testing.T) {
	p := next()
	files, err := Files([]Parser{p})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for _, q := range Parsers {
			for _, token := range []string{q.Version, q.Package(), q.Tag()} {
				if strings.Contains(string(f.Data), token) {
					t.Errorf("%s names %s, which is another parser's", f.Path, token)
				}
			}
		}
	}
	if !strings.Contains(string(files[0].Data), `gen "github.com/strata-hpc/strata/internal/slurmrest/v0099"`) {
		t.Errorf("%s does not import client v0099", files[0].Path)
	}
}

func TestGeneratedGo(t *testing.T) {
	files, err := Files(Parsers)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f.Path, ".gen.go") {
			continue
		}
		if !generatedRE.Match(f.Data) {
			t.Errorf("%s lacks the `// Code generated ... DO NOT EDIT.` line", f.Path)
		}
		file, err := parser.ParseFile(token.NewFileSet(), f.Path, f.Data, 0)
		if err != nil {
			t.Errorf("%s: %v", f.Path, err)
			continue
		}
		if file.Name.Name != "slurmrest" {
			t.Errorf("%s is package %s, want slurmrest", f.Path, file.Name.Name)
		}
	}
	reg := string(files[len(files)-1].Data)
	if want := `var Parsers = []string{"v0.0.45", "v0.0.42"}`; !strings.Contains(reg, want) {
		t.Errorf("parsers.gen.go lacks %s:\n%s", want, reg)
	}
}

// TestQuirks checks that each quirk changes what its adapter does.
func TestQuirks(t *testing.T) {
	base := next()
	for name, tc := range map[string]struct {
		quirk         func(*Quirks)
		want, wantNot string
	}{
		"ping status field": {func(q *Quirks) { q.PingStatus = "Pinged" }, "Status: deref(p.Pinged)", "deref(p.Status)"},
		"no REST requeue": {func(q *Quirks) { q.Requeue = false },
			"requeue(context.Context, JobRef, bool) error { return ErrUnsupported }", "GetJobRequeueWithResponse"},
		"REST requeue": {func(q *Quirks) { q.Requeue = true }, "a.gen.SlurmV0099GetJobRequeueWithResponse(", "ErrUnsupported"},
		"optional association condition": {func(q *Quirks) { q.AccountsAddCondByValue = false },
			"AssociationCondition: &gen.V0099AccountsAddCond{", "AssociationCondition: gen."},
		"required association condition": {func(q *Quirks) { q.AccountsAddCondByValue = true },
			"AssociationCondition: gen.V0099AccountsAddCond{", "AssociationCondition: &gen."},
		"shared as strings": {func(q *Quirks) { q.JobSharedEnum = "string" }, `d.Shared = enums[string]([]string{"none"})`, "enums[gen.V0099JobDescMsgShared]"},
		"shared as enums": {func(q *Quirks) { q.JobSharedEnum = "V0099JobDescMsgShared" },
			`d.Shared = enums[gen.V0099JobDescMsgShared]([]string{"none"})`, `enums[string]([]string{"none"})`},
		"QOS flags as strings":   {func(q *Quirks) { q.QOSFlagEnum = "string" }, "x.Flags = enums[string](q.Flags)", "enums[gen.V0099QosFlags]"},
		"QOS flags as enums":     {func(q *Quirks) { q.QOSFlagEnum = "V0099QosFlags" }, "x.Flags = enums[gen.V0099QosFlags](q.Flags)", "enums[string](q.Flags)"},
		"node states as strings": {func(q *Quirks) { q.NodeStateEnum = "string" }, "State: enums[string](state)", "enums[gen.V0099UpdateNodeMsgState]"},
		"node states as enums": {func(q *Quirks) { q.NodeStateEnum = "V0099UpdateNodeMsgState" },
			"State: enums[gen.V0099UpdateNodeMsgState](state)", "enums[string](state)"},
	} {
		t.Run(name, func(t *testing.T) {
			p := base
			tc.quirk(&p.Quirks)
			src, err := render("adapter.go.tmpl", p)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(src), tc.want) {
				t.Errorf("adapter lacks %q", tc.want)
			}
			if strings.Contains(string(src), tc.wantNot) {
				t.Errorf("adapter has %q", tc.wantNot)
			}
		})
	}
}
