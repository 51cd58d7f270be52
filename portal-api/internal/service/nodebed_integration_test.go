//go:build integration

package service

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// Container jobs started through this service's own code on the node bed
// (testbed.sh up --node-vm: the compute node under its own kernel, cgroup
// v2 with ConstrainDevices, crun with the shipped oci.conf). The portal
// renders a template with an image under the oci runtime
// (--container=<bundles>/<image>), checks it against the policy's image
// allow-list and submits it through slurmrestd as the user; what runs is
// checked from inside the job.

// probeImage is the image of testdata/nodebed's templates.
const probeImage = "registry.example.com/acme/probe:1"

// makeProbeImage makes the image's bundle on the node at bundle: root's,
// one for every user, with no uid mapping (oci.conf's strata-oci-run maps
// the job user's own), every fake GPU device bound in so that only the
// job's device cgroup decides which opens, and the mount points Slurm
// binds in made by root (test/testbed/node/README.md). The image holds
// static busybox, a file of its own and a page for its httpd.
func makeProbeImage(t *testing.T, b *testbed.Bed, bundle string) {
	t.Helper()
	b.NodeSh(t, fmt.Sprintf(`set -e; r=%[1]s/rootfs
mkdir -p $r/bin $r/etc $r/dev $r/proc $r/www $r/tmp/slurm $r/var/run/slurm $r/var/lib/slurm/slurmd/%[2]s
chmod 1777 $r/tmp $r/var/lib/slurm/slurmd/%[2]s
touch $r/tmp/slurm/startup $r/tmp/slurm/stdout $r/tmp/slurm/stderr
cp /usr/local/sbin/busybox $r/bin/busybox
for c in sh cat head id echo httpd; do ln -s busybox $r/bin/$c; done
echo "strata probe image" >$r/etc/strata-image
echo "strata probe server" >$r/www/index.html`, bundle, b.Nodes[0]))
	mounts := []map[string]any{
		{"destination": "/proc", "type": "proc", "source": "proc"},
		{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "mode=755", "size=1m"}},
	}
	for i := range b.GPUsPerNode {
		d := fmt.Sprintf("/dev/fakegpu%d", i)
		mounts = append(mounts, map[string]any{"destination": d, "type": "none", "source": d, "options": []string{"bind"}})
	}
	cfg, err := json.MarshalIndent(map[string]any{
		"ociVersion": "1.0.0",
		"process": map[string]any{"terminal": false, "user": map[string]int{"uid": 0, "gid": 0},
			"args": []string{"sh"}, "env": []string{"PATH=/bin"}, "cwd": "/", "noNewPrivileges": true},
		"root":     map[string]any{"path": "rootfs", "readonly": true},
		"hostname": "container",
		"mounts":   mounts,
		"linux": map[string]any{
			"namespaces": []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "user"}},
		},
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b.NodeWriteFile(t, bundle+"/config.json", cfg, 0o644)
}

// imagePolicy is the job policy of the node bed: alice's project may
// start the interactive and batch classes on the bed's partition and run
// the images under registry.example.com/acme, from bundles.
func imagePolicy(t *testing.T, b *testbed.Bed, alice, bundles string) *jobpolicy.Policy {
	t.Helper()
	class := func(line int) string {
		return fmt.Sprintf(`{"partition": %q, "default_time": 10, "max_time": 60, "requeue": false, "whole_nodes": false,
	    "switches": 0, "max_gpus_per_job": 1, "line": %d, "max_time_line": %d, "max_gpus_line": %d, "whole_nodes_line": %d}`,
			b.Partition, line, line+1, line+2, line)
	}
	p, err := jobpolicy.Parse(fmt.Appendf(nil, `{"apiVersion": "strata/v1", "kind": "JobPolicy", "source": "policy.yaml",
	  "cluster": %q, "default_class": "batch", "classes_line": 10, "oci_bundles": %q,
	  "classes": {"interactive": %s, "batch": %s},
	  "partitions": {%q: "batch"},
	  "accounts": {%q: {"tenant": "lab", "project": "main", "line": 50, "classes": ["interactive", "batch"], "classes_line": 51,
	    "gpus": {"limit": 4, "owner": "account %s", "line": 52}, "gpus_by_type": {}, "members": [%q], "viewers": {},
	    "images": ["registry.example.com/acme/*"], "images_line": 53}},
	  "users": {%q: %q}}`, b.Cluster, bundles, class(20), class(30), b.Partition, b.Account, b.Account, alice, alice, b.Account))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var probeOpenRE = regexp.MustCompile(`(?m)^OPEN /dev/fakegpu(\d+) (.*)$`)

// checkProbe checks a probe's output (testdata/nodebed): it ran as uid,
// in the image (its file, not the node's), with CUDA_VISIBLE_DEVICES for
// its one GPU, and of the node's GPU devices it opened its own only
// (ENXIO: no driver behind it) and got EPERM on every other. It returns
// the job's GPU, the node's index.
func checkProbe(t *testing.T, what, out string, uid, gpus int) int {
	t.Helper()
	if !strings.Contains(out, "UID="+strconv.Itoa(uid)+"\n") {
		t.Errorf("%s ran as:\n%s\nwant uid %d, the submitting user's, not root", what, out, uid)
	}
	if !strings.Contains(out, "strata probe image\n") || strings.Contains(out, "NODE-FILES-VISIBLE") {
		t.Errorf("%s sees the node's files or not the image's:\n%s", what, out)
	}
	if !strings.Contains(out, "CVD=0\n") || !strings.Contains(out, "IMAGE="+probeImage+"\n") {
		t.Errorf("%s: CUDA_VISIBLE_DEVICES is not its one GPU, or STRATA_IMAGE not its image:\n%s", what, out)
	}
	i := strings.Index(out, "JOBGPUS=")
	var own int
	if i < 0 {
		t.Fatalf("%s: no SLURM_JOB_GPUS:\n%s", what, out)
	}
	if _, err := fmt.Sscanf(out[i:], "JOBGPUS=%d", &own); err != nil {
		t.Fatalf("%s: SLURM_JOB_GPUS is not one GPU: %v\n%s", what, err, out)
	}
	opens := probeOpenRE.FindAllStringSubmatch(out, -1)
	if len(opens) != gpus {
		t.Fatalf("%s probed %d GPU devices, want the node's %d:\n%s", what, len(opens), gpus, out)
	}
	for _, m := range opens {
		dev, _ := strconv.Atoi(m[1])
		want := syscall.EPERM.Error()
		if dev == own {
			want = syscall.ENXIO.Error()
		}
		if !strings.EqualFold(m[2], want) {
			t.Errorf("%s (GPU %d) opening /dev/fakegpu%d: %q, want %q", what, own, dev, m[2], want)
		}
	}
	return own
}

// TestImageJobsOnNodeBed: alice starts a session of a template with an
// image through POST /v1/sessions, and, while it runs, submits a batch
// template with the image through POST /v1/submissions, on a portal whose
// templates render images under the oci runtime. Both jobs carry
// --container=<bundles>/<image> in Slurm; both run in the container under
// crun as alice (not root), see the image's file and not the node's, and
// see only their own GPU: CUDA_VISIBLE_DEVICES=0, SLURM_JOB_GPUS their two
// distinct GPUs, EPERM on every other GPU device of the node. The
// session's server (the image's busybox httpd) answers on the node, GET
// /v1/sessions/{id} shows it RUNNING with its one GPU, and DELETE
// /v1/sessions/{id} ends its job.
func TestImageJobsOnNodeBed(t *testing.T) {
	set, err := templates.Load("testdata/nodebed")
	if err != nil {
		t.Fatal(err)
	}
	testbed.EachNode(t, func(t *testing.T, b *testbed.Bed) {
		bundles := "/srv/strata/" + testbed.Unique("bundles")
		makeProbeImage(t, b, bundles+"/"+probeImage)
		t.Cleanup(func() { b.NodeExec(t, nil, "rm", "-rf", bundles) })
		alice := b.Users[0]
		var uid int
		if _, err := fmt.Sscan(b.NodeSh(t, "id -u "+alice), &uid); err != nil {
			t.Fatal(err)
		}
		p := newPortal(t, b, portalOpts{
			set:    set.WithContainers(templates.Containers{Runtime: templates.OCI, Bundles: bundles}),
			policy: imagePolicy(t, b, alice, bundles),
			// The job's working directory is in the image too (the
			// container's /tmp); its output goes to the node's.
			workDir: "/tmp", sessionRoot: "/tmp/strata-sessions/{user}",
		})
		container := func(id int64) string {
			out, err := exec.Command(b.Scontrol, "show", "job", strconv.FormatInt(id, 10)).CombinedOutput()
			if err != nil {
				t.Fatalf("scontrol show job %d: %v\n%s", id, err, out)
			}
			m := regexp.MustCompile(`Container=(\S*)`).FindSubmatch(out)
			if m == nil {
				return ""
			}
			return string(m[1])
		}

		// The session.
		s := p.start(t, "probe-session", map[string]string{"gpus": "1"})
		sessOut := b.NodeWaitFile(t, fmt.Sprintf("/tmp/slurm-%d.out", s.JobID), "PROBED", 3*time.Minute)
		sessGPU := checkProbe(t, "alice's session "+s.ID, sessOut, uid, b.GPUsPerNode)
		if !strings.Contains(sessOut, "SESSION="+s.ID+"\n") {
			t.Errorf("the session's job has not its STRATA_SESSION_ID %s:\n%s", s.ID, sessOut)
		}
		if got, want := container(s.JobID), bundles+"/"+probeImage; got != want {
			t.Errorf("the session's job %d has Container=%q, want %q", s.JobID, got, want)
		}
		var port int
		if i := strings.Index(sessOut, "PORT="); i < 0 {
			t.Fatalf("the session printed no port:\n%s", sessOut)
		} else if _, err := fmt.Sscanf(sessOut[i:], "PORT=%d", &port); err != nil {
			t.Fatal(err)
		}
		var page string
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			r := b.NodeExec(t, nil, "busybox", "wget", "-q", "-O-", fmt.Sprintf("http://127.0.0.1:%d/", port))
			if page = string(r.Stdout); r.Code == 0 || time.Now().After(end) {
				break
			}
		}
		if page != "strata probe server\n" {
			t.Errorf("the session's server (the image's httpd on port %d) answered %q, want its page", port, page)
		}
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
			v := p.get(t, s.ID)
			if v.State == "RUNNING" && len(v.GPUs) == 1 {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("GET /v1/sessions/%s: %+v, want RUNNING on one GPU", s.ID, v)
			}
		}

		// A batch job with the image, submitted while the session runs.
		code, body := p.do(alice, http.MethodPost, "/v1/submissions", map[string]any{"cluster": p.name, "template": "probe-batch"})
		var sub struct {
			JobID int64 `json:"job_id"`
		}
		if err := json.Unmarshal(body, &sub); code != http.StatusCreated || err != nil || sub.JobID == 0 {
			t.Fatalf("POST /v1/submissions probe-batch as %s = %d %s", alice, code, body)
		}
		t.Cleanup(func() { _ = p.admin.Cancel(testbed.Context(t), sub.JobID) })
		if got, want := container(sub.JobID), bundles+"/"+probeImage; got != want {
			t.Errorf("the batch job %d has Container=%q, want %q", sub.JobID, got, want)
		}
		j := testbed.WaitJob(t, p.admin, sub.JobID, 3*time.Minute, "ended", func(j slurmrest.Job) bool {
			return !j.Running() && !j.State.Has("PENDING") && !j.State.Has("COMPLETING") && !j.State.Has("CONFIGURING")
		})
		batchOut := b.NodeWaitFile(t, fmt.Sprintf("/tmp/slurm-%d.out", sub.JobID), "PROBED", 10*time.Second)
		batchGPU := checkProbe(t, fmt.Sprintf("alice's batch job %d (%v)", sub.JobID, j.State), batchOut, uid, b.GPUsPerNode)
		if batchGPU == sessGPU {
			t.Errorf("the session and the batch job, running at once, both hold GPU %d", sessGPU)
		}
		if j.User != alice || j.Account != b.Account || !j.State.Has("COMPLETED") {
			t.Errorf("the batch job: user %s, account %s, state %v; want alice's, under %s, completed", j.User, j.Account, j.State, b.Account)
		}

		// The session ends through the portal.
		if code, body := p.do(alice, http.MethodDelete, "/v1/sessions/"+s.ID, nil); code != http.StatusOK {
			t.Fatalf("DELETE /v1/sessions/%s = %d %s", s.ID, code, body)
		}
		testbed.WaitJob(t, p.admin, s.JobID, time.Minute, "ended", func(j slurmrest.Job) bool {
			return !j.Running() && !j.State.Has("PENDING") && !j.State.Has("COMPLETING")
		})
	})
}
