package spec

import "github.com/strata-hpc/strata/internal/strictyaml"

// A policy file's problems and positions are those of every hand-written
// YAML file of Strata (internal/strictyaml): the same "file:line:col:
// message (hint: ...)" errors, the same paths. Paths in a policy look like
// "cluster.name", "tenants[1].projects[0].members[2].user" and
// "tenants[0].limits.gpus_by_type.h100".
type (
	// Diagnostic is one problem of a policy file; Line and Col are 0 when
	// unknown (Validate on a policy built in code).
	Diagnostic = strictyaml.Diagnostic
	// Diagnostics are the problems of a policy file, sorted by position.
	Diagnostics = strictyaml.Diagnostics
	// Pos is a position in a policy file.
	Pos = strictyaml.Pos
	// Positions maps the path of every value Parse read to its position.
	Positions = strictyaml.Positions
)
