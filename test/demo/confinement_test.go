package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/testbed"
)

// TestCgroupConf reads Slurm's cgroup.conf settings as Slurm does: keys
// whatever their case, comments and blank lines skipped, the last value
// of a key kept.
func TestCgroupConf(t *testing.T) {
	for name, tc := range map[string]struct {
		text string
		want map[string]string
	}{
		"chroot bed": {"CgroupPlugin=disabled\n", map[string]string{"CgroupPlugin": "disabled"}},
		"node bed": {"# comment\nCgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\nConstrainCores=yes\n\nconstraindevices = yes # inline\n",
			map[string]string{"CgroupPlugin": "cgroup/v2", "IgnoreSystemd": "yes", "ConstrainCores": "yes", "ConstrainDevices": "yes"}},
		"last wins":    {"CgroupPlugin=cgroup/v1\ncgroupplugin=cgroup/v2\n", map[string]string{"CgroupPlugin": "cgroup/v2"}},
		"no settings":  {"just words\n#CgroupPlugin=disabled\n", map[string]string{}},
		"other key":    {"AllowedRAMSpace=100\n", map[string]string{"AllowedRAMSpace": "100"}},
		"empty":        {"", map[string]string{}},
		"value with =": {"CgroupMountpoint=/sys/fs/cgroup=x\n", map[string]string{"CgroupMountpoint": "/sys/fs/cgroup=x"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := cgroupConf([]byte(tc.text))
			if len(got) != len(tc.want) {
				t.Fatalf("cgroupConf(%q) = %v, want %v", tc.text, got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("cgroupConf(%q)[%s] = %q, want %q", tc.text, k, got[k], v)
				}
			}
		})
	}
}

func FuzzCgroupConf(f *testing.F) {
	for _, s := range []string{"CgroupPlugin=disabled\n", "ConstrainDevices=yes # x\n", "=\n", "a=b=c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for k, v := range cgroupConf([]byte(s)) {
			if strings.ContainsAny(k+v, "\n#") || k != strings.TrimSpace(k) || v != strings.TrimSpace(v) {
				t.Errorf("cgroupConf(%q): %q=%q keeps a newline, a comment or spaces", s, k, v)
			}
		}
	})
}

// TestConfinementNote: what the demo prints of a bed's confinement comes
// from the bed's cgroup.conf and whether its node is a VM: a chroot bed
// says none and points to the node bed; a node bed names the cgroup v2
// settings it runs with.
func TestConfinementNote(t *testing.T) {
	bed := func(conf string, vm bool) *testbed.Bed {
		root := t.TempDir()
		if conf != "" {
			if err := os.MkdirAll(filepath.Join(root, "etc/slurm"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "etc/slurm/cgroup.conf"), []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return &testbed.Bed{Root: root, NodeVM: vm, NodeAccel: "tcg", NodeKernel: "6.1.0-57-cloud-amd64"}
	}
	for name, tc := range map[string]struct {
		b       *testbed.Bed
		want    []string
		notWant []string
	}{
		"chroot bed": {bed("CgroupPlugin=disabled\n", false),
			[]string{"Confinement: none", "CgroupPlugin=disabled", "could open every GPU device", "make nodebed-up"}, []string{"cgroup v2 on"}},
		"node bed": {bed("CgroupPlugin=cgroup/v2\nConstrainCores=yes\nConstrainDevices=yes\nConstrainRAMSpace=yes\n", true),
			[]string{"cgroup v2 on the node's own kernel", "tcg", "6.1.0-57-cloud-amd64", "CgroupPlugin=cgroup/v2, ConstrainDevices, ConstrainCores, ConstrainRAMSpace"},
			[]string{"Confinement: none"}},
		"node bed with cgroups off": {bed("CgroupPlugin=disabled\n", true), []string{"Confinement: none"}, []string{"cgroup v2 on"}},
		"node bed without devices": {bed("CgroupPlugin=cgroup/v2\nConstrainCores=yes\n", true),
			[]string{"CgroupPlugin=cgroup/v2, ConstrainCores."}, []string{"ConstrainDevices"}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := confinement(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("the note has no %q:\n%s", w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("the note says %q:\n%s", w, got)
				}
			}
		})
	}
	if _, err := confinement(bed("", false)); err == nil || !strings.Contains(err.Error(), "cgroup.conf") {
		t.Errorf("a bed without cgroup.conf: %v, want an error naming it", err)
	}
}
