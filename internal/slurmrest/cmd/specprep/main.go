// Command specprep writes the per-parser OpenAPI spec that oapi-codegen
// generates the slurmrestd client from. See package specprep for what it
// changes and why.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/strata-hpc/strata/internal/slurmrest/specprep"
)

func main() {
	in := flag.String("in", "", "OpenAPI document captured from slurmrestd (GET /openapi/v3)")
	out := flag.String("out", "", "where to write the prepared spec")
	parser := flag.String("parser", "", "data parser to select, for example v0.0.42")
	flag.Parse()
	if err := run(*in, *out, *parser); err != nil {
		fmt.Fprintln(os.Stderr, "specprep:", err)
		os.Exit(1)
	}
}

func run(in, out, parser string) error {
	if in == "" || out == "" || parser == "" {
		return fmt.Errorf("-in, -out and -parser are required")
	}
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	spec, err := specprep.Prepare(raw, parser)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	return os.WriteFile(out, spec, 0o644)
}
