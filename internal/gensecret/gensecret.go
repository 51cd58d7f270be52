// Package gensecret is the verb every Strata part has to make the secrets
// it keeps in files (reclaimd's agents' shared secret, the bridge's API
// token, the portal's cookie key): random, root:<the daemon's group> 0640,
// never over an existing file unless asked. The packages' postinst runs it
// when a secret's file is absent, so that no secret is made by hand.
package gensecret

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/cliexit"
	"github.com/strata-hpc/strata/internal/secretfile"
)

// Spec describes a part's verb.
type Spec struct {
	Name  string // the verb: gen-token, gen-key
	Usage string // one line for --help
	// What the secret is, for the description: "the agents' shared secret".
	What string
	// Group is the daemon's group (strata-reclaimd): the one that reads it.
	Group string
	// Files returns the files the configuration names for the secret, for
	// a run without --file; it may read --config from c.
	Files func(c *cli.Context) ([]string, error)
}

// Command returns the verb: it writes each file that does not exist yet,
// says what it did, and with --force replaces existing ones.
func Command(s Spec) *cli.Command {
	return &cli.Command{
		Name:  s.Name,
		Usage: s.Usage,
		Description: fmt.Sprintf(`Writes %s: %d random bytes as base64, mode 0640, owned by root and the group
%s, which the daemon reads it as. A file that exists is kept (exit 0) unless
--force, so the packages run it on every install. Without --file it writes the
file(s) the configuration names. Run it as root.`, s.What, secretfile.GenerateBytes, s.Group),
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "file", Usage: "the file to write (default: the configuration's)"},
			&cli.StringFlag{Name: "group", Value: s.Group, Usage: "the group that may read it"},
			&cli.BoolFlag{Name: "force", Usage: "replace a file that exists (the daemons that read it need the new one)"},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Len() > 0 {
				return cliexit.Usagef("%s takes no arguments: give the file with --file", s.Name)
			}
			files := c.StringSlice("file")
			if len(files) == 0 {
				var err error
				if files, err = s.Files(c); err != nil {
					return fmt.Errorf("%s: %w (or give the file with --file)", s.Name, err)
				}
			}
			if len(files) == 0 {
				return fmt.Errorf("%s: the configuration names no file for %s: give one with --file", s.Name, s.What)
			}
			for _, f := range files {
				created, err := secretfile.Generate(f, c.String("group"), c.Bool("force"))
				if err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
				if created {
					fmt.Fprintf(c.App.Writer, "%s: written (root:%s 0640)\n", f, c.String("group"))
				} else {
					fmt.Fprintf(c.App.Writer, "%s: exists, kept (--force replaces it)\n", f)
				}
			}
			return nil
		},
	}
}
