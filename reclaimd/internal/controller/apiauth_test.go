package controller_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAPIToken: every /v1 read names tenants' jobs, users and nodes, so
// each wants the API token: without it, or with another, the answer is
// 401 with a hint, for known and unknown paths alike (never 404, which
// would tell what exists); with it the read answers. /healthz and
// /metrics stay open to probes and scrapers.
func TestAPIToken(t *testing.T) {
	b := newBed(t, "26.05", cancelRules, 0)
	b.mustTick()
	srv := httptest.NewServer(b.ctl.Handler(time.Hour))
	defer srv.Close()
	paths := []string{"/v1/decisions", "/v1/failures", "/v1/jobs/1/reclaim", "/v1/jobs/1/attempts", "/v1/nodes/health",
		"/v1/jobs/99999/reclaim", "/v1/no-such-path", "/v1/"}
	for _, p := range paths {
		for name, header := range map[string]string{"none": "", "wrong": "Bearer not-the-token", "basic": "Basic " + string(apiToken)} {
			code, body, h := do(t, srv.URL+p, header)
			if code != http.StatusUnauthorized || !strings.Contains(body, "send Authorization: Bearer <the content of api.token_file of reclaimd.yaml>") ||
				h.Get("WWW-Authenticate") == "" {
				t.Errorf("GET %s with %s token = %d %s, want 401 with a hint", p, name, code, body)
			}
		}
		code, body, _ := do(t, srv.URL+p, "Bearer "+string(apiToken))
		if code == http.StatusUnauthorized {
			t.Errorf("GET %s with the token = %d %s", p, code, body)
		}
	}
	if code, body, _ := do(t, srv.URL+"/v1/decisions", "Bearer "+string(apiToken)); code != http.StatusOK || !strings.Contains(body, `"decisions"`) {
		t.Errorf("GET /v1/decisions with the token = %d %s", code, body)
	}
	for _, p := range []string{"/healthz", "/metrics"} {
		if code, body, _ := do(t, srv.URL+p, ""); code == http.StatusUnauthorized {
			t.Errorf("GET %s without a token = %d %s: probes carry none", p, code, body)
		}
	}
}

func do(t *testing.T, url, authorization string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}
