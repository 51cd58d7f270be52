package core

import (
	"fmt"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
)

// The jobs of the two fake clusters, as the JSON API's tests have them
// (internal/service): gpu1 replays Slurm 26.05, gpu2 24.11.
var (
	gpu1Jobs = []clustertest.Job{
		{ID: 910101, User: "mem", Account: "acme-llm", Name: "llm-train", QOS: "train"},
		{ID: 910102, User: "mem2", Account: "acme-llm", State: "PENDING", Reason: "Priority", QOS: "batch"},
		{ID: 910103, User: "vmem", Account: "acme-vision", State: "PENDING", Reason: "QOSGrpGRES", Name: "vision-secret"},
		{ID: 910104, User: "gmem", Account: "globex-rl", Name: "globex-secret"},
		{ID: 910105, User: "gmem", Account: "globex-rl", State: "PENDING", Reason: "Resources"},
		{ID: 910106, User: "stranger", Account: "orphan", Name: "orphan-job"},
	}
	gpu2Jobs = []clustertest.Job{
		{ID: 920201, User: "mem", Account: "acme-llm", State: "PENDING", Reason: "Priority"},
		{ID: 920202, User: "gmem", Account: "globex-rl"},
	}
)

// testdata is the JSON API's test data: the tenant map, job policy and
// templates its tests and these share.
const testdata = "../service/testdata/"

// harness is a core over the two fake clusters, polled once.
type harness struct {
	server  *Core
	beds    map[string]*clustertest.Bed
	pollers map[string]*cluster.Poller
	now     time.Time
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{beds: map[string]*clustertest.Bed{}, pollers: map[string]*cluster.Poller{}, now: time.Unix(1795983872, 0)}
	m, err := tenantmap.Load(testdata + "tenants.json")
	if err != nil {
		t.Fatal(err)
	}
	var clusters []Cluster
	for _, c := range []struct {
		name, release string
		jobs          []clustertest.Job
	}{{"gpu1", "26.05", gpu1Jobs}, {"gpu2", "24.11", gpu2Jobs}} {
		bed := clustertest.New(t, c.release, c.jobs...)
		p := cluster.New(cluster.Config{Name: c.name, Slurm: slurmrest.Config{URL: bed.URL, Tokens: slurmrest.StaticToken("t")},
			Interval: time.Second, StaleAfter: time.Minute, Now: func() time.Time { return h.now }})
		if err := p.Poll(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.beds[c.name], h.pollers[c.name] = bed, p
		clusters = append(clusters, Cluster{Poller: p, Tenants: func() *tenantmap.Map { return m }})
	}
	h.server = New(Config{Clusters: clusters, Now: func() time.Time { return h.now }})
	return h
}

// benchMap is a tenant map of 50 tenants of 5 projects of 2 members.
func benchMap(b *testing.B) (*tenantmap.Map, []string, map[string]string) {
	m := &tenantmap.Map{APIVersion: tenantmap.APIVersion, Kind: tenantmap.Kind, Cluster: "bench", Admins: []string{}}
	var users []string
	accountOf := map[string]string{}
	for ti := range 50 {
		t := tenantmap.Tenant{Name: fmt.Sprintf("t%02d", ti), Account: fmt.Sprintf("t%02d", ti), Admins: []string{}}
		for pi := range 5 {
			acct := fmt.Sprintf("t%02d-p%d", ti, pi)
			p := tenantmap.Project{Name: fmt.Sprintf("p%d", pi), Account: acct, Classes: []string{}}
			for ui := range 2 {
				u := fmt.Sprintf("u%02d%d%d", ti, pi, ui)
				p.Members = append(p.Members, tenantmap.Member{User: u, Role: tenantmap.RoleMember, Default: true})
				users = append(users, u)
				accountOf[u] = acct
			}
			t.Projects = append(t.Projects, p)
		}
		m.Tenants = append(m.Tenants, t)
	}
	data, err := m.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	parsed, err := tenantmap.Parse(data)
	if err != nil {
		b.Fatal(err)
	}
	return parsed, users, accountOf
}

// reclaimdAnswers are the answers of reclaimd's own API server over a
// real store, written by reclaimd's TestAPIAnswersForThePortal.
const reclaimdAnswers = "../../../reclaimd/internal/controller/testdata/api/"
