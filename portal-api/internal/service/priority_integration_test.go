//go:build integration

package service

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// bedPriorityWeights reads the bed's priority/multifactor settings from
// `scontrol show config`, as an admin copies them into priority_weights.
func bedPriorityWeights(t *testing.T, b *testbed.Bed) *PriorityWeights {
	t.Helper()
	out, err := exec.CommandContext(testbed.Context(t), b.Scontrol, "show", "config").Output()
	if err != nil {
		t.Fatalf("scontrol show config: %v", err)
	}
	w := &PriorityWeights{TRES: map[string]float64{}}
	num := func(v string) float64 {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("scontrol show config: %q is not a number", v)
		}
		return n
	}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "PriorityType":
			if v != "priority/multifactor" {
				t.Skipf("the bed's PriorityType is %s", v)
			}
		case "PriorityWeightAge":
			w.Age = num(v)
		case "PriorityWeightAssoc":
			w.Assoc = num(v)
		case "PriorityWeightFairShare":
			w.Fairshare = num(v)
		case "PriorityWeightJobSize":
			w.JobSize = num(v)
		case "PriorityWeightPartition":
			w.Partition = num(v)
		case "PriorityWeightQOS":
			w.QOS = num(v)
		case "PriorityWeightTRES":
			for _, item := range strings.Split(v, ",") {
				if name, weight, ok := strings.Cut(item, "="); ok {
					w.TRES[strings.ToLower(name)] = num(weight)
				}
			}
		case "PriorityFavorSmall":
			w.FavorSmall = strings.EqualFold(v, "yes")
		case "PriorityMaxAge", "PriorityCalcPeriod":
			d, err := slurmDuration(v)
			if err != nil {
				t.Fatalf("scontrol show config: %s: %v", k, err)
			}
			if k == "PriorityMaxAge" {
				w.MaxAge = d
			} else {
				w.CalcPeriod = d
			}
		}
	}
	return w
}

// setPriorityConf sets keys of the bed's slurm.conf and reconfigures
// slurmctld; the test's end puts the file back and reconfigures again.
func setPriorityConf(t *testing.T, b *testbed.Bed, keys map[string]string) {
	t.Helper()
	orig, err := os.ReadFile(b.SlurmConf)
	if err != nil {
		t.Fatal(err)
	}
	reconfigure := func() error {
		out, err := exec.Command(b.Scontrol, "reconfigure").CombinedOutput()
		if err != nil {
			return fmt.Errorf("scontrol reconfigure: %w: %s", err, out)
		}
		return nil
	}
	t.Cleanup(func() {
		if err := os.WriteFile(b.SlurmConf, orig, 0o644); err != nil {
			t.Errorf("put slurm.conf back: %v", err)
		}
		if err := reconfigure(); err != nil {
			t.Error(err)
		}
	})
	var lines []string
	for _, line := range strings.Split(strings.TrimRight(string(orig), "\n"), "\n") {
		k, _, _ := strings.Cut(line, "=")
		if _, ok := keys[k]; !ok {
			lines = append(lines, line)
		}
	}
	for k, v := range keys {
		lines = append(lines, k+"="+v)
	}
	if err := os.WriteFile(b.SlurmConf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := reconfigure(); err != nil {
		t.Fatal(err)
	}
}

// slurmDuration reads Slurm's [days-]hh:mm:ss.
func slurmDuration(s string) (time.Duration, error) {
	var days int64
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", s, err)
		}
		days, s = n, rest
	}
	var h, m, sec int64
	if _, err := fmt.Sscanf(s, "%d:%d:%d", &h, &m, &sec); err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	return time.Duration(((days*24+h)*60+m)*60+sec) * time.Second, nil
}

// sprioRow is one job of `sprio -l -h`: its priority and weighted factors.
type sprioRow struct {
	priority float64
	factors  map[string]float64 // age, assoc, fairshare, job_size, partition, qos, nice, tres:<key>
}

// sprio runs the bed's `sprio -l -h`, whose columns are JOBID PARTITION
// USER ACCOUNT PRIORITY SITE AGE ASSOC FAIRSHARE JOBSIZE PARTITION
// QOSNAME QOS NICE TRES.
func sprio(t *testing.T, b *testbed.Bed) map[int64]sprioRow {
	t.Helper()
	cmd := exec.CommandContext(testbed.Context(t), filepath.Join(b.Bin, "sprio"), "-l", "-h")
	if _, err := os.Stat(cmd.Path); err != nil {
		// A bed made before testbed.sh put sprio in its bin/: the same
		// command as the wrapper runs.
		cmd = exec.CommandContext(testbed.Context(t), "chroot", b.Root, "sprio", "-l", "-h")
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sprio -l -h: %v: %s", err, out)
	}
	rows := map[int64]sprioRow{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 14 {
			continue
		}
		id, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("sprio: %q", line)
		}
		n := func(i int) float64 {
			x, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				t.Fatalf("sprio: column %d of %q", i, line)
			}
			return x
		}
		r := sprioRow{priority: n(4), factors: map[string]float64{"age": n(6), "assoc": n(7), "fairshare": n(8),
			"job_size": n(9), "partition": n(10), "qos": n(12), "nice": n(13)}}
		if len(f) > 14 {
			for _, item := range strings.Split(f[14], ",") {
				if k, v, ok := strings.Cut(item, "="); ok {
					x, _ := strconv.ParseFloat(v, 64)
					r.factors["tres:"+strings.ToLower(k)] = x
				}
			}
		}
		rows[id] = r
	}
	return rows
}

// TestIntegrationPriorityFactors: the factors GET /v1/queue works out
// from slurmrestd's records and the bed's slurm.conf weights are those
// sprio shows, job by job (sprio rounds each to a whole number), for
// jobs that differ in GPUs, nice value and QOS priority, with every
// factor weighted, and they add up to each job's priority.
func TestIntegrationPriorityFactors(t *testing.T) {
	testbed.EachExclusive(t, func(t *testing.T, b *testbed.Bed) {
		b.DumpLogsOnFailure(t)
		alice := b.Users[0]
		// The beds weigh fair-share, age, QOS and GPUs; for the test the
		// other factors too, and an age that fills in a minute, so that
		// each factor is compared (slurm.conf put back after).
		setPriorityConf(t, b, map[string]string{"PriorityWeightJobSize": "2000", "PriorityWeightPartition": "3000",
			"PriorityWeightAssoc": "700", "PriorityMaxAge": "00:01:00"})
		weights := bedPriorityWeights(t, b)
		sacctmgr := func(args ...string) {
			t.Helper()
			out, err := exec.CommandContext(testbed.Context(t), filepath.Join(b.Bin, "sacctmgr"), append([]string{"-i"}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("sacctmgr %v: %v: %s", args, err, out)
			}
		}
		// A QOS of its own with a priority, the only one with one: its
		// factor is 1.
		qos := strings.ReplaceAll(testbed.Unique("prio"), "_", "-")
		sacctmgr("add", "qos", qos, "priority=100")
		t.Cleanup(func() {
			exec.Command(filepath.Join(b.Bin, "sacctmgr"), "-i", "modify", "user", alice, "where", "account="+b.Account, "set", "qos-="+qos).Run()
			exec.Command(filepath.Join(b.Bin, "sacctmgr"), "-i", "delete", "qos", qos).Run()
		})
		sacctmgr("modify", "user", alice, "where", "account="+b.Account, "set", "qos+="+qos)
		// An association priority, the only one: its factor is 1.
		t.Cleanup(func() {
			exec.Command(filepath.Join(b.Bin, "sacctmgr"), "-i", "modify", "user", alice, "where", "account="+b.Account, "set", "priority=-1").Run()
		})
		sacctmgr("modify", "user", alice, "where", "account="+b.Account, "set", "priority=10")

		// Jobs that wait for a running one that holds every node: pending
		// and eligible, as sprio shows only those (not a job that waits
		// on a dependency).
		running := b.Sbatch(t, alice, "-N", strconv.Itoa(len(b.Nodes)), "--exclusive", "--wrap", "sleep 300")
		t.Cleanup(func() { exec.Command(filepath.Join(b.Bin, "scancel"), strconv.FormatInt(running, 10)).Run() })
		testbed.WaitJob(t, b.Client(t), running, time.Minute, "running", func(j slurmrest.Job) bool { return j.Running() })
		var pending []int64
		for _, args := range [][]string{
			{"--gres=gpu:2"},
			{"--gres=gpu:4", "--nice=5"},
			{"--gres=gpu:1", "--qos=" + qos},
			{"--gres=gpu:8", "--qos=" + qos, "--nice=100"},
		} {
			id := b.Sbatch(t, alice, append(args, "--wrap", "true")...)
			pending = append(pending, id)
			t.Cleanup(func() { exec.Command(filepath.Join(b.Bin, "scancel"), strconv.FormatInt(id, 10)).Run() })
		}

		// slurmctld set each priority at submission, with no age; wait for
		// its next pass (PriorityCalcPeriod, a minute on the beds), which
		// adds the age of the time the jobs have waited since.
		c := b.Client(t)
		first, err := c.Job(testbed.Context(t), pending[0])
		if err != nil {
			t.Fatal(err)
		}
		testbed.WaitJob(t, c, pending[0], 2*time.Minute, "priority computed again", func(j slurmrest.Job) bool { return j.Priority != first.Priority })
		st, err := store.Open(testbed.Context(t), filepath.Join(t.TempDir(), "portal.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		tok, _, err := st.CreateToken(testbed.Context(t), alice, "", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		signer, err := slurmrest.NewKeySigner(b.JWTKey, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		p := cluster.New(cluster.Config{Name: "bed", Slurm: slurmrest.Config{URL: b.URL, User: b.AdminUser, Tokens: signer},
			Interval: time.Second, StaleAfter: time.Minute, Metrics: cluster.NewMetrics(reg)})
		m := tenantsOf(t, b, alice, b.Users[1])
		srv := httptest.NewServer(New(Config{Clusters: []Cluster{{Poller: p, Tenants: func() *tenantmap.Map { return m }, Priority: weights}},
			Auth: auth.New(auth.Config{Tokens: st, TokenPrefix: store.TokenPrefix}), Store: st, Registry: reg}))
		defer srv.Close()

		type queueJob struct {
			ID       int64          `json:"id"`
			Priority int64          `json:"priority"`
			Factors  map[string]any `json:"factors"`
		}
		// slurmctld recomputes priorities every PriorityCalcPeriod: a pass
		// between the poll and sprio makes them differ, so try again.
		var last string
		for try := 0; try < 5; try++ {
			if err := p.Poll(testbed.Context(t)); err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/queue", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			rows := sprio(t, b)
			var q struct {
				Groups []struct{ Jobs []queueJob }
			}
			if err := json.Unmarshal(body, &q); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			got := map[int64]queueJob{}
			for _, g := range q.Groups {
				for _, j := range g.Jobs {
					got[j.ID] = j
				}
			}
			var problems []string
			for _, id := range pending {
				j, ok := got[id]
				r, inSprio := rows[id]
				if !ok || !inSprio {
					problems = append(problems, fmt.Sprintf("job %d: in the queue %v, in sprio %v", id, ok, inSprio))
					continue
				}
				if float64(j.Priority) != r.priority {
					problems = append(problems, fmt.Sprintf("job %d: priority %d, sprio %g", id, j.Priority, r.priority))
					continue
				}
				if c, _ := j.Factors["consistent"].(bool); !c {
					problems = append(problems, fmt.Sprintf("job %d: factors not consistent: %v", id, j.Factors))
				}
				mine := map[string]float64{}
				for k, v := range j.Factors {
					switch v := v.(type) {
					case float64:
						mine[k] = v
					case map[string]any:
						for tk, tv := range v {
							x, _ := tv.(float64)
							mine["tres:"+tk] = x
						}
					}
				}
				for k, want := range r.factors {
					// sprio prints each weighted factor rounded to a whole
					// number; the age factor is known to within a point
					// (see PriorityWeights.factors).
					tolerance := 0.5
					if k == "age" {
						tolerance = 1
					}
					if math.Abs(mine[k]-want) > tolerance+1e-6 {
						problems = append(problems, fmt.Sprintf("job %d: %s = %g, sprio %g", id, k, mine[k], want))
					}
				}
			}
			for _, id := range pending {
				if rows[id].factors["age"] == 0 {
					problems = append(problems, fmt.Sprintf("job %d: no age in sprio: the test compares no age factor", id))
				}
			}
			if len(problems) == 0 {
				t.Logf("factors of %d jobs match sprio: %s", len(pending), body)
				return
			}
			last = strings.Join(problems, "\n") + "\n" + string(body)
			time.Sleep(2 * time.Second)
		}
		t.Errorf("the portal's factors are not sprio's:\n%s", last)
	})
}
