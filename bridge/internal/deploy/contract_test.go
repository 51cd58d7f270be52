package deploy

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestResultContract: a deploy's result answers through the API as
// bridgeapi.Result (Result.Contract) in the very JSON the bridge wrote
// from its own type, with the applied objects left out as before (json:"-").
func TestResultContract(t *testing.T) {
	for name, r := range map[string]Result{
		"empty": {},
		"full": {Action: "deploy", Name: "llm-chat", Namespace: "strata-acme", Tenant: "acme", Project: "llm", JobID: 122, Version: "job-122",
			DryRun: true, Changed: true, Outcome: "ready", Message: "rolled out", Rollout: "surge",
			Objects: []Applied{{ObjectRef: ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "strata-acme", Name: "llm-chat"},
				Action: ActionConfigured, GenerationBefore: 3, GenerationAfter: 4, Object: &unstructured.Unstructured{Object: map[string]any{"kind": "Deployment"}}}},
			Pruned: []ObjectRef{{APIVersion: "v1", Kind: "Service", Namespace: "strata-acme", Name: "old"}}},
		"no objects": {Action: "rollback", Objects: []Applied{}},
	} {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(&r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(r.Contract())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("contract:\n%s\nthe bridge's own:\n%s", got, want)
			}
		})
	}
}
