package render

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-hpc/strata/internal/fuzzseed"
)

// FuzzRuntime feeds runtime templates (an admin's file) to ParseRuntime
// and renders every one it accepts in place of a golden case's runtime,
// for each mount kind and with KServe: parsing never panics, an accepted
// template validates again, and rendering either fails with an error or
// gives objects that marshal as JSON. Seeded from the shipped templates
// and testdata/runtimes.
func FuzzRuntime(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join(runtimesDir, "*.yaml"))
	bad, _ := filepath.Glob("testdata/runtimes/*.yaml")
	for _, p := range append(seeds, bad...) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		// Without their comments (fuzzseed): the shipped files,
		// kilobytes of explanation each, left the fuzzer minimizing
		// instead of exploring.
		f.Add(fuzzseed.YAML(data), uint8(0))
	}
	f.Add([]byte("apiVersion: strata/v1\nkind: ServingRuntime\nimage: x:1\nport: 8000\nenv:\n  A: \"{{.ModelPath}}{{\"\n"), uint8(1))
	// The golden cases' inputs are read once: reading their files at
	// every run made each run cost milliseconds, and the fuzzer spent
	// its time minimizing rather than exploring.
	names := []string{"generic-pvc", "vllm-hostpath-autoscale", "triton-nfs", "kserve-vllm-pvc"}
	inputs := make([]Input, len(names))
	for i, name := range names {
		inputs[i] = input(f, name, goldenCases[name])
	}
	f.Fuzz(func(t *testing.T, data []byte, variant uint8) {
		rt, err := ParseRuntime("fuzz.yaml", "fuzz", data)
		if err != nil {
			return
		}
		if d := rt.Validate(); len(d) != 0 {
			t.Fatalf("accepted a template whose Validate says %v", d)
		}
		in := inputs[int(variant)%len(inputs)] // a copy: the runtime below is this run's
		rt.Name = in.Runtime.Name
		in.Runtime = rt
		objs, err := Render(in)
		if err != nil {
			return
		}
		for _, o := range objs {
			if _, err := o.MarshalJSON(); err != nil {
				t.Fatalf("rendered object %s/%s does not marshal: %v", o.GetKind(), o.GetName(), err)
			}
		}
	})
}
