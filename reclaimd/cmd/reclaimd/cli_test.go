package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimulateVerb runs `reclaimd simulate` on the example trace and gets
// the report the simulate package's golden file holds.
func TestSimulateVerb(t *testing.T) {
	const dir = "../../internal/simulate/testdata/"
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"reclaimd", "simulate", "--rules", dir + "example-rules.json",
		"--jobs", dir + "example.jobs.csv", "--samples", dir + "example.samples.csv", "--step", "1m"}, &out, &errb)
	if err != nil {
		t.Fatalf("simulate: %v\n%s", err, errb.String())
	}
	want, err := os.ReadFile(dir + "example.report.golden")
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("report differs from %s:\n%s", dir+"example.report.golden", out.String())
	}
	if err := run(t.Context(), []string{"reclaimd", "simulate", "--rules", dir + "example-rules.json"}, &out, &errb); err == nil {
		t.Errorf("simulate without a trace did not fail")
	}
}

// TestSimulateRefusesRulesThatCannotJudge: simulate runs the checks of
// check-config against the trace's own sample interval (five minutes in
// the example trace), each problem at its file:line:col, and reports nothing.
func TestSimulateRefusesRulesThatCannotJudge(t *testing.T) {
	const dir = "../../internal/simulate/testdata/"
	rules := filepath.Join(t.TempDir(), "rules.json")
	write(t, rules, `{"apiVersion": "strata/v1", "kind": "ReclaimRules", "rules": [
  {"name": "train", "match": {"classes": ["train"]}, "idle": {"window": "30m", "min_coverage": 1},
   "warn": "15m", "signal": {"name": "USR1", "wait": "2m", "mode": "batch"}, "action": "requeue"},
  {"name": "quick", "idle": {"window": "8m"}, "action": "notify"}]}`)
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"reclaimd", "simulate", "--rules", rules,
		"--jobs", dir + "example.jobs.csv", "--samples", dir + "example.samples.csv", "--step", "1m"}, &out, &errb)
	if err == nil {
		t.Fatalf("simulate accepted rules that cannot judge at the trace's interval:\n%s", out.String())
	}
	for _, want := range []string{
		"sampled every 5m0s",
		`rules.json:2:96: rules[0].idle.min_coverage: rule "train": needs 100% coverage of 30m0s, but the newest sample is up to one 5m0s interval old`,
		"lower min_coverage to 0.83 or less",
		`rules.json:3:54: rules[0].signal.wait: rule "train": wait 2m0s after the signal is shorter than the 5m0s sample interval`,
		`rules.json:4:40: rules[1].idle.window: rule "quick": a 8m0s window holds fewer than two samples of 5m0s`,
		"sample more often (the trace's sample interval)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if out.Len() > 0 {
		t.Errorf("a report was written: %s", out.String())
	}
}
