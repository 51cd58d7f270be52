package reclaimrules_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/reclaimrules"
)

// cluster is a rule set in the order an admin writes it: specific first,
// the catch-all last.
var cluster = reclaimrules.Rules{
	APIVersion: reclaimrules.APIVersion,
	Kind:       reclaimrules.Kind,
	Rules: []reclaimrules.Rule{
		{Name: "llm-interactive", Match: reclaimrules.Match{Tenants: []string{"llm"}, Classes: []string{"interactive"}}},
		{Name: "llm", Match: reclaimrules.Match{Tenants: []string{"llm"}}},
		{Name: "ana-debug", Match: reclaimrules.Match{Users: []string{"ana", "bo"}, Partitions: []string{"debug"}}},
		{Name: "high-qos", Match: reclaimrules.Match{QOS: []string{"high"}, Accounts: []string{"vision", "audio"}}},
		{Name: "default"},
	},
}

func TestFor(t *testing.T) {
	tests := map[string]struct {
		job      reclaimrules.JobInfo
		rules    reclaimrules.Rules
		wantRule string // "" when no rule matches
	}{
		"first of two matching rules wins": {
			job:      reclaimrules.JobInfo{Tenant: "llm", Class: "interactive", Account: "llm-sft"},
			rules:    cluster,
			wantRule: "llm-interactive",
		},
		"lists are ANDed: class differs": {
			job:      reclaimrules.JobInfo{Tenant: "llm", Class: "train"},
			rules:    cluster,
			wantRule: "llm",
		},
		"values in a list are ORed": {
			job:      reclaimrules.JobInfo{Tenant: "vision", User: "bo", Partition: "debug"},
			rules:    cluster,
			wantRule: "ana-debug",
		},
		"one list of two unmatched": {
			job:      reclaimrules.JobInfo{Tenant: "vision", User: "bo", Partition: "gpu"},
			rules:    cluster,
			wantRule: "default",
		},
		"QOS and account": {
			job:      reclaimrules.JobInfo{Tenant: "vision", Account: "audio", QOS: "high"},
			rules:    cluster,
			wantRule: "high-qos",
		},
		"matching is case-sensitive, as in Slurm": {
			job:      reclaimrules.JobInfo{Tenant: "LLM", Class: "interactive"},
			rules:    cluster,
			wantRule: "default",
		},
		"empty job value does not match a non-empty list": {
			job:      reclaimrules.JobInfo{Class: "interactive"},
			rules:    reclaimrules.Rules{Rules: cluster.Rules[:4]},
			wantRule: "",
		},
		"no rules": {
			job:      reclaimrules.JobInfo{Tenant: "llm"},
			rules:    reclaimrules.Rules{},
			wantRule: "",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := tc.rules.For(tc.job)
			if ok != (tc.wantRule != "") || got.Name != tc.wantRule {
				t.Errorf("For(%+v) = %q, %v; want %q", tc.job, got.Name, ok, tc.wantRule)
			}
		})
	}
}

func TestExempts(t *testing.T) {
	e := reclaimrules.Exemptions{Accounts: []string{"ops"}, Users: []string{"root"}, QOS: []string{"bench"}, Partitions: []string{"maint"}}
	tests := map[string]struct {
		job        reclaimrules.JobInfo
		wantReason string
	}{
		"account":   {job: reclaimrules.JobInfo{Account: "ops", User: "ana"}, wantReason: `account "ops"`},
		"user":      {job: reclaimrules.JobInfo{Account: "llm", User: "root"}, wantReason: `user "root"`},
		"QOS":       {job: reclaimrules.JobInfo{QOS: "bench"}, wantReason: `QOS "bench"`},
		"partition": {job: reclaimrules.JobInfo{Partition: "maint"}, wantReason: `partition "maint"`},
		"none":      {job: reclaimrules.JobInfo{Account: "llm", User: "ana", QOS: "normal", Partition: "gpu"}},
		"empty job": {job: reclaimrules.JobInfo{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := e.Exempts(tc.job)
			if got != tc.wantReason || ok != (tc.wantReason != "") {
				t.Errorf("Exempts = %q, %v; want %q", got, ok, tc.wantReason)
			}
		})
	}
}

func TestCanonicalSignal(t *testing.T) {
	for in, want := range map[string]string{
		"USR1": "SIGUSR1", "SIGUSR1": "SIGUSR1", "usr1": "SIGUSR1", "sigterm": "SIGTERM", "TTOU": "SIGTTOU",
		"USR3": "", "": "", "SIG": "", "10": "", "SIGSIGUSR1": "", "SEGV": "",
	} {
		got, ok := reclaimrules.CanonicalSignal(in)
		if got != want || ok != (want != "") {
			t.Errorf("CanonicalSignal(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestRequeueLimit(t *testing.T) {
	tests := map[string]struct {
		rule   int
		limits int
		want   int
	}{
		"both unset: the default":  {want: reclaimrules.DefaultMaxRequeuesPerJob},
		"only the global limit":    {limits: 5, want: 5},
		"rule lower than global":   {rule: 1, limits: 5, want: 1},
		"rule higher than global":  {rule: 9, limits: 5, want: 5},
		"rule under default":       {rule: 2, want: 2},
		"rule over unset default":  {rule: 7, want: reclaimrules.DefaultMaxRequeuesPerJob},
		"negative reads as unset":  {rule: -1, limits: -1, want: reclaimrules.DefaultMaxRequeuesPerJob},
		"one requeue and no more":  {rule: 1, limits: 1, want: 1},
		"limits over rule default": {limits: 10, want: 10},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := reclaimrules.Limits{MaxRequeuesPerJob: tc.limits}.RequeueLimit(reclaimrules.Rule{MaxRequeues: tc.rule})
			if got != tc.want {
				t.Errorf("RequeueLimit = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	in := reclaimrules.Rules{
		APIVersion: reclaimrules.APIVersion, Kind: reclaimrules.Kind,
		Rules: []reclaimrules.Rule{
			{Name: "a", Match: reclaimrules.Match{Tenants: []string{"llm"}}, Signal: reclaimrules.Signal{Name: "usr1"}, Action: reclaimrules.ActionRequeue,
				PartialIdle: reclaimrules.PartialIdle{Enabled: true}},
			{Name: "b", Idle: reclaimrules.IdleDef{Window: dur(20 * time.Minute), MinCoverage: 0.5}, Warn: dur(time.Minute),
				Signal: reclaimrules.Signal{Name: "TERM", Wait: dur(time.Minute)}, Action: reclaimrules.ActionCancel},
		},
	}
	want := reclaimrules.Rules{
		APIVersion: reclaimrules.APIVersion, Kind: reclaimrules.Kind,
		Rules: []reclaimrules.Rule{
			{
				Name: "a", Match: reclaimrules.Match{Tenants: []string{"llm"}}, Idle: reclaimrules.IdleDef{Window: dur(time.Hour), MinCoverage: 0.8},
				PartialIdle: reclaimrules.PartialIdle{Enabled: true, MinIdleGPUs: 1, Action: reclaimrules.ActionNotify},
				Warn:        dur(15 * time.Minute), Signal: reclaimrules.Signal{Name: "SIGUSR1", Wait: dur(5 * time.Minute), Mode: reclaimrules.SignalSkipUnlessRequested},
				Action: reclaimrules.ActionRequeue,
			},
			{
				Name: "b", Idle: reclaimrules.IdleDef{Window: dur(20 * time.Minute), MinCoverage: 0.5}, Warn: dur(time.Minute),
				Signal: reclaimrules.Signal{Name: "SIGTERM", Wait: dur(time.Minute), Mode: reclaimrules.SignalSkipUnlessRequested}, Action: reclaimrules.ActionCancel,
			},
		},
		Limits: reclaimrules.Limits{MaxActionsPerCycle: 10, MaxRequeuesPerJob: 3},
	}
	got := in.WithDefaults()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WithDefaults (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(got, got.WithDefaults()); diff != "" {
		t.Errorf("WithDefaults is not idempotent (-once +twice):\n%s", diff)
	}
	if in.Rules[0].Signal.Name != "usr1" {
		t.Error("WithDefaults changed its receiver's rules")
	}
	if errs := got.Validate(); len(errs) > 0 {
		t.Errorf("defaults do not validate: %v", errs)
	}
}

// TestValidateCovers: a rule after one that matches a superset of its jobs
// never applies; one after a narrower rule does.
func TestValidateCovers(t *testing.T) {
	tests := map[string]struct {
		first, second reclaimrules.Match
		wantErr       string
	}{
		"catch-all first": {
			second:  reclaimrules.Match{Tenants: []string{"llm"}},
			wantErr: `rules[1]: never applies: every job it matches is matched first by rules[0] ("first")`,
		},
		"superset list first": {
			first:   reclaimrules.Match{Accounts: []string{"a", "b"}},
			second:  reclaimrules.Match{Accounts: []string{"b"}, Users: []string{"ana"}},
			wantErr: `rules[1]: never applies: every job it matches is matched first by rules[0] ("first")`,
		},
		"narrower first": {
			first:  reclaimrules.Match{Accounts: []string{"b"}, Users: []string{"ana"}},
			second: reclaimrules.Match{Accounts: []string{"a", "b"}},
		},
		"overlapping lists": {
			first:  reclaimrules.Match{Accounts: []string{"a", "b"}},
			second: reclaimrules.Match{Accounts: []string{"b", "c"}},
		},
		"different fields": {
			first:  reclaimrules.Match{Classes: []string{"train"}},
			second: reclaimrules.Match{QOS: []string{"high"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := reclaimrules.Rules{APIVersion: reclaimrules.APIVersion, Kind: reclaimrules.Kind, Rules: []reclaimrules.Rule{
				{Name: "first", Match: tc.first}, {Name: "second", Match: tc.second},
			}}
			var got []string
			for _, err := range r.Validate() {
				got = append(got, err.Error())
			}
			var want []string
			if tc.wantErr != "" {
				want = []string{tc.wantErr}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

func ExampleRules_For() {
	rules, err := reclaimrules.Parse([]byte(`{
  "apiVersion": "strata/v1",
  "kind": "ReclaimRules",
  "rules": [
    {"name": "llm-train", "match": {"tenants": ["llm"], "classes": ["train"]},
     "idle": {"max_util_percent": 5, "max_mem_activity_percent": 5, "window": "30m"},
     "signal": {"name": "USR1", "wait": "10m"}, "action": "requeue"},
    {"name": "default", "action": "notify"}
  ]
}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, job := range []reclaimrules.JobInfo{
		{Tenant: "llm", Class: "train", Account: "llm-pretrain"},
		{Tenant: "llm", Class: "interactive"},
	} {
		rule, _ := rules.For(job)
		fmt.Printf("%s/%s: rule %s, %s after %s idle\n", job.Tenant, job.Class, rule.Name, rule.Action, rule.Idle.Window)
	}
	// Output:
	// llm/train: rule llm-train, requeue after 30m idle
	// llm/interactive: rule default, notify after 1h idle
}

func TestNoRequeueValues(t *testing.T) {
	for v, wantErr := range map[reclaimrules.NoRequeuePolicy]bool{"": false, reclaimrules.NoRequeueSkip: false, reclaimrules.NoRequeueOverride: false, "always": true} {
		r := reclaimrules.Rules{APIVersion: reclaimrules.APIVersion, Kind: reclaimrules.Kind,
			Rules: []reclaimrules.Rule{{Name: "r", Action: reclaimrules.ActionRequeue, NoRequeue: v}}}
		errs := r.Validate()
		if got := len(errs) > 0; got != wantErr {
			t.Errorf("no_requeue %q: Validate() = %v, want an error: %v", v, errs, wantErr)
		}
		if wantErr && len(errs) > 0 && !strings.Contains(errs[0].Error(), `rules[0].no_requeue: "always": want skip`) {
			t.Errorf("no_requeue %q: error %q does not say what to write", v, errs[0])
		}
	}
}

func TestSignalModeValues(t *testing.T) {
	for name, tc := range map[string]struct {
		signal  reclaimrules.Signal
		wantErr string
	}{
		"default":               {signal: reclaimrules.Signal{Name: "USR1"}},
		"skip-unless-requested": {signal: reclaimrules.Signal{Name: "USR1", Mode: reclaimrules.SignalSkipUnlessRequested}},
		"batch":                 {signal: reclaimrules.Signal{Name: "USR1", Mode: reclaimrules.SignalBatch}},
		"all-steps":             {signal: reclaimrules.Signal{Name: "TERM", Mode: reclaimrules.SignalAllSteps}},
		"unknown": {signal: reclaimrules.Signal{Name: "USR1", Mode: "shell"},
			wantErr: `rules[0].signal.mode: "shell": want skip-unless-requested, batch, all-steps`},
		"mode without a signal": {signal: reclaimrules.Signal{Mode: reclaimrules.SignalBatch},
			wantErr: `rules[0].signal.mode: set, but signal.name is empty`},
	} {
		r := reclaimrules.Rules{APIVersion: reclaimrules.APIVersion, Kind: reclaimrules.Kind,
			Rules: []reclaimrules.Rule{{Name: "r", Action: reclaimrules.ActionRequeue, Signal: tc.signal}}}
		errs := r.Validate()
		switch {
		case tc.wantErr == "" && len(errs) > 0:
			t.Errorf("%s: Validate() = %v, want no error", name, errs)
		case tc.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantErr)):
			t.Errorf("%s: Validate() = %v, want %q", name, errs, tc.wantErr)
		}
	}
	if m := (reclaimrules.Rules{Rules: []reclaimrules.Rule{{Name: "r", Signal: reclaimrules.Signal{Name: "USR1"}}}}).WithDefaults().Rules[0].Signal.Mode; m != reclaimrules.SignalSkipUnlessRequested {
		t.Errorf("default mode = %q, want %q: a job that did not ask is not signalled", m, reclaimrules.SignalSkipUnlessRequested)
	}
	for m, want := range map[reclaimrules.SignalMode][2]bool{
		reclaimrules.SignalSkipUnlessRequested: {false, true},
		reclaimrules.SignalBatch:               {true, true},
		reclaimrules.SignalAllSteps:            {true, true},
	} {
		if got := [2]bool{m.Sends(false), m.Sends(true)}; got != want {
			t.Errorf("%s: Sends(false), Sends(true) = %v, want %v", m, got, want)
		}
	}
}
