package deploy

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"

	"github.com/strata-hpc/strata/bridge/internal/servespec"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/userfile"
)

// ErrNotRequested says a job asked for nothing: no serve marker in its
// comment and no strata-serve.yaml in its working directory.
var ErrNotRequested = errors.New("the job did not ask to be served: no --comment=strata:serve=<name> and no " +
	servespec.FileName + " in its working directory")

// JobSpec returns what a finished job asks to serve, with the bridge's
// defaults applied: strata-serve.yaml in its working directory (read
// through local, this host's view of the shared file system, as a file
// the job's user controls: see readJobFile) when there is one; else the comment marker strata:serve=<name>, which serves the
// job's working directory. It returns ErrNotRequested when the job asked
// for neither, and a *Refusal when what it asked for is invalid.
func JobSpec(j slurmrest.Job, local func(string) string, d servespec.Defaults) (*servespec.Spec, error) {
	name, marked := servespec.FromComment(j.Comment)
	if path.IsAbs(j.WorkDir) {
		file := path.Join(j.WorkDir, servespec.FileName)
		data, err := readJobFile(j, local(j.WorkDir), servespec.FileName)
		switch {
		case err == nil:
			spec, err := servespec.Parse(file, data)
			if err != nil {
				return nil, refuse(CheckSpec, "correct "+file+" and deploy again (strata-bridge deploy --job <id>)", "%v", err)
			}
			spec.ApplyDefaults(d)
			return spec, nil
		case !errors.Is(err, fs.ErrNotExist):
			return nil, refuseFile(file, err)
		}
	}
	if !marked {
		return nil, ErrNotRequested
	}
	if !path.IsAbs(j.WorkDir) {
		return nil, refuse(CheckSpec, "write "+servespec.FileName+" with model: in the job's working directory",
			"job %d asks to serve %q but Slurm reports no working directory to serve", j.ID, name)
	}
	spec := &servespec.Spec{Name: name, ModelPath: j.WorkDir}
	spec.ApplyDefaults(d)
	if err := spec.Validate().Err(); err != nil {
		return nil, refuse(CheckSpec, "fix --comment=strata:serve=<name>, or write "+servespec.FileName+" in the job's working directory",
			"job %d's comment strata:serve=%s: %v", j.ID, name, err)
	}
	return spec, nil
}

// readJobFile reads a file of the job's working directory (dir, as this
// host sees it) as a file its user controls: no symbolic link followed, a
// regular file owned by the job's user, at most servespec.MaxFileSize
// bytes (see userfile). A FIFO, a link to /dev/zero or to the bridge's own
// token is refused at once, and the refusal quotes nothing of it.
func readJobFile(j slurmrest.Job, dir, name string) ([]byte, error) {
	if j.UserID < 0 || j.UserID > math.MaxUint32 {
		return nil, fmt.Errorf("job %d has no valid user id (%d): its files are not read", j.ID, j.UserID)
	}
	return userfile.ReadFile(dir, name, userfile.Policy{UID: uint32(j.UserID), MaxSize: servespec.MaxFileSize})
}

// refuseFile is the refusal for a job's file that could not be read, with
// the fix for what was wrong with it.
func refuseFile(file string, err error) *Refusal {
	fix := "make the job's working directory and " + servespec.FileName + " readable by the strata-bridge user"
	switch {
	case errors.Is(err, userfile.ErrSymlink), errors.Is(err, userfile.ErrNotRegular), errors.Is(err, userfile.ErrEscapes):
		fix = "write " + servespec.FileName + " as a regular file (not a link, a pipe or a folder) in the job's working directory"
	case errors.Is(err, userfile.ErrOwner):
		fix = "let the job write " + servespec.FileName + " itself: it must belong to the job's user"
	case errors.Is(err, userfile.ErrTooLarge):
		fix = "a serve spec is a few lines: name the model and its resources, do not include them"
	}
	return refuse(CheckSpec, fix, "read %s: %v", file, err)
}
