//go:build integration

package slurmplugins

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// imagePolicy is the policy of TestImageAllowListOnNodeBed: %[1]s is the
// cluster, %[2]s the tenant, %[3]s where the node keeps the images'
// bundles. The tenant may run the images under registry.example.com/acme.
const imagePolicy = `apiVersion: strata/v1
kind: Policy
cluster:
  name: %[1]s
  gpu_types: [h100]
  default_class: %[2]s-batch
  oci_bundles: %[3]s
classes:
  - name: %[2]s-batch
    partition: gpu
    default_time: 10m
    max_time: 1h
    priority: 20
    requeue: false
    max_gpus_per_job: 4
tenants:
  - name: %[2]s
    limits:
      gpus: 4
    images: [registry.example.com/acme/*]
    projects:
      - name: llm
        members:
          - user: alice
            default: true
`

// TestImageAllowListOnNodeBed: on the node bed (slurmd under cgroup v2,
// crun in oci.conf), job_submit.lua with the policy's rendered data lets
// alice's job run an image of her tenant's allow-list, in the container
// under crun as alice, and refuses one outside it with the rule and its
// policy line; nothing of the refused image runs.
func TestImageAllowListOnNodeBed(t *testing.T) {
	testbed.EachNode(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		p := &plugin{b: b, tokens: map[string]string{}}
		plug, err := os.ReadFile("job_submit.lua")
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, b.HostPath("/etc/slurm/job_submit.lua"), plug)

		const bundles = "/var/lib/strata-bundles"
		tenant := testbed.Unique("img")
		text := fmt.Sprintf(imagePolicy, b.Cluster, tenant, bundles)
		dir := t.TempDir()
		file := filepath.Join(dir, "policy.yaml")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		c := b.Client(t)
		t.Cleanup(func() {
			_ = c.SetDefaultAccount(ctx, "alice", b.Account)
			for _, a := range []string{tenant + "-llm", tenant} {
				if err := c.DeleteAccount(ctx, a); err != nil {
					t.Logf("delete account %s: %v", a, err)
				}
			}
			if err := c.DeleteQOS(ctx, tenant+"-batch"); err != nil {
				t.Logf("delete QOS %s-batch: %v", tenant, err)
			}
		})
		policyCLI(t, "apply", "--apply", "--policy", file, "--url", b.URL, "--user", b.AdminUser, "--token-file", b.TokenFile)

		slurmDir := filepath.Join(dir, "slurm")
		policyCLI(t, "render", "--policy", file, "--output-dir", filepath.Join(dir, "strata"), "--slurm-dir", slurmDir)
		rendered, err := os.ReadFile(filepath.Join(slurmDir, "strata", "policy.lua"))
		if err != nil {
			t.Fatal(err)
		}
		data := b.HostPath("/etc/slurm/strata/policy.lua")
		t.Cleanup(func() {
			os.Remove(data)
			os.Remove(filepath.Dir(data))
			time.Sleep(reloadSeconds*time.Second + time.Second) // the plugin sees it gone before the next test's jobs
		})
		writeFile(t, data, rendered)
		time.Sleep(reloadSeconds*time.Second + time.Second)

		// Two images on the node, each alice's bundle (an unprivileged
		// user namespace maps only her own uid; see test/testbed/node).
		var uid, gid int
		if _, err := fmt.Sscan(b.NodeSh(t, "id -u alice; id -g alice"), &uid, &gid); err != nil {
			t.Fatal(err)
		}
		cfg, err := userBundleConfig(uid, gid)
		if err != nil {
			t.Fatal(err)
		}
		allowed, refused := "registry.example.com/acme/train:2.1", "docker.io/library/ubuntu:24.04"
		for _, img := range []string{allowed, refused} {
			bundle := bundles + "/" + img
			b.NodeSh(t, fmt.Sprintf(`set -e; r=%[1]s/rootfs
mkdir -p $r/bin $r/etc $r/dev $r/proc $r/tmp
cp /usr/local/sbin/busybox $r/bin/busybox
for c in sh cat id echo; do ln -s busybox $r/bin/$c; done
echo "image %[2]s" >$r/etc/strata-image
chown -R alice:alice %[1]s`, bundle, img))
			b.NodeWriteFile(t, bundle+"/config.json", cfg, 0o644)
		}
		t.Cleanup(func() { b.NodeExec(t, nil, "rm", "-rf", bundles) })

		// Outside the allow-list: refused at submission, with the rule
		// and the line of the policy that says it.
		p.script = b.JobDir + "/" + tenant + ".sh"
		writeFile(t, b.HostPath(p.script), []byte("#!/bin/sh\ncat /etc/strata-image\n"))
		t.Cleanup(func() { os.Remove(b.HostPath(p.script)) })
		t.Cleanup(func() {
			if len(p.jobs) > 0 {
				_, _ = exec.Command(filepath.Join(b.Bin, "scancel"), p.jobs...).CombinedOutput()
			}
		})
		want := fmt.Sprintf("strata: tenant %s may not run container image %s; it may run registry.example.com/acme/* (policy.yaml:%d)",
			tenant, refused, lineIn(t, text, "images: [registry.example.com/acme/*]", 0))
		if id, stderr := p.sbatch(t, "alice", "--container="+bundles+"/"+refused); id != "" {
			t.Errorf("job %s with image %s accepted; want it refused with %q", id, refused, want)
		} else if !strings.Contains(stderr, want) {
			t.Errorf("sbatch --container=%s/%s said\n%s\nwant %q", bundles, refused, stderr, want)
		}

		// On the list: it runs in the container, under crun, as alice.
		out := b.JobDir + "/" + testbed.Unique("img") + ".out"
		id := sbatchAs(t, b, "alice", "-A", tenant+"-llm", "-o", out, "--chdir", "/tmp", "-c1", "--mem=64M",
			"--container="+bundles+"/"+allowed, "--wrap", `echo "UID=$(id -u)"; cat /etc/strata-image; echo DONE`)
		j := testbed.WaitJob(t, c, id, 2*time.Minute, "ended", func(j slurmrest.Job) bool {
			return !j.Running() && !j.State.Has("PENDING") && !j.State.Has("COMPLETING") && !j.State.Has("CONFIGURING")
		})
		got := b.NodeWaitFile(t, out, "DONE", 10*time.Second)
		if !strings.Contains(got, "UID="+strconv.Itoa(uid)+"\n") || !strings.Contains(got, "image "+allowed+"\n") {
			t.Errorf("job %d (%v) with the allowed image printed:\n%s\nwant uid %d and the image's file", id, j.State, got, uid)
		}
		if j.Account != tenant+"-llm" {
			t.Errorf("job %d ran in account %s, want %s-llm", id, j.Account, tenant)
		}
	})
}

// sbatchAs submits as user in the bed's partition, with the arguments
// given (the account among them), and returns the job id.
func sbatchAs(t *testing.T, b *testbed.Bed, user string, args ...string) int64 {
	t.Helper()
	out, err := exec.Command(b.Scontrol, "token", "username="+user, "lifespan=600").CombinedOutput()
	if err != nil {
		t.Fatalf("scontrol token: %v: %s", err, out)
	}
	tok := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "SLURM_JWT="))
	full := append([]string{"--parsable", "-p", b.Partition, "-t", "10", "-J", testbed.Unique("img")}, args...)
	cmd := exec.Command(filepath.Join(b.Bin, "sbatch"), full...)
	cmd.Env = append(os.Environ(), "SLURM_JWT="+tok)
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch %v: %v: %s", full, err, res)
	}
	lines := strings.Split(strings.TrimSpace(string(res)), "\n")
	idText, _, _ := strings.Cut(lines[len(lines)-1], ";")
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil {
		t.Fatalf("sbatch %v printed %q: no job id", full, res)
	}
	return id
}

// userBundleConfig is the OCI runtime config of a rootless bundle of one
// user: their own uid and gid mapped, the root read-only.
func userBundleConfig(uid, gid int) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"ociVersion": "1.0.0",
		"process": map[string]any{"terminal": false, "user": map[string]int{"uid": uid, "gid": gid},
			"args": []string{"sh"}, "env": []string{"PATH=/bin"}, "cwd": "/", "noNewPrivileges": true},
		"root":     map[string]any{"path": "rootfs", "readonly": true},
		"hostname": "container",
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc"},
			{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "mode=755", "size=1m"}},
			{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "mode=1777"}},
		},
		"linux": map[string]any{
			"uidMappings": []map[string]int{{"containerID": uid, "hostID": uid, "size": 1}},
			"gidMappings": []map[string]int{{"containerID": gid, "hostID": gid, "size": 1}},
			"namespaces":  []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "user"}},
		},
	}, "", "  ")
}
