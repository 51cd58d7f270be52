package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/strata-hpc/strata/internal/reclaimrules"
	"github.com/strata-hpc/strata/internal/strictjson"
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
	return checkRules(rulesFile, r, c.Source, held, iv, heldKey, ivKey)
}

// CheckRulesForTrace is CheckRules for a simulation: against a recorded
// trace's own sample interval, which keeps every sample (so no window is
// too long for it).
func CheckRulesForTrace(rulesFile string, r reclaimrules.Rules, interval time.Duration) strictyaml.Diagnostics {
	return checkRules(rulesFile, r, "trace", time.Duration(math.MaxInt64), interval, "the trace", "the trace's sample interval")
}

func checkRules(rulesFile string, r reclaimrules.Rules, source string, held, iv time.Duration, heldKey, ivKey string) strictyaml.Diagnostics {
	var ds strictyaml.Diagnostics
	for i, rule := range r.WithDefaults().Rules {
		p := fmt.Sprintf("rules[%d]", i)
		bad := func(path, hint, format string, args ...any) {
			ds = append(ds, strictyaml.Diagnostic{File: rulesFile, Path: p + path,
				Msg: fmt.Sprintf("rule %q: ", rule.Name) + fmt.Sprintf(format, args...), Hint: hint})
		}
		window := rule.Idle.Window.Std()
		if rule.Idle.MinCoverage >= 1 && iv > 0 {
			// A sample describes the interval before it, and a cycle
			// reads the newest one between zero and one interval after
			// it was taken: the time since is in the window and no
			// sample describes it yet, so coverage of the window is
			// below 1 but in a cycle that falls on a sample's very
			// instant. Without a missing sample it is never below
			// (window - interval) / window.
			always := float64(window-iv) / float64(window)
			bad(".idle.min_coverage", fmt.Sprintf("lower min_coverage to %s or less: samples without a gap always cover that much of a %s window", floor2(always), window),
				"needs 100%% coverage of %s, but the newest sample is up to one %s interval old when a cycle reads it, so no window is ever fully covered: it can never judge a job", window, iv)
		} else if held < window {
			bad(".idle.window", fmt.Sprintf("set %s to %s or more in the reclaimd config, or shorten the rule's idle.window to %s or less", heldKey, window, held),
				"judges a %s window, but the %s source keeps only %s of samples (%s): it can never judge a job", window, source, held, heldKey)
		} else if reach := min(1, float64(held-iv)/float64(window)); reach < rule.Idle.MinCoverage {
			// The newest sample can be one interval old when the
			// controller reads it, so the window's oldest interval may
			// already be gone from what the source keeps.
			bad(".idle.min_coverage", fmt.Sprintf("lower min_coverage to %s or less, or set %s to %s or more", floor2(reach), heldKey, window+iv),
				"needs %s%% coverage of %s, but %s of samples, one %s interval behind, cover at most %s%%",
				pct2(rule.Idle.MinCoverage), window, held, iv, pct2(reach))
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

// floor2 formats f rounded down to two decimals, so that a fraction it
// suggests is one that is reached.
func floor2(f float64) string {
	return fmt.Sprintf("%.2f", float64(int(f*100))/100)
}

// pct2 formats a fraction as a percentage with at most two decimals,
// rounded down: 0.99861 is "99.86".
func pct2(f float64) string {
	return strconv.FormatFloat(float64(int(f*10000))/100, 'f', -1, 64)
}

// CheckRulesFile is CheckRules for the rules read from rulesFile, with
// each problem located at its file:line:col (the rule's key, or the
// nearest value the file gives when it leaves the key to its default),
// as every other problem of the file is, and its JSON path kept in the
// message. The file is read again only when there is a problem; when it
// cannot be, the problems keep their paths alone.
func (c Config) CheckRulesFile(rulesFile string, r reclaimrules.Rules) strictyaml.Diagnostics {
	ds := c.CheckRules(rulesFile, r)
	if len(ds) == 0 {
		return ds
	}
	if data, err := os.ReadFile(rulesFile); err == nil {
		LocateRules(data, ds)
	}
	return ds
}

// LocateRules gives each problem of ds (made by CheckRules, with a JSON
// path and no position) the line and column of its path in data, the
// rules document, and puts the path before its message.
func LocateRules(data []byte, ds strictyaml.Diagnostics) {
	var r reclaimrules.Rules
	doc, err := strictjson.Decode(data, &r, "")
	if err != nil {
		return
	}
	for i := range ds {
		if ds[i].Line > 0 {
			continue
		}
		fe := &strictjson.FieldError{Path: ds[i].Path}
		var got *strictjson.FieldError
		if errors.As(doc.Locate([]error{fe}), &got) && got.Line > 0 {
			ds[i].Line, ds[i].Col = got.Line, got.Col
			ds[i].Msg = ds[i].Path + ": " + ds[i].Msg
		}
	}
}
