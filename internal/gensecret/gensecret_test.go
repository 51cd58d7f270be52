package gensecret

import (
	"bytes"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/internal/cliexit"
)

func TestCommand(t *testing.T) {
	g, err := user.LookupGroupId(strconv.Itoa(os.Getegid()))
	if err != nil {
		t.Skipf("the test's own group has no name: %v", err)
	}
	dir := t.TempDir()
	configured := []string{filepath.Join(dir, "a.token"), filepath.Join(dir, "b.token")}
	run := func(files []string, args ...string) (string, error) {
		var out bytes.Buffer
		app := &cli.App{Name: "x", Writer: &out, ErrWriter: &out, ExitErrHandler: func(*cli.Context, error) {},
			Commands: []*cli.Command{Command(Spec{Name: "gen-token", What: "a token", Group: g.Name,
				Files: func(*cli.Context) ([]string, error) { return files, nil }})}}
		err := app.Run(append([]string{"x", "gen-token"}, args...))
		return out.String(), err
	}
	out, err := run(configured)
	if err != nil || strings.Count(out, ": written (root:"+g.Name+" 0640)") != 2 {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	before, _ := os.ReadFile(configured[0])
	out, err = run(configured)
	if err != nil || strings.Count(out, ": exists, kept") != 2 {
		t.Errorf("second run: %v\n%s", err, out)
	}
	if after, _ := os.ReadFile(configured[0]); !bytes.Equal(before, after) {
		t.Errorf("the second run replaced the secret")
	}
	if out, err = run(configured, "--force", "--file", configured[0]); err != nil || !strings.Contains(out, "a.token: written") {
		t.Errorf("--force --file: %v\n%s", err, out)
	}
	if after, _ := os.ReadFile(configured[0]); bytes.Equal(before, after) {
		t.Errorf("--force kept the old secret")
	}
	if _, err := run(nil); err == nil || !strings.Contains(err.Error(), "--file") {
		t.Errorf("no file configured: %v, want an error naming --file", err)
	}
	_, err = run(configured, "extra")
	if cliexit.CodeOf(err) != cliexit.ExitUsage {
		t.Errorf("an argument: %v, want a usage error", err)
	}
}
