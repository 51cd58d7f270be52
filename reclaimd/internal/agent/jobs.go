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

// ProcLister lists the processes of a ProcReader: ProcFS does. The agent
// needs it to find each job's slurmstepd where the job's cgroup is not
// named by its id (stepdJobs); a ProcReader without it maps such
// processes to no job.
type ProcLister interface {
	PIDs() ([]int, error)
}

// PIDs lists the processes of Root: its numeric entries.
func (p ProcFS) PIDs() ([]int, error) {
	root := p.Root
	if root == "" {
		root = "/proc"
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	pids := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// jobResolver finds processes' jobs for one sampling round: the job
// cgroups that are not named job_<id> are looked up once per round
// (stepdJobs), and only when a process needs them.
type jobResolver struct {
	p      ProcReader
	stepds map[string]int64 // job cgroup -> job; nil until needed
}

// jobOf returns the Slurm job of process pid, or false when it has none (or
// is gone). The cgroup comes first: slurmstepd puts every process of a job,
// including those adopted by pam_slurm_adopt, in the job's cgroup, and the
// job's user cannot move them out. Slurm 26.05 names a job's cgroup by the
// job's SLUID (…/slurmstepd.scope/s85DM96AYYTY00/step_0/…), not job_<id>:
// the job is then the one of the slurmstepd in the same job cgroup. The
// environment is the user's to change (a job could claim another's id), is
// readable only by the process's owner and root, and serves only nodes
// without the cgroup plugins: a process in a slurmstepd's job cgroup whose
// job is not found is no job's, whatever its environment says.
func (r *jobResolver) jobOf(pid int) (int64, bool) {
	if b, err := r.p.ReadProcFile(pid, "cgroup"); err == nil {
		if id, ok := jobFromCgroup(b); ok {
			return id, true
		}
		if dir, ok := stepdJobCgroup(b); ok {
			if r.stepds == nil {
				r.stepds = stepdJobs(r.p)
			}
			id, ok := r.stepds[dir]
			return id, ok
		}
	}
	if b, err := r.p.ReadProcFile(pid, "environ"); err == nil {
		if id, ok := jobFromEnviron(b); ok {
			return id, true
		}
	}
	return 0, false
}

// jobOf is jobResolver.jobOf for one process.
func jobOf(p ProcReader, pid int) (int64, bool) {
	r := jobResolver{p: p}
	return r.jobOf(pid)
}

// jobFromCgroup finds the job in /proc/<pid>/cgroup: the first path element
// job_<id> of any hierarchy, as Slurm's cgroup plugins name them:
//
//	v1: 4:devices:/slurm/uid_1000/job_1234/step_0/task_0
//	    (/slurm_<node>/ when slurmd runs with several node names)
//	v2: 0::/system.slice/slurmstepd.scope/job_1234/step_0/user/task_0
//	    (<node>_slurmstepd.scope when slurmd runs with -N)
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

// stepdJobCgroup finds the job cgroup of a cgroup v2 path that Slurm's
// cgroup/v2 plugin made, whatever the job cgroup's name: the element after
// a slurmstepd scope (slurmstepd.scope, <node>_slurmstepd.scope), followed
// by a step_<id> element, as 26.05 writes
//
//	0::/system.slice/gpu1_slurmstepd.scope/s85DM96AYYTY00/step_batch/user/task_0
//
// It returns the path up to and including the job cgroup.
func stepdJobCgroup(b []byte) (string, bool) {
	for line := range bytes.Lines(b) {
		path, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("0::"))
		if !ok {
			continue
		}
		elems := bytes.Split(path, []byte("/"))
		for i := 0; i+2 < len(elems); i++ {
			if bytes.HasSuffix(elems[i], []byte("slurmstepd.scope")) && len(elems[i+1]) > 0 &&
				bytes.HasPrefix(elems[i+2], []byte("step_")) {
				return string(bytes.Join(elems[:i+2], []byte("/"))), true
			}
		}
	}
	return "", false
}

// stepdJobs maps each job cgroup on the node to its job, from the node's
// slurmstepd processes: each runs as root, in its step's cgroup
// (<job cgroup>/step_<id>/slurm), titled "slurmstepd: [<job>.<step>]".
// A job's user can neither run a process as root nor move one into the
// step's slurm cgroup (Slurm's folders are root's), so neither half can be
// forged. A job cgroup whose slurmstepds disagree is left out.
func stepdJobs(p ProcReader) map[string]int64 {
	out := map[string]int64{}
	l, ok := p.(ProcLister)
	if !ok {
		return out
	}
	pids, err := l.PIDs()
	if err != nil {
		return out
	}
	bad := map[string]bool{}
	for _, pid := range pids {
		cmd, err := p.ReadProcFile(pid, "cmdline")
		if err != nil {
			continue
		}
		id, ok := jobFromStepdTitle(cmd)
		if !ok {
			continue
		}
		if st, err := p.ReadProcFile(pid, "status"); err != nil || !rootOwned(st) {
			continue
		}
		cg, err := p.ReadProcFile(pid, "cgroup")
		if err != nil {
			continue
		}
		dir, ok := stepdJobCgroup(cg)
		if !ok {
			continue
		}
		if old, seen := out[dir]; seen && old != id {
			bad[dir] = true
		}
		out[dir] = id
	}
	for dir := range bad {
		delete(out, dir)
	}
	return out
}

// jobFromStepdTitle reads the job of slurmstepd's process title,
// "slurmstepd: [1234.batch]" (also .extern, .0, .interactive), as its
// /proc/<pid>/cmdline holds it (one string, perhaps NUL-padded).
func jobFromStepdTitle(b []byte) (int64, bool) {
	b, _, _ = bytes.Cut(b, []byte{0})
	rest, ok := bytes.CutPrefix(b, []byte("slurmstepd: ["))
	if !ok {
		return 0, false
	}
	job, step, ok := bytes.Cut(bytes.TrimSpace(rest), []byte("."))
	if !ok || !bytes.HasSuffix(step, []byte("]")) || len(step) < 2 {
		return 0, false
	}
	return parseJobID(job)
}

// rootOwned says whether /proc/<pid>/status shows a process whose real,
// effective, saved and file-system uids are all 0.
func rootOwned(status []byte) bool {
	for line := range bytes.Lines(status) {
		if rest, ok := bytes.CutPrefix(line, []byte("Uid:")); ok {
			f := bytes.Fields(rest)
			if len(f) == 0 {
				return false
			}
			for _, u := range f {
				if string(u) != "0" {
					return false
				}
			}
			return true
		}
	}
	return false
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
