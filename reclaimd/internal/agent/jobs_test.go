package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// procTree lays out a directory like /proc: for each pid, the files given.
func procTree(t testing.TB, procs map[int]map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, files := range procs {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// environ joins entries as the kernel does: each ends with a NUL byte.
func environ(entries ...string) string { return strings.Join(entries, "\x00") + "\x00" }

// Real files as Slurm leaves them.
const (
	cgroupV1 = "12:memory:/slurm/uid_1000/job_4242/step_0/task_0\n" +
		"11:devices:/slurm/uid_1000/job_4242/step_0/task_0\n" +
		"4:cpuset:/slurm/uid_1000/job_4242/step_0\n" +
		"1:name=systemd:/system.slice/slurmd.service\n"
	cgroupV1MultipleSlurmd = "11:devices:/slurm_node3/uid_0/job_77/step_batch/task_0\n"
	cgroupV2               = "0::/system.slice/slurmstepd.scope/job_1001/step_0/user/task_0\n"
	cgroupV2Extern         = "0::/system.slice/slurmstepd.scope/job_1002/step_extern/slurm\n"
	cgroupNoJob            = "0::/user.slice/user-1000.slice/session-3.scope\n"
)

func TestJobOf(t *testing.T) {
	root := procTree(t, map[int]map[string]string{
		100: {"cgroup": cgroupV1},
		101: {"cgroup": cgroupV1MultipleSlurmd},
		102: {"cgroup": cgroupV2},
		103: {"cgroup": cgroupV2Extern},
		// No job cgroup (proctrack/linuxproc): the environment tells.
		200: {"cgroup": cgroupNoJob, "environ": environ("HOME=/home/ana", "SLURM_JOB_ID=555", "SLURM_STEP_ID=0")},
		201: {"environ": environ("SLURM_JOBID=556")},
		202: {"environ": environ("SLURM_JOBID=1", "SLURM_JOB_ID=557")},
		// The cgroup wins over an environment the user set.
		300: {"cgroup": cgroupV2, "environ": environ("SLURM_JOB_ID=9999")},
		// Not Slurm's, or unreadable.
		400: {"cgroup": cgroupNoJob, "environ": environ("PATH=/usr/bin")},
		401: {"cgroup": "0::/system.slice/job_x/step_0\n", "environ": environ("SLURM_JOB_ID=0")},
		402: {"environ": environ("SLURM_JOB_ID=12abc")},
		403: {},
	})
	tests := map[int]struct {
		want   int64
		wantOK bool
	}{
		100: {4242, true}, 101: {77, true}, 102: {1001, true}, 103: {1002, true},
		200: {555, true}, 201: {556, true}, 202: {557, true},
		300: {1001, true},
		400: {}, 401: {}, 402: {}, 403: {},
		404: {}, // gone
	}
	for pid, tt := range tests {
		t.Run(strconv.Itoa(pid), func(t *testing.T) {
			got, ok := jobOf(ProcFS{Root: root}, pid)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("jobOf(%d) = %d, %v; want %d, %v", pid, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestProcFSDefaultRoot(t *testing.T) {
	// The test's own process is not in a Slurm job (or is, under srun):
	// either way /proc/self-like reads must work through the default root.
	b, err := ProcFS{}.ReadProcFile(os.Getpid(), "cgroup")
	if err != nil {
		t.Fatalf("ReadProcFile(own pid, cgroup) = %v", err)
	}
	if len(b) == 0 {
		t.Error("empty cgroup file")
	}
}

func TestProcFSReadsAtMostOneMiB(t *testing.T) {
	big := strings.Repeat("X=y\x00", maxProcFile) + "SLURM_JOB_ID=5\x00"
	root := procTree(t, map[int]map[string]string{1: {"environ": big}})
	b, err := ProcFS{Root: root}.ReadProcFile(1, "environ")
	if err != nil || len(b) != maxProcFile {
		t.Fatalf("ReadProcFile() = %d bytes, %v; want %d", len(b), err, maxProcFile)
	}
}

var cgroupCases = map[string]struct {
	in     string
	want   int64
	wantOK bool
}{
	"v1":                     {cgroupV1, 4242, true},
	"v1, several slurmd":     {cgroupV1MultipleSlurmd, 77, true},
	"v2":                     {cgroupV2, 1001, true},
	"v2 extern step":         {cgroupV2Extern, 1002, true},
	"v2 without newline":     {strings.TrimSuffix(cgroupV2, "\n"), 1001, true},
	"colon in path":          {"0::/a:b/job_12/step_0\n", 12, true},
	"no job":                 {cgroupNoJob, 0, false},
	"job_ not a number":      {"0::/job_/job_1x/job_-1\n", 0, false},
	"job id too large":       {"0::/job_4294967296\n", 0, false},
	"leading zero":           {"0::/job_0012\n", 0, false},
	"largest job id":         {"0::/job_4294967295\n", 4294967295, true},
	"prefix of another name": {"0::/myjob_12/notjob_13\n", 0, false},
	"not a cgroup line":      {"job_12\n", 0, false},
	"empty":                  {"", 0, false},
}

func TestJobFromCgroup(t *testing.T) {
	for name, tt := range cgroupCases {
		t.Run(name, func(t *testing.T) {
			got, ok := jobFromCgroup([]byte(tt.in))
			if diff := cmp.Diff([]any{tt.want, tt.wantOK}, []any{got, ok}); diff != "" {
				t.Errorf("jobFromCgroup(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

var environCases = map[string]struct {
	in     string
	want   int64
	wantOK bool
}{
	"SLURM_JOB_ID":                 {environ("A=1", "SLURM_JOB_ID=42"), 42, true},
	"SLURM_JOBID only":             {environ("SLURM_JOBID=43"), 43, true},
	"SLURM_JOB_ID wins":            {environ("SLURM_JOBID=1", "SLURM_JOB_ID=44"), 44, true},
	"no trailing NUL":              {"SLURM_JOB_ID=45", 45, true},
	"value in another variable":    {environ("X=SLURM_JOB_ID=46"), 0, false},
	"bad value":                    {environ("SLURM_JOB_ID=4 6"), 0, false},
	"leading zero":                 {environ("SLURM_JOBID=01"), 0, false},
	"newline is not a separator":   {"A=1\nSLURM_JOB_ID=47", 0, false},
	"SLURM_JOB_IDX is another var": {environ("SLURM_JOB_IDX=48"), 0, false},
	"empty":                        {"", 0, false},
}

func TestJobFromEnviron(t *testing.T) {
	for name, tt := range environCases {
		t.Run(name, func(t *testing.T) {
			got, ok := jobFromEnviron([]byte(tt.in))
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("jobFromEnviron(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// checkJob holds for any job id a parser returns: positive, 32 bits, and
// written in the input after the prefix it was found by.
func checkJob(t *testing.T, in string, id int64, ok bool, prefixes ...string) {
	t.Helper()
	if !ok {
		if id != 0 {
			t.Fatalf("id %d with ok false", id)
		}
		return
	}
	if id <= 0 || id > 1<<32-1 {
		t.Fatalf("id %d out of range", id)
	}
	for _, p := range prefixes {
		if strings.Contains(in, p+strconv.FormatInt(id, 10)) {
			return
		}
	}
	t.Fatalf("id %d not found after %q in %q", id, prefixes, in)
}

func FuzzJobFromCgroup(f *testing.F) {
	for _, tt := range cgroupCases {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		id, ok := jobFromCgroup([]byte(in))
		checkJob(t, in, id, ok, "job_")
	})
}

func FuzzJobFromEnviron(f *testing.F) {
	for _, tt := range environCases {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		id, ok := jobFromEnviron([]byte(in))
		checkJob(t, in, id, ok, "SLURM_JOB_ID=", "SLURM_JOBID=")
	})
}

// Files of a real Slurm 26.05 node (the node bed's gpu1, slurmd -N gpu1):
// the job's cgroup is named by its SLUID, and its slurmstepd, in the
// step's slurm cgroup, is titled with the job id.
const (
	cgroupSLUIDTask  = "0::/system.slice/gpu1_slurmstepd.scope/sBN5M96D490F00/step_batch/user/task_0\n"
	cgroupSLUIDStepd = "0::/system.slice/gpu1_slurmstepd.scope/sBN5M96D490F00/step_batch/slurm\n"
	stepdTitle       = "slurmstepd: [31.batch]\x00"
	statusRoot       = "Name:\tslurmstepd\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n"
	statusUser       = "Name:\tsleep\nUid:\t26002\t26002\t26002\t26002\nGid:\t26002\t26002\t26002\t26002\n"
)

func TestJobOfSLUIDCgroup(t *testing.T) {
	other := "0::/system.slice/gpu1_slurmstepd.scope/sQQQQQQQQQQQ00/step_0/user/task_0\n"
	root := procTree(t, map[int]map[string]string{
		206: {"cmdline": stepdTitle, "status": statusRoot, "cgroup": cgroupSLUIDStepd},
		// The extern step's slurmstepd of the same job agrees.
		207: {"cmdline": "slurmstepd: [31.extern]\x00", "status": statusRoot,
			"cgroup": "0::/system.slice/gpu1_slurmstepd.scope/sBN5M96D490F00/step_extern/slurm\n"},
		// The job's process claims another job in its environment: the
		// cgroup's slurmstepd wins.
		216: {"cgroup": cgroupSLUIDTask, "status": statusUser, "environ": environ("SLURM_JOB_ID=99")},
		// A user's process titled like a slurmstepd, in its own job's
		// cgroup, claims that cgroup for job 99: not root, not believed.
		300: {"cmdline": "slurmstepd: [99.batch]\x00", "status": statusUser, "cgroup": other},
		301: {"cgroup": other, "status": statusUser, "environ": environ("SLURM_JOB_ID=99")},
		// A job cgroup without a slurmstepd (it is ending): no job, and
		// the environment is not asked.
		302: {"cgroup": "0::/system.slice/slurmstepd.scope/sZZZ/step_0/user/task_0\n", "environ": environ("SLURM_JOB_ID=98")},
		// Two slurmstepds in one job cgroup with different jobs: neither.
		400: {"cmdline": "slurmstepd: [40.batch]\x00", "status": statusRoot,
			"cgroup": "0::/system.slice/slurmstepd.scope/sTWO/step_batch/slurm\n"},
		401: {"cmdline": "slurmstepd: [41.0]\x00", "status": statusRoot,
			"cgroup": "0::/system.slice/slurmstepd.scope/sTWO/step_0/slurm\n"},
		402: {"cgroup": "0::/system.slice/slurmstepd.scope/sTWO/step_0/user/task_0\n"},
	})
	tests := map[int]int64{206: 31, 207: 31, 216: 31, 300: 0, 301: 0, 302: 0, 402: 0}
	for pid, want := range tests {
		t.Run(strconv.Itoa(pid), func(t *testing.T) {
			got, ok := jobOf(ProcFS{Root: root}, pid)
			if got != want || ok != (want != 0) {
				t.Errorf("jobOf(%d) = %d, %v; want %d, %v", pid, got, ok, want, want != 0)
			}
		})
	}
}

var stepdCgroupCases = map[string]struct {
	in, want string
}{
	"26.05 task":         {cgroupSLUIDTask, "/system.slice/gpu1_slurmstepd.scope/sBN5M96D490F00"},
	"26.05 slurmstepd":   {cgroupSLUIDStepd, "/system.slice/gpu1_slurmstepd.scope/sBN5M96D490F00"},
	"24.11":              {cgroupV2, "/system.slice/slurmstepd.scope/job_1001"},
	"not under a scope":  {"0::/user.slice/s1/step_0/user\n", ""},
	"no step":            {"0::/system.slice/slurmstepd.scope/sX/user\n", ""},
	"scope's own groups": {"0::/system.slice/gpu1_slurmstepd.scope/slurmd\n", ""},
	"empty job element":  {"0::/system.slice/slurmstepd.scope//step_0\n", ""},
	"cgroup v1":          {"11:devices:/system.slice/slurmstepd.scope/sX/step_0\n", ""},
	"empty":              {"", ""},
}

func TestStepdJobCgroup(t *testing.T) {
	for name, tt := range stepdCgroupCases {
		t.Run(name, func(t *testing.T) {
			got, ok := stepdJobCgroup([]byte(tt.in))
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("stepdJobCgroup(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
			}
		})
	}
}

var stepdTitleCases = map[string]struct {
	in   string
	want int64
}{
	"batch":             {stepdTitle, 31},
	"extern":            {"slurmstepd: [7.extern]", 7},
	"step 0":            {"slurmstepd: [4294967295.0]\x00\x00", 4294967295},
	"no step":           {"slurmstepd: [31]", 0},
	"not closed":        {"slurmstepd: [31.batch", 0},
	"another program":   {"/usr/sbin/slurmd\x00-D\x00", 0},
	"argument, not tit": {"sh\x00slurmstepd: [31.batch]", 0},
	"leading zero":      {"slurmstepd: [031.batch]", 0},
	"empty":             {"", 0},
}

func TestJobFromStepdTitle(t *testing.T) {
	for name, tt := range stepdTitleCases {
		t.Run(name, func(t *testing.T) {
			got, ok := jobFromStepdTitle([]byte(tt.in))
			if got != tt.want || ok != (tt.want != 0) {
				t.Errorf("jobFromStepdTitle(%q) = %d, %v; want %d", tt.in, got, ok, tt.want)
			}
		})
	}
}

func TestRootOwned(t *testing.T) {
	for in, want := range map[string]bool{
		statusRoot: true, statusUser: false,
		"Uid:\t0\t0\t0\t1000\n": false, // a setuid program's saved uid
		"Uid:\n":                false, "Name:\tx\n": false, "": false,
	} {
		if got := rootOwned([]byte(in)); got != want {
			t.Errorf("rootOwned(%q) = %v, want %v", in, got, want)
		}
	}
}

func FuzzJobFromStepdTitle(f *testing.F) {
	for _, tt := range stepdTitleCases {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		id, ok := jobFromStepdTitle([]byte(in))
		checkJob(t, in, id, ok, "slurmstepd: [")
	})
}

func FuzzStepdJobCgroup(f *testing.F) {
	for _, tt := range stepdCgroupCases {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		dir, ok := stepdJobCgroup([]byte(in))
		if ok && (!strings.Contains(in, dir+"/step_") || !strings.Contains(dir, "slurmstepd.scope/")) {
			t.Fatalf("stepdJobCgroup(%q) = %q: not a job cgroup of the input", in, dir)
		}
	})
}
