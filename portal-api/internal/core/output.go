package core

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"context"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/userfile"
	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
)

// OutputTailBytes is the most of a job's stdout or stderr JobOutput
// shows: the end of the file.
const OutputTailBytes = outputTail

const (
	// outputTail is the most of a job's stdout or stderr shown.
	outputTail = 64 << 10
	// outputEntries is the most entries of a working directory listed.
	outputEntries = 1000
	// outputScan is the most entries of a working directory read.
	outputScan = 20 * outputEntries
)

// JobOutput is the tail of a job's standard output and error and a
// listing of its working directory, read as userfile reads what a user
// controls: beneath one of the cluster's output roots, following no
// symbolic link, only what the job's user owns.
func (s *Core) JobOutput(ctx context.Context, who auth.Identity, clusterName string, id int64) (api.JobOutput, *Problem) {
	v, c, p := s.find(who, clusterName, id)
	if p != nil {
		return api.JobOutput{}, p
	}
	j := v.job
	o := outputs{roots: c.OutputRoots, uid: uint32(j.UserID)}
	out := api.JobOutput{Workdir: o.dir(j.WorkDir)}
	stdout := slurmPath(j, j.StdOut)
	if stdout == "" {
		stdout = slurmPath(j, "slurm-%j.out")
	}
	out.Stdout = o.tail(stdout)
	if stderr := slurmPath(j, j.StdErr); stderr != "" && stderr != stdout {
		f := o.tail(stderr)
		out.Stderr = &f
	}
	return out, nil
}

// slurmPath is a job's output path with Slurm's %j, %u, %x, %A and %%
// expanded, relative to its working directory; "" when p is "" or uses a
// pattern the portal does not expand (the file is then not shown).
func slurmPath(j *slurmrest.Job, p string) string {
	if p == "" {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' {
			b.WriteByte(p[i])
			continue
		}
		i++
		if i == len(p) {
			return ""
		}
		switch p[i] {
		case '%':
			b.WriteByte('%')
		case 'j', 'A':
			b.WriteString(strconv.FormatInt(j.ID, 10))
		case 'u':
			b.WriteString(j.User)
		case 'x':
			b.WriteString(j.Name)
		default:
			return ""
		}
	}
	out := b.String()
	if !path.IsAbs(out) {
		if j.WorkDir == "" {
			return ""
		}
		out = path.Join(j.WorkDir, out)
	}
	return path.Clean(out)
}

type outputs struct {
	roots []string
	uid   uint32
}

var errNoRoot = errors.New("is not beneath a folder this cluster shows output from")

// open opens p beneath the output root that holds it, as userfile opens
// a file of the user's.
func (o outputs) open(p string, dir bool) (*os.File, error) {
	if p == "" || !path.IsAbs(p) {
		return nil, errNoRoot
	}
	for _, root := range o.roots {
		rel, ok := strings.CutPrefix(p, strings.TrimSuffix(root, "/")+"/")
		if p == root {
			rel, ok = ".", true
		}
		if ok {
			return userfile.Open(root, rel, userfile.Policy{UID: o.uid, AllowDir: dir})
		}
	}
	return nil, errNoRoot
}

// why is what a refusal says: the reason, never a byte of the file.
func why(err error) *string {
	for _, e := range []error{errNoRoot, userfile.ErrSymlink, userfile.ErrEscapes, userfile.ErrNotRegular, userfile.ErrOwner, userfile.ErrName} {
		if errors.Is(err, e) {
			return ptr(e.Error())
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return ptr("does not exist")
	}
	return ptr("cannot be read")
}

func (o outputs) tail(p string) api.OutputFile {
	out := api.OutputFile{Path: p}
	f, err := o.open(p, false)
	if err != nil {
		out.Error = why(err)
		return out
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		out.Error = why(err)
		return out
	}
	size := st.Size()
	from := max(0, size-outputTail)
	data, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, from, outputTail), outputTail))
	if err != nil {
		out.Error = why(err)
		return out
	}
	out.Size, out.Tail, out.Truncated = ptr(size), ptr(strings.ToValidUTF8(string(data), "\uFFFD")), ptr(from > 0)
	return out
}

func (o outputs) dir(p string) api.OutputDir {
	out := api.OutputDir{Path: p, Entries: []api.OutputEntry{}}
	f, err := o.open(p, true)
	if err != nil {
		out.Error = why(err)
		return out
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.IsDir() {
		out.Error = ptr("is not a folder")
		return out
	}
	// A folder of millions of entries is read no further than a cap.
	var entries []fs.DirEntry
	for len(entries) < outputScan {
		batch, err := f.ReadDir(256)
		entries = append(entries, batch...)
		if errors.Is(err, io.EOF) || err == nil && len(batch) == 0 {
			break
		}
		if err != nil {
			out.Error = why(err)
			return out
		}
	}
	if len(entries) >= outputScan {
		out.Truncated = ptr(true)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range entries {
		if !e.Type().IsRegular() && !e.IsDir() {
			continue // links, devices, FIFOs, sockets: not the user's output
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if uid, ok := fileOwner(info); !ok || uid != o.uid {
			continue // another user's file is not shown, not even by name
		}
		if len(out.Entries) == outputEntries {
			out.Truncated = ptr(true)
			break
		}
		out.Entries = append(out.Entries, api.OutputEntry{Name: e.Name(), Dir: e.IsDir(), Size: info.Size(), Modified: info.ModTime().UTC()})
	}
	return out
}

// fileOwner is the uid that owns a file.
func fileOwner(info fs.FileInfo) (uint32, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}
