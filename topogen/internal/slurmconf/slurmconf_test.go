package slurmconf

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var cases = map[string]struct {
	conf      string
	wantNames []string
	wantCores map[string]int
	wantErr   string
}{
	"every way to give cores": {
		conf: `# a slurm.conf
NodeName=DEFAULT RealMemory=64000
NodeName=gpu[1-2] Boards=1 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=2 Gres=gpu:h100:8
NodeName=cpu1 Sockets=2 CoresPerSocket=32
NodeName=old1 CPUs=96 ThreadsPerCore=2   # 48 cores
NodeName=bare1
PartitionName=gpu Nodes=gpu[1-2] Default=YES
`,
		wantNames: []string{"gpu1", "gpu2", "cpu1", "old1", "bare1"},
		wantCores: map[string]int{"gpu1": 16, "gpu2": 16, "cpu1": 64, "old1": 48},
	},
	"case and comments": {
		conf:      "nodename=n1 cpus=8\n#NodeName=n2\nPartitionName=p NodeName=ignored\n",
		wantNames: []string{"n1"},
		wantCores: map[string]int{"n1": 8},
	},
	"nonsense counts count as one": {
		conf:      "NodeName=n1 Sockets=x CoresPerSocket=-4\n",
		wantNames: []string{"n1"},
		wantCores: map[string]int{"n1": 1},
	},
	// No node has a quadrillion cores; 2^32 × 2^32 would wrap to 0.
	"counts beyond any node give none": {
		conf:      "NodeName=n1 Boards=99999 SocketsPerBoard=99999 CoresPerSocket=99999\nNodeName=n2 Sockets=4294967296 CoresPerSocket=4294967296\n",
		wantNames: []string{"n1", "n2"}, wantCores: map[string]int{},
	},
	"no nodes":                  {conf: "ClusterName=c\n", wantCores: map[string]int{}},
	"bad range":                 {conf: "ClusterName=c\nNodeName=n[A-B]\n", wantErr: "slurm.conf:2: "},
	"an Include needs the file": {conf: "ClusterName=c\ninclude nodes.conf\n", wantErr: "slurm.conf:2: an Include line needs the file on disk"},
	"a key that starts like Include is no Include": {
		conf:      "IncludeX=1\nNodeName=n1\n",
		wantNames: []string{"n1"}, wantCores: map[string]int{},
	},
}

func TestNodes(t *testing.T) {
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			names, cores, err := Nodes([]byte(tc.conf))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantNames, names); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCores, cores); diff != "" {
				t.Errorf("cores (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzNodes: any file either fails or gives cores only for nodes it
// names, each positive.
func FuzzNodes(f *testing.F) {
	for _, tc := range cases {
		f.Add([]byte(tc.conf))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		names, cores, err := Nodes(data)
		if err != nil {
			return
		}
		named := map[string]bool{}
		for _, n := range names {
			named[n] = true
		}
		for n, c := range cores {
			if !named[n] || c <= 0 {
				t.Fatalf("cores[%q] = %d for names %v", n, c, names)
			}
		}
	})
}

// TestReadFile: Include lines are followed with Slurm's rules, and loops,
// missing files and runaway nesting are errors naming the line.
func TestReadFile(t *testing.T) {
	for name, tc := range map[string]struct {
		files     map[string]string // relative to the test's directory; "etc/slurm.conf" is read
		wantNames []string
		wantCores map[string]int
		wantErr   string
	}{
		"relative to slurm.conf's directory, nested ones too": {
			files: map[string]string{
				"etc/slurm.conf":     "ClusterName=c\nInclude nodes.conf\nPartitionName=p Nodes=ALL\n",
				"etc/nodes.conf":     "NodeName=gpu[1-2] CPUs=16\ninclude sub/more.conf\n",
				"etc/sub/more.conf":  "include extra.conf # relative to etc/, not etc/sub/\n",
				"etc/extra.conf":     "NodeName=cpu1\n",
				"etc/sub/extra.conf": "NodeName=wrong1\n",
			},
			wantNames: []string{"gpu1", "gpu2", "cpu1"},
			wantCores: map[string]int{"gpu1": 16, "gpu2": 16},
		},
		"absolute path and a glob in name order": {
			files: map[string]string{
				"etc/slurm.conf":        "NodeName=head1\nINCLUDE\t{{dir}}/etc/nodes.d/*.conf\n",
				"etc/nodes.d/20-b.conf": "NodeName=b1\n",
				"etc/nodes.d/10-a.conf": "NodeName=a1\n",
				"etc/nodes.d/README":    "NodeName=not1\n",
			},
			wantNames: []string{"head1", "a1", "b1"},
			wantCores: map[string]int{},
		},
		"a glob that matches nothing includes nothing": {
			files:     map[string]string{"etc/slurm.conf": "NodeName=n1\nInclude nodes.d/*.conf\n"},
			wantNames: []string{"n1"}, wantCores: map[string]int{},
		},
		"a missing file": {
			files:   map[string]string{"etc/slurm.conf": "ClusterName=c\nInclude nodes.conf\n"},
			wantErr: "slurm.conf:2: include nodes.conf: open",
		},
		"an include loop": {
			files: map[string]string{
				"etc/slurm.conf": "Include a.conf\n",
				"etc/a.conf":     "NodeName=a1\nInclude b.conf\n",
				"etc/b.conf":     "Include a.conf\n",
			},
			wantErr: "include loop",
		},
		"a file that includes itself": {
			files:   map[string]string{"etc/slurm.conf": "Include slurm.conf\n"},
			wantErr: "include loop",
		},
		"an Include with no path": {
			files:   map[string]string{"etc/slurm.conf": "NodeName=n1\nInclude   \n"},
			wantErr: "slurm.conf:2: Include names no file",
		},
		"a bad host list in an included file": {
			files: map[string]string{
				"etc/slurm.conf": "Include nodes.conf\n",
				"etc/nodes.conf": "\n\nNodeName=n[A-B]\n",
			},
			wantErr: "nodes.conf:3: ",
		},
		"nesting too deep": {
			files:   deepChain(MaxIncludeDepth + 2),
			wantErr: "nest more than",
		},
		"nesting as deep as allowed": {
			files:     deepChain(MaxIncludeDepth),
			wantNames: []string{"leaf1"}, wantCores: map[string]int{},
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for p, text := range tc.files {
				p = filepath.Join(dir, p)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(strings.ReplaceAll(text, "{{dir}}", dir)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			names, cores, err := ReadFile(filepath.Join(dir, "etc", "slurm.conf"))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantNames, names); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCores, cores); diff != "" {
				t.Errorf("cores (-want +got):\n%s", diff)
			}
		})
	}
}

// deepChain is slurm.conf including f1.conf including f2.conf ... n
// levels deep, the last declaring leaf1.
func deepChain(n int) map[string]string {
	files := map[string]string{"etc/slurm.conf": "Include f1.conf\n"}
	for i := 1; i < n; i++ {
		files[filepath.Join("etc", "f"+strconv.Itoa(i)+".conf")] = "Include f" + strconv.Itoa(i+1) + ".conf\n"
	}
	files[filepath.Join("etc", "f"+strconv.Itoa(n)+".conf")] = "NodeName=leaf1\n"
	return files
}
