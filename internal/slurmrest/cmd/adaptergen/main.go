// Command adaptergen writes the slurmrestd clients of package slurmrest,
// their adapters and the list of parsers, from the parsers listed in
// package adaptergen and the specs captured under spec/raw. Run it through
// make generate-slurmrest, which passes the pinned oapi-codegen.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/strata-hpc/strata/internal/slurmrest/adaptergen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "adaptergen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("adaptergen", flag.ContinueOnError)
	dir := fs.String("dir", "internal/slurmrest", "directory of package slurmrest")
	tool := fs.String("oapi-codegen", "", "the oapi-codegen to run (the pinned version: make generate-slurmrest)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: adaptergen takes only flags", fs.Arg(0))
	}
	return adaptergen.Generate(ctx, *dir, *tool, adaptergen.Parsers)
}
