package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigAgreesWithServe: every .bad file of the configuration's
// testdata, and every file problem preflight finds, fails check-config and
// serve alike, with the same message: one validation for both.
func TestCheckConfigAgreesWithServe(t *testing.T) {
	bad, err := filepath.Glob("../../internal/config/testdata/*.bad.yaml")
	if err != nil || len(bad) == 0 {
		t.Fatalf("no .bad files: %v", err)
	}
	cases := map[string]string{}
	for _, f := range bad {
		cases[filepath.Base(f)] = f
	}
	// File problems: the config is valid, a file it names is not.
	for name, edit := range map[string]func(t *testing.T, dir, cfg string) string{
		"empty reclaimd token": func(t *testing.T, dir, cfg string) string {
			p := filepath.Join(dir, "reclaimd.token")
			if err := os.WriteFile(p, []byte("\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return cfg + "    reclaimd_url: http://127.0.0.1:9811\n    reclaimd_token_file: " + p + "\n"
		},
		"reclaimd token others may read": func(t *testing.T, dir, cfg string) string {
			p := filepath.Join(dir, "reclaimd.token")
			if err := os.WriteFile(p, []byte("token\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return cfg + "    reclaimd_url: http://127.0.0.1:9811\n    reclaimd_token_file: " + p + "\n"
		},
		"empty jwt key": func(t *testing.T, dir, cfg string) string {
			if err := os.WriteFile(filepath.Join(dir, "jwt.key"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return cfg
		},
		"missing tenant map": func(t *testing.T, dir, cfg string) string {
			return strings.ReplaceAll(cfg, filepath.Join(dir, "tenants.json"), filepath.Join(dir, "nope.json"))
		},
	} {
		path := setup(t)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(edit(t, filepath.Dir(path), string(data))), 0o644); err != nil {
			t.Fatal(err)
		}
		cases[name] = path
	}
	for name, path := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, cerr := runCLI(t, "--config", path, "check-config")
			_, _, serr := runCLI(t, "--config", path, "serve")
			if cerr == nil || serr == nil {
				t.Fatalf("check-config = %v, serve = %v: want both refused", cerr, serr)
			}
			if cerr.Error() != serr.Error() {
				t.Errorf("check-config and serve disagree:\ncheck-config: %v\nserve:        %v", cerr, serr)
			}
		})
	}
}
