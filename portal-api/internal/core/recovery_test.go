package core

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/api"
)

// FuzzRecoveryOf: whatever reclaimd answers, counting it never panics,
// gives no negative count or GPU-hours, and a tenant's admin is given no
// count of an account outside their tenant. Seeded with the answers of
// reclaimd's own server.
func FuzzRecoveryOf(f *testing.F) {
	seed := func(file string) []byte {
		b, err := os.ReadFile(reclaimdAnswers + file)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add(seed("decisions.json"), seed("failures.json"), seed("nodes-health.json"))
	f.Add([]byte(`{"decisions":[{"job_id":1,"account":"globex-rl","action":"cancel","outcome":"done","gpus":[{},{}],"evidence":{"JobEnd":"9999-01-01T00:00:00Z"},"decided_at":"2026-11-29T20:00:00Z"}]}`),
		[]byte(`{"failures":[{"job_id":-1,"account":"","class":"","failed_at":"0001-01-01T00:00:00Z"}]}`), []byte(`{"nodes":null}`))
	m, err := tenantmap.Load(testdata + "tenants.json")
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 20, 24, 32, 0, time.UTC)
	f.Fuzz(func(t *testing.T, decisions, failures, health []byte) {
		var d struct {
			Decisions []reclaimRecord `json:"decisions"`
		}
		var fs struct {
			Failures []failureRecord `json:"failures"`
		}
		var h struct {
			Nodes []nodeHealth `json:"nodes"`
		}
		if json.Unmarshal(decisions, &d) != nil || json.Unmarshal(failures, &fs) != nil || json.Unmarshal(health, &h) != nil {
			return
		}
		rd := &reclaimdRead{at: now, records: d.Decisions, failures: fs.Failures, nodes: h.Nodes}
		for _, admin := range []bool{true, false} {
			co := api.ClusterOverview{Tenants: []api.TenantOverview{}}
			recoveryOf(rd, m, admin, map[string]bool{"acme": true}, now, &co)
			for _, w := range []*api.RecoveryWindow{co.Recovery.Last24h, co.Recovery.Last7d} {
				if w.ReclaimActions < 0 || w.GpuHoursReclaimed < 0 || w.GpuHoursReclaimed != w.GpuHoursReclaimed || w.JobsFailed < 0 || w.JobsRequeued > w.JobsFailed {
					t.Fatalf("window %+v", w)
				}
			}
			if !admin {
				if co.Recovery.NodesDrained != nil {
					t.Fatal("a tenant's admin sees the drained nodes")
				}
				for _, to := range co.Tenants {
					if to.Tenant != "acme" {
						t.Fatalf("a tenant's admin sees tenant %q", to.Tenant)
					}
				}
			}
		}
	})
}

// TestPages: a list longer than reclaimd gives at once is read page by
// page from the second of each page's last item, each item once; items
// of one second that fill a whole page end the read instead of looping.
func TestPages(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	type item struct {
		id int64
		at time.Time
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	tests := map[string]struct {
		items     []item
		wantIDs   []int64
		wantCalls int
	}{
		"short": {items: []item{{1, t0}, {2, t0.Add(ms(10))}}, wantIDs: []int64{1, 2}, wantCalls: 1},
		"three pages, seconds shared across pages": {
			items: []item{{1, t0}, {2, t0.Add(ms(500))}, {3, t0.Add(time.Second + ms(1))}, {4, t0.Add(time.Second + ms(2))},
				{5, t0.Add(2 * time.Second)}, {6, t0.Add(3 * time.Second)}, {7, t0.Add(3*time.Second + ms(900))}, {8, t0.Add(5 * time.Second)}},
			wantIDs: []int64{1, 2, 3, 4, 5, 6, 7, 8}, wantCalls: 5,
		},
		"a second fuller than a page": {
			items:   []item{{1, t0}, {2, t0.Add(ms(1))}, {3, t0.Add(ms(2))}, {4, t0.Add(ms(3))}, {5, t0.Add(ms(4))}},
			wantIDs: []int64{1, 2, 3}, wantCalls: 2,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			calls := 0
			got, err := pages(t0, 3, func(from time.Time) ([]item, error) {
				calls++
				if from != from.Truncate(time.Second) {
					return nil, fmt.Errorf("since %s is not in whole seconds", from)
				}
				var out []item
				for _, it := range tc.items {
					if !it.at.Before(from) && len(out) < 3 {
						out = append(out, it)
					}
				}
				return out, nil
			}, func(it item) (int64, time.Time) { return it.id, it.at })
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, it := range got {
				ids = append(ids, it.id)
			}
			if diff := cmp.Diff(tc.wantIDs, ids); diff != "" || calls != tc.wantCalls {
				t.Errorf("ids (-want +got):\n%s\ncalls %d, want %d", diff, calls, tc.wantCalls)
			}
		})
	}
}
