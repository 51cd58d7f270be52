package sacctmgr

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// show prints an association the way the expectations below are written.
func show(a slurmrest.Association) string {
	opt := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("%s/%s/%s/%s parent=%s share=%d qos=%s def=%s grp=%s mins=%s max=%s jobs=%s prio=%s default=%t",
		a.Cluster, a.Account, a.User, a.Partition, a.Parent, a.Fairshare, strings.Join(a.QOS, ","), a.DefaultQOS,
		a.GrpTRES, a.GrpTRESMin, a.MaxTRESJob, opt(a.MaxJobs), opt(a.Priority), a.IsDefault)
}

// TestResolve resolves the listings in testdata (see its README for the
// sacctmgr commands that made the tree). Every value below comes from
// those commands: rdt-p's fair-share "parent" is 2147483647; user
// associations inherit QOS, default QOS, priority and per-job TRES from
// their account's association (rdt's own; rdt-p's, which it inherits from
// rdt), keep their own where they set one (rdu1's gres/gpu=1 per job,
// rdu2's QOS normal in rdt-p), and are defaults as listed in defaults.txt.
func TestResolve(t *testing.T) {
	all, err := ParseAssociations(readTestdata(t, "all.txt"))
	if err != nil {
		t.Fatal(err)
	}
	accounts, err := ParseAssociations(readTestdata(t, "accounts.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := ParseDefaults(readTestdata(t, "defaults.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Resolve(all, accounts, defaults)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sbench/root// parent= share=1 qos=normal def= grp= mins= max= jobs=- prio=- default=false",
		"sbench/root/root/ parent= share=1 qos=normal def= grp= mins= max= jobs=- prio=- default=true",
		"sbench/rdt// parent=root share=30 qos=normal,rdq def=rdq grp= mins= max=cpu=4,gres/gpu=2 jobs=- prio=7 default=false",
		"sbench/rdt/rdu1/ parent= share=1 qos=normal,rdq def=rdq grp= mins= max=cpu=4,gres/gpu=1 jobs=- prio=7 default=true",
		"sbench/rdt/rdu2/gpu parent= share=1 qos=normal,rdq def=rdq grp= mins= max=cpu=4,gres/gpu=2 jobs=- prio=7 default=false",
		"sbench/rdt-p// parent=rdt share=2147483647 qos=normal,rdq def=rdq grp=gres/gpu=3 mins=gres/gpu=600 max=cpu=4,gres/gpu=2 jobs=5 prio=7 default=false",
		"sbench/rdt-p/rdu1/ parent= share=1 qos=normal,rdq def=rdq grp= mins= max=cpu=4,gres/gpu=2 jobs=- prio=7 default=false",
		"sbench/rdt-p/rdu2/ parent= share=1 qos=normal def=normal grp= mins= max=cpu=4,gres/gpu=2 jobs=- prio=7 default=true",
	}
	if len(got) != len(want) {
		t.Fatalf("%d associations, want %d", len(got), len(want))
	}
	for i, a := range got {
		if s := show(a); s != want[i] {
			t.Errorf("association %d:\n got  %s\n want %s", i, s, want[i])
		}
	}
	// The inherited lists are copies: changing one association's leaves
	// its account's alone.
	got[3].QOS[0] = "changed"
	if got[2].QOS[0] != "normal" {
		t.Errorf("a user association shares its QOS list with its account's")
	}
}

func TestResolveChangedBetweenListings(t *testing.T) {
	all, _ := ParseAssociations(readTestdata(t, "all.txt"))
	accounts, _ := ParseAssociations(readTestdata(t, "accounts.txt"))
	withoutRdt := append(all[:2:2], all[3:]...) // all.txt's lines but rdt's own
	for name, tc := range map[string]struct {
		all, accounts []slurmrest.Association
		want          string
	}{
		"an account association missing":        {all, accounts[:2], "account association rdt-p on sbench is in one sacctmgr listing and not the other"},
		"a user association's account missing":  {withoutRdt, append(accounts[:1:1], accounts[2]), "user association rdt/rdu1 on sbench: no association of account rdt"},
		"a user association among the accounts": {all, append(accounts[:3:3], all[1]), "listed user association root/root among the account associations"},
		"nothing listed":                        {nil, nil, "sacctmgr listed no associations, not even root's"},
		"no account listed":                     {all, nil, "sacctmgr listed no associations, not even root's"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Resolve(tc.all, tc.accounts, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	line := "sbench|rdt|rdu1|||1|normal|normal|gres/gpu=8|||2|7"
	for name, tc := range map[string]struct {
		in, want string
	}{
		"too few fields":      {"sbench|rdt|rdu1\n", "line 1: 3 fields, want 13"},
		"a field too many":    {line + "|\n", "line 1: 14 fields, want 13"},
		"second line":         {line + "\n" + strings.Replace(line, "|1|", "|x|", 1), `line 2: field Fairshare "x": not a number or "parent"`},
		"no account":          {strings.Replace(line, "|rdt|", "||", 1), "field Account is empty"},
		"a TRES without =":    {strings.Replace(line, "gres/gpu=8", "gres/gpu", 1), "field GrpTRES"},
		"a GrpJobs of words":  {strings.Replace(line, "|2|7", "|two|7", 1), `field GrpJobs "two": not a number`},
		"an empty Fairshare":  {strings.Replace(line, "|||1|", "||||", 1), `field Fairshare "": not a number or "parent"`},
		"a Priority of words": {strings.Replace(line, "|2|7", "|2|high", 1), `field Priority "high": not a number`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseAssociations([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := ParseDefaults([]byte("sbench||rdu1|\n")); err == nil || !strings.Contains(err.Error(), "line 1: a default association needs an account and a user") {
		t.Errorf("default without an account: %v", err)
	}
	if _, err := ParseDefaults([]byte("sbench|rdt|rdu1\n")); err == nil || !strings.Contains(err.Error(), "3 fields, want 4") {
		t.Errorf("short default line: %v", err)
	}
	if got, err := ParseAssociations([]byte("\n\n")); err != nil || len(got) != 0 {
		t.Errorf("empty listing: %v %v, want none and no error", got, err)
	}
}

// FuzzParseAssociations: any input parses or fails with an error naming a
// line, and never panics; what parses has an account on every row.
func FuzzParseAssociations(f *testing.F) {
	for _, name := range []string{"all.txt", "accounts.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("c|a||||parent|||||||\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		list, err := ParseAssociations(in)
		if err != nil {
			if !strings.Contains(err.Error(), "sacctmgr output, line ") {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		for _, a := range list {
			if a.Account == "" {
				t.Fatalf("parsed an association without an account: %+v", a)
			}
		}
	})
}

func FuzzParseDefaults(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "defaults.txt"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := ParseDefaults(in)
		if err != nil {
			if !strings.Contains(err.Error(), "sacctmgr output, line ") {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		for k := range m {
			if k.account == "" || k.user == "" {
				t.Fatalf("parsed a default without account or user: %+v", k)
			}
		}
	})
}

// listings is a Runner at the exec edge that answers the three listings
// of Associations from testdata, or as a test says; a listing told to
// fail fails at once, the others wait until their context ends, as a
// slow sacctmgr would.
type listings struct {
	mu      sync.Mutex
	args    []string
	fail    string // a listing ("wopinfo", "users=", "onlydefaults") that fails
	garbage string // a listing that prints garbage
}

func (l *listings) Run(ctx context.Context, _ string, args, _ []string) ([]byte, []byte, error) {
	joined := strings.Join(args, " ")
	l.mu.Lock()
	l.args = append(l.args, joined)
	l.mu.Unlock()
	var name, file string
	switch {
	case strings.Contains(joined, "onlydefaults"):
		name, file = "onlydefaults", "defaults.txt"
	case strings.Contains(joined, "users="):
		name, file = "users=", "accounts.txt"
	default:
		name, file = "wopinfo", "all.txt"
	}
	if name == l.fail {
		return nil, []byte("sacctmgr: error: Problem talking to the database: Connection refused"), errors.New("exit status 1")
	}
	if l.fail != "" {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	}
	if name == l.garbage {
		return []byte("Problem talking to the database\n"), nil, nil
	}
	b, err := os.ReadFile(filepath.Join("testdata", file))
	return b, nil, err
}

func TestAssociations(t *testing.T) {
	r := &listings{}
	c := &Command{Path: "sacctmgr", Runner: r}
	got, err := c.Associations(context.Background())
	if err != nil || len(got) != 8 || show(got[3]) != "sbench/rdt/rdu1/ parent= share=1 qos=normal,rdq def=rdq grp= mins= max=cpu=4,gres/gpu=1 jobs=- prio=7 default=true" {
		t.Fatalf("Associations: %v, %d associations (want the 8 of TestResolve)", err, len(got))
	}
	slices.Sort(r.args)
	want := []string{
		"-n -P show associations onlydefaults wopinfo format=Cluster,Account,User,Partition",
		"-n -P show associations where users= format=" + strings.Join(assocFields, ","),
		"-n -P show associations wopinfo format=" + strings.Join(assocFields, ","),
	}
	if !slices.Equal(r.args, want) || c.Runs() != 3 {
		t.Errorf("ran %d times:\n%s\nwant:\n%s", c.Runs(), strings.Join(r.args, "\n"), strings.Join(want, "\n"))
	}
	for name, tc := range map[string]struct {
		r    *listings
		want string
	}{
		"a listing that fails stops the others, and is the error": {&listings{fail: "users="}, "Connection refused"},
		"garbage names the listing and the line":                  {&listings{garbage: "onlydefaults"}, "sacctmgr show associations onlydefaults wopinfo format=Cluster,Account,User,Partition: sacctmgr output, line 1: 1 fields, want 4"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := (&Command{Runner: tc.r}).Associations(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "context canceled") {
				t.Errorf("error %v, want %q and not the cancel", err, tc.want)
			}
		})
	}
}
