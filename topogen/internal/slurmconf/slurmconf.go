// Package slurmconf reads what topogen needs from a slurm.conf: the nodes
// its NodeName= lines declare and the physical cores of each. [Nodes] is a
// pure function of one file's bytes; [ReadFile] reads a slurm.conf from
// disk and follows its Include lines, as slurmctld does.
package slurmconf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/internal/hostlist"
)

// MaxIncludeDepth is how deep Include lines may nest. Real sites nest one
// or two levels; a deeper chain is a mistake, and a bound keeps a chain
// of distinct files from running on.
const MaxIncludeDepth = 16

// MaxCores is the most physical cores a node line may give: far more than
// any node has. A product of counts above it (or one that would overflow)
// is a mistake of the file, and the line gives no count.
const MaxCores = 1 << 20

// Nodes lists the NodeName= entries of a slurm.conf, in file order, and
// the physical cores of each where its line says (Boards × SocketsPerBoard
// × CoresPerSocket, Sockets × CoresPerSocket, or CPUs / ThreadsPerCore).
// NodeName=DEFAULT lines declare no node. A host list it cannot expand is
// an error naming the line. Bytes alone cannot follow an Include line, so
// one is an error here: read the file with [ReadFile].
func Nodes(data []byte) (names []string, cores map[string]int, err error) {
	r := &reader{cores: map[string]int{}}
	err = r.parse(data, "slurm.conf", func(string) error {
		return errors.New("an Include line needs the file on disk: read it with ReadFile")
	})
	return r.names, r.cores, err
}

// ReadFile reads the slurm.conf at path and every file its Include lines
// name, with Slurm's rules: a relative path is relative to the directory
// of slurm.conf (not of the including file, nor the working directory),
// and a path may be a glob, whose files are read in name order. A glob
// that matches nothing includes nothing; a plain path that is missing is
// an error, as slurmctld refuses it. An include loop, or nesting deeper
// than [MaxIncludeDepth], is an error.
func ReadFile(path string) (names []string, cores map[string]int, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, err
	}
	r := &reader{cores: map[string]int{}, base: filepath.Dir(abs)}
	if err := r.file(abs, path, nil); err != nil {
		return nil, nil, err
	}
	return r.names, r.cores, nil
}

type reader struct {
	names []string
	cores map[string]int
	base  string // the directory of the top slurm.conf
}

// file reads one file; stack is the chain of files that included it.
func (r *reader) file(abs, shown string, stack []string) error {
	for _, s := range stack {
		if s == abs {
			return fmt.Errorf("%s: include loop: %s", shown, strings.Join(append(stack, abs), " -> "))
		}
	}
	if len(stack) > MaxIncludeDepth {
		return fmt.Errorf("%s: Include lines nest more than %d deep: %s", shown, MaxIncludeDepth, strings.Join(stack, " -> "))
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return err
	}
	stack = append(stack, abs)
	return r.parse(data, shown, func(arg string) error {
		pattern := arg
		if !filepath.IsAbs(pattern) {
			pattern = filepath.Join(r.base, pattern)
		}
		files := []string{pattern}
		if hasMeta(pattern) {
			var err error
			if files, err = filepath.Glob(pattern); err != nil {
				return fmt.Errorf("include %s: %w", arg, err)
			}
		}
		for _, f := range files {
			if err := r.file(filepath.Clean(f), f, stack); err != nil {
				return fmt.Errorf("include %s: %w", arg, err)
			}
		}
		return nil
	})
}

func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// parse reads the lines of one file; include follows an Include line.
func (r *reader) parse(data []byte, name string, include func(arg string) error) error {
	for i, line := range strings.Split(string(data), "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		line = strings.TrimRight(line, "\r")
		if arg, ok := includeArg(line); ok {
			if arg == "" {
				return fmt.Errorf("%s:%d: Include names no file", name, i+1)
			}
			if err := include(arg); err != nil {
				return fmt.Errorf("%s:%d: %w", name, i+1, err)
			}
			continue
		}
		kv := map[string]string{}
		first := ""
		for _, f := range strings.Fields(line) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			if first == "" {
				first = strings.ToLower(k)
			}
			kv[strings.ToLower(k)] = v
		}
		if first != "nodename" || strings.EqualFold(kv["nodename"], "DEFAULT") {
			continue
		}
		hs, err := hostlist.Expand(kv["nodename"])
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, i+1, err)
		}
		r.names = append(r.names, hs...)
		// num is a count of the line: def when it is not a positive
		// number, 0 (no count for the line) when it is beyond MaxCores.
		num := func(k string, def int) int {
			n, err := strconv.Atoi(kv[k])
			switch {
			case errors.Is(err, strconv.ErrRange) || err == nil && n > MaxCores:
				return 0
			case err != nil || n <= 0:
				return def
			}
			return n
		}
		// product multiplies counts each at most MaxCores, so no step
		// overflows; 0 when it passes MaxCores.
		product := func(ns ...int) int {
			p := 1
			for _, n := range ns {
				if p *= n; p > MaxCores {
					return 0
				}
			}
			return p
		}
		n := 0
		switch {
		case kv["corespersocket"] != "" && kv["socketsperboard"] != "":
			n = product(num("boards", 1), num("socketsperboard", 1), num("corespersocket", 1))
		case kv["corespersocket"] != "":
			n = product(num("sockets", 1), num("corespersocket", 1))
		case kv["cpus"] != "":
			if tpc := num("threadspercore", 1); tpc > 0 {
				n = num("cpus", 0) / tpc
			}
		}
		if n > 0 {
			for _, h := range hs {
				r.cores[h] = n
			}
		}
	}
	return nil
}

// includeArg reports whether line is an Include line ("Include" in any
// case, then blanks, then the path) and returns its path.
func includeArg(line string) (string, bool) {
	line = strings.TrimLeft(line, " \t")
	if len(line) < len("include") || !strings.EqualFold(line[:len("include")], "include") {
		return "", false
	}
	rest := line[len("include"):]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false // IncludeSomething=...
	}
	return strings.TrimSpace(rest), true
}
