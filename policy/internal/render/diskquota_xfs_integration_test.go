//go:build integration

package render

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/policy/internal/spec"
)

// xfsQuota is one project's line of xfs_quota's report: usage and limits
// in KiB and files.
type xfsQuota struct {
	UsedKiB, SoftKiB, HardKiB int64
	Files, FilesHard          int64
}

// reportRE reads a line of `xfs_quota -x -c 'report -p -N -n -b -i'`:
// #ID, blocks used, soft, hard, warnings, [grace], inodes used, soft,
// hard.
var reportRE = regexp.MustCompile(`^#(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\d+\s+\[[^\]]*\]\s+(\d+)\s+\d+\s+(\d+)`)

// xfsBed is an XFS file system with project quotas and the machine that
// has it mounted: this one (a loop file made in the test, mounted with -o
// prjquota) or a node bed's VM (its scratch disk, made afresh), where the
// host kernel has no XFS quotas. Every step is a shell command on that
// machine.
type xfsBed struct {
	t   *testing.T
	dir string // a folder on that machine, for the script and its record
	mnt string // the XFS mount point there
	// run runs a shell script with args ($0, $1, ...) and stdin there.
	run func(stdin []byte, script string, args ...string) (stdout, stderr string, code int)
}

// newXFSBed makes the file system here, or skips the test saying why it
// cannot run here: not root, no loop device, a kernel without XFS quotas.
// Under CI=true a machine that has loop devices must run it: a missing
// mkfs.xfs (make deps installs xfsprogs) fails instead, and so does a
// kernel without XFS quotas (the node bed, STRATA_NODEBEDS, has them).
func newXFSBed(t *testing.T) *xfsBed {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("XFS project quotas need root (a loop device, mount, xfs_quota)")
	}
	if out, err := exec.Command("losetup", "-f").CombinedOutput(); err != nil {
		t.Skipf("no free loop device (losetup -f: %v: %s): the XFS quota test needs one", err, bytes.TrimSpace(out))
	}
	for _, tool := range []string{"mkfs.xfs", "xfs_quota", "xfs_io"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not found: install xfsprogs (make deps)", tool)
			}
			t.Skipf("%s not found: install xfsprogs (make deps) to run the XFS quota test", tool)
		}
	}
	b := &xfsBed{t: t, dir: t.TempDir(), run: localSh}
	img := filepath.Join(b.dir, "xfs.img")
	b.mnt = filepath.Join(b.dir, "mnt")
	// Sparse: only what is written takes room on the host.
	b.sh(`truncate -s 3G "$0" && mkfs.xfs -q "$0" && mkdir "$1"`, img, b.mnt)
	if out, err := exec.Command("mount", "-o", "loop,prjquota", img, b.mnt).CombinedOutput(); err != nil {
		// Mounted without quotas, it works: the kernel has XFS but not
		// its quotas (CONFIG_XFS_QUOTA), which no setting here changes.
		if exec.Command("mount", "-o", "loop", img, b.mnt).Run() == nil {
			_ = exec.Command("umount", b.mnt).Run()
			msg := fmt.Sprintf("this kernel mounts XFS but has no XFS quota support (mount -o prjquota: %s)", bytes.TrimSpace(out))
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s: run it on the node bed (%s)", msg, testbed.NodeEnvVar)
			}
			t.Skipf("%s: start the node bed and set %s to run it there", msg, testbed.NodeEnvVar)
		}
		t.Fatalf("mount -o loop,prjquota: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", b.mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", b.mnt, err, out)
		}
	})
	return b
}

func localSh(stdin []byte, script string, args ...string) (string, string, int) {
	cmd := exec.Command("sh", append([]string{"-c", script}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		stderr.WriteString(err.Error())
	}
	return stdout.String(), stderr.String(), code
}

// newNodeXFSBed uses the node bed's XFS scratch disk, made afresh: a new
// file system (the test holds the bed to itself), mounted with prjquota
// by the VM's own kernel.
func newNodeXFSBed(t *testing.T, nb *testbed.Bed) *xfsBed {
	t.Helper()
	b := &xfsBed{t: t, mnt: nb.NodeScratch, dir: "/tmp/" + testbed.Unique("diskquota"),
		run: func(stdin []byte, script string, args ...string) (string, string, int) {
			r := nb.NodeExec(t, stdin, append([]string{"sh", "-c", script}, args...)...)
			return string(r.Stdout), string(r.Stderr), r.Code
		}}
	// The guest's xfsprogs may be newer than its kernel: mkfs.xfs takes
	// the feature set of the kernel's long-term release when it has one.
	b.sh(`dev=$(findmnt -n -o SOURCE "$0") && umount "$0" &&
		lts=/usr/share/xfsprogs/mkfs/lts_$(uname -r | cut -d. -f1-2).conf &&
		if [ -e "$lts" ]; then mkfs.xfs -q -f -c options="$lts" "$dev"; else mkfs.xfs -q -f "$dev"; fi >/dev/null &&
		mount -t xfs -o prjquota "$dev" "$0" && chmod 1777 "$0" && mkdir -p "$1"`, b.mnt, b.dir)
	if opts := b.sh(`findmnt -n -o FSTYPE,OPTIONS "$0"`, b.mnt); !strings.Contains(opts, "xfs") || !strings.Contains(opts, "prjquota") {
		t.Fatalf("node %s: %s is not XFS with prjquota: %s", nb.Name, b.mnt, opts)
	}
	t.Cleanup(func() { b.run(nil, `rm -rf "$0"`, b.dir) })
	return b
}

// sh runs script with args on the bed's machine and returns its stdout;
// a failure fails the test.
func (b *xfsBed) sh(script string, args ...string) string {
	b.t.Helper()
	stdout, stderr, code := b.run(nil, script, args...)
	if code != 0 {
		b.t.Fatalf("sh -c %q %q: exit %d\n%s%s", script, args, code, stdout, stderr)
	}
	return stdout
}

// report is xfs_quota's report of every project with usage or limits.
func (b *xfsBed) report() map[int]xfsQuota {
	b.t.Helper()
	out := b.sh(`xfs_quota -x -c 'report -p -N -n -b -i' "$0"`, b.mnt)
	got := map[int]xfsQuota{}
	for _, line := range strings.Split(out, "\n") {
		m := reportRE.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		n := make([]int64, len(m))
		for i := 1; i < len(m); i++ {
			n[i], _ = strconv.ParseInt(m[i], 10, 64)
		}
		if n[1] == 0 {
			continue // project 0: everything not in a project
		}
		got[int(n[1])] = xfsQuota{UsedKiB: n[2], SoftKiB: n[3], HardKiB: n[4], Files: n[5], FilesHard: n[6]}
	}
	return got
}

// projectOf is the project id of a file or folder (xfs_io lsproj).
func (b *xfsBed) projectOf(path string) int {
	b.t.Helper()
	out := b.sh(`xfs_io -c lsproj "$0"`, path)
	var id int
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "projid = %d", &id); err != nil {
		b.t.Fatalf("xfs_io lsproj %s: %q", path, out)
	}
	return id
}

// apply renders the policy's disk-quota.sh and runs it with --apply; it
// returns its stderr.
func (b *xfsBed) apply(policy string) string {
	b.t.Helper()
	p, err := spec.Parse("policy.yaml", []byte(policy))
	if err != nil {
		b.t.Fatal(err)
	}
	script, err := DiskQuotaScript(p)
	if err != nil {
		b.t.Fatal(err)
	}
	path := b.dir + "/disk-quota.sh"
	if _, stderr, code := b.run(script, `cat >"$0" && chmod 755 "$0"`, path); code != 0 {
		b.t.Fatalf("write %s: %s", path, stderr)
	}
	stdout, stderr, code := b.run(nil, `STRATA_DISK_QUOTA_STATE="$1" sh "$0" --apply`, path, b.dir+"/state")
	if code != 0 {
		b.t.Fatalf("disk-quota.sh --apply: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	return stderr
}

// readFile is a file's content on the bed's machine.
func (b *xfsBed) readFile(path string) string { b.t.Helper(); return b.sh(`cat "$0"`, path) }

const xfsPolicy = `apiVersion: strata/v1
kind: Policy
cluster: {name: c}
classes: [{name: batch, partition: gpu}]
tenants:
  - name: acme
    projects:
      - {name: llm, members: [], disk: {path: %[1]s/acme/llm, filesystem: xfs, soft_gb: 1, hard_gb: 2, inodes: 1000, project_id: 1001}}
%[2]s`

const xfsVision = `      - {name: vision, members: [], disk: {path: %[1]s/acme/vision, filesystem: xfs, hard_gb: 1}}
`

// TestDiskQuotaOnXFS runs the rendered disk-quota.sh against a real XFS
// file system with project quotas: each project's directory gets its id
// (the policy's, or the one derived from its account), the limits are
// the policy's, a write past the hard limit fails (ENOSPC, XFS's error
// for a project's limit) while the file system has room, a second
// run changes nothing, and a project removed from the policy keeps its
// files and loses only its limits.
func TestDiskQuotaOnXFS(t *testing.T) {
	if os.Getenv(testbed.NodeEnvVar) != "" {
		testbed.EachNode(t, func(t *testing.T, nb *testbed.Bed) { testDiskQuotaOnXFS(t, newNodeXFSBed(t, nb)) })
		return
	}
	testDiskQuotaOnXFS(t, newXFSBed(t))
}

func testDiskQuotaOnXFS(t *testing.T, b *xfsBed) {
	b.sh(`mkdir -p "$0/acme/llm" "$0/acme/vision"`, b.mnt)
	// A file written before the quota is set: tagging takes it in.
	early := b.mnt + "/acme/vision/early.bin"
	b.sh(`head -c 65536 /dev/zero | tr '\0' v >"$0"`, early)
	visionID := spec.DiskProjectID("acme-vision")
	policy := fmt.Sprintf(xfsPolicy, b.mnt, fmt.Sprintf(xfsVision, b.mnt))
	if stderr := b.apply(policy); !strings.Contains(stderr, "2 project quotas, 0 removed (apply)") {
		t.Errorf("first run said:\n%s", stderr)
	}

	// Ids and directories.
	for path, want := range map[string]int{"acme/llm": 1001, "acme/vision": visionID, "acme/vision/early.bin": visionID} {
		if got := b.projectOf(b.mnt + "/" + path); got != want {
			t.Errorf("%s is in project %d, want %d", path, got, want)
		}
	}
	// Limits as the policy says (GiB in KiB); the usage is what the
	// projects hold (vision its early file and folder, llm its folder).
	const gib = 1 << 20
	got := b.report()
	want := map[int]xfsQuota{
		1001:     {SoftKiB: 1 * gib, HardKiB: 2 * gib, FilesHard: 1000},
		visionID: {HardKiB: 1 * gib},
	}
	if diff := cmp.Diff(want, xfsLimits(got)); diff != "" {
		t.Errorf("xfs_quota report, limits (-want +got):\n%s\nreport: %+v", diff, got)
	}
	if v := got[visionID]; v.UsedKiB < 64 || v.Files < 2 {
		t.Errorf("vision uses %d KiB in %d files, want its 64 KiB file and its folder: the tagging missed them", v.UsedKiB, v.Files)
	}

	// A write past vision's hard limit (1 GiB) fails: most of it taken by
	// fallocate (no data to write), the rest by write(2). XFS reports a
	// project's hard limit as a full file system, ENOSPC, not EDQUOT (the
	// user and group limits' error): the file stops at the limit while
	// the file system has room left.
	big := b.mnt + "/acme/vision/big.bin"
	stdout, stderr, _ := b.run(nil, `xfs_io -f -c "falloc 0 $1" -c "pwrite -q $1 $2" "$0"`, big,
		strconv.Itoa(1<<30-(4<<20)), strconv.Itoa(8<<20))
	if msg := syscall.ENOSPC.Error(); !strings.Contains(strings.ToLower(stdout+stderr), "pwrite: "+msg) {
		t.Errorf("a write past the hard limit: %q, want %q (ENOSPC, XFS's error for a project's hard limit)", stdout+stderr, "pwrite: "+msg)
	}
	if strings.Contains(stdout+stderr, "falloc:") {
		t.Errorf("fallocate within the limit failed: %s", stdout+stderr)
	}
	var size, freeMiB int64
	if _, err := fmt.Sscan(b.sh(`stat -c %s "$0"; df --output=avail -B1M "$1" | tail -1`, big, b.mnt), &size, &freeMiB); err != nil {
		t.Fatal(err)
	}
	if size > 1<<30 || freeMiB < 256 {
		t.Errorf("the write stopped at %d bytes with %d MiB free: want it stopped by the 1 GiB limit, not a full file system", size, freeMiB)
	}
	b.sh(`rm "$0"`, big)

	// A second run changes nothing: the same limits, ids and record.
	before, record := b.report(), b.readFile(b.dir+"/state")
	if stderr := b.apply(policy); !strings.Contains(stderr, "2 project quotas, 0 removed (apply)") {
		t.Errorf("second run said:\n%s", stderr)
	}
	if diff := cmp.Diff(before, b.report()); diff != "" {
		t.Errorf("the second run changed the quotas (-before +after):\n%s", diff)
	}
	if after := b.readFile(b.dir + "/state"); after != record {
		t.Errorf("the second run changed the record:\n%s\nto:\n%s", record, after)
	}

	// vision leaves the policy: its files stay, in their project, and its
	// limits go; llm is untouched.
	stderr = b.apply(fmt.Sprintf(xfsPolicy, b.mnt, ""))
	if !strings.Contains(stderr, fmt.Sprintf("acme-vision: project %d on %s is no longer in the policy", visionID, b.mnt)) ||
		!strings.Contains(stderr, "1 project quotas, 1 removed (apply)") {
		t.Errorf("the run after vision left said:\n%s", stderr)
	}
	if size := strings.TrimSpace(b.sh(`stat -c %s "$0"`, early)); size != strconv.Itoa(64<<10) {
		t.Errorf("vision's file after it left the policy: %s bytes, want %d", size, 64<<10)
	}
	if got := b.projectOf(early); got != visionID {
		t.Errorf("vision's file is in project %d, want still %d", got, visionID)
	}
	got = b.report()
	if q := got[visionID]; q.SoftKiB != 0 || q.HardKiB != 0 || q.FilesHard != 0 || q.UsedKiB < 64 {
		t.Errorf("vision after it left the policy: %+v, want its usage and no limits", q)
	}
	if diff := cmp.Diff(want[1001], xfsLimits(got)[1001]); diff != "" {
		t.Errorf("llm changed (-want +got):\n%s", diff)
	}
	if r := b.readFile(b.dir + "/state"); strings.Contains(r, "acme-vision") {
		t.Errorf("the record still holds vision:\n%s", r)
	}
}

// xfsLimits keeps the limits of a report, without the usage.
func xfsLimits(r map[int]xfsQuota) map[int]xfsQuota {
	out := map[int]xfsQuota{}
	for id, q := range r {
		out[id] = xfsQuota{SoftKiB: q.SoftKiB, HardKiB: q.HardKiB, FilesHard: q.FilesHard}
	}
	return out
}
