// Package adaptergen writes what package slurmrest holds for each slurmrestd
// data parser: the prepared OpenAPI spec, the oapi-codegen client and the
// adapter between that client and Strata's types, and the list of parsers
// the client offers.
//
// Every adapter comes from one template (templates/adapter.go.tmpl). What
// differs between parsers is data, one Parser value a parser (v0042.go,
// v0045.go): a field that moved, a type that became an enum, an endpoint a
// parser lacks. Parsers (parsers.go) lists them, newest first; it is the
// only list of parsers in Strata.
package adaptergen

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"go/token"
	"path"
	"regexp"
	"strconv"
	"strings"
	"text/template"
)

// Parser is one slurmrestd data parser and how its generated client differs
// from the others'.
type Parser struct {
	// Version is the parser's name in slurmrestd's paths, e.g. "v0.0.45".
	Version string
	// RawSpec is the OpenAPI document captured from a slurmrestd that
	// offers the parser, under spec/raw (make capture-slurmrest).
	RawSpec string
	// Releases says which Slurm releases offer the parser, for comments.
	Releases string
	Quirks   Quirks
}

// Quirks are the differences between parsers' generated clients that the
// adapter template must know. Each is named after what the adapter reads or
// writes; its zero value is the older parsers' shape.
type Quirks struct {
	// PingStatus is the field of a ping entry holding the controller's
	// status ("UP", "DOWN"): Pinged up to v0.0.42, Status after.
	PingStatus string
	// JobSharedEnum is the element type of job_desc_msg.shared: "string"
	// where it is a plain string list, else the generated enum's name.
	JobSharedEnum string
	// QOSFlagEnum is the element type of qos.flags, as JobSharedEnum.
	QOSFlagEnum string
	// NodeStateEnum is the element type of update_node_msg.state, as
	// JobSharedEnum.
	NodeStateEnum string
	// AccountsAddCondByValue is true where
	// openapi_accounts_add_cond_resp.association_condition is required,
	// so the generated field is a value and not a pointer.
	AccountsAddCondByValue bool
	// Requeue is true where the parser has GET /job/{job_id}/requeue; the
	// client falls back to its Requeuer elsewhere.
	Requeue bool
}

var versionRE = regexp.MustCompile(`^v0\.0\.([0-9]{2,})$`)

// Package is the Go package of the parser's generated client, e.g. "v0045".
func (p Parser) Package() string {
	m := versionRE.FindStringSubmatch(p.Version)
	if m == nil {
		return ""
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n > 9999 {
		return ""
	}
	return fmt.Sprintf("v%04d", n)
}

// Tag is the version in generated identifiers: V0045JobInfo, SlurmV0045GetPing.
func (p Parser) Tag() string { return "V" + strings.TrimPrefix(p.Package(), "v") }

// Spec is the prepared spec, relative to package slurmrest's directory.
func (p Parser) Spec() string { return path.Join("spec", p.Version+".json") }

// Raw is the captured spec, relative to package slurmrest's directory.
func (p Parser) Raw() string { return path.Join("spec", "raw", p.RawSpec) }

// Client is the oapi-codegen output, relative to package slurmrest's directory.
func (p Parser) Client() string { return path.Join(p.Package(), p.Package()+".gen.go") }

// Adapter is the generated adapter, relative to package slurmrest's directory.
func (p Parser) Adapter() string { return "adapter_" + p.Package() + ".gen.go" }

// Validate returns every problem of the parser list at once.
func Validate(parsers []Parser) error {
	var errs []error
	if len(parsers) == 0 {
		errs = append(errs, errors.New("no parsers"))
	}
	seen := map[string]bool{}
	for i, p := range parsers {
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("parser %d (%q): %s", i, p.Version, fmt.Sprintf(format, a...)))
		}
		if p.Package() == "" {
			bad("version must look like v0.0.45")
		}
		if seen[p.Version] {
			bad("listed twice")
		}
		seen[p.Version] = true
		if i > 0 && p.Package() != "" && parsers[i-1].Package() != "" && p.Package() >= parsers[i-1].Package() {
			bad("not older than %s: list parsers newest first", parsers[i-1].Version)
		}
		if p.RawSpec == "" || path.Base(p.RawSpec) != p.RawSpec || path.Ext(p.RawSpec) != ".json" {
			bad("RawSpec %q must name a .json file under spec/raw", p.RawSpec)
		}
		if p.Releases == "" {
			bad("Releases is empty")
		}
		q := p.Quirks
		for _, f := range []struct{ name, id string }{
			{"PingStatus", q.PingStatus}, {"JobSharedEnum", q.JobSharedEnum}, {"QOSFlagEnum", q.QOSFlagEnum},
			{"NodeStateEnum", q.NodeStateEnum},
		} {
			if !token.IsIdentifier(f.id) {
				bad("Quirks.%s %q is not a Go identifier", f.name, f.id)
			}
		}
	}
	return errors.Join(errs...)
}

//go:embed templates/*.tmpl
var templates embed.FS

var tmpl = template.Must(template.New("").Funcs(template.FuncMap{
	"enum": func(name string) string { // a type of the generated package, or a predeclared one
		if token.IsExported(name) {
			return "gen." + name
		}
		return name
	},
}).ParseFS(templates, "templates/*.tmpl"))

// File is one file this package writes, relative to package slurmrest's
// directory.
type File struct {
	Path string
	Data []byte
}

// Files renders every file derived from the parser list alone: each
// parser's adapter, the oapi-codegen configuration and package comment of
// its client, and the registry of parsers. The specs and the clients are
// derived from captured documents as well (see Generate).
func Files(parsers []Parser) ([]File, error) {
	if err := Validate(parsers); err != nil {
		return nil, err
	}
	var out []File
	for _, p := range parsers {
		for _, f := range []struct{ name, path string }{
			{"adapter.go.tmpl", p.Adapter()},
			{"oapi-codegen.yaml.tmpl", path.Join(p.Package(), "oapi-codegen.yaml")},
			{"doc.go.tmpl", path.Join(p.Package(), "doc.go")},
		} {
			data, err := render(f.name, p)
			if err != nil {
				return nil, err
			}
			out = append(out, File{Path: f.path, Data: data})
		}
	}
	data, err := render("parsers.go.tmpl", parsers)
	if err != nil {
		return nil, err
	}
	return append(out, File{Path: "parsers.gen.go", Data: data}), nil
}

func render(name string, data any) ([]byte, error) {
	var b bytes.Buffer
	if err := tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return nil, fmt.Errorf("adaptergen: %s: %w", name, err)
	}
	if !strings.HasSuffix(name, ".go.tmpl") {
		return b.Bytes(), nil
	}
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("adaptergen: %s renders invalid Go: %w", name, err)
	}
	return src, nil
}
