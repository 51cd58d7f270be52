package main

import (
	"bytes"
	"os"
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
