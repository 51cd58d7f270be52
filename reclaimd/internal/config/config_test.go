package config

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/strictyaml/strictyamltest"
	"github.com/strata-hpc/strata/reclaimd/internal/notify"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata/*.bad.yaml")

// goodFiles are what each testdata/*.good.yaml loads to: Default()
// changed by the function.
var goodFiles = map[string]func(c *Config){
	"minimal.good.yaml": func(c *Config) { c.Interval = time.Minute },
	"durations.good.yaml": func(c *Config) {
		c.Interval = 90 * time.Second
		c.Source = "prometheus"
		c.Prometheus.Step = time.Minute
		c.Prometheus.Window = 24 * time.Hour
		c.Agent.Window = 36 * time.Hour
		c.Agents.Timeout = 30 * time.Second
	},
	"postgres.good.yaml": func(c *Config) {
		c.Database = "postgres://reclaimd@db.example.org:5432/strata_reclaimd?sslmode=verify-full"
		c.DatabasePasswordFile = "/etc/strata/reclaimd-db.password"
		c.Standby.TakeoverWithin = 20 * time.Second
	},
	"health.good.yaml": func(c *Config) {
		c.Notify.Mail = true
		c.Notify.AdminMail = []string{"ops@example.org", "hpc-oncall@example.org"}
		c.Health = Health{Enabled: true, FatalXids: []int{48, 79, 95}, DrainOn: []string{"ecc_uncorrectable", "row_remap_failure"},
			ApplicationXids: []int{13, 31, 43, 45, 68, 69},
			MaxDrainedShare: 0.25, MaxFaultAge: 6 * time.Hour,
			CheckCommand:  []string{"ssh", "-o", "BatchMode=yes", "{node}", "dcgmi", "diag", "-r", "1"},
			CheckInterval: 5 * time.Minute, CheckTimeout: 10 * time.Minute}
		c.Agent.Replay, c.Agent.FaultsFile = "/var/lib/strata/demo.csv", "/run/strata/faults.csv"
	},
}

// TestFiles: every .good file loads to its goodFiles entry; every .bad
// file fails with the diagnostics of its .golden file, all at once, each
// with its line and column (-update rewrites them).
func TestFiles(t *testing.T) {
	good := strictyamltest.Files(t, "testdata", *update, func(path string) error {
		_, err := Load(path)
		return err
	})
	for _, f := range good {
		change, ok := goodFiles[filepath.Base(f)]
		if !ok {
			t.Errorf("%s has no case in goodFiles", f)
			continue
		}
		got, err := Load(f)
		if err != nil {
			continue // reported by Files
		}
		want := Default()
		change(&want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", f, diff)
		}
	}
}

func TestDefaultValidates(t *testing.T) {
	if ds := Default().Validate(); len(ds) > 0 {
		t.Errorf("Default().Validate() = %v, want no problem", ds)
	}
}

// FuzzParse: no input makes Parse panic, and what it accepts validates.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	files = append(files, "../../../etc/strata/reclaimd.yaml")
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
			return
		}
		if ds := cfg.Validate(); len(ds) > 0 {
			t.Errorf("Parse accepted a config that does not validate: %v", ds)
		}
	})
}

// TestShippedExamples: the example config is the defaults, every key
// written out; the example rules and mail template load.
func TestShippedExamples(t *testing.T) {
	cfg, err := Load("../../../etc/strata/reclaimd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("etc/strata/reclaimd.yaml differs from the defaults (-want +got):\n%s", diff)
	}
	data, err := os.ReadFile("../../../etc/strata/reclaim-rules.json")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := reclaimrules.Parse(data)
	if err != nil {
		t.Fatalf("etc/strata/reclaim-rules.json: %v", err)
	}
	if !rules.DryRun || len(rules.Rules) != 3 || rules.Rules[0].Idle.Window.Std() != 30*time.Minute {
		t.Errorf("example rules = %+v: want dry run first, 3 rules, train window 30m", rules)
	}
	tmpl, err := os.ReadFile("../../../etc/strata/reclaimd-mail.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	if string(tmpl) != notify.DefaultTemplate {
		t.Errorf("etc/strata/reclaimd-mail.tmpl is not the built-in template")
	}
	if _, err := notify.ParseTemplate(string(tmpl)); err != nil {
		t.Error(err)
	}
}
