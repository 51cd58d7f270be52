package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/reclaimd/internal/notify"
)

func TestFiles(t *testing.T) {
	for name, want := range map[string][]string{
		"minimal.good.yaml": nil,
		"typo.bad.yaml":     {"line 3: field intervall not found in type config.Config"},
		"every-problem.bad.yaml": {
			"interval: 1s is shorter than 5s",
			`agents.url_template: "http://agents:9810" has no {node}`,
			"agent.window: 15s keeps fewer than two samples of 10s",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", name))
			if want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
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
