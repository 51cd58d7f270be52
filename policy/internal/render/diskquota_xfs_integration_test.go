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

// xfsBed is an XFS file system with project quotas, made in the test from a
// loop file and mounted with -o prjquota.
type xfsBed struct {
	t   *testing.T
	dir string // the test's folder, for the script, its record and the image
	mnt string
}

// newXFSBed makes the file system, or skips the test saying why it cannot
// run here: not root, no loop device, a kernel without XFS quotas. Under
// CI=true a machine that has loop devices must run it: a missing
// mkfs.xfs (make deps installs xfsprogs) fails instead.
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
	b := &xfsBed{t: t, dir: t.TempDir()}
	img := filepath.Join(b.dir, "xfs.img")
	b.mnt = filepath.Join(b.dir, "mnt")
	// Sparse: only what is written takes room on the host.
	b.sh("truncate", "-s", "3G", img)
	b.sh("mkfs.xfs", "-q", img)
	if err := os.Mkdir(b.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop,prjquota", img, b.mnt).CombinedOutput(); err != nil {
		// Mounted without quotas, it works: the kernel has XFS but not
		// its quotas (CONFIG_XFS_QUOTA), which no setting here changes.
		if exec.Command("mount", "-o", "loop", img, b.mnt).Run() == nil {
			_ = exec.Command("umount", b.mnt).Run()
			t.Skipf("this kernel mounts XFS but has no XFS quota support (mount -o prjquota: %s)", bytes.TrimSpace(out))
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

func (b *xfsBed) sh(name string, args ...string) string {
	b.t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		b.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// report is xfs_quota's report of every project with usage or limits.
func (b *xfsBed) report() map[int]xfsQuota {
	b.t.Helper()
	out := b.sh("xfs_quota", "-x", "-c", "report -p -N -n -b -i", b.mnt)
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
	out := b.sh("xfs_io", "-c", "lsproj", path)
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
	path := filepath.Join(b.dir, "disk-quota.sh")
	if err := os.WriteFile(path, script, 0o755); err != nil {
		b.t.Fatal(err)
	}
	cmd := exec.Command("sh", path, "--apply")
	cmd.Env = append(os.Environ(), "STRATA_DISK_QUOTA_STATE="+filepath.Join(b.dir, "state"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		b.t.Fatalf("disk-quota.sh --apply: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return stderr.String()
}

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
// the policy's, a write past the hard limit fails with EDQUOT, a second
// run changes nothing, and a project removed from the policy keeps its
// files and loses only its limits.
func TestDiskQuotaOnXFS(t *testing.T) {
	b := newXFSBed(t)
	for _, d := range []string{"acme/llm", "acme/vision"} {
		if err := os.MkdirAll(filepath.Join(b.mnt, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A file written before the quota is set: tagging takes it in.
	early := filepath.Join(b.mnt, "acme/vision/early.bin")
	if err := os.WriteFile(early, bytes.Repeat([]byte("v"), 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	visionID := spec.DiskProjectID("acme-vision")
	policy := fmt.Sprintf(xfsPolicy, b.mnt, fmt.Sprintf(xfsVision, b.mnt))
	if stderr := b.apply(policy); !strings.Contains(stderr, "2 project quotas, 0 removed (apply)") {
		t.Errorf("first run said:\n%s", stderr)
	}

	// Ids and directories.
	for path, want := range map[string]int{"acme/llm": 1001, "acme/vision": visionID, "acme/vision/early.bin": visionID} {
		if got := b.projectOf(filepath.Join(b.mnt, path)); got != want {
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

	// A write past vision's hard limit (1 GiB) fails with EDQUOT: most of
	// it taken by fallocate (no data to write), the rest by write(2).
	f, err := os.Create(filepath.Join(b.mnt, "acme/vision/big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, 1<<30-(4<<20)); err != nil {
		t.Fatalf("fallocate within the limit: %v", err)
	}
	_, werr := f.WriteAt(bytes.Repeat([]byte("x"), 8<<20), 1<<30-(4<<20))
	f.Close()
	if !errors.Is(werr, syscall.EDQUOT) {
		t.Errorf("a write past the hard limit: %v, want EDQUOT", werr)
	}
	if err := os.Remove(filepath.Join(b.mnt, "acme/vision/big.bin")); err != nil {
		t.Fatal(err)
	}

	// A second run changes nothing: the same limits, ids and record.
	before, record := b.report(), readFile(t, filepath.Join(b.dir, "state"))
	if stderr := b.apply(policy); !strings.Contains(stderr, "2 project quotas, 0 removed (apply)") {
		t.Errorf("second run said:\n%s", stderr)
	}
	if diff := cmp.Diff(before, b.report()); diff != "" {
		t.Errorf("the second run changed the quotas (-before +after):\n%s", diff)
	}
	if after := readFile(t, filepath.Join(b.dir, "state")); after != record {
		t.Errorf("the second run changed the record:\n%s\nto:\n%s", record, after)
	}

	// vision leaves the policy: its files stay, in their project, and its
	// limits go; llm is untouched.
	stderr := b.apply(fmt.Sprintf(xfsPolicy, b.mnt, ""))
	if !strings.Contains(stderr, fmt.Sprintf("acme-vision: project %d on %s is no longer in the policy", visionID, b.mnt)) ||
		!strings.Contains(stderr, "1 project quotas, 1 removed (apply)") {
		t.Errorf("the run after vision left said:\n%s", stderr)
	}
	if data, err := os.ReadFile(early); err != nil || len(data) != 64<<10 {
		t.Errorf("vision's file after it left the policy: %d bytes, %v", len(data), err)
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
	if r := readFile(t, filepath.Join(b.dir, "state")); strings.Contains(r, "acme-vision") {
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

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
