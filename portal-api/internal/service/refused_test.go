package service

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// TestActionRefusedBySlurm: tadmin, an admin of acme in tenants.json
// alone, cancels mem's job; slurmrestd answers as it does a cancel
// slurmctld refused (HTTP 200, the refusal in status[0].error, captured on
// both test beds). The portal answers 403 slurm_refused with Slurm's
// reason and no address of slurmrestd, and audits the cancel as refused.
// The same request answered as done is 200 and audited ok.
func TestActionRefusedBySlurm(t *testing.T) {
	for _, tc := range []struct{ cluster, job string }{{"gpu1", "910101"}, {"gpu2", "920201"}} {
		t.Run(tc.cluster, func(t *testing.T) {
			h := newHarness(t)
			bed := h.beds[tc.cluster]
			bed.AnswerControls("cancel-refused")
			code, body := h.do("tadmin", http.MethodPost, "/v1/jobs/"+tc.cluster+"/"+tc.job+"/cancel", nil)
			var e struct{ Code, Message, Hint string }
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatal(err)
			}
			if code != http.StatusForbidden || e.Code != "slurm_refused" || !strings.Contains(e.Message, "Access/permission denied") {
				t.Fatalf("cancel Slurm refused = %d %s, want 403 slurm_refused with Slurm's reason", code, body)
			}
			if strings.Contains(string(body), strings.TrimPrefix(bed.URL, "http://")) || strings.Contains(string(body), "slurmrestd answered") {
				t.Errorf("the answer shows slurmrestd's address or the client's wording: %s", body)
			}
			log, err := h.store.AuditLog(t.Context(), 1)
			if err != nil || len(log) != 1 {
				t.Fatalf("audit log = %+v, %v", log, err)
			}
			if a := log[0]; a.Action != "cancel" || a.User != "tadmin" || a.Result != store.ResultRefused || !strings.Contains(a.Error, "Access/permission denied") {
				t.Errorf("audit record = %+v, want the cancel refused with Slurm's reason", a)
			}

			bed.AnswerControls("")
			if code, body := h.do("tadmin", http.MethodPost, "/v1/jobs/"+tc.cluster+"/"+tc.job+"/cancel", nil); code != http.StatusOK {
				t.Fatalf("cancel done = %d %s", code, body)
			}
			if log, _ := h.store.AuditLog(t.Context(), 1); len(log) != 1 || log[0].Result != store.ResultOK {
				t.Errorf("audit record of the cancel done = %+v", log)
			}
		})
	}
}

// TestRefusedWritesAudited: a write the portal refuses before trying it
// leaves an audit record, refused, with the reason: a viewer's cancel, a
// cancel of another tenant's job (answered 404 as a missing one), a
// member's drain, a viewer's submission.
func TestRefusedWritesAudited(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		user, method, path string
		body               any
		code               int
		want               string // action target
	}{
		{"view", "POST", "/v1/jobs/gpu1/910101/cancel", nil, 403, "cancel 910101"},
		{"gmem", "POST", "/v1/jobs/gpu1/910101/hold", nil, 404, "hold 910101"},
		{"mem", "POST", "/v1/nodes/gpu1/gpu1/drain", map[string]string{"reason": "maintenance"}, 403, "drain gpu1"},
		{"view", "POST", "/v1/submissions", map[string]any{"cluster": "gpu1", "template": "small", "account": "acme-llm", "params": map[string]string{}}, 403, "submit small"},
	} {
		code, body := h.do(tc.user, tc.method, tc.path, tc.body)
		if code != tc.code {
			t.Errorf("%s %s as %s = %d %s, want %d", tc.method, tc.path, tc.user, code, body, tc.code)
			continue
		}
		log, err := h.store.AuditLog(t.Context(), 1)
		if err != nil || len(log) != 1 {
			t.Fatalf("audit log = %+v, %v", log, err)
		}
		a := log[0]
		if a.User != tc.user || a.Action+" "+a.Target != tc.want || a.Result != store.ResultRefused || a.Error == "" || a.FinishedAt.IsZero() {
			t.Errorf("%s %s as %s: audit record %+v, want %q refused with its reason", tc.method, tc.path, tc.user, a, tc.want)
		}
	}
}
