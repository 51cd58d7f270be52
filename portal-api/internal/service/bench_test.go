package service

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/store"
	"github.com/strata-hpc/strata/portal-api/internal/web"
)

// benchAdmin is tenant ti's admin, who reads its operator screen.
func benchAdmin(ti int) string { return fmt.Sprintf("a%02d", ti) }

// benchMap is 50 tenants of 5 projects of 2 members each: 500 users;
// each tenant has an admin of its own.
func benchMap(b *testing.B) (*tenantmap.Map, []string, map[string]string) {
	m := &tenantmap.Map{APIVersion: tenantmap.APIVersion, Kind: tenantmap.Kind, Cluster: "bench", Admins: []string{}}
	var users []string
	accountOf := map[string]string{}
	for ti := range 50 {
		t := tenantmap.Tenant{Name: fmt.Sprintf("t%02d", ti), Account: fmt.Sprintf("t%02d", ti), Admins: []string{benchAdmin(ti)}}
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

// BenchmarkPortalLoad is make bench-portal: two clusters (replayed Slurm
// 26.05 and 24.11) of 2,000 jobs each, 500 users with personal tokens,
// and an open-loop load of GET /v1/jobs and GET /v1/jobs/{cluster}/{id}
// at STRATA_BENCH_RATE requests a second (500) for STRATA_BENCH_SECONDS
// (60), once from one user and once from all 500, after a warm-up of
// STRATA_BENCH_WARMUP seconds (5) from all 500 that opens the client's
// connections and lets the collector settle after building the clusters
// (0: none). It prints p50 and p99 of each route and the requests
// slurmrestd got a minute in each phase (the warm-up's too, not part of
// the result): the pollers' alone, whatever the number of users. Then
// the pages: My jobs from 50 researchers and the operator screen from
// the 50 tenants' admins, each person loading the page, reading it for
// STRATA_BENCH_THINK_MS (1000) and loading it again, for
// STRATA_BENCH_SECONDS; it prints the server's time of each load (p50,
// p99) beside the client's.
func BenchmarkPortalLoad(b *testing.B) {
	rate := envInt("STRATA_BENCH_RATE", 500)
	seconds := envInt("STRATA_BENCH_SECONDS", 60)
	warmup := 5
	if v, err := strconv.Atoi(os.Getenv("STRATA_BENCH_WARMUP")); err == nil && v >= 0 {
		warmup = v
	}
	m, users, accountOf := benchMap(b)
	reg := prometheus.NewRegistry()
	metrics := cluster.NewMetrics(reg)
	var clusters []Cluster
	var pollers []*cluster.Poller
	jobsOf := map[string][]jobRef{} // user -> their jobs
	for ci, c := range []struct{ name, release string }{{"gpu1", "26.05"}, {"gpu2", "24.11"}} {
		var jobs []clustertest.Job
		for i := range 2000 {
			u := users[i%len(users)]
			j := clustertest.Job{ID: int64(100000*(ci+1) + i), User: u, Account: accountOf[u], QOS: "batch"}
			if i%4 != 0 {
				j.State, j.Reason = "PENDING", []string{"Priority", "Resources", "QOSGrpGRES", "AssocGrpGRES"}[i%4]
			}
			jobs = append(jobs, j)
			jobsOf[u] = append(jobsOf[u], jobRef{c.name, j.ID})
		}
		bed := clustertest.New(b, c.release, jobs...)
		p := cluster.New(cluster.Config{Name: c.name, Slurm: slurmrest.Config{URL: bed.URL, Tokens: slurmrest.StaticToken("t")},
			Interval: 5 * time.Second, StaleAfter: time.Minute, Metrics: metrics})
		if err := p.Poll(b.Context()); err != nil {
			b.Fatal(err)
		}
		pollers = append(pollers, p)
		clusters = append(clusters, Cluster{Poller: p, Tenants: func() *tenantmap.Map { return m }})
	}
	st, err := store.Open(b.Context(), filepath.Join(b.TempDir(), "portal.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	tokens := map[string]string{}
	for _, u := range users {
		tok, _, err := st.CreateToken(b.Context(), u, "", time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		tokens[u] = tok
	}
	apiSrv := New(Config{Clusters: clusters, Auth: auth.New(auth.Config{Tokens: st, TokenPrefix: store.TokenPrefix}),
		Store: st, RatePerSecond: 1e9, Burst: 1e9, Registry: reg})
	pages, err := web.New(web.Config{Store: st, Source: web.CoreSessionSource(apiSrv.Core(), apiSrv.SessionLaunchURL)})
	if err != nil {
		b.Fatal(err)
	}
	// The server's own time of each page request (the handler's, the
	// page session's lookup in the store included), apart from the
	// client's round trip.
	var timing atomic.Pointer[serverTimes]
	mounted := web.Mount(apiSrv, pages, "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		mounted.ServeHTTP(w, r)
		if st := timing.Load(); st != nil {
			st.add(r.URL.Path, time.Since(t0))
		}
	}))
	defer srv.Close()
	// A page session each for 50 researchers (one per tenant) and the 50
	// tenants' admins, as a sign-in would make.
	cookies := map[string]string{}
	var readers, admins []string
	for ti := range 50 {
		readers = append(readers, users[ti*10])
		admins = append(admins, benchAdmin(ti))
	}
	for _, u := range append(slices.Clone(readers), admins...) {
		tok, _, err := st.CreatePageSession(b.Context(), u, web.ViaLink, "en", time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		cookies[u] = tok
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}, Timeout: 10 * time.Second}

	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range pollers {
		wg.Go(func() { _ = p.Run(ctx) })
	}
	type result struct {
		name                  string
		list, one             []time.Duration
		sent, failed, dropped int64
		slurm                 float64
		elapsed               time.Duration
	}
	phase := func(name string, who []string, seconds int) result {
		r := result{name: name}
		var mu sync.Mutex
		before := metrics.Requests("gpu1") + metrics.Requests("gpu2")
		sem := make(chan struct{}, 512)
		// Open loop: request i is due at start + i/rate, whenever the
		// ones before it come back; one that finds 512 in flight is
		// dropped and counted.
		start := time.Now()
		every := time.Second / time.Duration(rate)
		n := rate * seconds
		var inflight sync.WaitGroup
		var failed, dropped atomic.Int64
		for i := range n {
			if d := time.Until(start.Add(time.Duration(i) * every)); d > 0 {
				time.Sleep(d)
			}
			u := who[i%len(who)]
			path := "/v1/jobs"
			if i%2 == 1 {
				js := jobsOf[u]
				j := js[(i/2)%len(js)]
				path = fmt.Sprintf("/v1/jobs/%s/%d", j.cluster, j.id)
			}
			select {
			case sem <- struct{}{}:
			default:
				dropped.Add(1)
				continue
			}
			r.sent++
			inflight.Go(func() {
				defer func() { <-sem }()
				req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
				req.Header.Set("Authorization", "Bearer "+tokens[u])
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				d := time.Since(t0)
				if err != nil || resp.StatusCode != http.StatusOK {
					failed.Add(1)
					return
				}
				mu.Lock()
				if path == "/v1/jobs" {
					r.list = append(r.list, d)
				} else {
					r.one = append(r.one, d)
				}
				mu.Unlock()
			})
		}
		inflight.Wait()
		r.elapsed = time.Since(start)
		r.failed, r.dropped = failed.Load(), dropped.Load()
		r.slurm = (metrics.Requests("gpu1") + metrics.Requests("gpu2") - before) / r.elapsed.Minutes()
		return r
	}
	b.ResetTimer()
	var results []result
	if warmup > 0 {
		results = append(results, phase("warm-up", users, warmup))
	}
	results = append(results, phase("1 user", users[:1], seconds), phase("500 users", users, seconds))
	// The pages: 50 people at once, each loading the page, reading it
	// for STRATA_BENCH_THINK_MS (1000), and loading it again.
	think := time.Duration(envInt("STRATA_BENCH_THINK_MS", 1000)) * time.Millisecond
	pagePhase := func(name, path string, who []string) pageResult {
		st := &serverTimes{by: map[string][]time.Duration{}}
		timing.Store(st)
		defer timing.Store(nil)
		r := pageResult{name: name, path: path, users: len(who)}
		var mu sync.Mutex
		var failed atomic.Int64
		start := time.Now()
		end := start.Add(time.Duration(seconds) * time.Second)
		var people sync.WaitGroup
		for i, u := range who {
			people.Go(func() {
				// Spread the first loads over the think time.
				time.Sleep(think * time.Duration(i) / time.Duration(len(who)))
				for time.Now().Before(end) {
					req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
					req.Header.Set("Cookie", web.SessionCookie+"="+cookies[u])
					t0 := time.Now()
					resp, err := client.Do(req)
					n := 0
					if err == nil {
						m, _ := io.Copy(io.Discard, resp.Body)
						n = int(m)
						resp.Body.Close()
					}
					d := time.Since(t0)
					if err != nil || resp.StatusCode != http.StatusOK {
						failed.Add(1)
					} else {
						mu.Lock()
						r.client = append(r.client, d)
						r.bytes += int64(n)
						mu.Unlock()
					}
					time.Sleep(think)
				}
			})
		}
		people.Wait()
		r.elapsed = time.Since(start)
		r.failed = failed.Load()
		r.server = st.of(path)
		return r
	}
	pageResults := []pageResult{pagePhase("jobs page", "/jobs", readers), pagePhase("operator screen", "/operator", admins)}
	b.StopTimer()
	cancel()
	wg.Wait()
	q := func(ds []time.Duration, p float64) string {
		if len(ds) == 0 {
			return "-"
		}
		slices.Sort(ds)
		return ds[min(len(ds)-1, int(float64(len(ds))*p))].Round(100 * time.Microsecond).String()
	}
	fmt.Fprintf(os.Stdout, "\nportal-api load: 2 clusters x 2000 jobs, %d req/s for %ds a phase after a warm-up of %ds, half GET /v1/jobs, half GET /v1/jobs/{cluster}/{id}\n", rate, seconds, warmup)
	fmt.Fprintf(os.Stdout, "%-10s %10s %10s %10s %10s %10s %8s %8s %8s %15s %22s\n", "phase", "req/s", "list p50", "list p99", "job p50", "job p99",
		"sent", "failed", "dropped", "slurmrestd/min", "slurmrestd/portal req")
	for _, r := range results {
		per := r.slurm * r.elapsed.Minutes() / float64(max(r.sent, 1))
		fmt.Fprintf(os.Stdout, "%-10s %10.0f %10s %10s %10s %10s %8d %8d %8d %15.1f %22.5f\n", r.name, float64(r.sent)/r.elapsed.Seconds(),
			q(r.list, .5), q(r.list, .99), q(r.one, .5), q(r.one, .99), r.sent, r.failed, r.dropped, r.slurm, per)
	}
	fmt.Fprintf(os.Stdout, "a pass-through portal (one slurmrestd request per portal request) would send %d a minute\n", rate*60)
	fmt.Fprintf(os.Stdout, "\nportal pages: %d people at once each, a page load then %s of reading, for %ds a page\n", len(readers), think, seconds)
	fmt.Fprintf(os.Stdout, "%-16s %-10s %6s %8s %12s %12s %12s %12s %10s %8s\n", "page", "path", "users", "req/s", "server p50", "server p99",
		"client p50", "client p99", "bytes/page", "failed")
	for _, r := range pageResults {
		fmt.Fprintf(os.Stdout, "%-16s %-10s %6d %8.1f %12s %12s %12s %12s %10d %8d\n", r.name, r.path, r.users, float64(len(r.client))/r.elapsed.Seconds(),
			q(r.server, .5), q(r.server, .99), q(r.client, .5), q(r.client, .99), r.bytes/int64(max(len(r.client), 1)), r.failed)
	}
}

// serverTimes are the server's times of the requests, by path.
type serverTimes struct {
	mu sync.Mutex
	by map[string][]time.Duration
}

func (s *serverTimes) add(path string, d time.Duration) {
	s.mu.Lock()
	s.by[path] = append(s.by[path], d)
	s.mu.Unlock()
}

func (s *serverTimes) of(path string) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.by[path])
}

// pageResult is one page's phase: the server's and the client's times
// of its loads.
type pageResult struct {
	name, path     string
	users          int
	server, client []time.Duration
	bytes, failed  int64
	elapsed        time.Duration
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
