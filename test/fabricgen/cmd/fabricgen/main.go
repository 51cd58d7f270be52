// Command fabricgen writes the benchmark fabrics to files, so a whole
// topogen process can be timed on them (and its peak memory read):
//
//	fabricgen big10k OUT             the valid 10,000-host, 8-rail, 3-tier fabric
//	fabricgen tile DUMP COPIES OUT   COPIES tiled copies of a classic dump
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"

	"github.com/strata-hpc/strata/test/fabricgen"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fabricgen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var write func(w *bufio.Writer) error
	switch {
	case len(args) == 2 && args[0] == "big10k":
		write = func(w *bufio.Writer) error { return fabricgen.Write(w, fabricgen.Big10k) }
	case len(args) == 4 && args[0] == "tile":
		dump, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		copies, err := strconv.Atoi(args[2])
		if err != nil {
			return fmt.Errorf("copies %q: %w", args[2], err)
		}
		write = func(w *bufio.Writer) error { return fabricgen.Tile(w, dump, copies) }
	default:
		return fmt.Errorf("usage: fabricgen big10k OUT | fabricgen tile DUMP COPIES OUT")
	}
	f, err := os.Create(args[len(args)-1])
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := write(w); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
