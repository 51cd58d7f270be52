// Package slurmconf reads what topogen needs from a slurm.conf: the nodes
// its NodeName= lines declare and the physical cores of each. It is a pure
// function of the file's bytes.
package slurmconf

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/internal/hostlist"
)

// Nodes lists the NodeName= entries of a slurm.conf, in file order, and
// the physical cores of each where its line says (Boards × SocketsPerBoard
// × CoresPerSocket, Sockets × CoresPerSocket, or CPUs / ThreadsPerCore).
// NodeName=DEFAULT lines declare no node. A host list it cannot expand is
// an error naming the line.
func Nodes(data []byte) (names []string, cores map[string]int, err error) {
	cores = map[string]int{}
	for i, line := range strings.Split(string(data), "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
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
			return nil, nil, fmt.Errorf("slurm.conf line %d: %w", i+1, err)
		}
		names = append(names, hs...)
		num := func(k string, def int) int {
			n, err := strconv.Atoi(kv[k])
			if err != nil || n <= 0 {
				return def
			}
			return n
		}
		n := 0
		switch {
		case kv["corespersocket"] != "" && kv["socketsperboard"] != "":
			n = num("boards", 1) * num("socketsperboard", 1) * num("corespersocket", 1)
		case kv["corespersocket"] != "":
			n = num("sockets", 1) * num("corespersocket", 1)
		case kv["cpus"] != "":
			n = num("cpus", 0) / num("threadspercore", 1)
		}
		if n > 0 {
			for _, h := range hs {
				cores[h] = n
			}
		}
	}
	return names, cores, nil
}
