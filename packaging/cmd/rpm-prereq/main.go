// Command rpm-prereq marks dependencies of built RPMs as Requires(pre),
// which nfpm cannot write (packaging/internal/rpmhdr says why and how):
//
//	rpm-prereq -pre /usr/bin/systemd-sysusers dist/strata-reclaimd-1.0.0-1.x86_64.rpm
//
// `make packages` runs it on every RPM whose %pre makes users.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/strata-hpc/strata/internal/atomicfile"
	"github.com/strata-hpc/strata/packaging/internal/rpmhdr"
)

func main() {
	pre := flag.String("pre", "", "dependencies to mark Requires(pre), separated by commas")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: rpm-prereq -pre NAME[,NAME...] PACKAGE.rpm...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *pre == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, path := range flag.Args() {
		if err := mark(path, strings.Split(*pre, ",")); err != nil {
			fmt.Fprintf(os.Stderr, "rpm-prereq: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

func mark(path string, names []string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	p, err := rpmhdr.Parse(b)
	if err != nil {
		return err
	}
	if err := p.MarkPre(names...); err != nil {
		return err
	}
	return atomicfile.Write(path, p.Bytes(), st.Mode().Perm())
}
