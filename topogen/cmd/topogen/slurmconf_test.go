package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSlurmConfNodes(t *testing.T) {
	conf := []byte(`# a slurm.conf
NodeName=DEFAULT RealMemory=64000
NodeName=gpu[1-2] Boards=1 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=2 Gres=gpu:h100:8
NodeName=cpu1 Sockets=2 CoresPerSocket=32
NodeName=old1 CPUs=96 ThreadsPerCore=2   # 48 cores
NodeName=bare1
PartitionName=gpu Nodes=gpu[1-2] Default=YES
`)
	names, cores, err := slurmConfNodes(conf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"gpu1", "gpu2", "cpu1", "old1", "bare1"}, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"gpu1": 16, "gpu2": 16, "cpu1": 64, "old1": 48}, cores); diff != "" {
		t.Errorf("cores (-want +got):\n%s", diff)
	}
	if _, _, err := slurmConfNodes([]byte("NodeName=n[A-B]\n")); err == nil {
		t.Errorf("a non-numeric range in slurm.conf was accepted")
	}
}
