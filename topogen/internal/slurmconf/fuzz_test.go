package slurmconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzReadFile reads a fuzzed slurm.conf that may include a fuzzed
// nodes.conf (and, through a glob, conf.d/*.conf) from disk: it never
// panics or runs on (loops and depth are bounded); what it accepts names
// each node's cores only for nodes it lists, each a count a node can
// have; and a file without Include lines reads as Nodes reads its bytes.
// Seeded from TestNodes' cases and Include lines of TestReadFile.
func FuzzReadFile(f *testing.F) {
	for _, tc := range cases {
		f.Add([]byte(tc.conf), []byte("NodeName=gpu[1-2] CPUs=16\n"))
	}
	for _, s := range [][2]string{
		{"ClusterName=c\nInclude nodes.conf\nPartitionName=p Nodes=ALL\n", "NodeName=gpu[1-2] CPUs=16\n"},
		{"include nodes.conf\n", "include slurm.conf\n"},
		{"include conf.d/*.conf\n", "NodeName=x Sockets=2 CoresPerSocket=4\n"},
		{"Include /nonexistent/x.conf\n", ""},
		{"include nodes.conf\ninclude nodes.conf\n", "NodeName=n1\n"},
		{"NodeName=n1 Boards=99999 SocketsPerBoard=99999 CoresPerSocket=99999\n", ""},
		{"NodeName=n1 CPUs=9223372036854775807 ThreadsPerCore=1\n", ""},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, conf, nodes []byte) {
		dir := t.TempDir()
		for name, data := range map[string][]byte{"slurm.conf": conf, "nodes.conf": nodes, "conf.d/a.conf": nodes} {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		names, cores, err := ReadFile(filepath.Join(dir, "slurm.conf"))
		hasInclude := false
		for _, l := range strings.Split(string(conf), "\n") {
			if j := strings.IndexByte(l, '#'); j >= 0 {
				l = l[:j]
			}
			if _, ok := includeArg(strings.TrimRight(l, "\r")); ok {
				hasInclude = true
			}
		}
		if !hasInclude {
			n2, c2, err2 := Nodes(conf)
			if (err == nil) != (err2 == nil) {
				t.Fatalf("ReadFile: %v; Nodes: %v", err, err2)
			}
			if err == nil && (!cmp.Equal(names, n2) || !cmp.Equal(cores, c2)) {
				t.Fatalf("ReadFile = %v %v; Nodes = %v %v", names, cores, n2, c2)
			}
		}
		if err != nil {
			return
		}
		named := map[string]bool{}
		for _, n := range names {
			named[n] = true
		}
		for n, c := range cores {
			if !named[n] || c <= 0 || c > MaxCores {
				t.Fatalf("cores[%q] = %d for names %v", n, c, names)
			}
		}
	})
}
