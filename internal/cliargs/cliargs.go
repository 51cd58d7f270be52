// Package cliargs gives every Strata verb the same positional arguments:
// a verb declares the arguments it takes (a file it reads is also a flag,
// so `strata-policy check broken.yaml` and `strata-policy check --policy
// broken.yaml` are one thing), flags may follow the arguments, and any
// argument the verb does not take, a missing one, or a positional and a
// flag that disagree is a usage error (exit code cliexit.ExitUsage) that
// says what the verb expected. Nothing is silently ignored.
package cliargs

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/cliexit"
)

// Arg is one positional argument of a verb.
type Arg struct {
	// Name names the argument in usage lines and messages: FILE, NAME, ID.
	Name string
	// Flag is the flag the argument stands for ("" when it has none): the
	// positional sets it, so the verb reads one value either way, and a
	// positional and a flag that disagree are a usage error.
	Flag string
	// Required makes a missing argument (and a missing flag, when there is
	// one) a usage error.
	Required bool
}

// Usage is args as a usage line shows them: "NAME [FILE]".
func Usage(args []Arg) string {
	var parts []string
	for _, a := range args {
		if a.Required {
			parts = append(parts, a.Name)
		} else {
			parts = append(parts, "["+a.Name+"]")
		}
	}
	return strings.Join(parts, " ")
}

// FlagValue reports a flag's value and whether it was given.
type FlagValue func(flag string) (value string, set bool)

// Match matches the positionals a verb got to the arguments it takes, for
// any flag parser: verb names the verb in messages ("check", "explain
// job"), usage is its usage line. It returns the value of every argument
// by name, taken from the positional or else from its flag; a flag
// argument given only positionally is in the map too, and the caller sets
// the flag from it.
func Match(verb, usage string, got []string, want []Arg, flags FlagValue) (map[string]string, error) {
	vals := map[string]string{}
	if len(got) > len(want) {
		extra := got[len(want)]
		if len(want) == 0 {
			return nil, cliexit.Usagef("%s: unexpected argument %q: %s takes no arguments (usage: %s)", verb, extra, verb, usage)
		}
		most := ""
		for _, a := range want {
			if !a.Required {
				most = "at most "
			}
		}
		noun := "arguments"
		if len(want) == 1 {
			noun = "argument"
		}
		return nil, cliexit.Usagef("%s: unexpected argument %q: %s takes %s%d %s, %s (usage: %s)", verb, extra, verb, most, len(want), noun,
			Usage(want), usage)
	}
	for i, a := range want {
		fv, fset := "", false
		if a.Flag != "" && flags != nil {
			fv, fset = flags(a.Flag)
		}
		switch {
		case i < len(got) && fset && fv != got[i]:
			return nil, cliexit.Usagef("%s: the %s %q and --%s %q disagree: give one (usage: %s)", verb, a.Name, got[i], a.Flag, fv, usage)
		case i < len(got):
			vals[a.Name] = got[i]
		case fset:
			vals[a.Name] = fv
		case a.Required && a.Flag != "":
			return nil, cliexit.Usagef("%s: missing %s: give it as an argument or as --%s (usage: %s)", verb, a.Name, a.Flag, usage)
		case a.Required:
			return nil, cliexit.Usagef("%s: missing %s (usage: %s)", verb, a.Name, usage)
		}
	}
	return vals, nil
}

type valuesKey struct{}

// Bind makes cmd take exactly args: before its action runs, the flags
// written after a positional are parsed with cmd's own flag definitions
// (urfave/cli stops at the first positional), the positionals are matched
// to args (see Match), and a positional that stands for a flag sets that
// flag. It sets cmd.ArgsUsage and runs a Before cmd already has after
// its own. It returns cmd.
func Bind(cmd *cli.Command, args ...Arg) *cli.Command {
	next := cmd.Before
	cmd.ArgsUsage = Usage(args)
	cmd.Before = func(c *cli.Context) error {
		if err := bind(c, args); err != nil {
			return err
		}
		if next != nil {
			return next(c)
		}
		return nil
	}
	return cmd
}

func bind(c *cli.Context, want []Arg) error {
	verb := verbName(c)
	usage := usageLine(c)
	got, err := positionals(c, verb, usage)
	if err != nil {
		return err
	}
	vals, err := Match(verb, usage, got, want, func(name string) (string, bool) {
		if !c.IsSet(name) {
			return "", false
		}
		return fmt.Sprint(c.Value(name)), true
	})
	if err != nil {
		return err
	}
	for _, a := range want {
		v, ok := vals[a.Name]
		if !ok || a.Flag == "" || c.IsSet(a.Flag) {
			continue
		}
		if err := c.Set(a.Flag, v); err != nil {
			return cliexit.Usagef("%s: %s %q: %v (usage: %s)", verb, a.Name, v, err, usage)
		}
	}
	c.Context = context.WithValue(c.Context, valuesKey{}, vals)
	return nil
}

// positionals returns c's arguments less the flags among them, which it
// parses with the command's flag definitions and sets on c. Everything
// after "--" is positional.
func positionals(c *cli.Context, verb, usage string) ([]string, error) {
	rest, tail := c.Args().Slice(), []string(nil)
	for i, a := range rest {
		if a == "--" {
			rest, tail = rest[:i], rest[i+1:]
			break
		}
	}
	var got []string
	for len(rest) > 0 {
		if !strings.HasPrefix(rest[0], "-") || rest[0] == "-" {
			got = append(got, rest[0])
			rest = rest[1:]
			continue
		}
		set := flag.NewFlagSet(verb, flag.ContinueOnError)
		set.SetOutput(io.Discard)
		for _, f := range c.Command.Flags {
			if err := f.Apply(set); err != nil {
				return nil, err
			}
		}
		if err := set.Parse(rest); err != nil {
			return nil, cliexit.Usagef("%s: %v (usage: %s; see %s --help)", verb, err, usage, helpName(c))
		}
		var err error
		set.Visit(func(f *flag.Flag) {
			// urfave/cli keeps a variable per alias and reads the first
			// name: set that one (-p sets --policy).
			if e := c.Set(primary(c, f.Name), f.Value.String()); e != nil && err == nil {
				err = e
			}
		})
		if err != nil {
			return nil, cliexit.Usagef("%s: %v (usage: %s)", verb, err, usage)
		}
		rest = set.Args()
	}
	return append(got, tail...), nil
}

// primary is the first name of the command's flag that name names.
func primary(c *cli.Context, name string) string {
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			if n == name {
				return f.Names()[0]
			}
		}
	}
	return name
}

// Get returns the value of the argument named name, from the positional
// or its flag; "" when neither was given.
func Get(c *cli.Context, name string) string {
	for _, ctx := range c.Lineage() {
		if ctx.Context == nil {
			continue
		}
		if vals, ok := ctx.Context.Value(valuesKey{}).(map[string]string); ok {
			return vals[name]
		}
	}
	return ""
}

// Enforce holds every verb of app to what it declares: each command with
// no Before of its own and no subcommands takes no arguments (Bind with
// none), an unknown command or subcommand is a usage error, and so is a
// flag the verb does not define. Call it after Bind-ing the verbs that
// take arguments, before app runs.
func Enforce(app *cli.App) {
	app.OnUsageError = onUsageError
	if app.Action == nil {
		app.Action = unknownCommand
	}
	enforce(app.Commands)
}

func enforce(cmds []*cli.Command) {
	for _, cmd := range cmds {
		cmd.OnUsageError = onUsageError
		if len(cmd.Subcommands) > 0 {
			if cmd.Action == nil {
				cmd.Action = unknownSubcommand
			}
			enforce(cmd.Subcommands)
			continue
		}
		// A leaf's arguments are its own: `status help` names a
		// deployment, and --help still shows the help.
		cmd.HideHelpCommand = true
		if cmd.Before == nil {
			Bind(cmd)
		}
	}
}

func onUsageError(c *cli.Context, err error, _ bool) error {
	return cliexit.Usagef("%s%v (see %s --help)", prefix(c), err, helpName(c))
}

// unknownCommand is the app's action: with no argument it shows the
// help, with one it names the commands there are.
func unknownCommand(c *cli.Context) error {
	if !c.Args().Present() {
		return cli.ShowAppHelp(c)
	}
	return unknown(c, c.App.Commands)
}

// unknownSubcommand is the action of a command with subcommands.
func unknownSubcommand(c *cli.Context) error {
	if !c.Args().Present() {
		return cli.ShowSubcommandHelp(c)
	}
	return unknown(c, c.Command.Subcommands)
}

func unknown(c *cli.Context, cmds []*cli.Command) error {
	var names []string
	for _, sc := range cmds {
		if !sc.Hidden && sc.Name != "help" {
			names = append(names, sc.Name)
		}
	}
	return cliexit.Usagef("%sunknown command %q: want one of %s (see %s --help)", prefix(c), c.Args().First(),
		strings.Join(names, ", "), helpName(c))
}

// verbName is the command as messages name it, without the program:
// "check", "explain job"; the program's name at the top level.
func verbName(c *cli.Context) string {
	h := helpName(c)
	if v := strings.TrimPrefix(h, c.App.Name+" "); v != h {
		return v
	}
	return h
}

// prefix is "verb: " for a message about a verb, "" for one about the
// program, which cliexit.Main already names.
func prefix(c *cli.Context) string {
	if v := verbName(c); v != c.App.Name {
		return v + ": "
	}
	return ""
}

func helpName(c *cli.Context) string {
	if c.Command != nil && c.Command.HelpName != "" {
		return c.Command.HelpName
	}
	return c.App.Name
}

func usageLine(c *cli.Context) string {
	u := helpName(c) + " [options]"
	if c.Command != nil && c.Command.ArgsUsage != "" {
		u += " " + c.Command.ArgsUsage
	}
	return u
}
