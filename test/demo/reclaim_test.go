package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReplayOf: the idle job's GPUs and the free ones replay at 0%, every
// other job's at 95%, each GPU with its job, twice (the replay loops).
func TestReplayOf(t *testing.T) {
	got := strings.Split(strings.TrimSpace(string(replayOf("gpu3", 3, map[int]int64{0: 7, 1: 9}, 7))), "\n")
	want := []string{
		"# strata-demo: node gpu3",
		"offset_seconds,gpu,uuid,model,util,mem_activity,sm_active,mem_used_mib,mem_total_mib,pids,jobs",
		"0,0,GPU-00000000-0000-4000-8000-000003000000,NVIDIA H100 80GB HBM3,0,0,,2048,81559,,7",
		"0,1,GPU-00000000-0000-4000-8000-000003000001,NVIDIA H100 80GB HBM3,95,47,,60000,81559,,9",
		"0,2,GPU-00000000-0000-4000-8000-000003000002,NVIDIA H100 80GB HBM3,0,0,,2048,81559,,",
		"1,0,GPU-00000000-0000-4000-8000-000003000000,NVIDIA H100 80GB HBM3,0,0,,2048,81559,,7",
		"1,1,GPU-00000000-0000-4000-8000-000003000001,NVIDIA H100 80GB HBM3,95,47,,60000,81559,,9",
		"1,2,GPU-00000000-0000-4000-8000-000003000002,NVIDIA H100 80GB HBM3,0,0,,2048,81559,,",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("replay (-want +got):\n%s", d)
	}
}
