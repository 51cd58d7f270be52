package templates

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/slurmrest"
)

// Runtime is the container runtime of a site: what runs a template's
// image.
type Runtime string

// The container runtimes.
const (
	// NoRuntime: the portal runs no containers; a template with an image
	// is refused at render.
	NoRuntime Runtime = ""
	// Pyxis (NVIDIA's SPANK plugin, over enroot): the batch script starts
	// the template's script as one step, srun --container-image. pyxis's
	// options are srun's, not slurmrestd's: slurmrestd has no way to give
	// a SPANK option to a batch job.
	Pyxis Runtime = "pyxis"
	// Apptainer: the batch script runs the template's script with
	// apptainer exec (--nv for a job with GPUs).
	Apptainer Runtime = "apptainer"
	// OCI is Slurm's own container support: sbatch --container=<bundle>,
	// an OCI bundle unpacked on the nodes (skopeo copy, then umoci
	// unpack), which slurmstepd runs the whole batch script in through
	// the runtime of oci.conf (crun). The script is the template's.
	OCI Runtime = "oci"
)

// DefaultBundles is where the OCI bundles lie on the nodes, one per image
// at <bundles>/<image>.
const DefaultBundles = jobpolicy.DefaultOCIBundles

// Containers is the portal's container setting, passed to [Set.WithContainers].
type Containers struct {
	// Runtime runs a template's image.
	Runtime Runtime `yaml:"runtime" json:"runtime"`
	// Bundles is the directory of the OCI bundles (the oci runtime):
	// the image registry.example.com/acme/train:2.1 is the bundle
	// <bundles>/registry.example.com/acme/train:2.1 ("": DefaultBundles).
	// It must be the policy's cluster.oci_bundles, where job_submit.lua
	// finds the image a job's --container names.
	Bundles string `yaml:"bundles" json:"bundles,omitempty"`
}

// Validate returns every problem of c.
func (c Containers) Validate() error {
	var errs []error
	switch c.Runtime {
	case NoRuntime, Pyxis, Apptainer, OCI:
	default:
		errs = append(errs, fmt.Errorf("containers.runtime: %q is not a container runtime: use pyxis, apptainer or oci", c.Runtime))
	}
	if c.Bundles != "" && (!filepath.IsAbs(c.Bundles) || filepath.Clean(c.Bundles) != c.Bundles || c.Bundles == "/") {
		errs = append(errs, fmt.Errorf("containers.bundles: %q is not an absolute, clean directory other than /", c.Bundles))
	}
	return errors.Join(errs...)
}

// BundlePath is the OCI bundle of image under c's bundle directory.
func (c Containers) BundlePath(image string) string {
	root := c.Bundles
	if root == "" {
		root = DefaultBundles
	}
	return root + "/" + image
}

// ValidImage says whether image is an image reference a template may
// name ([jobpolicy.ValidImage]): no shell or mount-list character, no
// "." or ".." component, so that it is safe in a script, a mount list
// and a bundle path.
func ValidImage(image string) bool { return jobpolicy.ValidImage(image) }

// jobScript is where the template's script is mounted in the container.
const jobScript = "/run/strata/job-script"

// containerize makes spec run in image with c's runtime.
func (c Containers) containerize(spec *slurmrest.JobSpec, image string, gpus bool) error {
	switch c.Runtime {
	case NoRuntime:
		return errors.New("the template runs in container image " + image + ", and the portal has no container runtime: " +
			"set containers.runtime (pyxis, apptainer or oci) in the portal's config")
	case OCI:
		spec.Container = c.BundlePath(image)
		return nil
	}
	if strings.ContainsAny(spec.WorkDir, ",:'\n") {
		return fmt.Errorf("the working directory %q cannot be mounted into a container: it has ',', ':', a quote or a newline", spec.WorkDir)
	}
	var run string
	switch c.Runtime {
	case Pyxis:
		mounts := `"$script":` + jobScript + `:ro`
		workdir := ""
		if spec.WorkDir != "" {
			mounts += "," + quote(spec.WorkDir+":"+spec.WorkDir)
			workdir = " --container-workdir=" + quote(spec.WorkDir)
		}
		run = `srun --nodes=1 --ntasks=1 --cpus-per-task="$SLURM_CPUS_ON_NODE" --container-image=` + quote(image) +
			" --container-mounts=" + mounts + workdir + " " + jobScript
	case Apptainer:
		nv := ""
		if gpus {
			nv = " --nv"
		}
		binds := ` --bind "$script":` + jobScript + `:ro`
		if spec.WorkDir != "" {
			binds += " --bind " + quote(spec.WorkDir) + " --pwd " + quote(spec.WorkDir)
		}
		run = "apptainer exec" + nv + binds + " " + quote("docker://"+image) + " " + jobScript
	}
	wrapped, err := wrap(spec.Script, image, c.Runtime, run)
	if err != nil {
		return err
	}
	spec.Script = wrapped
	return nil
}

// wrap is the batch script that runs script with run: it writes script,
// byte for byte, to a file of its own (a here-document with a quoted
// delimiter, so the shell expands nothing in it), and removes it at the
// end.
func wrap(script, image string, rt Runtime, run string) (string, error) {
	sum := sha256.Sum256([]byte(script))
	delim := "STRATA_SCRIPT_" + hex.EncodeToString(sum[:8])
	if !strings.HasSuffix(script, "\n") {
		script += "\n"
	}
	for _, line := range strings.Split(script, "\n") {
		if line == delim {
			return "", errors.New("the script has a line " + delim + ", which ends the here-document it is carried in")
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/bash\n# strata: the template's script runs in container image %s (%s).\n", image, rt)
	b.WriteString("set -eu\nscript=$(mktemp \"${TMPDIR:-/tmp}/strata-job.XXXXXX\")\ntrap 'rm -f \"$script\"' EXIT\n")
	fmt.Fprintf(&b, "cat >\"$script\" <<'%s'\n%s%s\nchmod 0700 \"$script\"\n%s\n", delim, script, delim, run)
	return b.String(), nil
}

// quote quotes s for the shell.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
