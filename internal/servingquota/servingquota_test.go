package servingquota

import (
	"strings"
	"testing"
)

const good = `{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[
 {"name":"acme","namespace":"strata-acme","gpus":8,"replicas":4,"projects":[{"name":"llm","account":"acme-llm"}]},
 {"name":"globex","namespace":"strata-globex","gpus":0,"replicas":0,"projects":[{"name":"rl","account":"globex-rl"}]}]}`

func TestParseLookup(t *testing.T) {
	f, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	o, ok := f.Lookup("acme-llm")
	if !ok || o.Tenant.Name != "acme" || o.Project != "llm" || o.Tenant.GPUs != 8 {
		t.Errorf("Lookup(acme-llm) = %+v, %v", o, ok)
	}
	if o, ok := f.Lookup("acme"); !ok || o.Project != "" {
		t.Errorf("Lookup(acme) = %+v, %v", o, ok)
	}
	if _, ok := f.Lookup("initech-x"); ok {
		t.Error("Lookup of an unknown account succeeded")
	}
	b, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(b); err != nil {
		t.Errorf("Marshal output does not parse: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"header", `{"apiVersion":"strata/v2","kind":"ServingQuotas"}`, "not a strata/v1"},
		{"unknown field", `{"apiVersion":"strata/v1","kind":"ServingQuotas","tenant":[]}`, "unknown field"},
		{"dup namespace", `{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"n"},{"name":"b","namespace":"n"}]}`, "also tenant a's"},
		{"dup account", `{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","projects":[{"name":"p","account":"a-p"}]},{"name":"b","namespace":"y","projects":[{"name":"q","account":"a-p"}]}]}`, "also a/p's"},
		{"negative", `{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","gpus":-1}]}`, "negative"},
		{"a project account that is a tenant's", `{"apiVersion":"strata/v1","kind":"ServingQuotas","tenants":[{"name":"a","namespace":"x","projects":[{"name":"p","account":"b"}]},{"name":"b","namespace":"y"}]}`,
			`tenant b: its account "b" is also a/p's`},
		{"two values", good + `{"apiVersion":"strata/v1"}`, "more than one JSON value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
