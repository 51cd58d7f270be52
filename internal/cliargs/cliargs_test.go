package cliargs_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/cliargs"
	"github.com/strata-hpc/strata/internal/cliexit"
)

// app is a small program with the shapes Strata's verbs have: a file that
// is also a flag (check), a name with flags after it (rollback), an id that
// is also a required flag (deploy), a verb that takes nothing (list) and
// one with subcommands (explain).
func app(out *bytes.Buffer, seen *string) *cli.App {
	a := &cli.App{
		Name: "prog", Writer: out, ErrWriter: out, ExitErrHandler: func(*cli.Context, error) {},
		Flags: []cli.Flag{&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Value: "/etc/prog.yaml"}},
		Commands: []*cli.Command{
			cliargs.Bind(&cli.Command{Name: "check", Action: func(c *cli.Context) error {
				*seen = "config=" + c.String("config")
				return nil
			}}, cliargs.Arg{Name: "CONFIG", Flag: "config"}),
			cliargs.Bind(&cli.Command{Name: "rollback",
				Flags: []cli.Flag{&cli.StringFlag{Name: "to", Aliases: []string{"t"}}, &cli.BoolFlag{Name: "apply"}},
				Action: func(c *cli.Context) error {
					*seen = fmt.Sprintf("name=%s to=%s apply=%v", cliargs.Get(c, "NAME"), c.String("to"), c.Bool("apply"))
					return nil
				}}, cliargs.Arg{Name: "NAME", Required: true}),
			cliargs.Bind(&cli.Command{Name: "deploy", Flags: []cli.Flag{&cli.Int64Flag{Name: "job"}},
				Action: func(c *cli.Context) error {
					*seen = fmt.Sprintf("job=%d", c.Int64("job"))
					return nil
				}}, cliargs.Arg{Name: "JOB", Flag: "job", Required: true}),
			{Name: "list", Action: func(c *cli.Context) error { *seen = "list"; return nil }},
			{Name: "explain", Subcommands: []*cli.Command{
				cliargs.Bind(&cli.Command{Name: "job", Flags: []cli.Flag{&cli.BoolFlag{Name: "json"}}, Action: func(c *cli.Context) error {
					*seen = fmt.Sprintf("job %s json=%v", cliargs.Get(c, "ID"), c.Bool("json"))
					return nil
				}}, cliargs.Arg{Name: "ID", Required: true}),
			}},
		},
	}
	cliargs.Enforce(a)
	return a
}

func TestArgs(t *testing.T) {
	for name, tc := range map[string]struct {
		args     []string
		wantSeen string
		wantCode int
		wantErr  string // in the error; "" for none
	}{
		"file as argument":     {args: []string{"check", "a.yaml"}, wantSeen: "config=a.yaml"},
		"file as flag":         {args: []string{"-c", "a.yaml", "check"}, wantSeen: "config=a.yaml"},
		"file as both, agreed": {args: []string{"--config", "a.yaml", "check", "a.yaml"}, wantSeen: "config=a.yaml"},
		"default file":         {args: []string{"check"}, wantSeen: "config=/etc/prog.yaml"},
		"flags after the name": {args: []string{"rollback", "llama", "--to", "job-12", "--apply"}, wantSeen: "name=llama to=job-12 apply=true"},
		"alias after the name": {args: []string{"rollback", "llama", "-t", "job-12"}, wantSeen: "name=llama to=job-12 apply=false"},
		"flags around":         {args: []string{"rollback", "--apply", "llama", "--to=job-12"}, wantSeen: "name=llama to=job-12 apply=true"},
		"id as argument":       {args: []string{"deploy", "4242"}, wantSeen: "job=4242"},
		"id as flag":           {args: []string{"deploy", "--job", "4242"}, wantSeen: "job=4242"},
		"subcommand":           {args: []string{"explain", "job", "12", "--json"}, wantSeen: "job 12 json=true"},
		"nothing for list":     {args: []string{"list"}, wantSeen: "list"},

		"file and flag disagree": {args: []string{"-c", "b.yaml", "check", "a.yaml"}, wantCode: cliexit.ExitUsage,
			wantErr: `check: the CONFIG "a.yaml" and --config "b.yaml" disagree: give one (usage: prog check [options] [CONFIG])`},
		"two files": {args: []string{"check", "a.yaml", "b.yaml"}, wantCode: cliexit.ExitUsage,
			wantErr: `check: unexpected argument "b.yaml": check takes at most 1 argument, [CONFIG] (usage: prog check [options] [CONFIG])`},
		"no name": {args: []string{"rollback", "--apply"}, wantCode: cliexit.ExitUsage,
			wantErr: "rollback: missing NAME (usage: prog rollback [options] NAME)"},
		"after --": {args: []string{"rollback", "a", "--", "--apply"}, wantCode: cliexit.ExitUsage,
			wantErr: `rollback: unexpected argument "--apply"`},
		"two names": {args: []string{"rollback", "a", "--apply", "b"}, wantCode: cliexit.ExitUsage, wantErr: `unexpected argument "b"`},
		"flag needs a value": {args: []string{"rollback", "a", "--to"}, wantCode: cliexit.ExitUsage,
			wantErr: "rollback: flag needs an argument: -to"},
		"unknown flag after": {args: []string{"rollback", "a", "--aply"}, wantCode: cliexit.ExitUsage,
			wantErr: "rollback: flag provided but not defined: -aply"},
		"unknown flag before": {args: []string{"rollback", "--aply", "a"}, wantCode: cliexit.ExitUsage,
			wantErr: "rollback: flag provided but not defined: -aply (see prog rollback --help)"},
		"id and flag disagree": {args: []string{"deploy", "--job", "1", "2"}, wantCode: cliexit.ExitUsage, wantErr: "disagree"},
		"no id": {args: []string{"deploy"}, wantCode: cliexit.ExitUsage,
			wantErr: "deploy: missing JOB: give it as an argument or as --job (usage: prog deploy [options] JOB)"},
		"not an id": {args: []string{"deploy", "x"}, wantCode: cliexit.ExitUsage, wantErr: `deploy: JOB "x"`},
		"argument to list": {args: []string{"list", "x"}, wantCode: cliexit.ExitUsage,
			wantErr: `list: unexpected argument "x": list takes no arguments (usage: prog list [options])`},
		"help is an argument": {args: []string{"list", "help"}, wantCode: cliexit.ExitUsage, wantErr: `unexpected argument "help"`},
		"unknown command": {args: []string{"chek"}, wantCode: cliexit.ExitUsage,
			wantErr: `unknown command "chek": want one of check, rollback, deploy, list, explain (see prog --help)`},
		"unknown subcommand": {args: []string{"explain", "jbo"}, wantCode: cliexit.ExitUsage,
			wantErr: `explain: unknown command "jbo": want one of job (see prog explain --help)`},
		"subcommand extra": {args: []string{"explain", "job", "1", "2"}, wantCode: cliexit.ExitUsage,
			wantErr: `explain job: unexpected argument "2": explain job takes 1 argument, ID (usage: prog explain job [options] ID)`},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			var seen string
			err := app(&out, &seen).RunContext(context.Background(), append([]string{"prog"}, tc.args...))
			if code := cliexit.CodeOf(err); code != tc.wantCode {
				t.Fatalf("exit %d (%v), want %d\n%s", code, err, tc.wantCode, out.String())
			}
			if tc.wantErr != "" {
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %q\nwant it to contain %q", err, tc.wantErr)
				}
				if seen != "" {
					t.Errorf("the action ran (%s) after a usage error", seen)
				}
				return
			}
			if diff := cmp.Diff(tc.wantSeen, seen); diff != "" {
				t.Errorf("action saw (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHelpStillWorks(t *testing.T) {
	var out bytes.Buffer
	var seen string
	if err := app(&out, &seen).RunContext(context.Background(), []string{"prog", "rollback", "--help"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "prog rollback [command options] NAME") {
		t.Errorf("rollback --help does not show its arguments:\n%s", out.String())
	}
}

func TestMatch(t *testing.T) {
	want := []cliargs.Arg{{Name: "ENV", Flag: "env"}}
	flags := func(v string, set bool) cliargs.FlagValue {
		return func(string) (string, bool) { return v, set }
	}
	for name, tc := range map[string]struct {
		got     []string
		flags   cliargs.FlagValue
		want    map[string]string
		wantErr string
	}{
		"positional": {got: []string{"a"}, flags: flags("", false), want: map[string]string{"ENV": "a"}},
		"flag":       {flags: flags("b", true), want: map[string]string{"ENV": "b"}},
		"neither":    {flags: flags("", false), want: map[string]string{}},
		"disagree":   {got: []string{"a"}, flags: flags("b", true), wantErr: `demo: the ENV "a" and --env "b" disagree`},
		"extra":      {got: []string{"a", "b"}, flags: flags("", false), wantErr: `demo: unexpected argument "b": demo takes at most 1 argument, [ENV]`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := cliargs.Match("demo", "demo [options] [ENV]", tc.got, want, tc.flags)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || cliexit.CodeOf(err) != cliexit.ExitUsage {
					t.Errorf("error %v (exit %d), want %q (exit %d)", err, cliexit.CodeOf(err), tc.wantErr, cliexit.ExitUsage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
