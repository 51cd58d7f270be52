//go:build integration

package nodebed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// bundleConfig is an OCI runtime config for a rootless bundle of one user:
// the user's own uid and gid mapped (an unprivileged user namespace can
// map no other), the root read-only, and every GPU device of the node
// bound in, so that only the job's device cgroup decides which opens.
func bundleConfig(uid, gid, gpus int) ([]byte, error) {
	mounts := []map[string]any{
		{"destination": "/proc", "type": "proc", "source": "proc"},
		{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "mode=755", "size=1m"}},
		{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "mode=1777"}},
	}
	for i := range gpus {
		d := fmt.Sprintf("/dev/fakegpu%d", i)
		mounts = append(mounts, map[string]any{"destination": d, "type": "none", "source": d, "options": []string{"bind"}})
	}
	return json.MarshalIndent(map[string]any{
		"ociVersion": "1.0.0",
		"process": map[string]any{"terminal": false, "user": map[string]int{"uid": uid, "gid": gid},
			"args": []string{"sh"}, "env": []string{"PATH=/bin"}, "cwd": "/", "noNewPrivileges": true},
		"root":     map[string]any{"path": "rootfs", "readonly": true},
		"hostname": "container",
		"mounts":   mounts,
		"linux": map[string]any{
			"uidMappings": []map[string]int{{"containerID": uid, "hostID": uid, "size": 1}},
			"gidMappings": []map[string]int{{"containerID": gid, "hostID": gid, "size": 1}},
			"namespaces":  []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "user"}},
		},
	}, "", "  ")
}

// TestContainerJobs: a batch job with --container runs in the image under
// crun (oci.conf) as its submitting user, not root: it sees the image's
// files and not the node's, CUDA_VISIBLE_DEVICES for its one GPU, and of
// the GPU devices bound into the container it can open only its own.
func TestContainerJobs(t *testing.T) {
	testbed.EachNode(t, func(t *testing.T, b *testbed.Bed) {
		c := b.Client(t)
		for _, user := range []string{"alice", "bob"} {
			var uid, gid int
			if _, err := fmt.Sscan(b.NodeSh(t, "id -u "+user+"; id -g "+user), &uid, &gid); err != nil {
				t.Fatal(err)
			}
			// The image: static busybox and a file of its own, owned by
			// the user (crun makes the mount points of Slurm's spool in it).
			bundle := "/var/lib/strata-images/" + user + "/" + testbed.Unique("busybox")
			b.NodeSh(t, fmt.Sprintf(`set -e; r=%[1]s/rootfs
mkdir -p $r/bin $r/etc $r/dev $r/proc $r/tmp
cp /usr/local/sbin/busybox $r/bin/busybox
for c in sh cat head id echo; do ln -s busybox $r/bin/$c; done
echo "strata test image of %[2]s" >$r/etc/strata-image
chown -R %[2]s:%[2]s %[1]s`, bundle, user))
			cfg, err := bundleConfig(uid, gid, b.GPUsPerNode)
			if err != nil {
				t.Fatal(err)
			}
			b.NodeWriteFile(t, bundle+"/config.json", cfg, 0o644)
			t.Cleanup(func() { b.NodeExec(t, nil, "rm", "-rf", bundle) })

			out := b.JobDir + "/" + testbed.Unique("ctr-"+user) + ".out"
			script := `echo "UID=$(id -u)"
cat /etc/strata-image
[ -e /etc/os-release ] && echo "NODE-FILES-VISIBLE"
echo "CVD=$CUDA_VISIBLE_DEVICES"
echo "JOBGPUS=$SLURM_JOB_GPUS"
for d in /dev/fakegpu*; do
  if err=$(head -c0 "$d" 2>&1); then echo "OPEN $d ok"; else echo "OPEN $d ${err##*: }"; fi
done
echo PROBED`
			id := b.Sbatch(t, user, "-o", out, "--chdir", "/tmp", "-c1", "--mem=64M", "--gres=gpu:"+b.GPUType+":1",
				"--container="+bundle, "--wrap", script)
			j := testbed.WaitJob(t, c, id, 2*time.Minute, "ended", func(j slurmrest.Job) bool {
				return !j.Running() && !j.State.Has("PENDING") && !j.State.Has("COMPLETING") && !j.State.Has("CONFIGURING")
			})
			got := b.NodeWaitFile(t, out, "PROBED", 10*time.Second)
			if !strings.Contains(got, "UID="+strconv.Itoa(uid)+"\n") {
				t.Errorf("%s's container job (%v) ran as:\n%s\nwant uid %d, the user's", user, j.State, got, uid)
			}
			if !strings.Contains(got, "strata test image of "+user) || strings.Contains(got, "NODE-FILES-VISIBLE") {
				t.Errorf("%s's container job sees the node's files or not the image's:\n%s", user, got)
			}
			if !strings.Contains(got, "CVD=0\n") {
				t.Errorf("%s's container job: CUDA_VISIBLE_DEVICES is not its one GPU:\n%s", user, got)
			}
			var own int
			if _, err := fmt.Sscanf(got[strings.Index(got, "JOBGPUS="):], "JOBGPUS=%d", &own); err != nil {
				t.Fatalf("%s's container job: no SLURM_JOB_GPUS:\n%s", user, got)
			}
			opens := openRE.FindAllStringSubmatch(got, -1)
			if len(opens) != b.GPUsPerNode {
				t.Fatalf("%s's container job probed %d devices, want %d:\n%s", user, len(opens), b.GPUsPerNode, got)
			}
			for _, m := range opens {
				i, _ := strconv.Atoi(m[1])
				want := syscall.EPERM.Error()
				if i == own {
					want = syscall.ENXIO.Error()
				}
				if !strings.EqualFold(m[2], want) {
					t.Errorf("%s's container job (GPU %d) opening /dev/fakegpu%d: %q, want %q", user, own, i, m[2], want)
				}
			}
		}
	})
}

// TestSharedImageBundle: one bundle of an image, root's, as the portal
// names it for every user (--container=<oci_bundles>/<image>), runs under
// crun for alice and for bob, each as themselves. The bundle maps no uid
// (it cannot know whose job runs it); oci.conf's strata-oci-run maps the
// job user's own (and makes it the process's user) in slurmstepd's per-job
// copy. The mount points Slurm binds in (/var/run/slurm,
// /tmp/slurm/{startup,stdout,stderr}) are made in the image by root, and
// the node's folder of SlurmdSpoolDir is sticky and open to all (each job's
// oci-job<id>-<step> mount point is made in it, and stays, empty), so a
// job of one user leaves nothing in the shared root that another's would
// trip on.
func TestSharedImageBundle(t *testing.T) {
	testbed.EachNode(t, func(t *testing.T, b *testbed.Bed) {
		c := b.Client(t)
		bundle := "/srv/strata/bundles/registry.example.com/acme/" + testbed.Unique("shared") + ":1"
		b.NodeSh(t, fmt.Sprintf(`set -e; r=%[1]s/rootfs
mkdir -p $r/bin $r/etc $r/dev $r/proc $r/tmp/slurm $r/var/run/slurm $r/var/lib/slurm/slurmd/%[2]s
chmod 1777 $r/tmp $r/var/lib/slurm/slurmd/%[2]s
touch $r/tmp/slurm/startup $r/tmp/slurm/stdout $r/tmp/slurm/stderr
cp /usr/local/sbin/busybox $r/bin/busybox
for c in sh cat id echo; do ln -s busybox $r/bin/$c; done
echo "shared image" >$r/etc/strata-image`, bundle, b.Nodes[0]))
		cfg, err := bundleConfig(0, 0, b.GPUsPerNode)
		if err != nil {
			t.Fatal(err)
		}
		var spec map[string]any
		if err := json.Unmarshal(cfg, &spec); err != nil {
			t.Fatal(err)
		}
		linux := spec["linux"].(map[string]any)
		delete(linux, "uidMappings")
		delete(linux, "gidMappings")
		if cfg, err = json.MarshalIndent(spec, "", "  "); err != nil {
			t.Fatal(err)
		}
		b.NodeWriteFile(t, bundle+"/config.json", cfg, 0o644)
		t.Cleanup(func() {
			b.NodeExec(t, nil, "rm", "-rf", strings.TrimSuffix(bundle, "/"+bundle[strings.LastIndex(bundle, "/")+1:]))
		})

		for _, user := range []string{"alice", "bob"} {
			var uid int
			if _, err := fmt.Sscan(b.NodeSh(t, "id -u "+user), &uid); err != nil {
				t.Fatal(err)
			}
			out := b.JobDir + "/" + testbed.Unique("shared-"+user) + ".out"
			id := b.Sbatch(t, user, "-o", out, "--chdir", "/tmp", "-c1", "--mem=64M", "--container="+bundle,
				"--wrap", `echo "UID=$(id -u)"; cat /etc/strata-image; echo DONE`)
			j := testbed.WaitJob(t, c, id, 2*time.Minute, "ended", func(j slurmrest.Job) bool {
				return !j.Running() && !j.State.Has("PENDING") && !j.State.Has("COMPLETING") && !j.State.Has("CONFIGURING")
			})
			got := b.NodeWaitFile(t, out, "DONE", 10*time.Second)
			if !strings.Contains(got, "UID="+strconv.Itoa(uid)+"\n") || !strings.Contains(got, "shared image\n") {
				t.Errorf("%s's job (%v) in the shared bundle printed:\n%s\nwant uid %d and the image's file", user, j.State, got, uid)
			}
		}
		// Nothing of the jobs was left in the shared root but the empty
		// mount points of their spool folders (one per job id, sticky).
		if left := b.NodeSh(t, "find "+bundle+"/rootfs ! -user root ! \\( -type d -empty -path '*/slurmd/"+b.Nodes[0]+"/oci-job*' \\)"); strings.TrimSpace(left) != "" {
			t.Errorf("the jobs left files of their users in the shared image:\n%s", left)
		}
	})
}

// TestOCIConfIsTheExample: the node's oci.conf is the production example
// (etc/slurm/oci.conf, which strata-policy ships) byte for byte, and the
// RunTimeRun it names is the shipped wrapper (slurm-plugins/strata-oci-run)
// at the path the package installs it: the container tests run what a
// site installs, not a copy of the bed's own.
func TestOCIConfIsTheExample(t *testing.T) {
	want, err := os.ReadFile("../../etc/slurm/oci.conf")
	if err != nil {
		t.Fatal(err)
	}
	wrapper, err := os.ReadFile("../../slurm-plugins/strata-oci-run")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RunTimeRun="(\S+) `).FindSubmatch(want)
	if m == nil {
		t.Fatalf("etc/slurm/oci.conf has no RunTimeRun:\n%s", want)
	}
	run := string(m[1])
	testbed.EachNode(t, func(t *testing.T, b *testbed.Bed) {
		if got := b.NodeExec(t, nil, "cat", "/etc/slurm/oci.conf"); got.Code != 0 || !bytes.Equal(got.Stdout, want) {
			t.Errorf("the node's /etc/slurm/oci.conf (exit %d) is not etc/slurm/oci.conf:\n%s", got.Code, got.Stdout)
		}
		if got := b.NodeExec(t, nil, "cat", run); got.Code != 0 || !bytes.Equal(got.Stdout, wrapper) {
			t.Errorf("the node's %s (exit %d, %s) is not slurm-plugins/strata-oci-run", run, got.Code, got.Stderr)
		}
		if mode := strings.TrimSpace(b.NodeSh(t, "stat -c %a "+run)); mode != "755" {
			t.Errorf("the node's %s has mode %s, want 755 as shipped", run, mode)
		}
	})
}
