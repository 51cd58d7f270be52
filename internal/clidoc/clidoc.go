// Package clidoc makes each binary's man pages and shell completion from
// the binary's own urfave/cli definition, so that they cannot drift from
// --help: a hidden verb, gen-docs, that `make packages` runs on the built
// binary and the packages install. It writes
//
//   - <binary>.<section>: the command's man page (section 1 for the CLIs,
//     8 for the daemons), from cli.App's ToManWithSection;
//   - <file>.5 for each configuration file the binary reads: the shipped
//     example, whose comments are its documentation, with what the file is
//     for and where it lives;
//   - <binary>.bash and _<binary>: bash and zsh completion of the verbs and
//     flags.
package clidoc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
)

// Config is a configuration file a binary reads.
type Config struct {
	// Name is the file's name, and the man page's: reclaimd.yaml.
	Name string
	// Summary says what it configures, for the NAME line.
	Summary string
}

// Spec is what a binary's gen-docs writes.
type Spec struct {
	// Section is the command's man section: 1 for a command users and
	// admins run, 8 for a daemon.
	Section int
	// Configs are the files documented in section 5, from the examples.
	Configs []Config
}

// Verb is the hidden verb's name.
const Verb = "gen-docs"

// Command returns the hidden verb that writes app's documentation.
func Command(app *cli.App, s Spec) *cli.Command {
	return &cli.Command{
		Name:   Verb,
		Hidden: true,
		Usage:  "write the man pages and the bash and zsh completion (for the packages)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Required: true, Usage: "the folder to write into"},
			&cli.StringFlag{Name: "examples", Value: "etc/strata", Usage: "the folder of the example configuration files (section 5)"},
		},
		Action: func(c *cli.Context) error {
			files, err := Generate(app, s, c.String("examples"))
			if err != nil {
				return err
			}
			out := c.String("out")
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			names := make([]string, 0, len(files))
			for n := range files {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				if err := os.WriteFile(filepath.Join(out, n), files[n], 0o644); err != nil {
					return err
				}
				fmt.Fprintln(c.App.Writer, filepath.Join(out, n))
			}
			return nil
		},
	}
}

// Generate returns every file gen-docs writes, by name. examples is the
// folder of the configuration examples; with no Configs it is not read.
func Generate(app *cli.App, s Spec, examples string) (map[string][]byte, error) {
	man, err := app.ToManWithSection(s.Section)
	if err != nil {
		return nil, fmt.Errorf("man page: %w", err)
	}
	files := map[string][]byte{
		fmt.Sprintf("%s.%d", app.Name, s.Section): []byte(man),
		app.Name + ".bash":                        []byte(Bash(app)),
		"_" + app.Name:                            []byte(Zsh(app)),
	}
	for _, cf := range s.Configs {
		example, err := os.ReadFile(filepath.Join(examples, cf.Name))
		if err != nil {
			return nil, fmt.Errorf("the example of %s (--examples): %w", cf.Name, err)
		}
		files[cf.Name+".5"] = []byte(ConfigMan(app.Name, s.Section, cf, string(example)))
	}
	return files, nil
}

// roffEscape makes text safe in a roff line: backslashes doubled, and a
// leading dot or quote, which roff reads as a request, guarded.
func roffEscape(line string) string {
	line = strings.ReplaceAll(line, `\`, `\e`)
	if strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'") {
		line = `\&` + line
	}
	return line
}

// ConfigMan is the section 5 page of a configuration file: its example,
// verbatim, as the documentation it is.
func ConfigMan(binary string, section int, cf Config, example string) string {
	var b bytes.Buffer
	upper := strings.ToUpper(cf.Name)
	fmt.Fprintf(&b, ".TH %q 5 \"\" \"Strata\" \"File Formats\"\n", upper)
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", roffEscape(cf.Name), roffEscape(cf.Summary))
	fmt.Fprintf(&b, ".SH SYNOPSIS\n/etc/strata/%s\n", roffEscape(cf.Name))
	fmt.Fprintf(&b, ".SH DESCRIPTION\n%s reads \\fI/etc/strata/%s\\fR (another file with \\fB\\-\\-config\\fR). "+
		"It is YAML, decoded strictly: a key it does not know is an error, with its line and column. "+
		"Every key has a default in the program; the example below, installed as the file, gives each with what it does. "+
		"\\fB%s check\\-config\\fR reports every problem of a file at once.\n",
		roffEscape(binary), roffEscape(cf.Name), roffEscape(binary))
	b.WriteString(".SH EXAMPLE\n.nf\n")
	for _, line := range strings.Split(strings.TrimRight(example, "\n"), "\n") {
		b.WriteString(roffEscape(line) + "\n")
	}
	b.WriteString(".fi\n")
	fmt.Fprintf(&b, ".SH SEE ALSO\n\\fB%s\\fR(%d)\n", roffEscape(binary), section)
	return b.String()
}

// node is a command of the tree: its verbs and flags.
type node struct {
	path  string // "" for the app, "token create" for a subcommand
	verbs []string
	flags []string
}

func flagNames(flags []cli.Flag) []string {
	var out []string
	for _, f := range flags {
		if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
			continue
		}
		for _, n := range f.Names() {
			if len(n) == 1 {
				out = append(out, "-"+n)
			} else {
				out = append(out, "--"+n)
			}
		}
	}
	return out
}

// tree lists the app and every visible command, parents first.
func tree(app *cli.App) []node {
	var out []node
	var walk func(path string, cmds []*cli.Command, flags []cli.Flag)
	walk = func(path string, cmds []*cli.Command, flags []cli.Flag) {
		n := node{path: path, flags: append(flagNames(flags), "--help")}
		for _, c := range cmds {
			if !c.Hidden && c.Name != "help" {
				n.verbs = append(n.verbs, c.Name)
			}
		}
		out = append(out, n)
		for _, c := range cmds {
			if c.Hidden || c.Name == "help" {
				continue
			}
			walk(strings.TrimSpace(path+" "+c.Name), c.Subcommands, c.Flags)
		}
	}
	flags := app.Flags
	if !app.HideVersion && app.Version != "" {
		flags = append(flags[:len(flags):len(flags)], &cli.BoolFlag{Name: "version"})
	}
	walk("", app.Commands, flags)
	return out
}

// funcName is a shell function name for the binary.
func funcName(app string) string { return "_" + strings.NewReplacer("-", "_", ".", "_").Replace(app) }

// tables writes the two lookup functions both shells share: the verbs and
// the flags of a command path.
func tables(b *bytes.Buffer, fn string, nodes []node) {
	fmt.Fprintf(b, "%s_verbs() {\n\tcase \"$1\" in\n", fn)
	for _, n := range nodes {
		if len(n.verbs) > 0 {
			fmt.Fprintf(b, "\t%q) echo %q ;;\n", n.path, strings.Join(n.verbs, " "))
		}
	}
	b.WriteString("\tesac\n}\n")
	fmt.Fprintf(b, "%s_flags() {\n\tcase \"$1\" in\n", fn)
	for _, n := range nodes {
		fmt.Fprintf(b, "\t%q) echo %q ;;\n", n.path, strings.Join(n.flags, " "))
	}
	b.WriteString("\tesac\n}\n")
}

// Bash is the binary's bash completion: verbs, then each verb's flags
// (a word that is no verb of the command so far, a flag's value or an
// argument, is passed over), and file names where no verb is left.
func Bash(app *cli.App) string {
	fn := funcName(app.Name)
	var b bytes.Buffer
	fmt.Fprintf(&b, "# bash completion for %s; generated by %s %s from its command line definition.\n", app.Name, app.Name, Verb)
	tables(&b, fn, tree(app))
	fmt.Fprintf(&b, `%[1]s() {
	local cur="${COMP_WORDS[COMP_CWORD]}" path="" w i
	for ((i = 1; i < COMP_CWORD; i++)); do
		w="${COMP_WORDS[i]}"
		case " $(%[1]s_verbs "$path") " in *" $w "*) path="${path:+$path }$w" ;; esac
	done
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(%[1]s_flags "$path")" -- "$cur"))
		return
	fi
	local verbs
	verbs="$(%[1]s_verbs "$path")"
	if [[ -n $verbs ]]; then
		COMPREPLY=($(compgen -W "$verbs" -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -o filenames -F %[1]s %[2]s
`, fn, app.Name)
	return b.String()
}

// Zsh is the binary's zsh completion, the same walk as Bash's.
func Zsh(app *cli.App) string {
	fn := funcName(app.Name)
	var b bytes.Buffer
	fmt.Fprintf(&b, "#compdef %s\n# zsh completion for %s; generated by %s %s from its command line definition.\n", app.Name, app.Name, app.Name, Verb)
	tables(&b, fn, tree(app))
	fmt.Fprintf(&b, `%[1]s() {
	local p="" w i
	local -a verbs
	for ((i = 2; i < CURRENT; i++)); do
		w="${words[i]}"
		verbs=(${=$(%[1]s_verbs "$p")})
		if (( ${verbs[(Ie)$w]} )); then p="${p:+$p }$w"; fi
	done
	if [[ $PREFIX == -* ]]; then
		compadd -- ${=$(%[1]s_flags "$p")}
		return
	fi
	verbs=(${=$(%[1]s_verbs "$p")})
	if (( ${#verbs} )); then
		compadd -- $verbs
	else
		_files
	fi
}
%[1]s "$@"
`, fn)
	return b.String()
}
