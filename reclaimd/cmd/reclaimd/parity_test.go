package main

import (
	"bytes"
	"path/filepath"
	"testing"
)

// TestCheckConfigAgreesWithRun: every .bad file of the configuration's
// testdata fails check-config, run and agent alike, with the same message:
// the three share one validation (config.Load), so that check-config
// never passes what a daemon refuses.
func TestCheckConfigAgreesWithRun(t *testing.T) {
	bad, err := filepath.Glob("../../internal/config/testdata/*.bad.yaml")
	if err != nil || len(bad) == 0 {
		t.Fatalf("no .bad files: %v", err)
	}
	for _, path := range bad {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var errs []error
			for _, verb := range []string{"check-config", "run", "agent"} {
				var out, errb bytes.Buffer
				err := run(t.Context(), []string{"reclaimd", "--config", path, verb}, &out, &errb)
				if err == nil {
					t.Fatalf("%s accepted %s", verb, path)
				}
				errs = append(errs, err)
			}
			for i, verb := range []string{"run", "agent"} {
				if errs[i+1].Error() != errs[0].Error() {
					t.Errorf("check-config and %s disagree:\ncheck-config: %v\n%s: %v", verb, errs[0], verb, errs[i+1])
				}
			}
		})
	}
}
