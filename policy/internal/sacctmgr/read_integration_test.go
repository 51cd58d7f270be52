//go:build integration

package sacctmgr

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
)

// TestAssociationsMatchREST reads every association of the test bed's
// slurmdbd through sacctmgr and through slurmrestd and wants the same
// list. Before, it adds a tree that exercises what the sacctmgr read
// works out itself (see read.go): a tenant account with a priority, a
// per-job TRES limit, a QOS list and a default QOS that its children
// inherit; a project account whose fair-share is "parent", with a GPU
// limit, running-job limit and GPU-minute budget; a user in both (the
// tenant its default) with a per-job limit of its own that is merged with
// the inherited one; a second user with a QOS list of its own and an
// association in one partition only.
func TestAssociationsMatchREST(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		p := fmt.Sprintf("rd%04d", rand.IntN(10000))
		tenant, project, u1, u2, qos := p+"t", p+"t-p", p+"u1", p+"u2", p+"q"
		sm := func(args ...string) {
			t.Helper()
			out, err := exec.CommandContext(ctx, filepath.Join(b.Bin, "sacctmgr"), append([]string{"-i"}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("sacctmgr %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		t.Cleanup(func() {
			for _, args := range [][]string{{"delete", "user", u1 + "," + u2}, {"delete", "account", project}, {"delete", "account", tenant}, {"delete", "qos", qos}} {
				_ = exec.Command(filepath.Join(b.Bin, "sacctmgr"), append([]string{"-i"}, args...)...).Run()
			}
		})
		sm("add", "qos", qos)
		sm("add", "account", tenant, "Cluster="+b.Cluster, "Parent=root", "Fairshare=30", "Priority=7",
			"MaxTRES=cpu=4,gres/gpu=2", "QOS=normal,"+qos, "DefaultQOS="+qos)
		sm("add", "account", project, "Cluster="+b.Cluster, "Parent="+tenant, "Fairshare=parent",
			"GrpTRES=gres/gpu=3", "GrpJobs=5", "GrpTRESMins=gres/gpu=600")
		sm("add", "user", u1, "Cluster="+b.Cluster, "Account="+tenant, "DefaultAccount="+tenant, "MaxTRES=gres/gpu=1")
		sm("add", "user", u1, "Cluster="+b.Cluster, "Account="+project)
		sm("add", "user", u2, "Cluster="+b.Cluster, "Account="+project, "DefaultAccount="+project, "QOS=normal", "DefaultQOS=normal")
		sm("add", "user", u2, "Cluster="+b.Cluster, "Account="+tenant, "Partition="+b.Partition)

		rest, err := b.Client(t).Associations(ctx, slurmrest.AssociationFilter{})
		if err != nil {
			t.Fatal(err)
		}
		tokens := &slurmrest.FileToken{Path: b.TokenFile}
		cmd := &Command{Path: filepath.Join(b.Bin, "sacctmgr"),
			Token: func(ctx context.Context) (string, error) { return tokens.Token(ctx, b.AdminUser) }}
		got, err := cmd.Associations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := cmd.Runs(); n != 3 {
			t.Errorf("%d sacctmgr runs, want 3", n)
		}
		want := index(t, "slurmrestd", rest)
		have := index(t, "sacctmgr", got)
		for k, w := range want {
			h, ok := have[k]
			switch {
			case !ok:
				t.Errorf("%s: read through slurmrestd, not through sacctmgr: %s", k, w)
			case h != w:
				t.Errorf("%s:\n  sacctmgr   %s\n  slurmrestd %s", k, h, w)
			}
		}
		for k, h := range have {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: read through sacctmgr, not through slurmrestd: %s", k, h)
			}
		}
		// The tree above is among them, as set.
		for k, v := range map[string]string{
			b.Cluster + "/" + tenant + "//":                         "parent=root share=30 qos=normal," + qos + " def=" + qos + " grp= mins= max=cpu=4,gres/gpu=2 jobs=- prio=7 default=n/a",
			b.Cluster + "/" + project + "//":                        fmt.Sprintf("parent=%s share=%d qos=normal,%s def=%s grp=gres/gpu=3 mins=gres/gpu=600 max=cpu=4,gres/gpu=2 jobs=5 prio=7 default=n/a", tenant, fairshareParent, qos, qos),
			b.Cluster + "/" + tenant + "/" + u1 + "/":               "parent= share=1 qos=normal," + qos + " def=" + qos + " grp= mins= max=cpu=4,gres/gpu=1 jobs=- prio=7 default=true",
			b.Cluster + "/" + project + "/" + u2 + "/":              "parent= share=1 qos=normal def=normal grp= mins= max=cpu=4,gres/gpu=2 jobs=- prio=7 default=true",
			b.Cluster + "/" + tenant + "/" + u2 + "/" + b.Partition: "parent= share=1 qos=normal," + qos + " def=" + qos + " grp= mins= max=cpu=4,gres/gpu=2 jobs=- prio=7 default=false",
		} {
			if have[k] != v {
				t.Errorf("%s through sacctmgr:\n  got  %s\n  want %s", k, have[k], v)
			}
		}
		t.Logf("%d associations read both ways", len(want))
	})
}

// index prints each association's fields, the lists sorted, by
// cluster/account/user/partition. IsDefault is printed for user
// associations only: Slurm 24.11's slurmrestd reports every account
// association as a default, 26.05's none, and sacctmgr none; only a
// user's default means anything.
func index(t *testing.T, how string, list []slurmrest.Association) map[string]string {
	t.Helper()
	m := make(map[string]string, len(list))
	for _, a := range list {
		k := a.Cluster + "/" + a.Account + "/" + a.User + "/" + a.Partition
		if _, dup := m[k]; dup {
			t.Errorf("%s lists %s twice", how, k)
		}
		q := slices.Sorted(slices.Values(a.QOS))
		opt := func(p *int64) string {
			if p == nil {
				return "-"
			}
			return fmt.Sprint(*p)
		}
		def := fmt.Sprint(a.IsDefault)
		if a.User == "" {
			def = "n/a"
		}
		m[k] = fmt.Sprintf("parent=%s share=%d qos=%s def=%s grp=%s mins=%s max=%s jobs=%s prio=%s default=%s",
			a.Parent, a.Fairshare, strings.Join(q, ","), a.DefaultQOS, a.GrpTRES, a.GrpTRESMin, a.MaxTRESJob, opt(a.MaxJobs), opt(a.Priority), def)
	}
	return m
}
