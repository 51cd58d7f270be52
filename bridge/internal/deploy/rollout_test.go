package deploy

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	// As the dynamic client decodes: integers stay int64.
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(s)); err != nil {
		t.Fatal(err)
	}
	return u
}

// The states a Deployment passes through in a rolling update, as the
// deployment controller writes them, and the two an InferenceService
// has.
func TestRolloutStatus(t *testing.T) {
	tests := map[string]struct {
		obj        string
		wantDone   bool
		wantFailed bool
		wantMsg    string
	}{
		"new spec not seen yet": {
			obj:     `{"kind":"Deployment","metadata":{"generation":3},"spec":{"replicas":2},"status":{"observedGeneration":2,"replicas":2,"updatedReplicas":2,"availableReplicas":2}}`,
			wantMsg: "waiting for the controller to see generation 3 (it has seen 2)",
		},
		"one of two updated": {
			obj:     `{"kind":"Deployment","metadata":{"generation":3},"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":1,"availableReplicas":2}}`,
			wantMsg: "1 of 2 replicas updated",
		},
		"pods refused for quota": {
			obj: `{"kind":"Deployment","metadata":{"generation":3},"spec":{"replicas":1},"status":{"observedGeneration":3,"replicas":0,"updatedReplicas":0,
				"conditions":[{"type":"ReplicaFailure","status":"True","reason":"FailedCreate","message":"pods \"m-1\" is forbidden: exceeded quota: strata-serving, requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=1"}]}}`,
			wantMsg: `the apiserver refuses the new version's pods: the tenant's serving quota (ResourceQuota strata-serving) has no room for them: pods "m-1" is forbidden: exceeded quota: strata-serving, requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=1`,
		},
		"old replica still there": {
			obj:     `{"kind":"Deployment","metadata":{"generation":3},"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":2,"availableReplicas":2}}`,
			wantMsg: "1 old replicas pending termination",
		},
		"updated, not available": {
			obj:     `{"kind":"Deployment","metadata":{"generation":3},"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2,"availableReplicas":1}}`,
			wantMsg: "1 of 2 updated replicas available",
		},
		"rolled out": {
			obj:      `{"kind":"Deployment","metadata":{"generation":3},"spec":{"replicas":2},"status":{"observedGeneration":3,"replicas":2,"updatedReplicas":2,"availableReplicas":2}}`,
			wantDone: true, wantMsg: "2 of 2 replicas updated and available",
		},
		"no replicas field is one": {
			obj:     `{"kind":"Deployment","metadata":{"generation":1},"spec":{},"status":{"observedGeneration":1}}`,
			wantMsg: "0 of 1 replicas updated",
		},
		"progress deadline exceeded": {
			obj: `{"kind":"Deployment","metadata":{"generation":2},"spec":{"replicas":1},"status":{"observedGeneration":2,"replicas":1,"updatedReplicas":0,
				"conditions":[{"type":"Available","status":"True"},{"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded","message":"ReplicaSet \"m-1\" has timed out progressing."}]}}`,
			wantFailed: true, wantMsg: `progress deadline exceeded: ReplicaSet "m-1" has timed out progressing.`,
		},
		"inference service not ready": {
			obj:     `{"kind":"InferenceService","metadata":{"generation":1},"status":{"conditions":[{"type":"Ready","status":"False","message":"Predictor not ready"}]}}`,
			wantMsg: "InferenceService is not Ready: Predictor not ready",
		},
		"inference service ready": {
			obj:      `{"kind":"InferenceService","metadata":{"generation":1},"status":{"observedGeneration":1,"conditions":[{"type":"Ready","status":"True"}]}}`,
			wantDone: true, wantMsg: "InferenceService is Ready",
		},
		"inference service without status": {
			obj:     `{"kind":"InferenceService","metadata":{"generation":1}}`,
			wantMsg: "InferenceService has no Ready condition yet",
		},
		"a service has no rollout": {
			obj:      `{"kind":"Service","metadata":{}}`,
			wantDone: true, wantMsg: "Service has no rollout",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := RolloutStatus(obj(t, tc.obj))
			if got.Done != tc.wantDone || got.Failed != tc.wantFailed || got.Message != tc.wantMsg {
				t.Errorf("RolloutStatus = %+v, want done=%v failed=%v %q", got, tc.wantDone, tc.wantFailed, tc.wantMsg)
			}
		})
	}
}
