package reclaimclient

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/bearer"
	"github.com/strata-hpc/strata/internal/reclaimapi"
)

// TestToken: reclaimd's API answers only a request with its token, behind
// the guard reclaimd itself uses (internal/bearer). The client sends the
// token it is given and reads the answer; without it, or with another,
// the 401 comes back with what to do; a token file it cannot read sends
// nothing.
func TestToken(t *testing.T) {
	api := http.NewServeMux()
	api.HandleFunc("GET "+reclaimapi.PathDecisions, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(reclaimapi.Decisions{Decisions: []reclaimapi.Record{{JobID: 7}}})
	})
	var requests int
	guard := bearer.Guard{Token: func() ([]byte, error) { return []byte("the-token"), nil }, Realm: "reclaimd", Key: "api.token_file"}.Wrap(api)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		guard.ServeHTTP(w, r)
	}))
	defer srv.Close()
	for name, tc := range map[string]struct {
		token    func() ([]byte, error)
		wantErr  string // "": the decisions are read
		wantSent bool
	}{
		"the token":      {token: func() ([]byte, error) { return []byte("the-token"), nil }, wantSent: true},
		"no token":       {wantErr: "reclaimd answered 401: reclaimd refused the portal's token: give the cluster a reclaimd_token_file", wantSent: true},
		"another token":  {token: func() ([]byte, error) { return []byte("other"), nil }, wantErr: "answered 401", wantSent: true},
		"unusable token": {token: func() ([]byte, error) { return nil, errors.New("mode 0644") }, wantErr: "reclaimd_token_file: mode 0644"},
	} {
		t.Run(name, func(t *testing.T) {
			requests = 0
			c := New(Config{Cluster: "gpu1", URL: srv.URL, Token: tc.token})
			got, err := c.Decisions(t.Context(), time.Unix(0, 0), 10)
			switch {
			case tc.wantErr == "" && (err != nil || len(got) != 1 || got[0].JobID != 7):
				t.Errorf("Decisions = %+v, %v", got, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Decisions error = %v, want %q", err, tc.wantErr)
			}
			if (requests > 0) != tc.wantSent {
				t.Errorf("%d requests sent", requests)
			}
		})
	}
}
