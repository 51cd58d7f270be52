package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/cliexit"
)

// TestArgs: every verb takes the file it reads as an argument as well as
// a flag, a file that is not there fails naming it, and an argument the
// verb does not take is a usage error that says what it takes. run and
// agent stop at the missing configuration before they listen or poll.
func TestArgs(t *testing.T) {
	const sim = "../../internal/simulate/testdata/"
	dir := t.TempDir()
	example, err := os.ReadFile("../../../etc/strata/reclaimd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs("../../../etc/strata/reclaim-rules.json")
	if err != nil {
		t.Fatal(err)
	}
	tenants, err := filepath.Abs("../../../internal/tenantmap/testdata/full.good.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "reclaimd.yaml")
	text := strings.Replace(string(example), "rules_file: /etc/strata/rendered/reclaim-rules.json", "rules_file: "+rules, 1)
	text = strings.Replace(text, "tenants_file: /etc/strata/rendered/tenants.json", "tenants_file: "+tenants, 1)
	if !strings.Contains(text, tenants) {
		t.Fatal("the example reclaimd.yaml sets no tenants_file: /etc/strata/rendered/tenants.json to point elsewhere")
	}
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	report, err := os.ReadFile(sim + "example.report.golden")
	if err != nil {
		t.Fatal(err)
	}
	simFlags := []string{"--rules", sim + "example-rules.json", "--step", "1m"}
	for name, tc := range map[string]struct {
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		"check-config: file":         {args: []string{"check-config", cfg}, wantOut: cfg + " is valid; " + rules},
		"check-config: file by flag": {args: []string{"-c", cfg, "check-config"}, wantOut: cfg + " is valid"},
		"check-config: missing file": {args: []string{"check-config", missing}, wantCode: 1, wantErr: missing},
		"check-config: disagree":     {args: []string{"-c", cfg, "check-config", missing}, wantCode: cliexit.ExitUsage, wantErr: "disagree"},
		"check-config: extra": {args: []string{"check-config", cfg, "x"}, wantCode: cliexit.ExitUsage,
			wantErr: `check-config: unexpected argument "x": check-config takes at most 1 argument, [CONFIG] (usage: reclaimd check-config [options] [CONFIG])`},
		"run: missing file":   {args: []string{"run", missing}, wantCode: 1, wantErr: missing},
		"run: extra":          {args: []string{"run", cfg, "x"}, wantCode: cliexit.ExitUsage, wantErr: `run: unexpected argument "x"`},
		"agent: missing file": {args: []string{"agent", missing}, wantCode: 1, wantErr: missing},
		"agent: extra":        {args: []string{"agent", cfg, "x"}, wantCode: cliexit.ExitUsage, wantErr: `agent: unexpected argument "x"`},
		"simulate: files": {args: append([]string{"simulate", sim + "example.jobs.csv", sim + "example.samples.csv"}, simFlags...),
			wantOut: string(report)},
		"simulate: missing file": {args: append([]string{"simulate", missing, sim + "example.samples.csv"}, simFlags...), wantCode: 1, wantErr: missing},
		"simulate: no trace": {args: append([]string{"simulate"}, simFlags...), wantCode: cliexit.ExitUsage,
			wantErr: "simulate: give the jobs and samples CSV files"},
		"simulate: extra": {args: []string{"simulate", "a.csv", "b.csv", "c.csv"}, wantCode: cliexit.ExitUsage,
			wantErr: `simulate: unexpected argument "c.csv": simulate takes at most 2 arguments, [JOBS] [SAMPLES]`},
		"unknown verb": {args: []string{"agnet"}, wantCode: cliexit.ExitUsage, wantErr: `unknown command "agnet": want one of run, agent, check-config, simulate`},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append([]string{"reclaimd", "--log-level", "error"}, tc.args...), &stdout, &stderr)
			if code := cliexit.CodeOf(err); code != tc.wantCode {
				t.Fatalf("exit %d (%v), want %d\n%s%s", code, err, tc.wantCode, stdout.String(), stderr.String())
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want it to contain %q", err, tc.wantErr)
			}
			if !strings.Contains(stdout.String(), tc.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tc.wantOut, stdout.String())
			}
		})
	}
}
