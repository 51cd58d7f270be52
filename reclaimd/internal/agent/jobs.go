package agent

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// maxProcFile bounds what is read of one /proc file: a process's environment
// can be megabytes, and SLURM_JOB_ID is set early in it.
const maxProcFile = 1 << 20

// ProcReader reads a file of a process from /proc, such as "cgroup" or
// "environ" of pid 4242.
type ProcReader interface {
	ReadProcFile(pid int, name string) ([]byte, error)
}

// ProcFS is the ProcReader of a proc file system mounted at Root ("" means
// /proc). Tests point Root at a directory laid out like /proc; an agent in a
// container points it at the host's /proc mounted elsewhere.
type ProcFS struct {
	Root string
}

// ReadProcFile reads up to 1 MiB of Root/<pid>/<name>.
func (p ProcFS) ReadProcFile(pid int, name string) ([]byte, error) {
	root := p.Root
	if root == "" {
		root = "/proc"
	}
	f, err := os.Open(filepath.Join(root, strconv.Itoa(pid), name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxProcFile))
	if err != nil {
		return nil, fmt.Errorf("read %s of process %d: %w", name, pid, err)
	}
	return b, nil
}

// jobOf returns the Slurm job of process pid, or false when it has none (or
// is gone). The cgroup comes first: slurmstepd puts every process of a job,
// including those adopted by pam_slurm_adopt, in the job's cgroup, and the
// job's user cannot move them out; the environment is the user's to change
// (a job could claim another's id), is readable only by the process's owner
// and root, and serves nodes without the cgroup plugins.
func jobOf(p ProcReader, pid int) (int64, bool) {
	if b, err := p.ReadProcFile(pid, "cgroup"); err == nil {
		if id, ok := jobFromCgroup(b); ok {
			return id, true
		}
	}
	if b, err := p.ReadProcFile(pid, "environ"); err == nil {
		if id, ok := jobFromEnviron(b); ok {
			return id, true
		}
	}
	return 0, false
}

// jobFromCgroup finds the job in /proc/<pid>/cgroup: the first path element
// job_<id> of any hierarchy, as Slurm's cgroup plugins name them:
//
//	v1: 4:devices:/slurm/uid_1000/job_1234/step_0/task_0
//	    (/slurm_<node>/ when slurmd runs with several node names)
//	v2: 0::/system.slice/slurmstepd.scope/job_1234/step_0/user/task_0
func jobFromCgroup(b []byte) (int64, bool) {
	for line := range bytes.Lines(b) {
		// hierarchy-id:controllers:path; the path may itself hold colons.
		parts := bytes.SplitN(bytes.TrimRight(line, "\r\n"), []byte(":"), 3)
		if len(parts) != 3 {
			continue
		}
		for elem := range bytes.SplitSeq(parts[2], []byte("/")) {
			if rest, ok := bytes.CutPrefix(elem, []byte("job_")); ok {
				if id, ok := parseJobID(rest); ok {
					return id, true
				}
			}
		}
	}
	return 0, false
}

// jobFromEnviron finds SLURM_JOB_ID (or the older SLURM_JOBID) in
// /proc/<pid>/environ, whose entries end with NUL bytes.
func jobFromEnviron(b []byte) (int64, bool) {
	var old []byte
	for entry := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(entry, []byte("SLURM_JOB_ID=")); ok {
			return parseJobID(v)
		}
		if v, ok := bytes.CutPrefix(entry, []byte("SLURM_JOBID=")); ok && old == nil {
			old = v
		}
	}
	if old != nil {
		return parseJobID(old)
	}
	return 0, false
}

// parseJobID reads a Slurm job id: a positive 32-bit decimal number,
// written as Slurm writes it (no sign, no leading zero).
func parseJobID(b []byte) (int64, bool) {
	if len(b) == 0 || b[0] == '0' {
		return 0, false
	}
	id, err := strconv.ParseUint(string(b), 10, 32)
	if err != nil || id == 0 {
		return 0, false
	}
	return int64(id), true
}
