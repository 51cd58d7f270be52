package slurmconf

import (
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
	"no nodes":  {conf: "ClusterName=c\n", wantCores: map[string]int{}},
	"bad range": {conf: "ClusterName=c\nNodeName=n[A-B]\n", wantErr: "slurm.conf line 2"},
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
