package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-hpc/strata/reclaimd/internal/config"
)

// TestRulesThatCannotJudge: start-up refuses rules that could never judge
// under the configured source, and a SIGHUP reload to such rules keeps
// the rules in force.
func TestRulesThatCannotJudge(t *testing.T) {
	dir := t.TempDir()
	example, err := os.ReadFile("../../../etc/strata/reclaim-rules.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.RulesFile, cfg.TenantsFile = filepath.Join(dir, "rules.json"), filepath.Join(dir, "tenants.json")
	write(t, cfg.RulesFile, string(example))
	write(t, cfg.TenantsFile, tenantsJSON)
	log := slog.New(slog.DiscardHandler)

	short := cfg
	short.Agent.Window = 15 * time.Minute
	if _, err := newReloads(t.Context(), short, log); err == nil || !strings.Contains(err.Error(), `rule "train": judges a 30m0s window`) {
		t.Fatalf("start-up with agent.window 15m: err = %v, want the train rule refused", err)
	}

	rl, err := newReloads(t.Context(), cfg, log)
	if err != nil {
		t.Fatalf("start-up with the defaults: %v", err)
	}
	write(t, cfg.RulesFile, strings.Replace(string(example), `"window": "2h"`, `"window": "3h"`, 1))
	if err := rl.rules.Reload(t.Context()); err == nil || !strings.Contains(err.Error(), "set agent.window to 3h0m0s or more") {
		t.Fatalf("reload to a 3h window: err = %v, want it refused with the key to change", err)
	}
	if got := rl.rules.Get().Rules[1].Idle.Window.Std(); got != 2*time.Hour {
		t.Errorf("after the refused reload the rule window is %s, want the 2h in force", got)
	}
}
