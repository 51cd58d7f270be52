package jobpolicy

import (
	"regexp"
	"strings"
)

// DefaultOCIBundles is the directory of the OCI bundles on the nodes when
// the policy names none (cluster.oci_bundles): the image
// registry.example.com/acme/train:2.1 is the bundle
// /srv/strata/bundles/registry.example.com/acme/train:2.1, and a job's
// --container names the image it runs by that path.
const DefaultOCIBundles = "/srv/strata/bundles"

// imageRE is an image reference as the registries write it:
// [host[:port]/]path[:tag][@sha256:digest], in lower case but the tag.
// It has no shell or mount-list character (space, ',', quotes), and no
// component is "." or "..", so that it is safe in a script, a mount list
// and a bundle path.
var imageRE = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$`)

// prefixRE is the part of a prefix pattern before "/*": a registry host
// and path, without tag or digest.
var prefixRE = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*$`)

// ValidImage says whether image is an image reference: what a template
// and an allow-list may name.
func ValidImage(image string) bool { return len(image) <= 512 && imageRE.MatchString(image) }

// ValidImagePattern says whether pattern is an entry of an image
// allow-list: an image reference, matched exactly, or a registry path
// and "/*" ("registry.example.com/acme/*"), which matches every image
// under that path, at any depth, with any tag.
func ValidImagePattern(pattern string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "/*"); ok {
		return len(prefix) <= 512 && prefixRE.MatchString(prefix)
	}
	return ValidImage(pattern)
}

// ImageAllowed says whether an allow-list lets a job run image: an entry
// is the image, or a prefix pattern whose path the image is under.
// job_submit.lua's image_allowed matches alike.
func ImageAllowed(patterns []string, image string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "/*"); ok {
			if strings.HasPrefix(image, prefix+"/") {
				return true
			}
		} else if image == p {
			return true
		}
	}
	return false
}

// Bundles is the directory of the policy's OCI bundles.
func (p *Policy) Bundles() string {
	if p.OCIBundles == "" {
		return DefaultOCIBundles
	}
	return p.OCIBundles
}

// imageOfBundle returns the image a --container path is the bundle of:
// the path under the bundle directory, with no empty, "." or ".."
// component; ok is false for any other path. job_submit.lua's
// image_of_bundle reads it alike.
func imageOfBundle(bundles, container string) (string, bool) {
	image, ok := strings.CutPrefix(container, bundles+"/")
	if !ok || image == "" {
		return "", false
	}
	for _, c := range strings.Split(image, "/") {
		if c == "" || c == "." || c == ".." {
			return "", false
		}
	}
	return image, true
}
