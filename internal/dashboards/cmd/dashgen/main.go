// Command dashgen writes Strata's Grafana dashboards (package dashboards)
// into a folder, one JSON file each: `make generate` runs it on
// etc/grafana.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-hpc/strata/internal/atomicfile"
	"github.com/strata-hpc/strata/internal/dashboards"
)

func main() {
	dir := flag.String("dir", "etc/grafana", "folder to write the dashboards into")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "dashgen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, b := range dashboards.Boards() {
		data, err := b.JSON()
		if err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(dir, b.File), data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", b.File, err)
		}
	}
	return nil
}
