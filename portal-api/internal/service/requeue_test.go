package service

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// TestRequeueThroughScontrol: on Slurm 24.11 (no REST requeue) a cluster
// given a scontrol requeues through it, as the caller: scontrol gets
// `requeue <id>` and, in SLURM_JWT, a token minted for the caller, not
// the poller's; without a scontrol the same requeue answers 501 with a
// hint. The scontrol is a script at the exec edge that records what it
// was given.
func TestRequeueThroughScontrol(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "jwt_hs256.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(dir, "scontrol.out")
	script := filepath.Join(dir, "scontrol")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '%s\\n' \"$*\" \"$SLURM_JWT\" >"+record+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := tenantmap.Load("testdata/tenants.json")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), filepath.Join(dir, "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tok, _, err := st.CreateToken(t.Context(), "mem", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := slurmrest.NewKeySigner(key, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		requeuer  slurmrest.Requeuer
		wantCode  int
		wantInErr string
	}{
		"scontrol":    {requeuer: slurmrest.ScontrolRequeuer{Path: script}, wantCode: 200},
		"no scontrol": {wantCode: 501, wantInErr: "set the cluster's scontrol"},
	} {
		t.Run(name, func(t *testing.T) {
			os.Remove(record)
			bed := clustertest.New(t, "24.11", gpu2Jobs...)
			p := cluster.New(cluster.Config{Name: "gpu2", Slurm: slurmrest.Config{URL: bed.URL, User: "root", Tokens: signer, Requeuer: tc.requeuer},
				Interval: time.Second})
			if err := p.Poll(t.Context()); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(New(Config{Clusters: []Cluster{{Poller: p, Tenants: func() *tenantmap.Map { return m }}},
				Auth: auth.New(auth.Config{Tokens: st, TokenPrefix: store.TokenPrefix}), Store: st, RatePerSecond: 1e6, Burst: 1e6}))
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/jobs/gpu2/920201/requeue", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct{ Message, Hint string }
			json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tc.wantCode || !strings.Contains(body.Hint, tc.wantInErr) {
				t.Fatalf("requeue = %d %+v, want %d with %q", resp.StatusCode, body, tc.wantCode, tc.wantInErr)
			}
			got, err := os.ReadFile(record)
			if tc.requeuer == nil {
				if err == nil {
					t.Errorf("scontrol ran: %s", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("scontrol did not run: %v", err)
			}
			lines := strings.Split(strings.TrimSpace(string(got)), "\n")
			if len(lines) != 2 || lines[0] != "requeue 920201" {
				t.Fatalf("scontrol got %q", got)
			}
			if user := jwtUser(t, lines[1]); user != "mem" {
				t.Errorf("SLURM_JWT is a token of %q, want the caller mem", user)
			}
		})
	}
}

// jwtUser is the user name (Slurm's sun claim) of a token.
func jwtUser(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("%q is not a JWT", token)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Sun string `json:"sun"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(fmt.Errorf("claims %s: %w", raw, err))
	}
	return claims.Sun
}
