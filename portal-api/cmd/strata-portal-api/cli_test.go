package main

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/portal-api/internal/config"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// setup writes a config whose database, tenant map and jwt key are in a
// temporary folder.
func setup(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tenants, err := os.ReadFile("../../internal/service/testdata/tenants.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tenants.json"), tenants, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "jwt.key"), []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := `apiVersion: strata/v1
kind: PortalConfig
database: ` + filepath.Join(dir, "portal.db") + `
sessions:
  origin: https://sessions.portal.test
clusters:
  - name: gpu1
    slurm_cluster: s2605
    slurmrestd_url: http://127.0.0.1:6820
    jwt_key_file: ` + filepath.Join(dir, "jwt.key") + `
    tenants_file: ` + filepath.Join(dir, "tenants.json") + `
`
	path := filepath.Join(dir, "portal-api.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// parseMu is held by a run while it parses its arguments: urfave/cli
// writes its package-level help flag as each run parses, so two runs in
// one test binary (a bed's subtests run side by side) must not parse at
// once. runCLI holds it for the whole run; a test that starts serve holds
// it until serve answers.
var parseMu sync.Mutex

func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	parseMu.Lock()
	defer parseMu.Unlock()
	var out, errOut bytes.Buffer
	err := run(t.Context(), append([]string{"strata-portal-api"}, args...), &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestToken: create prints a token once; list shows its record and never
// the token; revoke revokes it once; bad input is a usage error.
func TestToken(t *testing.T) {
	cfg := setup(t)
	out, stderr, err := runCLI(t, "--config", cfg, "token", "create", "--user", "alice", "--expires", "30d", "--note", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out)
	if !regexp.MustCompile(`^strata_pat_[A-Za-z0-9_-]{43}$`).MatchString(tok) || !strings.Contains(stderr, "shown only now") {
		t.Fatalf("token create printed %q / %q", out, stderr)
	}
	out, _, err = runCLI(t, "--config", cfg, "token", "list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "alice") || !strings.Contains(out, "valid") || !strings.Contains(out, "laptop") || strings.Contains(out, tok[12:]) {
		t.Errorf("token list:\n%s", out)
	}
	if out, _, err := runCLI(t, "--config", cfg, "token", "revoke", "1"); err != nil || !strings.Contains(out, "revoked") {
		t.Errorf("revoke: %q %v", out, err)
	}
	if out, _, _ := runCLI(t, "--config", cfg, "token", "list", "--user", "alice"); !strings.Contains(out, "revoked") {
		t.Errorf("after revoke:\n%s", out)
	}
	if _, _, err := runCLI(t, "--config", cfg, "token", "revoke", "1"); err == nil || cliexit.CodeOf(err) != 1 {
		t.Errorf("second revoke: %v", err)
	}
	if out, _, err := runCLI(t, "--config", cfg, "token", "revoke-user", "alice"); err != nil || !strings.Contains(out, "user alice revoked") {
		t.Errorf("revoke-user: %q %v", out, err)
	}
	for name, args := range map[string][]string{
		"too long":     {"token", "create", "--user", "bob", "--expires", "1000d"},
		"bare number":  {"token", "create", "--user", "bob", "--expires", "30"},
		"no user":      {"token", "create"},
		"not an id":    {"token", "revoke", "one"},
		"extra arg":    {"token", "revoke", "1", "2"},
		"unknown verb": {"tokens"},
	} {
		if _, _, err := runCLI(t, append([]string{"--config", cfg}, args...)...); cliexit.CodeOf(err) != cliexit.ExitUsage && (name != "no user" || err == nil) {
			t.Errorf("%s: err = %v (exit %d), want a usage error", name, err, cliexit.CodeOf(err))
		}
	}
}

// TestCheckConfig: a good config with its files passes; an exposed jwt
// key and a bad tenant map are both reported.
func TestCheckConfig(t *testing.T) {
	cfg := setup(t)
	if out, stderr, err := runCLI(t, "check-config", cfg); err != nil || !strings.Contains(out, "ok (1 clusters)") || stderr != "" {
		t.Fatalf("check-config = %q %q, %v", out, stderr, err)
	}
	// Without a session origin: still a config, with a loud warning.
	data, _ := os.ReadFile(cfg)
	noOrigin := filepath.Join(t.TempDir(), "no-origin.yaml")
	os.WriteFile(noOrigin, []byte(strings.Replace(string(data), "sessions:\n  origin: https://sessions.portal.test\n", "", 1)), 0o644)
	if out, stderr, err := runCLI(t, "check-config", noOrigin); err != nil || !strings.Contains(out, "ok (1 clusters)") ||
		!strings.Contains(stderr, "WARNING: sessions.origin is not set: browsers cannot open sessions") {
		t.Errorf("check-config without sessions.origin = %q %q, %v", out, stderr, err)
	}
	dir := filepath.Dir(cfg)
	os.Chmod(filepath.Join(dir, "jwt.key"), 0o644)
	os.WriteFile(filepath.Join(dir, "tenants.json"), []byte(`{"apiVersion": "strata/v1"}`), 0o644)
	_, _, err := runCLI(t, "check-config", cfg)
	if err == nil || !strings.Contains(err.Error(), "jwt_key_file") || !strings.Contains(err.Error(), "tenants.json") {
		t.Errorf("check-config = %v; want both problems", err)
	}
}

// TestTenantsOfAnotherCluster: a tenants.json that describes another
// cluster is refused by check-config and by serve, with the same message.
func TestTenantsOfAnotherCluster(t *testing.T) {
	cfg := setup(t)
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(data), "slurm_cluster: s2605", "slurm_cluster: gpu7", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	const want = `tenants.json describes cluster "s2605", not "gpu7": give clusters[].tenants_file the tenants.json that strata-policy render wrote for gpu7`
	if _, _, err := runCLI(t, "check-config", cfg); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("check-config = %v; want %q", err, want)
	}
	if _, _, err := runCLI(t, "--config", cfg, "serve"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("serve = %v; want %q", err, want)
	}
}

// TestShippedConfig: the example in etc/ is a valid config.
func TestShippedConfig(t *testing.T) {
	_, _, err := runCLI(t, "check-config", "../../../etc/strata/portal-api.yaml")
	// Its tenant maps and keys are on a real host only: the config itself
	// must pass, so the problems are only about those files.
	if err != nil && (strings.Contains(err.Error(), "portal-api.yaml:") || !strings.Contains(err.Error(), "cluster gpu1")) {
		t.Errorf("check-config of the example: %v", err)
	}
}

// TestBridgeTokenFile: the bridge's token file is held to the rule of
// every secret, by check-config and by serve, and never quoted.
func TestBridgeTokenFile(t *testing.T) {
	cfg := setup(t)
	dir := filepath.Dir(cfg)
	token := filepath.Join(dir, "bridge-api.token")
	if err := os.WriteFile(token, []byte("the-bridge-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(cfg)
	data = append(data, []byte("    bridge_url: http://127.0.0.1:9464\n    bridge_token_file: "+token+"\n")...)
	if err := os.WriteFile(cfg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, err := runCLI(t, "check-config", cfg); err != nil || !strings.Contains(out, "ok (1 clusters)") || stderr != "" {
		t.Fatalf("check-config = %q %q, %v", out, stderr, err)
	}
	if err := os.Chmod(token, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCLI(t, "check-config", cfg)
	if err == nil || !strings.Contains(err.Error(), "bridge_token_file") || !strings.Contains(err.Error(), "readable or writable by every user") ||
		strings.Contains(err.Error(), "the-bridge-secret") {
		t.Errorf("check-config with a token others can read: %v", err)
	}
	_, _, err = runCLI(t, "--config", cfg, "serve")
	if err == nil || !strings.Contains(err.Error(), "bridge_token_file") || strings.Contains(err.Error(), "the-bridge-secret") {
		t.Errorf("serve with a token others can read: %v", err)
	}
	if err := os.Remove(token); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "--config", cfg, "serve"); err == nil || !strings.Contains(err.Error(), "bridge_token_file") {
		t.Errorf("serve without the token file: %v", err)
	}
}

// TestCookieKeyFile: sessions.cookie_key_file is held to the rule of
// every secret and to 32 bytes or more, by check-config and by serve,
// and never quoted; a good key is what the sessions' cookies are signed
// with.
func TestCookieKeyFile(t *testing.T) {
	cfg := setup(t)
	key := filepath.Join(filepath.Dir(cfg), "session.key")
	data, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(data), "sessions:\n", "sessions:\n  cookie_key_file: "+key+"\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	const good = "the-cookie-secret-of-forty-bytes-or-more"
	for _, tc := range []struct {
		name, content string
		mode          os.FileMode // 0: no file
		want          string      // "": check-config passes
	}{
		{"a key only its owner reads", good + "\n", 0o600, ""},
		{"a key every user reads", good + "\n", 0o644, "readable or writable by every user"},
		{"a short key", "short-cookie-secret\n", 0o600, "19 bytes, want 32 or more"},
		{"no file", "", 0, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(key)
			if tc.mode != 0 {
				if err := os.WriteFile(key, []byte(tc.content), tc.mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(key, tc.mode); err != nil { // past the umask
					t.Fatal(err)
				}
			}
			out, stderr, err := runCLI(t, "check-config", cfg)
			if tc.want == "" {
				if err != nil || !strings.Contains(out, "ok (1 clusters)") || stderr != "" {
					t.Fatalf("check-config = %q %q, %v", out, stderr, err)
				}
				got, err := cookieKey(nil, config.Sessions{CookieKeyFile: key})
				if err != nil || string(got) != good {
					t.Errorf("cookieKey = %q, %v; want the file's key", got, err)
				}
				return
			}
			for what, err := range map[string]error{"check-config": err, "serve": serveErr(t, cfg)} {
				if err == nil || !strings.Contains(err.Error(), "sessions.cookie_key_file") || !strings.Contains(err.Error(), tc.want) ||
					tc.content != "" && strings.Contains(err.Error(), strings.TrimSpace(tc.content)) {
					t.Errorf("%s: %v; want sessions.cookie_key_file, %q and not the key", what, err, tc.want)
				}
			}
		})
	}
	got, err := cookieKey(nil, config.Sessions{})
	if got != nil || err != nil {
		t.Errorf("cookieKey without a file = %q, %v; want nil (a key of the process)", got, err)
	}
}

func serveErr(t *testing.T, cfg string) error {
	t.Helper()
	_, _, err := runCLI(t, "--config", cfg, "serve")
	return err
}

// TestLoginLink: login-link prints a sign-in URL whose secret signs alice
// in once; the database holds only its hash.
func TestLoginLink(t *testing.T) {
	cfg := setup(t)
	b, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg, append(b, []byte("pages:\n  public_url: https://portal.example.org\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runCLI(t, "--config", cfg, "login-link", "--user", "alice")
	if err != nil {
		t.Fatal(err, stderr)
	}
	u, err := url.Parse(strings.TrimSpace(out))
	if err != nil || u.Scheme != "https" || u.Host != "portal.example.org" || u.Path != "/signin/link" || len(u.Query().Get("t")) < 40 {
		t.Fatalf("login-link printed %q", out)
	}
	if !strings.Contains(stderr, "once, until") {
		t.Errorf("stderr %q does not say it works once and until when", stderr)
	}
	db, _ := os.ReadFile(filepath.Join(filepath.Dir(cfg), "portal.db"))
	if bytes.Contains(db, []byte(u.Query().Get("t"))) {
		t.Errorf("the secret is stored in clear")
	}
	st, err := store.Open(t.Context(), filepath.Join(filepath.Dir(cfg), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if user, err := st.UseLoginLink(t.Context(), u.Query().Get("t")); err != nil || user != "alice" {
		t.Errorf("the link's secret: %q, %v", user, err)
	}
	if _, err := st.UseLoginLink(t.Context(), u.Query().Get("t")); err == nil {
		t.Errorf("the link worked twice")
	}
	if _, _, err := runCLI(t, "--config", cfg, "login-link", "--user", "a b"); cliexit.CodeOf(err) != cliexit.ExitUsage {
		t.Errorf("a bad user name: %v", err)
	}
}
