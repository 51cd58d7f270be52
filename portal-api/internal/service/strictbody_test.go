package service

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestStrictBodies: a request body with a key given twice or a value
// after the JSON object is refused (400 bad_request, naming the problem
// and its place), as the contracts between Strata's parts are read;
// nothing is submitted.
func TestStrictBodies(t *testing.T) {
	h := newHarness(t)
	post := func(path, body string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+h.tokens["mem"])
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var e struct{ Code, Message string }
		_ = json.Unmarshal(b, &e)
		return resp.StatusCode, e.Code, e.Message
	}
	const sub = `{"cluster": "gpu1", "template": "small", "params": {"gpus": "1"}}`
	for name, tc := range map[string]struct{ path, body, want string }{
		"a key twice":        {"/v1/submissions", `{"cluster": "gpu1", "cluster": "gpu2", "template": "small", "params": {"gpus": "1"}}`, "cluster: given twice"},
		"a parameter twice":  {"/v1/submissions", `{"cluster": "gpu1", "template": "small", "params": {"gpus": "1", "gpus": "8"}}`, "given twice"},
		"a trailing value":   {"/v1/submissions", sub + ` {"cluster": "gpu2"}`, "after the document"},
		"trailing garbage":   {"/v1/submissions", sub + ` x`, "bad_request"},
		"a session's key":    {"/v1/sessions", `{"cluster": "gpu1", "cluster": "gpu1", "template": "notebook", "params": {}}`, "given twice"},
		"a rollback's key":   {"/v1/deployments/gpu1/llm/rollback", `{"to": "job-1", "to": "job-2"}`, "given twice"},
		"a rollback's tail":  {"/v1/deployments/gpu1/llm/rollback", `{} {}`, "after the document"},
		"a deploy's key":     {"/v1/deployments", `{"cluster": "gpu1", "job": 910101, "job": 910102}`, "bad_request"},
		"an unknown field":   {"/v1/submissions", `{"cluster": "gpu1", "template": "small", "params": {}, "extra": 1}`, "unknown field"},
		"an empty body":      {"/v1/submissions", ``, "want a JSON object"},
		"a submission array": {"/v1/submissions", `[` + sub + `]`, "bad_request"},
	} {
		code, ecode, msg := post(tc.path, tc.body)
		if code != http.StatusBadRequest || ecode != "bad_request" || (tc.want != "bad_request" && !strings.Contains(msg, tc.want)) {
			t.Errorf("%s: %d %s %q, want 400 bad_request with %q", name, code, ecode, msg, tc.want)
		}
	}
	if n := len(h.beds["gpu1"].Submits()); n != 0 {
		t.Errorf("%d submissions reached Slurm", n)
	}
}
