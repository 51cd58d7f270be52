package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: whatever the bytes, Parse does not panic, and what it accepts
// validates and names an http(s) slurmrestd and an API token file; what
// it refuses it refuses with at least one "line:col: path: message".
// Seeded from every .good and .bad file of testdata and the shipped
// example.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	files = append(files, "../../../etc/strata/bridge.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Errorf("refusal without the file's name: %v", err)
			}
			return
		}
		if ds := cfg.Validate(); len(ds) > 0 {
			t.Errorf("Parse accepted a config that does not validate: %v", ds)
		}
		if !strings.HasPrefix(cfg.Slurm.URL, "http://") && !strings.HasPrefix(cfg.Slurm.URL, "https://") {
			t.Errorf("accepted slurm.url %q", cfg.Slurm.URL)
		}
		if !filepath.IsAbs(cfg.API.TokenFile) {
			t.Errorf("accepted api.token_file %q", cfg.API.TokenFile)
		}
	})
}
