package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/strata-hpc/strata/internal/testbed"
)

// cgroupConf reads the settings of a cgroup.conf: Key=Value lines, keys
// in Slurm's spelling whatever their case in the file, comments and blank
// lines skipped; a later value of a key wins, as in Slurm.
func cgroupConf(data []byte) map[string]string {
	canon := map[string]string{}
	for _, k := range []string{"CgroupPlugin", "ConstrainDevices", "ConstrainCores", "ConstrainRAMSpace", "IgnoreSystemd"} {
		canon[strings.ToLower(k)] = k
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if c, known := canon[strings.ToLower(k)]; known {
			k = c
		}
		out[k] = strings.TrimSpace(v)
	}
	return out
}

// confinement says, on screen, what confines the jobs of bed b: read from
// the bed (its slurmctld's cgroup.conf, and whether its node is a VM), not
// assumed. The chroot bed, which make demo runs, confines nothing; the
// node bed does, and its tests are where confinement is shown.
func confinement(b *testbed.Bed) (string, error) {
	data, err := os.ReadFile(b.HostPath("/etc/slurm/cgroup.conf"))
	if err != nil {
		return "", fmt.Errorf("what confines the jobs: %w", err)
	}
	c := cgroupConf(data)
	plugin := c["CgroupPlugin"]
	if plugin == "" {
		plugin = "autodetect"
	}
	if b.NodeVM && plugin != "disabled" {
		var on []string
		for _, k := range []string{"ConstrainDevices", "ConstrainCores", "ConstrainRAMSpace"} {
			if strings.EqualFold(c[k], "yes") {
				on = append(on, k)
			}
		}
		return fmt.Sprintf(`== Confinement: cgroup v2 on the node's own kernel (a qemu VM, %s, kernel %s): CgroupPlugin=%s, %s.
   Each job sees and opens only its own GPUs, cores and memory; the node bed's tests show it (test/testbed/node/README.md).
`, b.NodeAccel, b.NodeKernel, plugin, strings.Join(on, ", ")), nil
	}
	return fmt.Sprintf(`== Confinement: none. This bed's slurmds share this machine's kernel in a chroot (cgroup.conf: CgroupPlugin=%s):
   a job here could open every GPU device of its node, and its cores and memory are not limited. What the
   demo shows is Slurm's allocation (which GPUs a job is given), not isolation. GPU isolation, cores, memory,
   the OOM kill, disk quotas and containers under crun are shown on the node bed, where a VM runs the node
   under its own kernel: make nodebed-up, then the node-bed tests (test/testbed/node/README.md).
`, plugin), nil
}
