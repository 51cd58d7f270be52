package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCheckConfigAgreesWithRun: every .bad file of the configuration's
// testdata, and every problem of the files a valid configuration names
// (an empty token, a missing serving file), fails check-config and run
// alike, with the same message: both call config.Load, then preflight.
func TestCheckConfigAgreesWithRun(t *testing.T) {
	bad, err := filepath.Glob("../../internal/config/testdata/*.bad.yaml")
	if err != nil || len(bad) == 0 {
		t.Fatalf("no .bad files: %v", err)
	}
	cases := map[string]string{}
	for _, f := range bad {
		cases[filepath.Base(f)] = f
	}
	for name, edit := range map[string]func(dir string) error{
		"empty API token": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "bridge-api.token"), []byte("\n"), 0o600)
		},
		"empty Slurm token": func(dir string) error { return os.WriteFile(filepath.Join(dir, "bridge.jwt"), nil, 0o600) },
		"no serving file":   func(dir string) error { return os.Remove(filepath.Join(dir, "serving.json")) },
	} {
		cfg, dir := site(t, true)
		if err := edit(dir); err != nil {
			t.Fatal(err)
		}
		cases[name] = cfg
	}
	for name, path := range cases {
		t.Run(name, func(t *testing.T) {
			_, cerr := runCLI(t, "--config", path, "check-config")
			_, rerr := runCLI(t, "--config", path, "run")
			if cerr == nil || rerr == nil {
				t.Fatalf("check-config = %v, run = %v: want both refused", cerr, rerr)
			}
			if cerr.Error() != rerr.Error() {
				t.Errorf("check-config and run disagree:\ncheck-config: %v\nrun:          %v", cerr, rerr)
			}
		})
	}
}
