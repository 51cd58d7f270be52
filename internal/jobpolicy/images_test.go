package jobpolicy

import (
	"strings"
	"testing"
)

// TestImagePatterns: which entries an allow-list may hold, and what each
// matches.
func TestImagePatterns(t *testing.T) {
	for p, want := range map[string]bool{
		"registry.example.com/acme/*":      true,
		"registry.example.com:5000/acme/*": true,
		"nvcr.io/nvidia/pytorch:25.04-py3": true,
		"ubuntu":                           true,
		"*":                                false,
		"registry.example.com/acme*":       false,
		"registry.example.com/acme/x:1/*":  false,
		"registry.example.com/../x/*":      false,
		"Registry.example.com/acme":        false,
		"acme/x y":                         false,
	} {
		if got := ValidImagePattern(p); got != want {
			t.Errorf("ValidImagePattern(%q) = %v, want %v", p, got, want)
		}
	}
	list := []string{"registry.example.com/acme/*", "nvcr.io/nvidia/pytorch:25.04-py3"}
	for img, want := range map[string]bool{
		"registry.example.com/acme/train:2.1":    true,
		"registry.example.com/acme/a/b/c@sha256": true,
		"nvcr.io/nvidia/pytorch:25.04-py3":       true,
		"nvcr.io/nvidia/pytorch:24.01-py3":       false,
		"nvcr.io/nvidia/pytorch":                 false,
		"registry.example.com/acme":              false,
		"registry.example.com/acme-evil/x":       false,
		"registry.example.com/other/x":           false,
	} {
		if got := ImageAllowed(list, img); got != want {
			t.Errorf("ImageAllowed(%q) = %v, want %v", img, got, want)
		}
	}
}

// TestCheckImage: the portal's image (pyxis, Apptainer), which
// job_submit.lua cannot see, is held to the same allow-list as a
// --container bundle.
func TestCheckImage(t *testing.T) {
	p := &Policy{APIVersion: APIVersion, Kind: Kind, Source: "policy.yaml", Cluster: "gpu", DefaultClass: "batch",
		Classes:  map[string]Class{"batch": {Partition: "gpu"}},
		Accounts: map[string]Account{"acme-llm": {Tenant: "acme", Classes: []string{"batch"}, Members: []string{"alice"}, Images: []string{"registry.example.com/acme/*"}, ImagesLine: 12}},
		Users:    map[string]string{"alice": "acme-llm"}}
	for name, tc := range map[string]struct {
		job  Job
		want string
	}{
		"allowed image":     {Job{Image: "registry.example.com/acme/train:1"}, ""},
		"refused image":     {Job{Image: "docker.io/library/ubuntu"}, "strata: tenant acme may not run container image docker.io/library/ubuntu; it may run registry.example.com/acme/* (policy.yaml:12)"},
		"allowed bundle":    {Job{Container: "/srv/strata/bundles/registry.example.com/acme/train:1"}, ""},
		"bundle, bad image": {Job{Container: "/srv/strata/bundles/registry.example.com/acme/train:1", Image: "docker.io/x"}, "strata: tenant acme may not run container image docker.io/x"},
		"no container":      {Job{}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			r := p.Check("alice", tc.job)
			if (tc.want == "") != (r == nil) || (r != nil && (!strings.HasPrefix(r.Message, tc.want) || r.Code != "ESLURM_ACCOUNTING_POLICY")) {
				t.Errorf("Check = %v, want %q", r, tc.want)
			}
		})
	}
	bad := *p
	bad.OCIBundles = "bundles/"
	acct := bad.Accounts["acme-llm"]
	acct.Images = []string{"*"}
	bad.Accounts = map[string]Account{"acme-llm": acct}
	errs := bad.Validate()
	if len(errs) != 2 {
		t.Errorf("Validate of a relative bundle directory and a bad pattern: %v", errs)
	}
}

// FuzzImage: an image the check accepts is safe where the portal puts
// it (a script, a mount list, a bundle path), and a prefix pattern
// matches only images under its path.
func FuzzImage(f *testing.F) {
	for _, s := range []string{"registry.example.com/acme/train:2.1", "registry.example.com/acme/*", "a/../b", "a//b", "x;y", "nvcr.io/nvidia/pytorch:25.04-py3", "acme/x@sha256:" + strings.Repeat("0", 64)} {
		f.Add(s, "registry.example.com/acme/*")
	}
	f.Fuzz(func(t *testing.T, image, pattern string) {
		if ValidImage(image) {
			if strings.ContainsAny(image, " \t\n,'\"`$;&|<>\\*") {
				t.Errorf("ValidImage(%q): it has a shell or mount-list character", image)
			}
			if _, ok := imageOfBundle(DefaultOCIBundles, DefaultOCIBundles+"/"+image); !ok {
				t.Errorf("ValidImage(%q), but its bundle path is refused", image)
			}
		}
		if ValidImagePattern(pattern) && ImageAllowed([]string{pattern}, image) && image != pattern &&
			!strings.HasPrefix(image, strings.TrimSuffix(pattern, "*")) {
			t.Errorf("pattern %q matches %q, which is not under it", pattern, image)
		}
	})
}
