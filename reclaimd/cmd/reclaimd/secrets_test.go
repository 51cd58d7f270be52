package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecrets: check-config refuses a secret file every user can read or
// write, or an empty one (the slurmrestd token, the API token, the agents'
// shared secret) and warns about one that is missing; run and agent
// refuse to start with the same message.
func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSecrets(t *testing.T) {
	rules, err := filepath.Abs("../../../etc/strata/reclaim-rules.json")
	if err != nil {
		t.Fatal(err)
	}
	replay, err := filepath.Abs("../../internal/source/testdata/two-gpus.csv")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		modes       map[string]os.FileMode // by file; 0: not written (api.token: 0600 unless given)
		empty       string                 // this file is written empty
		wantErr     []string               // check-config's; nil: valid
		wantWarning string
		verb        string // also refused by this verb
		config      string // replaces keys of the configuration
	}{
		"private": {modes: map[string]os.FileMode{"reclaimd.jwt": 0o600, "agent.token": 0o640}},
		"world-readable slurmrestd token": {modes: map[string]os.FileMode{"reclaimd.jwt": 0o644, "agent.token": 0o600},
			wantErr: []string{"slurm.token_file: ", "reclaimd.jwt (mode 0644) is readable or writable by every user of this host: chmod o-rwx"}, verb: "run"},
		"world-readable agent secret": {modes: map[string]os.FileMode{"reclaimd.jwt": 0o600, "agent.token": 0o604},
			wantErr: []string{"agents.token_file: ", "agent.token (mode 0604)"}, verb: "agent"},
		"world-writable agent secret": {modes: map[string]os.FileMode{"reclaimd.jwt": 0o600, "agent.token": 0o602},
			wantErr: []string{"agents.token_file: "}, verb: "run"},
		"no agent secret on this host": {modes: map[string]os.FileMode{"reclaimd.jwt": 0o600},
			wantWarning: "WARNING: agents.token_file: DIR/agent.token does not exist: reclaimd run and reclaimd agent needs it"},
		"prometheus: no agents and no agents' secret": {modes: map[string]os.FileMode{"reclaimd.jwt": 0o600, "agent.token": 0o644},
			config: "source: prometheus\n"},
		"world-readable API token": {modes: map[string]os.FileMode{"reclaimd.jwt": 0o600, "agent.token": 0o600, "api.token": 0o644},
			wantErr: []string{"api.token_file: ", "api.token (mode 0644) is readable or writable by every user"}, verb: "run"},
		"empty agent secret": {modes: map[string]os.FileMode{"reclaimd.jwt": 0o600, "agent.token": 0o600}, empty: "agent.token",
			wantErr: []string{"agents.token_file: ", "agent.token is empty: write the secret into it"}, verb: "agent"},
		"empty API token": {modes: map[string]os.FileMode{"reclaimd.jwt": 0o600, "agent.token": 0o600}, empty: "api.token",
			wantErr: []string{"api.token_file: ", "api.token is empty: write the secret into it"}, verb: "run"},
		"the agent's own secret file": {modes: map[string]os.FileMode{"reclaimd.jwt": 0o600, "agent.token": 0o600, "node.token": 0o644},
			config: "agent: {token_file: DIR/node.token}\n", wantErr: []string{"agent.token_file: ", "node.token (mode 0644)"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "tenants.json"), tenantsJSON)
			modes := map[string]os.FileMode{"api.token": 0o600}
			for f, mode := range tc.modes {
				modes[f] = mode
			}
			for f, mode := range modes {
				p := filepath.Join(dir, f)
				data := "secret-" + f + "\n"
				if f == tc.empty {
					data = "\n"
				}
				if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, mode); err != nil {
					t.Fatal(err)
				}
			}
			cfg := filepath.Join(dir, "reclaimd.yaml")
			write(t, cfg, strings.ReplaceAll(`apiVersion: strata/v1
kind: ReclaimdConfig
rules_file: `+rules+`
tenants_file: DIR/tenants.json
slurm: {url: "http://127.0.0.1:1", token_file: DIR/reclaimd.jwt}
api: {token_file: DIR/api.token}
agents: {token_file: DIR/agent.token}
agent: {token_file: DIR/agent.token, listen: "127.0.0.1:0", node: gpu01, replay: `+replay+`}
`, "DIR", dir))
			if tc.config != "" {
				text := mustRead(t, cfg)
				if strings.HasPrefix(tc.config, "agent:") {
					text = text[:strings.Index(text, "agent: {")]
				}
				write(t, cfg, text+strings.ReplaceAll(tc.config, "DIR", dir))
			}
			var out, errb bytes.Buffer
			err := run(t.Context(), []string{"reclaimd", "--config", cfg, "check-config"}, &out, &errb)
			all := out.String() + errb.String()
			if err != nil {
				all += err.Error()
			}
			if strings.Contains(all, "secret-") {
				t.Errorf("check-config quotes a secret:\n%s", all)
			}
			if tc.wantErr == nil && err != nil {
				t.Fatalf("check-config: %v\n%s", err, all)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("check-config = %v, want %q", err, w)
				}
			}
			if w := strings.ReplaceAll(tc.wantWarning, "DIR", dir); !strings.Contains(errb.String(), w) {
				t.Errorf("check-config stderr lacks %q:\n%s", w, errb.String())
			}
			if tc.wantWarning == "" && strings.Contains(errb.String(), "WARNING") {
				t.Errorf("check-config warns:\n%s", errb.String())
			}
			if tc.verb == "" {
				return
			}
			// The verb refuses the secret with check-config's words (after
			// the key: check-config names a file agent and agents share once).
			rerr := run(t.Context(), []string{"reclaimd", "--config", cfg, tc.verb}, &out, &errb)
			if _, msg, _ := strings.Cut(fmt.Sprint(rerr), ": "); rerr == nil || !strings.Contains(err.Error(), msg) {
				t.Errorf("%s = %v, want check-config's refusal %q", tc.verb, rerr, err)
			}
		})
	}
}
