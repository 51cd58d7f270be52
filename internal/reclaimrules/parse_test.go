package reclaimrules_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/strata-hpc/strata/internal/reclaimrules"
)

// minimal is what minimal.good.json parses to: one catch-all rule with
// every default filled in.
func minimal() reclaimrules.Rules {
	return reclaimrules.Rules{
		APIVersion: "strata/v1",
		Kind:       "ReclaimRules",
		Rules: []reclaimrules.Rule{{
			Name:   "default",
			Idle:   reclaimrules.IdleDef{Window: dur(time.Hour), MinCoverage: 0.8},
			Warn:   dur(15 * time.Minute),
			Action: reclaimrules.ActionNotify,
		}},
		Limits: reclaimrules.Limits{MaxActionsPerCycle: 10, MaxRequeuesPerJob: 3},
	}
}

func dur(d time.Duration) reclaimrules.Duration { return reclaimrules.Duration(d) }

// fileTests covers every file in testdata (TestFiles fails on a file
// missing here). A .good file parses to want; a .bad file fails with
// exactly the error lines listed, each "line:col: path: message".
var fileTests = map[string]struct {
	want     func() reclaimrules.Rules
	wantErrs []string
}{
	"minimal.good.json": {want: minimal},
	"full.good.json": {want: func() reclaimrules.Rules {
		r := minimal()
		r.DryRun = true
		r.Rules = []reclaimrules.Rule{{
			Name:         "interactive",
			Match:        reclaimrules.Match{Classes: []string{"interactive"}, Partitions: []string{"gpu-short", "gpu-debug"}},
			Idle:         reclaimrules.IdleDef{MaxUtilPercent: 1, MaxMemActivityPercent: 1, Window: dur(30 * time.Minute), MinCoverage: 0.9},
			StartupGrace: dur(5 * time.Minute),
			FirstWindow:  dur(15 * time.Minute),
			Warn:         dur(10 * time.Minute),
			Action:       reclaimrules.ActionCancel,
		}, {
			Name:         "llm-train",
			Match:        reclaimrules.Match{Tenants: []string{"llm"}, Accounts: []string{"llm-pretrain", "llm-sft"}, QOS: []string{"normal", "high"}},
			Idle:         reclaimrules.IdleDef{MaxUtilPercent: 5, MaxMemActivityPercent: 5, Window: dur(time.Hour), MinCoverage: 0.8},
			StartupGrace: dur(20 * time.Minute),
			PartialIdle:  reclaimrules.PartialIdle{Enabled: true, MinIdleGPUs: 2, MinIdleFraction: 0.25, Action: reclaimrules.ActionNotify},
			Warn:         dur(15 * time.Minute),
			Signal:       reclaimrules.Signal{Name: "SIGUSR1", Wait: dur(10 * time.Minute), Mode: reclaimrules.SignalSkipUnlessRequested},
			Action:       reclaimrules.ActionRequeue,
			MaxRequeues:  2,
		}, {
			Name:   "batch",
			Match:  reclaimrules.Match{Classes: []string{"batch", "train"}},
			Idle:   reclaimrules.IdleDef{Window: dur(2 * time.Hour), MinCoverage: 0.8},
			Warn:   dur(15 * time.Minute),
			Signal: reclaimrules.Signal{Name: "SIGTERM", Wait: dur(5 * time.Minute), Mode: reclaimrules.SignalSkipUnlessRequested},
			Action: reclaimrules.ActionRequeueHold,
		}, {
			Name:   "everyone-else",
			Idle:   reclaimrules.IdleDef{Window: dur(time.Hour), MinCoverage: 0.8},
			Warn:   dur(15 * time.Minute),
			Action: reclaimrules.ActionNotify,
		}}
		r.Exempt = reclaimrules.Exemptions{
			Accounts: []string{"ops"}, Users: []string{"root", "slurm"}, QOS: []string{"benchmark"}, Partitions: []string{"maintenance"},
		}
		r.Limits = reclaimrules.Limits{MaxActionsPerCycle: 25, MaxRequeuesPerJob: 5}
		return r
	}},
	"unknown-field.bad.json": {wantErrs: []string{
		"7:39: rules[0].idle.windw: unknown field; the fields here are max_util_percent, max_mem_activity_percent, window, min_coverage",
	}},
	"wrong-types.bad.json": {wantErrs: []string{
		`4:14: dry_run: want true or false, got "yes"`,
		`8:29: rules[0].match.accounts: want a list, got "llm"`,
		`9:36: rules[0].idle.max_util_percent: want a number, got "5%"`,
		`9:52: rules[0].idle.window: want a string, got 1800: "1800" is not a duration: add a unit, such as "1800m" (Slurm reads a bare number as minutes) or "1800s"`,
		"10:58: rules[0].partial_idle.min_idle_gpus: want a whole number, got 0.5",
		"11:17: rules[0].signal: want an object, got a list",
		"12:23: rules[0].max_requeues: null: give a value or leave the field out",
		"15:39: limits.max_actions_per_cycle: want a whole number, got 1e3",
	}},
	"duplicate-field.bad.json": {wantErrs: []string{
		"5:45: rules[0].action: given twice (first at 5:25)",
	}},
	"syntax.bad.json": {wantErrs: []string{
		"5:24: invalid JSON: invalid character '}' looking for beginning of object key string",
	}},
	"truncated.bad.json": {wantErrs: []string{
		"6:1: invalid JSON: the document ends too early (a missing } or ]?)",
	}},
	"trailing-data.bad.json": {wantErrs: []string{
		"2:1: unexpected data after the document: a file holds one JSON object",
	}},
	"empty.bad.json": {wantErrs: []string{
		`1:1: empty document: want a JSON object with "apiVersion": "strata/v1" and "kind": "ReclaimRules"`,
	}},
	"bad-duration.bad.json": {wantErrs: []string{
		`5:44: rules[0].idle.window: "30 minutes" is not a duration: write hours or minutes with a unit ("36h", "90m"), days ("7d"), or Slurm's days-hours:minutes:seconds ("1-00:00:00")`,
		`5:67: rules[0].warn: "15" is not a duration: add a unit, such as "15m" (Slurm reads a bare number as minutes) or "15s"`,
	}},
	"bad-signal.bad.json": {wantErrs: []string{
		`7:87: rules[2].signal.name: "USR3" is not a signal slurmrestd sends: use one of HUP INT QUIT ABRT KILL ALRM TERM USR1 USR2 URG CONT STOP TSTP TTIN TTOU (with or without SIG)`,
	}},
	"wrong-api-version.bad.json": {wantErrs: []string{
		`2:17: apiVersion: "strata/v2" is not supported: use strata/v1`,
	}},
	"unreachable-rule.bad.json": {wantErrs: []string{
		`7:5: rules[2]: never applies: every job it matches is matched first by rules[0] ("llm")`,
		`8:5: rules[3]: never applies: every job it matches is matched first by rules[1] ("catch-all")`,
	}},
	"every-problem-at-once.bad.json": {wantErrs: []string{
		`2:17: apiVersion: "v1" is not supported: use strata/v1`,
		`3:11: kind: "Rules": want ReclaimRules`,
		`6:15: rules[0].name: required: the name appears in records, logs and the job's admin comment`,
		`7:37: rules[0].match.accounts[1]: empty name`,
		`7:59: rules[0].match.users[1]: "ana" is listed twice`,
		`8:36: rules[0].idle.max_util_percent: 120: want a percentage from 0 to 100`,
		`8:69: rules[0].idle.max_mem_activity_percent: -1: want a percentage from 0 to 100`,
		`8:83: rules[0].idle.window: 30s: want at least 1m0s (0 or absent: 1h0m0s)`,
		`8:106: rules[0].idle.min_coverage: 1.5: want a fraction above 0 and at most 1 (0 or absent: 0.8)`,
		`9:24: rules[0].startup_grace: -5m0s: must not be negative`,
		`11:23: rules[0].partial_idle: settings given but enabled is false: set enabled: true, or remove them`,
		`11:59: rules[0].partial_idle.min_idle_gpus: -1: must not be negative`,
		`11:84: rules[0].partial_idle.min_idle_fraction: 2: want a fraction from 0 to 1`,
		`11:97: rules[0].partial_idle.action: "kill": want one of notify, requeue, requeue-hold, cancel`,
		`12:15: rules[0].warn: -1m0s: must not be negative`,
		`13:38: rules[0].signal.wait: set, but signal.name is empty: name the signal to wait after`,
		`14:17: rules[0].action: "delete": want one of notify, requeue, requeue-hold, cancel`,
		`15:23: rules[0].max_requeues: -2: must not be negative`,
		`18:15: rules[1].name: "bad name!": use letters, digits, '.', '_' and '-' only`,
		`20:26: rules[1].signal.name: "USR1" is never sent: a signal comes only before requeue, requeue-hold or cancel, and this rule only notifies`,
		`22:23: rules[1].max_requeues: set, but the rule never requeues`,
		`25:15: rules[2].name: "bad name!" is the name of rules[1] too: names must be unique`,
		`25:15: rules[2].name: "bad name!": use letters, digits, '.', '_' and '-' only`,
		`29:27: exempt.accounts[0]: empty name`,
		`29:50: exempt.qos[1]: "debug" is listed twice`,
		`30:39: limits.max_actions_per_cycle: -1: must not be negative`,
		`30:67: limits.max_requeues_per_job: -3: must not be negative`,
	}},
}

func TestFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := fileTests[filepath.Base(f)]; !ok {
			t.Errorf("%s has no case in fileTests", f)
		}
	}
	for name, tc := range fileTests {
		t.Run(name, func(t *testing.T) {
			if strings.HasSuffix(name, ".good.json") != (tc.want != nil) || (tc.want != nil) == (tc.wantErrs != nil) {
				t.Fatal("a .good file needs want and a .bad file wantErrs")
			}
			data, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := reclaimrules.Parse(data)
			if tc.wantErrs != nil {
				if err == nil {
					t.Fatalf("Parse succeeded, want errors %q", tc.wantErrs)
				}
				if diff := cmp.Diff(tc.wantErrs, strings.Split(err.Error(), "\n")); diff != "" {
					t.Errorf("error lines (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want(), got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

// TestErrorsAreFieldErrors: a caller can take every problem apart.
func TestErrorsAreFieldErrors(t *testing.T) {
	data, err := os.ReadFile("testdata/bad-signal.bad.json")
	if err != nil {
		t.Fatal(err)
	}
	_, err = reclaimrules.Parse(data)
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("Parse error %T does not unwrap into a list", err)
	}
	var got []reclaimrules.FieldError
	for _, e := range joined.Unwrap() {
		var fe *reclaimrules.FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("problem %T is not a *FieldError", e)
		}
		got = append(got, *fe)
	}
	want := []reclaimrules.FieldError{{
		Path: "rules[2].signal.name", Line: 7, Col: 87,
		Msg: `"USR3" is not a signal slurmrestd sends: use one of HUP INT QUIT ABRT KILL ALRM TERM USR1 USR2 URG CONT STOP TSTP TTIN TTOU (with or without SIG)`,
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// TestParseInline holds the small cases that read better inline: syntax
// errors at odd places, and the strictness rules one by one.
func TestParseInline(t *testing.T) {
	const head = `"apiVersion": "strata/v1", "kind": "ReclaimRules"`
	tests := map[string]struct {
		in      string
		wantErr string
	}{
		"no rules is valid":     {in: `{` + head + `}`},
		"null rules list":       {in: `{` + head + `, "rules": null}`},
		"empty object":          {in: `{}`, wantErr: "1:1: apiVersion: missing: use strata/v1\n1:1: kind: \"\": want ReclaimRules"},
		"not an object":         {in: `["strata/v1"]`, wantErr: `1:1: want an object, got a list`},
		"a string":              {in: `"rules"`, wantErr: `1:1: want an object, got "rules"`},
		"missing colon":         {in: `{"apiVersion" "strata/v1"}`, wantErr: `1:15: invalid JSON: invalid character '"' after object key`},
		"bad literal":           {in: `{"dry_run": tru}`, wantErr: `1:16: invalid JSON: invalid character '}' in literal true (expecting 'e')`},
		"single quotes":         {in: `{'kind': 1}`, wantErr: `1:2: invalid JSON: invalid character '\''`},
		"bad escape":            {in: `{"kind": "\q"}`, wantErr: `1:12: invalid JSON: invalid character 'q' in string escape code`},
		"control character":     {in: "{\"kind\": \"a\x01\"}", wantErr: `1:12: invalid JSON: invalid character '\x01' in string literal`},
		"unknown top-level key": {in: `{` + head + `, "rule": []}`, wantErr: `1:53: rule: unknown field; the fields here are apiVersion, kind, dry_run, rules, exempt, limits, recovery`},
		"unknown key in unknown object is not walked": {
			in:      `{` + head + `, "extra": {"a": [1, {"b": 2}]}, "limits": {"max_actions_per_cycle": 3}}`,
			wantErr: `1:53: extra: unknown field; the fields here are apiVersion, kind, dry_run, rules, exempt, limits, recovery`,
		},
		"huge int": {
			in:      `{` + head + `, "limits": {"max_actions_per_cycle": 99999999999999999999}}`,
			wantErr: `1:89: limits.max_actions_per_cycle: want a whole number, got 99999999999999999999`,
		},
		"huge float": {
			in:      `{` + head + `, "rules": [{"name": "a", "idle": {"max_util_percent": 1e999}}]}`,
			wantErr: `1:106: rules[0].idle.max_util_percent: 1e999 is out of range`,
		},
		"duplicate rule name is reported at the second": {
			in:      `{` + head + `, "rules": [{"name": "a", "match": {"users": ["x"]}}, {"name": "a"}]}`,
			wantErr: `1:114: rules[1].name: "a" is the name of rules[0] too: names must be unique`,
		},
		"missing name is reported at its rule": {
			in:      `{` + head + `, "rules": [{"action": "notify"}]}`,
			wantErr: `1:63: rules[0].name: required: the name appears in records, logs and the job's admin comment`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := reclaimrules.Parse([]byte(tc.in))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("Parse(%s) error:\n got: %s\nwant: %s", tc.in, got, tc.wantErr)
			}
		})
	}
}

// TestRoundTrip: what Parse returns, marshalled, parses to itself, and
// reads as YAML with the same field names.
func TestRoundTrip(t *testing.T) {
	data, err := os.ReadFile("testdata/full.good.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := reclaimrules.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got, err := reclaimrules.Parse(out)
	if err != nil {
		t.Fatalf("Parse of marshalled rules: %v\n%s", err, out)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
	if !bytes.Contains(out, []byte(`"window": "30m"`)) {
		t.Errorf("durations are not written as compact duration strings:\n%s", out)
	}

	y, err := yaml.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var fromYAML reclaimrules.Rules
	dec := yaml.NewDecoder(bytes.NewReader(y))
	dec.KnownFields(true)
	if err := dec.Decode(&fromYAML); err != nil {
		t.Fatalf("YAML decode: %v\n%s", err, y)
	}
	if diff := cmp.Diff(want, fromYAML.WithDefaults(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("YAML round trip (-want +got):\n%s", diff)
	}
}

// TestYAML: reclaimd's configuration embeds these types in YAML, decoded
// strictly with yaml.v3; durations and errors behave as in JSON.
func TestYAML(t *testing.T) {
	const tmpl = `
apiVersion: strata/v1
kind: ReclaimRules
rules:
  - name: llm
    match: {tenants: [llm]}
    idle: {%s}
    signal: {name: USR1, wait: 2m}
    action: requeue
limits: {max_actions_per_cycle: 4}
`
	decode := func(idle string) (reclaimrules.Rules, error) {
		var r reclaimrules.Rules
		dec := yaml.NewDecoder(strings.NewReader(fmt.Sprintf(tmpl, idle)))
		dec.KnownFields(true)
		return r, dec.Decode(&r)
	}
	r, err := decode("max_util_percent: 5, window: 45m")
	if err != nil {
		t.Fatal(err)
	}
	if errs := r.Validate(); len(errs) > 0 {
		t.Fatalf("Validate: %v", errs)
	}
	r = r.WithDefaults()
	if got := r.Rules[0].Idle.Window.Std(); got != 45*time.Minute {
		t.Errorf("window = %s, want 45m0s", got)
	}
	if got := r.Rules[0].Signal; got != (reclaimrules.Signal{Name: "SIGUSR1", Wait: dur(2 * time.Minute), Mode: reclaimrules.SignalSkipUnlessRequested}) {
		t.Errorf("signal = %+v, want SIGUSR1 and 2m0s", got)
	}
	for idle, want := range map[string]string{
		"window: 30":     `"30" is not a duration`,
		"windw: 30m":     "field windw not found",
		"window: [1, 2]": "cannot unmarshal !!seq",
	} {
		if _, err := decode(idle); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("YAML idle {%s}: error %v, want one containing %q", idle, err, want)
		}
	}
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestTags: every field has the same name in JSON and YAML, in snake_case
// (the apiVersion header excepted, as in every Strata file).
func TestTags(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		for typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			j, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			y, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			switch {
			case j == "" || j != y:
				t.Errorf("%s.%s: json name %q, yaml name %q: want the same", path, f.Name, j, y)
			case !snakeCase.MatchString(j) && j != "apiVersion":
				t.Errorf("%s.%s: %q is not snake_case", path, f.Name, j)
			}
			walk(path+"."+j, f.Type)
		}
	}
	walk("Rules", reflect.TypeFor[reclaimrules.Rules]())
	if len(seen) < 8 {
		t.Errorf("walked %d struct types: the walk is broken", len(seen))
	}
}

func TestDuration(t *testing.T) {
	var d reclaimrules.Duration
	if err := json.Unmarshal([]byte(`"1h30m"`), &d); err != nil || d.Std() != 90*time.Minute {
		t.Errorf(`Unmarshal "1h30m" = %s, %v; want 1h30m`, d, err)
	}
	// The grammar of every Strata file: days and Slurm's times too.
	for in, want := range map[string]time.Duration{`"1d"`: 24 * time.Hour, `"1-12:00:00"`: 36 * time.Hour, `"30:00"`: 30 * time.Minute} {
		if err := json.Unmarshal([]byte(in), &d); err != nil || d.Std() != want {
			t.Errorf("Unmarshal %s = %s, %v; want %s", in, d, err, want)
		}
	}
	if err := json.Unmarshal([]byte(`90`), &d); err == nil {
		t.Error("Unmarshal of a bare number succeeded, want an error")
	}
	if err := json.Unmarshal([]byte(`"90"`), &d); err == nil || !strings.Contains(err.Error(), `"90" is not a duration`) {
		t.Errorf(`Unmarshal "90" error = %v`, err)
	}
	out, err := json.Marshal(struct{ D reclaimrules.Duration }{dur(30 * time.Minute)})
	if err != nil || string(out) != `{"D":"30m"}` {
		t.Errorf("Marshal = %s, %v", out, err)
	}
}

// FuzzParse: no input makes Parse panic; what it accepts validates, has
// its defaults filled, and survives a JSON round trip unchanged.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"apiVersion": "strata/v1", "kind": "ReclaimRules", "rules": [{"name": "a", "idle": {"window": "1m"}, "first_window": "59s"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := reclaimrules.Parse(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without text")
			}
			return
		}
		if errs := r.Validate(); len(errs) > 0 {
			t.Fatalf("Parse accepted rules that do not validate: %v", errs)
		}
		if diff := cmp.Diff(r, r.WithDefaults()); diff != "" {
			t.Fatalf("Parse left defaults unfilled (-parsed +defaults):\n%s", diff)
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		again, err := reclaimrules.Parse(out)
		if err != nil {
			t.Fatalf("Parse of its own output: %v\n%s", err, out)
		}
		if diff := cmp.Diff(r, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

// TestTooManyProblems: a document with hundreds of problems reports the
// first fifty and says there are more.
func TestTooManyProblems(t *testing.T) {
	for name, doc := range map[string]string{
		"decoding": `{"rules": [` + strings.Repeat(`{"name": 1},`, 80) + `{"name": 2}]}`,
		"validation": `{"apiVersion": "strata/v1", "kind": "ReclaimRules", "exempt": {"users": [` +
			strings.Repeat(`"", `, 80) + `""]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := reclaimrules.Parse([]byte(doc))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != 51 || lines[50] != "too many problems: fix these first" {
				t.Errorf("%d lines, the last %q; want 50 problems and a last line saying there are more", len(lines), lines[len(lines)-1])
			}
		})
	}
}
