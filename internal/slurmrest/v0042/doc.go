// Package v0042 is the slurmrestd client for data parser v0.0.42, generated
// by oapi-codegen from the spec in ../spec. Only the slurmrest facade imports
// it; nothing else in Strata sees a generated type.
package v0042

//go:generate ../../../bin/oapi-codegen -config oapi-codegen.yaml ../spec/v0.0.42.json
