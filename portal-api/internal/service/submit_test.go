package service

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSubmit: a member's submission is checked, made as them with the
// values only in the environment, audited and recorded; a refusal of the
// policy carries its message and line; bad values are all reported.
func TestSubmit(t *testing.T) {
	h := newHarness(t)
	code, body := h.do("mem", "POST", "/v1/submissions", map[string]any{"cluster": "gpu1", "template": "small",
		"params": map[string]string{"gpus": "2", "tag": "a-b"}})
	if code != 201 {
		t.Fatalf("submit = %d %s", code, body)
	}
	var sub struct {
		JobID   int64  `json:"job_id"`
		Account string `json:"account"`
		AuditID int64  `json:"audit_id"`
	}
	json.Unmarshal(body, &sub)
	if sub.JobID == 0 || sub.Account != "acme-llm" {
		t.Errorf("submission = %s", body)
	}
	subs := h.beds["gpu1"].Submits()
	if len(subs) != 1 || subs[0].User != "mem" {
		t.Fatalf("submits = %+v", subs)
	}
	sent := string(subs[0].Body)
	if !strings.Contains(sent, "STRATA_PARAM_TAG=a-b") || !strings.Contains(sent, `"account":"acme-llm"`) || strings.Contains(sent, `a-b steps`) {
		t.Errorf("submitted job: %s", sent)
	}
	recs, err := h.store.Submissions(t.Context(), "mem", 10)
	if err != nil || len(recs) != 1 || recs[0].JobID != sub.JobID || recs[0].Template != "small" || recs[0].Cluster != "gpu1" ||
		recs[0].AuditID != sub.AuditID || !strings.Contains(recs[0].Params, `"gpus":"2"`) {
		t.Errorf("recorded = %+v, %v", recs, err)
	}
	log, _ := h.store.AuditLog(t.Context(), 10)
	if len(log) != 1 || log[0].Action != "submit" || log[0].Result != "ok" || log[0].User != "mem" {
		t.Errorf("audit = %+v", log)
	}

	for name, tc := range map[string]struct {
		user   string
		req    map[string]any
		code   int
		inBody []string
	}{
		"over the project's GPUs": {"mem", map[string]any{"cluster": "gpu1", "template": "small", "params": map[string]string{"gpus": "6"}},
			403, []string{`"policy_refused"`, `"policy_line":"policy.yaml:52"`, "acme-llm",
				`"refusal":{"asked":"6","limit":"4","owner":"account acme-llm","rule":"gpus","unit":"gpus"}`}},
		"bad values": {"mem", map[string]any{"cluster": "gpu1", "template": "small", "params": map[string]string{"gpus": "99", "tag": "A B; rm -rf /", "nope": "1"}},
			400, []string{"3 parameter values", "gpus", "tag", "nope"}},
		"unknown template":     {"mem", map[string]any{"cluster": "gpu1", "template": "nope"}, 404, []string{"no template"}},
		"unknown cluster":      {"mem", map[string]any{"cluster": "nope", "template": "small"}, 404, []string{"no cluster"}},
		"no policy":            {"mem", map[string]any{"cluster": "gpu2", "template": "small"}, 503, []string{"job_policy_file"}},
		"another tenant's":     {"mem", map[string]any{"cluster": "gpu1", "template": "small", "account": "globex-rl"}, 404, []string{"no project account"}},
		"viewer":               {"view", map[string]any{"cluster": "gpu1", "template": "small", "account": "acme-llm"}, 403, []string{"viewers"}},
		"no default project":   {"nobody", map[string]any{"cluster": "gpu1", "template": "small"}, 400, []string{"no default project"}},
		"unknown field":        {"mem", map[string]any{"cluster": "gpu1", "template": "small", "script": "rm -rf /"}, 400, []string{"script"}},
		"other tenant default": {"gmem", map[string]any{"cluster": "gpu1", "template": "small"}, 201, []string{"globex-rl"}},
	} {
		t.Run(name, func(t *testing.T) {
			h.t = t
			code, body := h.do(tc.user, "POST", "/v1/submissions", tc.req)
			if code != tc.code {
				t.Errorf("= %d, want %d: %s", code, tc.code, body)
			}
			for _, s := range tc.inBody {
				if !strings.Contains(string(body), s) {
					t.Errorf("answer lacks %q: %s", s, body)
				}
			}
		})
	}
	h.t = t
	if n := len(h.beds["gpu1"].Submits()); n != 2 {
		t.Errorf("%d submissions reached Slurm, want 2 (the refused ones must not)", n)
	}
	// The body cap.
	code, body = h.do("mem", "POST", "/v1/submissions", map[string]any{"cluster": "gpu1", "template": "small",
		"params": map[string]string{"tag": strings.Repeat("x", 2<<20)}})
	if code != 413 || !strings.Contains(string(body), "too_large") {
		t.Errorf("2 MiB body = %d %s", code, body)
	}
}

// TestTemplates: the templates and their parameters' rules.
func TestTemplates(t *testing.T) {
	h := newHarness(t)
	code, body := h.do("view", "GET", "/v1/templates", nil)
	if code != 200 || !strings.Contains(string(body), `"name":"small"`) || !strings.Contains(string(body), `"max":8`) ||
		!strings.Contains(string(body), `"pattern":"[a-z0-9\\-]{1,20}"`) {
		t.Errorf("templates = %d %s", code, body)
	}
}

// TestSubmitDryRun: with dry_run the policy's answer comes back (200)
// and nothing reaches Slurm, the audit log or the submissions: accepted
// with what the policy fills in, or refused with its message and line
// ("asks for 6 GPUs" of acme-llm's 4, policy.yaml:52); what fails before
// the policy is a problem as without dry_run; a session takes none.
func TestSubmitDryRun(t *testing.T) {
	h := newHarness(t)
	for name, tc := range map[string]struct {
		user   string
		params map[string]string
		code   int
		want   []string
		absent []string
	}{
		"accepted": {"mem", map[string]string{"gpus": "2"}, 200,
			[]string{`"accepted":true`, `"dry_run":true`, `"account":"acme-llm"`, `"gpus":"gres/gpu:2"`, `"partition":`}, []string{`"message"`, "job_id"}},
		"refused by the policy": {"mem", map[string]string{"gpus": "6"}, 200,
			[]string{`"accepted":false`, `"policy_line":"policy.yaml:52"`, "acme-llm", "6",
				`"refusal":{"asked":"6","limit":"4","owner":"account acme-llm","rule":"gpus","unit":"gpus"}`}, []string{`"job"`, "job_id"}},
		"bad values":  {"mem", map[string]string{"gpus": "99"}, 400, []string{"parameter values"}, nil},
		"viewer":      {"view", map[string]string{"gpus": "1"}, 403, []string{"viewers"}, nil},
		"no project:": {"nobody", map[string]string{"gpus": "1"}, 400, []string{"no default project"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			h.t = t
			req := map[string]any{"cluster": "gpu1", "template": "small", "params": tc.params, "dry_run": true}
			if tc.user == "view" {
				req["account"] = "acme-llm"
			}
			code, body := h.do(tc.user, "POST", "/v1/submissions", req)
			if code != tc.code {
				t.Errorf("= %d, want %d: %s", code, tc.code, body)
			}
			for _, s := range tc.want {
				if !strings.Contains(string(body), s) {
					t.Errorf("answer lacks %q: %s", s, body)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(string(body), s) {
					t.Errorf("answer has %q: %s", s, body)
				}
			}
		})
	}
	h.t = t
	if n := len(h.beds["gpu1"].Submits()); n != 0 {
		t.Errorf("%d dry runs reached Slurm", n)
	}
	if log, _ := h.store.AuditLog(t.Context(), 10); len(log) != 0 {
		t.Errorf("dry runs audited: %+v", log)
	}
	if recs, _ := h.store.Submissions(t.Context(), "mem", 10); len(recs) != 0 {
		t.Errorf("dry runs recorded: %+v", recs)
	}
	code, body := h.do("mem", "POST", "/v1/sessions", map[string]any{"cluster": "gpu1", "template": "notebook", "dry_run": true})
	if code != 400 || !strings.Contains(string(body), "dry_run") {
		t.Errorf("a session's dry run = %d %s", code, body)
	}
}
