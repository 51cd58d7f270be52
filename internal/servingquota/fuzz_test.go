package servingquota

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse feeds serving.json to Parse: it never panics; a file it
// accepts marshals to one it accepts as the same file, and every account
// it names is found as its own tenant's or project's. Seeded from the
// table tests.
func FuzzParse(f *testing.F) {
	for _, s := range []string{good, goodV2,
		`{"apiVersion":"strata/v2","kind":"ServingQuotas"}`,
		`{"apiVersion":"strata/v1","kind":"ServingQuotas","tenant":[]}`,
		`{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"n"},{"name":"b","namespace":"n"}]}`,
		`{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","projects":[{"name":"p","account":"a-p"}]},{"name":"b","namespace":"y","projects":[{"name":"q","account":"a-p"}]}]}`,
		`{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","gpus":-1}]}`,
		`{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","projects":[{"name":"p","account":"b"}]},{"name":"b","namespace":"y"}]}`,
		good + `{"apiVersion":"strata/v1"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		for i := range file.Tenants {
			tn := &file.Tenants[i]
			if o, ok := file.Lookup(tn.Name); !ok || o.Tenant.Name != tn.Name || o.Project != "" {
				t.Fatalf("Lookup(%q) = %+v, %v; want tenant %s's own account", tn.Name, o, ok, tn.Name)
			}
			for _, p := range tn.Projects {
				if o, ok := file.Lookup(p.Account); !ok || o.Tenant.Name != tn.Name || o.Project != p.Name {
					t.Fatalf("Lookup(%q) = %+v, %v; want %s/%s", p.Account, o, ok, tn.Name, p.Name)
				}
			}
		}
		out, err := file.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("the marshalled file does not parse: %v\n%s", err, out)
		}
		sorted, _ := Parse(out)
		if diff := cmp.Diff(sorted, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
		if out2, _ := again.Marshal(); string(out2) != string(out) {
			t.Fatalf("marshal is not stable:\n%s\n%s", out, out2)
		}
	})
}
