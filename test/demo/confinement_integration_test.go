//go:build integration

package main

import (
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/testbed"
)

// TestConfinementOnTestBeds: on the Slurm test beds (chroot, what make
// demo runs), the demo says their jobs are not confined and where they
// are: the node bed.
func TestConfinementOnTestBeds(t *testing.T) {
	for _, b := range testbed.All(t) {
		got, err := confinement(b)
		if err != nil {
			t.Fatalf("%s: %v", b.Name, err)
		}
		if !strings.Contains(got, "Confinement: none") || !strings.Contains(got, "CgroupPlugin=disabled") || !strings.Contains(got, "node bed") {
			t.Errorf("%s: the demo says:\n%s\nwant no confinement (CgroupPlugin=disabled), pointing to the node bed", b.Name, got)
		}
	}
}

// TestConfinementOnNodeBeds: on the node beds, the demo names the cgroup
// v2 confinement their node runs under.
func TestConfinementOnNodeBeds(t *testing.T) {
	for _, b := range testbed.NodeBeds(t) {
		got, err := confinement(b)
		if err != nil {
			t.Fatalf("%s: %v", b.Name, err)
		}
		if want := "CgroupPlugin=cgroup/v2, ConstrainDevices, ConstrainCores, ConstrainRAMSpace"; !strings.Contains(got, want) || !strings.Contains(got, b.NodeAccel) {
			t.Errorf("%s: the demo says:\n%s\nwant %q under %s", b.Name, got, want, b.NodeAccel)
		}
	}
}
