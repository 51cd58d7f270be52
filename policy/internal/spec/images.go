package spec

import (
	"fmt"
	"path"
	"strings"

	"github.com/strata-hpc/strata/internal/jobpolicy"
)

// Images is a tenant's image allow-list: the container images its jobs
// may run, each an image reference matched exactly
// ("nvcr.io/nvidia/pytorch:25.04-py3") or a registry path and "/*"
// ("registry.example.com/acme/*": every image under that path, at any
// depth, with any tag). A tenant without the list may run no container
// image. The portal checks the image of every template it renders
// (pyxis, Apptainer, Slurm OCI), job_submit.lua the image of a job's
// --container (the bundle <oci_bundles>/<image>); sbatch
// --container-image (pyxis) is a SPANK option job_submit.lua cannot see.
type Images []string

// images checks every tenant's allow-list and the bundle directory.
func (v *validator) images(p *Policy) {
	if b := p.Cluster.OCIBundles; b != "" && (!strings.HasPrefix(b, "/") || path.Clean(b) != b || b == "/") {
		v.add("cluster.oci_bundles", "write an absolute, clean directory other than /, such as "+jobpolicy.DefaultOCIBundles,
			"%q is not a directory of OCI bundles", b)
	}
	for ti, t := range p.Tenants {
		seen := map[string]int{}
		for i, img := range t.Images {
			ip := fmt.Sprintf("tenants[%d].images[%d]", ti, i)
			if j, dup := seen[img]; dup {
				v.add(ip, "list each image once", "image %s is also images[%d]", img, j)
				continue
			}
			seen[img] = i
			if !jobpolicy.ValidImagePattern(img) {
				v.add(ip, "write an image, lower case, such as registry.example.com/acme/train:2.1, or a registry path and /*, such as registry.example.com/acme/*",
					"%q is not an image or an image prefix", img)
			}
		}
	}
}
