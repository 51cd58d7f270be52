package prometheus_test

import (
	"os"
	"os/exec"
	"testing"
)

// promtool finds promtool (Debian's prometheus package ships it): without
// it the test skips, saying how to get it; under CI=true it fails.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed (make deps installs Debian's prometheus package, which has it)")
		}
		t.Skip("promtool is not installed (apt-get install prometheus, or make deps): the rule checks are skipped")
	}
	return p
}

// TestRulesCheck: the alert rules load in Prometheus as they are.
func TestRulesCheck(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", "strata-rules.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules strata-rules.yaml: %v\n%s", err, out)
	}
}

// TestRulesUnit: every alert fires when it should, with the labels and
// text an operator gets, and stays quiet otherwise
// (strata-rules.test.yaml).
func TestRulesUnit(t *testing.T) {
	out, err := exec.Command(promtool(t), "test", "rules", "strata-rules.test.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules strata-rules.test.yaml: %v\n%s", err, out)
	}
}
