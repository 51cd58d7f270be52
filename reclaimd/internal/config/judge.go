package config

import (
	"fmt"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/strictyaml"
)

// Held is how much sample history the configured source keeps for each
// GPU, how often it samples, and the key that sets each, for messages.
func (c Config) Held() (window, interval time.Duration, windowKey, intervalKey string) {
	if c.Source == "prometheus" {
		return c.Prometheus.Window, c.Prometheus.Step, "prometheus.window", "prometheus.step"
	}
	return c.Agent.Window, c.Agent.Interval, "agent.window", "agent.interval"
}

// CheckRules reports every rule of r that can never judge a job, or whose
// ladder would decide on data it has already seen, under this
// configuration's source: a rule window longer than the samples the
// source keeps (agent.window, or prometheus.window), a min_coverage the
// kept samples cannot reach, a window of fewer than two samples, or a
// warning period shorter than one sample interval (the next step would
// be decided on the samples the warning was). Each problem names the rule
// and the key to change. rulesFile names the rules in the messages.
//
// It is a pure function of the two, run wherever both are loaded:
// check-config, start-up and every SIGHUP reload of the rules.
func (c Config) CheckRules(rulesFile string, r reclaimrules.Rules) strictyaml.Diagnostics {
	held, iv, heldKey, ivKey := c.Held()
	var ds strictyaml.Diagnostics
	for i, rule := range r.WithDefaults().Rules {
		p := fmt.Sprintf("rules[%d]", i)
		bad := func(path, hint, format string, args ...any) {
			ds = append(ds, strictyaml.Diagnostic{File: rulesFile, Path: p + path,
				Msg: fmt.Sprintf("rule %q: ", rule.Name) + fmt.Sprintf(format, args...), Hint: hint})
		}
		window := rule.Idle.Window.Std()
		if held < window {
			bad(".idle.window", fmt.Sprintf("set %s to %s or more in the reclaimd config, or shorten the rule's idle.window to %s or less", heldKey, window, held),
				"judges a %s window, but the %s source keeps only %s of samples (%s): it can never judge a job", window, c.Source, held, heldKey)
		} else if reach := min(1, float64(held-iv)/float64(window)); reach < rule.Idle.MinCoverage {
			// The newest sample can be one interval old when the
			// controller reads it, so the window's oldest interval may
			// already be gone from what the source keeps.
			bad(".idle.min_coverage", fmt.Sprintf("lower min_coverage to %.2f or less, or set %s to %s or more", reach, heldKey, window+iv),
				"needs %.0f%% coverage of %s, but %s of samples, one %s interval behind, cover at most %.0f%%",
				100*rule.Idle.MinCoverage, window, held, iv, 100*reach)
		}
		if iv > 0 && window < 2*iv {
			bad(".idle.window", fmt.Sprintf("give a window of %s or more, or sample more often (%s)", 2*iv, ivKey),
				"a %s window holds fewer than two samples of %s", window, iv)
		}
		if fw := rule.FirstWindow.Std(); fw > 0 && iv > 0 && fw < 2*iv {
			bad(".first_window", fmt.Sprintf("give a first_window of %s or more, or sample more often (%s)", 2*iv, ivKey),
				"a %s first window holds fewer than two samples of %s", fw, iv)
		}
		// A notice-only ladder never waits after the warning.
		destroys := rule.Action.Destructive() || rule.PartialIdle.Enabled && rule.PartialIdle.Action.Destructive()
		if destroys && iv > 0 && rule.Warn.Std() < iv {
			bad(".warn", fmt.Sprintf("give a warn of %s or more, or sample more often (%s)", iv, ivKey),
				"warning period %s is shorter than the %s sample interval: the next step would be decided on the data of the warning", rule.Warn.Std(), iv)
		}
		if destroys && rule.Signal.Name != "" && iv > 0 && rule.Signal.Wait.Std() < iv {
			bad(".signal.wait", fmt.Sprintf("give a signal.wait of %s or more, or sample more often (%s)", iv, ivKey),
				"wait %s after the signal is shorter than the %s sample interval: no sample after it could show the GPUs still idle", rule.Signal.Wait.Std(), iv)
		}
	}
	return ds
}
