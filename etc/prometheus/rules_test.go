package prometheus_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"go.yaml.in/yaml/v3"
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

// TestEveryAlertTested: each alert of strata-rules.yaml is evaluated by a
// case of strata-rules.test.yaml, and each such case names an alert that
// exists (promtool passes a test of an alert that was renamed away).
func TestEveryAlertTested(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				AlertName string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	for file, v := range map[string]any{"strata-rules.yaml": &rules, "strata-rules.test.yaml": &tests} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts[r.Alert] = true
			}
		}
	}
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if !alerts[a.AlertName] {
				t.Errorf("strata-rules.test.yaml tests %s, which strata-rules.yaml does not have", a.AlertName)
			}
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			}
		}
	}
	for a := range alerts {
		if !fires[a] {
			t.Errorf("alert %s has no case in strata-rules.test.yaml where it fires", a)
		}
	}
	if len(alerts) < 10 {
		t.Errorf("only %d alerts read: the rules file's shape changed", len(alerts))
	}
}

// alertName is an alert named in backquotes in a README.
var alertName = regexp.MustCompile("`(Strata[A-Z][A-Za-z]+)`")

// partOfAlert says which part's README must name an alert, from the
// metrics and scrape jobs its expression reads.
var partOfAlert = []struct {
	expr   *regexp.Regexp
	readme string
}{
	{regexp.MustCompile(`strata_(reclaim|recovery)_|job="strata-reclaimd`), "reclaimd/README.md"},
	{regexp.MustCompile(`strata_bridge_|job="strata-bridge"`), "bridge/README.md"},
	{regexp.MustCompile(`strata_portal_|job="strata-portal-api"`), "portal-api/README.md"},
	{regexp.MustCompile(`topogen`), "topogen/README.md"},
}

// TestReadmesNameTheAlerts: every alert a README names exists, and every
// alert is named by the README of the part whose metrics it reads, so a
// README never promises an alert the rules lack, nor hides one they have.
func TestReadmesNameTheAlerts(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	b, err := os.ReadFile("strata-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	exprs := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				exprs[r.Alert] = r.Expr
			}
		}
	}
	named := map[string]map[string]bool{} // README -> alerts
	for _, p := range partOfAlert {
		text, err := os.ReadFile(filepath.Join("..", "..", p.readme))
		if err != nil {
			t.Fatal(err)
		}
		named[p.readme] = map[string]bool{}
		for _, m := range alertName.FindAllStringSubmatch(string(text), -1) {
			named[p.readme][m[1]] = true
			if _, ok := exprs[m[1]]; !ok {
				t.Errorf("%s names the alert %s, which strata-rules.yaml does not have", p.readme, m[1])
			}
		}
	}
	for alert, expr := range exprs {
		for _, p := range partOfAlert {
			if p.expr.MatchString(expr) && !named[p.readme][alert] {
				t.Errorf("%s does not name the alert %s (on %s)", p.readme, alert, expr)
			}
		}
	}
}
