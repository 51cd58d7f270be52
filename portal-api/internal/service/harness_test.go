package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strata-hpc/strata/internal/jobpolicy"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/tenantmap"
	portalapi "github.com/strata-hpc/strata/portal-api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/cluster"
	"github.com/strata-hpc/strata/portal-api/internal/cluster/clustertest"
	"github.com/strata-hpc/strata/portal-api/internal/store"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// The jobs of the two fake clusters: gpu1 replays Slurm 26.05, gpu2 24.11.
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

// users of the tenant map (testdata/tenants.json): ops is a cluster
// admin, tadmin administers acme, mem and mem2 are members of acme's llm,
// view its viewer, vmem a member of acme's vision, gmem of globex's rl;
// nobody is in no project.
var users = []string{"ops", "tadmin", "mem", "view", "vmem", "gmem", "nobody"}

type harness struct {
	t       *testing.T
	srv     *httptest.Server
	server  *Server
	beds    map[string]*clustertest.Bed
	pollers map[string]*cluster.Poller
	store   *store.Store
	tokens  map[string]string
	router  routers.Router
	now     time.Time
	metrics *cluster.Metrics
	reg     *prometheus.Registry
	// outputRoot is gpu1's output root, empty at start.
	outputRoot string
	// sessionRoot is gpu1's session root.
	sessionRoot string
	// reclaimRecords are reclaimd's answers beside 910101's, by job id.
	reclaimRecords sync.Map

	reclaimdRequests atomic.Int64
	// bridge is gpu1's strata-bridge API (gpu2 has none).
	bridge            *bridge
	reclaimdDown      atomic.Bool
	prometheusQueries atomic.Int64
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, beds: map[string]*clustertest.Bed{}, pollers: map[string]*cluster.Poller{}, tokens: map[string]string{},
		now: time.Unix(1795983872, 0), outputRoot: t.TempDir(), sessionRoot: t.TempDir()}
	m, err := tenantmap.Load("testdata/tenants.json")
	if err != nil {
		t.Fatal(err)
	}
	policy, err := jobpolicy.Load("testdata/jobpolicy.json")
	if err != nil {
		t.Fatal(err)
	}
	set, err := templates.Load("testdata/templates")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h.metrics, h.reg = cluster.NewMetrics(reg), reg
	var clusters []Cluster
	for _, c := range []struct {
		name, release string
		jobs          []clustertest.Job
	}{{"gpu1", "26.05", gpu1Jobs}, {"gpu2", "24.11", gpu2Jobs}} {
		bed := clustertest.New(t, c.release, c.jobs...)
		p := cluster.New(cluster.Config{Name: c.name, Slurm: slurmrest.Config{URL: bed.URL, Tokens: slurmrest.StaticToken("t")},
			Interval: time.Second, StaleAfter: time.Minute, Metrics: h.metrics, Now: func() time.Time { return h.now }})
		if err := p.Poll(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.beds[c.name], h.pollers[c.name] = bed, p
		cl := Cluster{Poller: p, Tenants: func() *tenantmap.Map { return m }}
		if c.name == "gpu1" {
			// gpu2 has no job policy: it takes no submissions; nor a reclaimd.
			cl.Policy = func() *jobpolicy.Policy { return policy }
			cl.ReclaimdURL = h.reclaimd().URL
			cl.ReclaimdToken = func() ([]byte, error) { return []byte(reclaimdToken), nil }
			cl.Bridge = h.newBridge()
			cl.OutputRoots = []string{h.outputRoot}
			cl.SessionRoot, cl.SessionIdleLimit = h.sessionRoot, time.Hour
			cl.Priority = &bedWeights
			cl.Prometheus = &Prometheus{URL: h.prometheus().URL, Step: time.Second}
		}
		clusters = append(clusters, cl)
	}
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h.store = st
	for _, u := range users {
		tok, _, err := st.CreateToken(t.Context(), u, "", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		h.tokens[u] = tok
	}
	a := auth.New(auth.Config{Tokens: st, TokenPrefix: store.TokenPrefix})
	s := New(Config{Clusters: clusters, Auth: a, Store: st, Templates: func() *templates.Set { return set }, RatePerSecond: 1e6, Burst: 1e6, Registry: reg,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), Now: func() time.Time { return h.now },
		Sessions: SessionConfig{Transport: nodeTransport(), Origin: testOrigin}})
	h.server, h.srv = s, httptest.NewServer(s)
	t.Cleanup(h.srv.Close)

	h.router = specRouter(t)
	return h
}

// specRouter finds a request's route in openapi.yaml, to validate the
// answer against it.
func specRouter(t *testing.T) routers.Router {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(portalapi.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return router
}

// reclaimdAnswers are the answers of reclaimd's own API server over a
// real store, written by reclaimd's TestAPIAnswersForThePortal
// (portal-api may not import reclaimd's packages): the routes the
// overview and the attempts route read.
const reclaimdAnswers = "../../../reclaimd/internal/controller/testdata/api/"

// prometheus is Prometheus's API at the network edge, answering as
// Prometheus does a query of dcgm-exporter's utilisation: gpu1's GPUs 0
// (busy), 1 (idle) and 2 (of no job of the harness), whatever GPUs the
// query names, so that only the asker can keep a job to its own.
func (h *harness) prometheus() *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.prometheusQueries.Add(1)
		if err := r.ParseForm(); err != nil || r.Form.Get("query") == "" {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"no query"}`))
			return
		}
		series := func(gpu string, util ...string) string {
			var pts []string
			for i, u := range util {
				pts = append(pts, fmt.Sprintf(`[%d,%q]`, h.now.Unix()-int64(len(util)-1-i), u))
			}
			return `{"metric":{"Hostname":"gpu1","gpu":"` + gpu + `"},"values":[` + strings.Join(pts, ",") + `]}`
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/query_range":
			fmt.Fprintf(w, `{"status":"success","data":{"resultType":"matrix","result":[%s,%s,%s]}}`,
				series("0", "80", "90", "100"), series("1", "0", "0", "3"), series("2", "50", "50", "50"))
		case "/api/v1/query":
			if strings.Contains(r.Form.Get("query"), "hpc_job") {
				// The mean of the GPUs dcgm-exporter labelled with each
				// job: 930001's, and one of a job nobody asked about.
				fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[`+
					`{"metric":{"hpc_job":"930001"},"value":[%[1]d,"42.25"]},{"metric":{"hpc_job":"930002"},"value":[%[1]d,"7"]}]}}`, h.now.Unix())
				return
			}
			fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[`+
				`{"metric":{"Hostname":"gpu1","gpu":"0"},"value":[%[1]d,"77.5"]},`+
				`{"metric":{"Hostname":"gpu1","gpu":"1"},"value":[%[1]d,"0.25"]},`+
				`{"metric":{"Hostname":"gpu1","gpu":"2"},"value":[%[1]d,"50"]}]}}`, h.now.Unix())
		default:
			http.NotFound(w, r)
		}
	}))
	h.t.Cleanup(srv.Close)
	return srv
}

// reclaimd is reclaimd's API at the network edge: a record for job
// 910101 in reclaimd's shape, none for the others; the decisions,
// failures, node health and attempts reclaimd's own server gave
// (reclaimdAnswers). With reclaimdDown set it answers nothing but 503.
// reclaimdToken is the stand-in reclaimd's API token (its api.token_file,
// the cluster's reclaimd_token_file).
const reclaimdToken = "reclaimd-api-token"

func (h *harness) reclaimd() *httptest.Server {
	serve := func(w http.ResponseWriter, file string, code int) {
		body, err := os.ReadFile(reclaimdAnswers + file)
		if err != nil {
			h.t.Errorf("reclaimd's answer: %v", err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write(body)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.reclaimdRequests.Add(1)
		// As reclaimd's API: nothing without its token.
		if r.Header.Get("Authorization") != "Bearer "+reclaimdToken {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if h.reclaimdDown.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		q := r.URL.Query()
		switch {
		case r.URL.Path == "/v1/decisions" && q.Get("since") != "" && q.Get("limit") != "":
			serve(w, "decisions.json", http.StatusOK)
			return
		case r.URL.Path == "/v1/failures" && q.Get("since") != "" && q.Get("limit") != "":
			serve(w, "failures.json", http.StatusOK)
			return
		case r.URL.Path == "/v1/worth" && q.Get("since") != "" && q.Get("limit") != "":
			serve(w, "worth.json", http.StatusOK)
			return
		case r.URL.Path == "/v1/nodes/health":
			serve(w, "nodes-health.json", http.StatusOK)
			return
		case r.URL.Path == "/v1/jobs/910101/attempts":
			serve(w, "attempts-910101.json", http.StatusOK)
			return
		case strings.HasSuffix(r.URL.Path, "/attempts"):
			serve(w, "attempts-missing.json", http.StatusNotFound)
			return
		}
		var id int64
		fmt.Sscanf(r.URL.Path, "/v1/jobs/%d/reclaim", &id)
		if rec, ok := h.reclaimRecords.Load(id); ok {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(rec.(string)))
			return
		}
		if r.URL.Path != "/v1/jobs/910101/reclaim" {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error": "reclaimd has no record of job"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"job_id": 910101, "state": {"phase": "warned"}, "decisions": [{"rule": "train-idle", "action": "warn",
			"reason": "GPUs gpu1:0 and gpu1:1 idle for 30m", "outcome": "sent"}]}`))
	}))
	h.t.Cleanup(srv.Close)
	return srv
}

// do sends a request as user ("" for none) and validates the answer
// against openapi.yaml: every status, header and body of every route.
func (h *harness) do(user, method, path string, body any) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if strings.HasSuffix(path, "/cookie") && h.server != nil && h.server.cfg.Sessions.Origin != nil {
		req.Host = h.server.cfg.Sessions.Origin.Host // a session's cookie is set on its origin
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+h.tokens[user])
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	h.validate(req, raw, resp, got)
	return resp.StatusCode, got
}

func (h *harness) validate(req *http.Request, reqBody []byte, resp *http.Response, body []byte) {
	h.t.Helper()
	vreq := req.Clone(context.Background())
	vreq.URL.Scheme, vreq.URL.Host = "", ""
	route, params, err := h.router.FindRoute(vreq)
	if err != nil {
		if resp.StatusCode != http.StatusNotFound {
			h.t.Errorf("%s %s: not a route of the spec (%v), answered %d", req.Method, req.URL.Path, err, resp.StatusCode)
		}
		h.checkError(req, resp, body)
		return
	}
	if reqBody != nil {
		vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		h.t.Errorf("%s %s → %d does not follow openapi.yaml: %v\n%s", req.Method, req.URL.Path, resp.StatusCode, err, body)
	}
	if resp.StatusCode >= 400 {
		h.checkError(req, resp, body)
	}
}

// checkError: every error is JSON with a code and a message.
func (h *harness) checkError(req *http.Request, resp *http.Response, body []byte) {
	h.t.Helper()
	var e struct{ Code, Message string }
	if err := json.Unmarshal(body, &e); err != nil || e.Code == "" || e.Message == "" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		h.t.Errorf("%s %s → %d: not a JSON error with code and message: %s", req.Method, req.URL.Path, resp.StatusCode, body)
	}
}
