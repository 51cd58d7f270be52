package reclaimrules

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/strictjson"
)

// Validate returns every problem of r, each a *FieldError with its JSON
// path, in document order. Zero fields that have a default are valid: it
// checks r as written, before or after WithDefaults.
func (r Rules) Validate() []error {
	v := &validator{}
	switch r.APIVersion {
	case APIVersion:
	case "":
		v.bad("apiVersion", "missing: use %s", APIVersion)
	default:
		v.bad("apiVersion", "%q is not supported: use %s", r.APIVersion, APIVersion)
	}
	if r.Kind != Kind {
		v.bad("kind", "%q: want %s", r.Kind, Kind)
	}
	names := map[string]int{}
	for i, rule := range r.Rules {
		p := fmt.Sprintf("rules[%d]", i)
		if j, dup := names[rule.Name]; dup && rule.Name != "" {
			v.bad(p+".name", "%q is the name of rules[%d] too: names must be unique", rule.Name, j)
		} else {
			names[rule.Name] = i
		}
		v.rule(p, rule)
		for j := range i {
			if covers(r.Rules[j].Match, rule.Match) {
				v.bad(p, "never applies: every job it matches is matched first by rules[%d] (%q)", j, r.Rules[j].Name)
				break
			}
		}
	}
	v.names("exempt.accounts", r.Exempt.Accounts)
	v.names("exempt.users", r.Exempt.Users)
	v.names("exempt.qos", r.Exempt.QOS)
	v.names("exempt.partitions", r.Exempt.Partitions)
	v.nonNegative("limits.max_actions_per_cycle", r.Limits.MaxActionsPerCycle)
	v.nonNegative("limits.max_requeues_per_job", r.Limits.MaxRequeuesPerJob)
	v.recovery(r.Recovery)
	return v.errs
}

type validator struct{ errs []error }

func (v *validator) bad(path, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) rule(p string, r Rule) {
	switch {
	case r.Name == "":
		v.bad(p+".name", "required: the name appears in records, logs and the job's admin comment")
	case !validName(r.Name):
		v.bad(p+".name", "%q: use letters, digits, '.', '_' and '-' only", r.Name)
	}
	v.names(p+".match.tenants", r.Match.Tenants)
	v.names(p+".match.accounts", r.Match.Accounts)
	v.names(p+".match.users", r.Match.Users)
	v.names(p+".match.classes", r.Match.Classes)
	v.names(p+".match.qos", r.Match.QOS)
	v.names(p+".match.partitions", r.Match.Partitions)

	v.percent(p+".idle.max_util_percent", r.Idle.MaxUtilPercent)
	v.percent(p+".idle.max_mem_activity_percent", r.Idle.MaxMemActivityPercent)
	window := r.Idle.Window.Std()
	switch {
	case window == 0:
		window = DefaultWindow
	case window < MinWindow:
		v.bad(p+".idle.window", "%s: want at least %s (0 or absent: %s)", window, MinWindow, DefaultWindow)
		window = 0 // unknown: first_window is not compared with it
	}
	if c := r.Idle.MinCoverage; !(c >= 0 && c <= 1) {
		v.bad(p+".idle.min_coverage", "%g: want a fraction above 0 and at most 1 (0 or absent: %g)", c, DefaultMinCoverage)
	}
	v.duration(p+".startup_grace", r.StartupGrace)
	if fw := r.FirstWindow.Std(); fw != 0 {
		switch {
		case fw < MinWindow:
			v.bad(p+".first_window", "%s: want at least %s, or 0 for none", fw, MinWindow)
		case window > 0 && fw >= window:
			v.bad(p+".first_window", "%s is not shorter than idle.window %s: it would never apply", fw, window)
		}
	}

	pi := r.PartialIdle
	if !pi.Enabled && (pi.MinIdleGPUs != 0 || pi.MinIdleFraction != 0 || pi.Action != "") {
		v.bad(p+".partial_idle", "settings given but enabled is false: set enabled: true, or remove them")
	}
	v.nonNegative(p+".partial_idle.min_idle_gpus", pi.MinIdleGPUs)
	if f := pi.MinIdleFraction; !(f >= 0 && f <= 1) {
		v.bad(p+".partial_idle.min_idle_fraction", "%g: want a fraction from 0 to 1", f)
	}
	v.action(p+".partial_idle.action", pi.Action)

	v.duration(p+".warn", r.Warn)
	// Whether the rule ever signals or requeues is only known when its
	// actions are valid.
	actionsOK := validAction(r.Action) && validAction(pi.Action)
	destroys := r.Action.Destructive() || pi.Enabled && pi.Action.Destructive()
	requeues := r.Action.Requeues() || pi.Enabled && pi.Action.Requeues()
	if r.Signal.Name != "" {
		if _, ok := CanonicalSignal(r.Signal.Name); !ok {
			v.bad(p+".signal.name", "%q is not a signal slurmrestd sends: use one of %s (with or without SIG)", r.Signal.Name, strings.Join(signals, " "))
		} else if actionsOK && !destroys {
			v.bad(p+".signal.name", "%q is never sent: a signal comes only before requeue, requeue-hold or cancel, and this rule only notifies", r.Signal.Name)
		}
	} else if r.Signal.Wait != 0 {
		v.bad(p+".signal.wait", "set, but signal.name is empty: name the signal to wait after")
	}
	if r.Signal.Mode != "" {
		if !slices.Contains(signalModes, r.Signal.Mode) {
			names := make([]string, len(signalModes))
			for i, m := range signalModes {
				names[i] = string(m)
			}
			v.bad(p+".signal.mode", "%q: want %s (the default: only jobs whose comment has strata:signal)", r.Signal.Mode, strings.Join(names, ", "))
		} else if r.Signal.Name == "" {
			v.bad(p+".signal.mode", "set, but signal.name is empty: name the signal to send")
		}
	}
	v.duration(p+".signal.wait", r.Signal.Wait)
	v.action(p+".action", r.Action)
	v.nonNegative(p+".max_requeues", r.MaxRequeues)
	switch r.NoRequeue {
	case "", NoRequeueSkip, NoRequeueOverride:
	default:
		v.bad(p+".no_requeue", "%q: want %s (the default: notify only) or %s", r.NoRequeue, NoRequeueSkip, NoRequeueOverride)
	}
	if actionsOK && r.MaxRequeues > 0 && !requeues {
		v.bad(p+".max_requeues", "set, but the rule never requeues")
	}
}

// validAction reports whether a is an action or empty (the default).
func validAction(a Action) bool { return a == "" || slices.Contains(actions, a) }

func (v *validator) action(path string, a Action) {
	if !validAction(a) {
		list := make([]string, len(actions))
		for i, a := range actions {
			list[i] = string(a)
		}
		v.bad(path, "%q: want one of %s", a, strings.Join(list, ", "))
	}
}

func (v *validator) percent(path string, x float64) {
	if !(x >= 0 && x <= 100) {
		v.bad(path, "%g: want a percentage from 0 to 100", x)
	}
}

func (v *validator) duration(path string, d Duration) {
	if d < 0 {
		v.bad(path, "%s: must not be negative", time.Duration(d))
	}
}

func (v *validator) nonNegative(path string, n int) {
	if n < 0 {
		v.bad(path, "%d: must not be negative", n)
	}
}

// names checks a list of Slurm names: none empty, none twice.
func (v *validator) names(path string, list []string) {
	v.errs = append(v.errs, strictjson.Unique(path, list, "name")...)
}

func validName(s string) bool {
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return s != ""
}

// covers reports whether every job that b matches is matched by a too:
// each of a's lists is empty or holds all of b's (non-empty) list.
func covers(a, b Match) bool {
	sub := func(x, y []string) bool {
		if len(x) == 0 {
			return true
		}
		if len(y) == 0 {
			return false
		}
		for _, s := range y {
			if !slices.Contains(x, s) {
				return false
			}
		}
		return true
	}
	return sub(a.Tenants, b.Tenants) && sub(a.Accounts, b.Accounts) && sub(a.Users, b.Users) &&
		sub(a.Classes, b.Classes) && sub(a.QOS, b.QOS) && sub(a.Partitions, b.Partitions)
}
