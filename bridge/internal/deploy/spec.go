package deploy

import (
	"errors"
	"io/fs"
	"os"
	"path"

	"github.com/strata-hpc/strata/bridge/internal/servespec"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

// ErrNotRequested says a job asked for nothing: no serve marker in its
// comment and no strata-serve.yaml in its working directory.
var ErrNotRequested = errors.New("the job did not ask to be served: no --comment=strata:serve=<name> and no " +
	servespec.FileName + " in its working directory")

// JobSpec returns what a finished job asks to serve, with the bridge's
// defaults applied: strata-serve.yaml in its working directory (read
// through local, this host's view of the shared file system) when there
// is one; else the comment marker strata:serve=<name>, which serves the
// job's working directory. It returns ErrNotRequested when the job asked
// for neither, and a *Refusal when what it asked for is invalid.
func JobSpec(j slurmrest.Job, local func(string) string, d servespec.Defaults) (*servespec.Spec, error) {
	name, marked := servespec.FromComment(j.Comment)
	if path.IsAbs(j.WorkDir) {
		file := path.Join(j.WorkDir, servespec.FileName)
		data, err := os.ReadFile(local(file))
		switch {
		case err == nil:
			spec, err := servespec.Parse(file, data)
			if err != nil {
				return nil, refuse(CheckSpec, "correct "+file+" and deploy again (strata-bridge deploy --job <id>)", "%v", err)
			}
			spec.ApplyDefaults(d)
			return spec, nil
		case !errors.Is(err, fs.ErrNotExist):
			return nil, refuse(CheckSpec, "make the job's working directory readable by the strata-bridge user",
				"read %s: %v", file, err)
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
