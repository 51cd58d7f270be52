package agent

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	secret, nonce, body := []byte("shared"), strings.Repeat("0f", 16), []byte(`{"node":"gpu01"}`+"\n")
	good := Sign(secret, nonce, body)
	tests := map[string]struct {
		secret    []byte
		nonce     string
		body      []byte
		signature string
		want      string // "": verifies
	}{
		"good":           {secret, nonce, body, good, ""},
		"no signature":   {secret, nonce, body, "", "none"},
		"another secret": {[]byte("other"), nonce, body, good, "wrong"},
		"another nonce":  {secret, strings.Repeat("1f", 16), body, good, "wrong"},
		"another body":   {secret, nonce, []byte(`{"node":"gpu02"}` + "\n"), good, "wrong"},
		"no scheme":      {secret, nonce, body, strings.TrimPrefix(good, signaturePrefix), "not hmac-sha256=<hex>"},
		"not hex":        {secret, nonce, body, signaturePrefix + "zz", "not hmac-sha256=<hex>"},
		"truncated":      {secret, nonce, body, good[:len(good)-2], "wrong"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Verify(tc.secret, tc.nonce, tc.body, tc.signature)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Verify = %v", err)
			case tc.want != "" && (err == nil || !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Verify = %v, want ErrSignature with %q", err, tc.want)
			}
		})
	}
}

// With a secret, /v1/snapshot wants a fresh nonce and signs its answer
// for it; a secret it cannot read refuses the snapshot. Without one it
// signs nothing (and the controller refuses it).
func TestSnapshotSigned(t *testing.T) {
	nonce := strings.Repeat("a1", 16)
	tests := map[string]struct {
		secret   func() ([]byte, error)
		nonce    string
		wantCode int
		wantSig  bool
	}{
		"signed":           {secret: func() ([]byte, error) { return []byte("s"), nil }, nonce: nonce, wantCode: 200, wantSig: true},
		"no nonce":         {secret: func() ([]byte, error) { return []byte("s"), nil }, wantCode: 400},
		"short nonce":      {secret: func() ([]byte, error) { return []byte("s"), nil }, nonce: "abcd", wantCode: 400},
		"not hex":          {secret: func() ([]byte, error) { return []byte("s"), nil }, nonce: strings.Repeat("zz", 16), wantCode: 400},
		"secret unusable":  {secret: func() ([]byte, error) { return nil, errors.New("mode 0644") }, nonce: nonce, wantCode: 503},
		"no secret at all": {nonce: nonce, wantCode: 200},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, _ := replayAgent(t, false)
			a.cfg.Secret = tc.secret
			req := httptest.NewRequest(http.MethodGet, "/v1/snapshot", nil)
			if tc.nonce != "" {
				req.Header.Set(HeaderNonce, tc.nonce)
			}
			req.Header.Set("Authorization", "Bearer "+string(ReadToken([]byte("s"), "gpu01")))
			rr := httptest.NewRecorder()
			a.Handler().ServeHTTP(rr, req)
			if rr.Code != tc.wantCode {
				t.Fatalf("GET /v1/snapshot = %d %s, want %d", rr.Code, rr.Body, tc.wantCode)
			}
			sig := rr.Header().Get(HeaderSignature)
			if !tc.wantSig {
				if sig != "" {
					t.Errorf("signature %q, want none", sig)
				}
				return
			}
			if err := Verify([]byte("s"), tc.nonce, rr.Body.Bytes(), sig); err != nil {
				t.Errorf("the answer does not verify: %v", err)
			}
			if strings.Contains(rr.Body.String(), `"s"`) {
				t.Errorf("the answer holds the secret: %s", rr.Body)
			}
		})
	}
}

// TestReadToken: with a secret, every /v1 path wants the node's read
// token: none, another node's, one of another secret or the secret itself
// is 401 with a hint, before the nonce is looked at and for unknown paths
// too (never 400 or 404, which would tell something to anyone).
// /healthz and /metrics stay open.
func TestReadToken(t *testing.T) {
	secret := []byte("s")
	nonce := strings.Repeat("a1", 16)
	good := "Bearer " + string(ReadToken(secret, "gpu01"))
	for name, tc := range map[string]struct {
		path, nonce, authorization string
		wantCode                   int
	}{
		"the node's token":         {"/v1/snapshot", nonce, good, 200},
		"none":                     {"/v1/snapshot", nonce, "", 401},
		"none, no nonce":           {"/v1/snapshot", "", "", 401},
		"another node's":           {"/v1/snapshot", nonce, "Bearer " + string(ReadToken(secret, "gpu02")), 401},
		"another secret's":         {"/v1/snapshot", nonce, "Bearer " + string(ReadToken([]byte("t"), "gpu01")), 401},
		"the secret itself":        {"/v1/snapshot", nonce, "Bearer s", 401},
		"none, unknown path":       {"/v1/snapshots", nonce, "", 401},
		"none, POST":               {"/v1/snapshot", nonce, "", 401},
		"the token, unknown path":  {"/v1/snapshots", nonce, good, 404},
		"healthz without a token":  {"/healthz", "", "", 503},
		"metrics without a token":  {"/metrics", "", "", 200},
		"the token, missing nonce": {"/v1/snapshot", "", good, 400},
	} {
		t.Run(name, func(t *testing.T) {
			a, _ := replayAgent(t, false)
			a.cfg.Secret = func() ([]byte, error) { return secret, nil }
			method := http.MethodGet
			if strings.HasSuffix(name, "POST") {
				method = http.MethodPost
			}
			req := httptest.NewRequest(method, tc.path, nil)
			if tc.nonce != "" {
				req.Header.Set(HeaderNonce, tc.nonce)
			}
			if tc.authorization != "" {
				req.Header.Set("Authorization", tc.authorization)
			}
			rr := httptest.NewRecorder()
			a.Handler().ServeHTTP(rr, req)
			if rr.Code != tc.wantCode {
				t.Fatalf("%s %s = %d %s, want %d", method, tc.path, rr.Code, rr.Body, tc.wantCode)
			}
			if tc.wantCode == 401 && (!strings.Contains(rr.Body.String(), "agents.token_file") || strings.Contains(rr.Body.String(), "gpu")) {
				t.Errorf("401 body %s: want the hint and nothing of the node", rr.Body)
			}
		})
	}
}

// started_at is null before the first good sample, then that sample's
// time for good: a failed attempt before it does not count.
func TestStartedAt(t *testing.T) {
	a, c := nvmlAgent(t, nil)
	if s := a.Snapshot(); s.StartedAt != nil {
		t.Errorf("started_at before any sample = %v, want null", s.StartedAt)
	}
	first := c.Now()
	for range 3 {
		if err := a.SampleOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.Add(10 * time.Second)
	}
	s := a.Snapshot()
	if s.StartedAt == nil || !s.StartedAt.Equal(first) {
		t.Errorf("started_at = %v, want the first sample's %s", s.StartedAt, first)
	}
	for _, g := range s.GPUs {
		for _, p := range g.Samples {
			if p.At.Before(*s.StartedAt) {
				t.Errorf("sample at %s before started_at %s", p.At, s.StartedAt)
			}
		}
	}
}

// FuzzVerify: whatever the signature header says, Verify never panics and
// accepts only what Sign gives for this secret, nonce and body (in either
// case of hex). Seeded
// from TestSignVerify's signatures.
func FuzzVerify(f *testing.F) {
	secret, nonce, body := []byte("shared"), strings.Repeat("0f", 16), []byte(`{"node":"gpu01"}`+"\n")
	good := Sign(secret, nonce, body)
	for _, s := range []string{good, "", strings.TrimPrefix(good, signaturePrefix), signaturePrefix + "zz", good[:len(good)-2],
		strings.ToUpper(good), good + "00", signaturePrefix} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sig string) {
		err := Verify(secret, nonce, body, sig)
		// The same MAC in upper-case hex is the same signature.
		rest, ok := strings.CutPrefix(sig, signaturePrefix)
		same := ok && strings.EqualFold(rest, strings.TrimPrefix(good, signaturePrefix))
		if (err == nil) != same {
			t.Errorf("Verify(%q) = %v; the good signature is %q", sig, err, good)
		}
	})
}
