package collect

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/strata-hpc/strata/internal/dcgmprom/dcgmpromtest"
	"github.com/strata-hpc/strata/reclaimd/internal/decide"
)

// Prometheus has the method set of the controller's Collector (which this
// package cannot import: the controller imports it).
var _ interface {
	Collect(ctx context.Context, nodes []string) (Result, error)
} = (*Prometheus)(nil)

// promNow is the clock of the hand-written fixtures: their last step.
var promNow = time.Unix(1795900000, 0)

// fixtureAt is the i-th step of the hand-written fixtures (30s apart,
// the last at promNow).
func fixtureAt(i int) time.Time { return promNow.Add(time.Duration(i-4) * 30 * time.Second) }

// promRequest is what the fake Prometheus was asked.
type promRequest struct {
	Method, Path, ContentType string
	Form                      url.Values
}

// fakePrometheus answers every request with status and body, as a
// Prometheus whose answer was recorded, and keeps the requests.
type fakePrometheus struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []promRequest
}

func newFakePrometheus(t *testing.T, status int, body []byte) *fakePrometheus {
	t.Helper()
	f := &fakePrometheus{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Errorf("request form: %v", err)
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, promRequest{Method: r.Method, Path: r.URL.Path,
			ContentType: r.Header.Get("Content-Type"), Form: r.PostForm})
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakePrometheus) requests() []promRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recentSamples returns the newest samples the collector holds of each
// GPU, whole (decide.WindowTail at most): every sample of a window as
// short as most tests'.
func recentSamples(res Result) map[decide.GPUKey][]decide.Sample {
	out := make(map[decide.GPUKey][]decide.Sample, len(res.Windows))
	for key, w := range res.Windows {
		_, out[key] = w.Recent()
	}
	return out
}

// sampleOpts compare samples: ratios scaled to percent are not exact, and
// a NaN (a value DCGM could not measure) equals a NaN.
var sampleOpts = cmp.Options{cmpopts.EquateApprox(0, 1e-9), cmpopts.EquateNaNs()}

// series builds the want samples of one GPU from the fixture steps.
func series(steps []int, util, mem []float64, fb ...float64) []decide.Sample {
	out := make([]decide.Sample, len(steps))
	for i, st := range steps {
		out[i] = decide.Sample{At: fixtureAt(st), UtilPercent: util[i], MemActivityPercent: mem[i], MemUsedMiB: fb[i%len(fb)]}
	}
	return out
}

func TestPrometheusCollect(t *testing.T) {
	nan := math.NaN()
	all := []int{0, 1, 2, 3, 4}
	tests := map[string]struct {
		fixture     string
		prom        Prometheus
		nodes       []string
		wantQuery   string
		wantStep    string
		wantStart   string
		wantEnd     string // the newest whole step; "1795899990.000" when empty
		wantSamples map[decide.GPUKey][]decide.Sample
		wantNewest  time.Time
		wantFailed  map[string]string
		wantErr     string
	}{
		"two nodes, gaps dropped, a node without series failed": {
			fixture: "query_range-two-nodes.json",
			nodes:   []string{"gpu2", "gpu1", "gpu3", "gpu1", ""},
			wantQuery: `label_replace(max_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu1|gpu2|gpu3"}[30s]), "strata_metric", "DCGM_FI_DEV_GPU_UTIL", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_PROF_DRAM_ACTIVE{Hostname=~"gpu1|gpu2|gpu3"}[30s]), "strata_metric", "DCGM_FI_PROF_DRAM_ACTIVE", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_DEV_FB_USED{Hostname=~"gpu1|gpu2|gpu3"}[30s]), "strata_metric", "DCGM_FI_DEV_FB_USED", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname=~"gpu1|gpu2|gpu3",GPU_I_ID!=""}[30s]), "strata_metric", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "", "")`,
			wantStep:  "30",
			wantStart: "1795896390.000", // an hour before the newest whole step
			wantSamples: map[decide.GPUKey][]decide.Sample{
				// No FB_USED at step 2: recorded as 0, the sample kept.
				{Node: "gpu1", Index: 0}: series(all, []float64{0, 0, 0, 0, 0}, []float64{0, 0, 0, 0, 0}, 62248, 62248, 0, 62248, 62248),
				{Node: "gpu1", Index: 1}: series(all, []float64{0, 0, 0, 1, 0}, []float64{0, 0, 0.1953, 0, 0}, 62248),
				// No DRAM_ACTIVE at step 2: dropped, a gap.
				{Node: "gpu2", Index: 0}: series([]int{0, 1, 3, 4}, []float64{97, 95, 98, 97}, []float64{62.4518, 60.1233, 63.3871, 62}, 71732),
				// No util at step 0: dropped; NaN at step 3: kept, so decide reads the GPU as stale.
				{Node: "gpu2", Index: 1}: series([]int{1, 2, 3, 4}, []float64{88, 91, nan, 90}, []float64{39.8114, 42.1007, 40.5, 41}, 71732),
			},
			wantNewest: promNow,
			wantFailed: map[string]string{"gpu3": "Prometheus has no DCGM series for node gpu3 in the last 1h0m0s: " +
				"is dcgm-exporter running there, and is its Hostname label the Slurm node name?"},
		},
		"instance label, port stripped": {
			fixture: "query_range-instance.json",
			prom:    Prometheus{NodeLabel: "instance", Window: 2 * time.Minute, Step: 90 * time.Second},
			nodes:   []string{"gpu1", "gpu2"},
			wantQuery: `label_replace(max_over_time(DCGM_FI_DEV_GPU_UTIL{instance=~"(?:gpu1|gpu2)(?::[0-9]+)?"}[90s]), "strata_metric", "DCGM_FI_DEV_GPU_UTIL", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_PROF_DRAM_ACTIVE{instance=~"(?:gpu1|gpu2)(?::[0-9]+)?"}[90s]), "strata_metric", "DCGM_FI_PROF_DRAM_ACTIVE", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_DEV_FB_USED{instance=~"(?:gpu1|gpu2)(?::[0-9]+)?"}[90s]), "strata_metric", "DCGM_FI_DEV_FB_USED", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{instance=~"(?:gpu1|gpu2)(?::[0-9]+)?",GPU_I_ID!=""}[90s]), "strata_metric", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "", "")`,
			wantStep:  "90",
			wantStart: "1795899870.000", // steps on multiples of 90 s
			wantEnd:   "1795899960.000",
			wantSamples: map[decide.GPUKey][]decide.Sample{
				{Node: "gpu1", Index: 0}: series(all, []float64{0, 0, 0, 0, 0}, []float64{0, 0, 0, 0, 0}, 1024),
				{Node: "gpu2", Index: 1}: series(all, []float64{100, 100, 100, 100, 100}, []float64{50, 50, 50, 50, 50}, 80000),
			},
			wantNewest: promNow,
			wantFailed: map[string]string{},
		},
		"memory copy utilisation in percent; a node without memory activity failed": {
			fixture: "query_range-mem-copy-util.json",
			prom:    Prometheus{MemActivityMetric: "DCGM_FI_DEV_MEM_COPY_UTIL", Step: 1500 * time.Millisecond},
			nodes:   []string{"gpu1", "gpu2"},
			wantQuery: `label_replace(max_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu1|gpu2"}[1500ms]), "strata_metric", "DCGM_FI_DEV_GPU_UTIL", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_DEV_MEM_COPY_UTIL{Hostname=~"gpu1|gpu2"}[1500ms]), "strata_metric", "DCGM_FI_DEV_MEM_COPY_UTIL", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_DEV_FB_USED{Hostname=~"gpu1|gpu2"}[1500ms]), "strata_metric", "DCGM_FI_DEV_FB_USED", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname=~"gpu1|gpu2",GPU_I_ID!=""}[1500ms]), "strata_metric", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "", "")`,
			wantStep:  "1.5",
			wantStart: "1795896399.000",
			wantEnd:   "1795899999.000",
			wantSamples: map[decide.GPUKey][]decide.Sample{
				{Node: "gpu1", Index: 0}: series(all, []float64{0, 0, 0, 0, 0}, []float64{0, 0, 3, 0, 0}, 512),
			},
			wantNewest: promNow,
			wantFailed: map[string]string{"gpu2": "Prometheus has no DCGM_FI_DEV_MEM_COPY_UTIL series for node gpu2: " +
				"is the field in dcgm-exporter's counters file?"},
		},
		"profiling metric missing: says what to do": {
			fixture: "query_range-mem-copy-util.json", // holds no DRAM_ACTIVE at all
			nodes:   []string{"gpu1"},
			wantQuery: `label_replace(max_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu1"}[30s]), "strata_metric", "DCGM_FI_DEV_GPU_UTIL", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_PROF_DRAM_ACTIVE{Hostname=~"gpu1"}[30s]), "strata_metric", "DCGM_FI_PROF_DRAM_ACTIVE", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_DEV_FB_USED{Hostname=~"gpu1"}[30s]), "strata_metric", "DCGM_FI_DEV_FB_USED", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname=~"gpu1",GPU_I_ID!=""}[30s]), "strata_metric", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "", "")`,
			wantStep:    "30",
			wantStart:   "1795896390.000",
			wantSamples: map[decide.GPUKey][]decide.Sample{},
			wantFailed: map[string]string{"gpu1": "Prometheus has no DCGM_FI_PROF_DRAM_ACTIVE series for node gpu1: enable it in " +
				"dcgm-exporter's counters file, or use DCGM_FI_DEV_MEM_COPY_UTIL (needs no profiling metrics)"},
			wantErr: "prometheus: no samples for any of the 1 nodes (e.g. gpu1: Prometheus has no DCGM_FI_PROF_DRAM_ACTIVE",
		},
		"two series of a metric after a driver upgrade: the maximum": {
			fixture: "query_range-driver-upgrade.json",
			nodes:   []string{"gpu1"},
			wantQuery: `label_replace(max_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu1"}[30s]), "strata_metric", "DCGM_FI_DEV_GPU_UTIL", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_PROF_DRAM_ACTIVE{Hostname=~"gpu1"}[30s]), "strata_metric", "DCGM_FI_PROF_DRAM_ACTIVE", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_DEV_FB_USED{Hostname=~"gpu1"}[30s]), "strata_metric", "DCGM_FI_DEV_FB_USED", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname=~"gpu1",GPU_I_ID!=""}[30s]), "strata_metric", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "", "")`,
			wantStep:  "30",
			wantStart: "1795896390.000",
			wantSamples: map[decide.GPUKey][]decide.Sample{
				{Node: "gpu1", Index: 0}: series(all, []float64{0, 0, 0, 12, 0}, []float64{0, 0, 0, 1, 0}, 100, 100, 100, 100, 200),
			},
			wantNewest: promNow,
			wantFailed: map[string]string{},
		},
		"no series at all: an error, every node failed": {
			fixture: "query_range-empty.json",
			prom:    Prometheus{NodeLabel: "node"},
			nodes:   []string{"gpu1", "gpu2"},
			wantQuery: `label_replace(max_over_time(DCGM_FI_DEV_GPU_UTIL{node=~"gpu1|gpu2"}[30s]), "strata_metric", "DCGM_FI_DEV_GPU_UTIL", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_PROF_DRAM_ACTIVE{node=~"gpu1|gpu2"}[30s]), "strata_metric", "DCGM_FI_PROF_DRAM_ACTIVE", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_DEV_FB_USED{node=~"gpu1|gpu2"}[30s]), "strata_metric", "DCGM_FI_DEV_FB_USED", "", "")` +
				` or label_replace(max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{node=~"gpu1|gpu2",GPU_I_ID!=""}[30s]), "strata_metric", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "", "")`,
			wantStep:    "30",
			wantStart:   "1795896390.000",
			wantSamples: map[decide.GPUKey][]decide.Sample{},
			wantFailed: map[string]string{
				"gpu1": "Prometheus has no DCGM series for node gpu1 in the last 1h0m0s: is dcgm-exporter running there, and is its node label the Slurm node name?",
				"gpu2": "Prometheus has no DCGM series for node gpu2 in the last 1h0m0s: is dcgm-exporter running there, and is its node label the Slurm node name?",
			},
			wantErr: "prometheus: no samples for any of the 2 nodes (e.g. gpu1: Prometheus has no DCGM series for node gpu1",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			srv := newFakePrometheus(t, http.StatusOK, readFixture(t, tt.fixture))
			p := tt.prom
			p.URL, p.Now = srv.URL+"/", func() time.Time { return promNow }
			res, err := p.Collect(context.Background(), tt.nodes)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Collect() error = %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)) {
				t.Fatalf("Collect() error = %v, want one starting %q", err, tt.wantErr)
			}
			end := tt.wantEnd
			if end == "" {
				end = "1795899990.000"
			}
			want := promRequest{Method: http.MethodPost, Path: "/api/v1/query_range", ContentType: "application/x-www-form-urlencoded",
				Form: url.Values{"query": {tt.wantQuery}, "start": {tt.wantStart}, "end": {end}, "step": {tt.wantStep}}}
			if diff := cmp.Diff([]promRequest{want}, srv.requests()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if got := p.Query(tt.nodes); got != tt.wantQuery {
				t.Errorf("Query() = %s\nwant %s", got, tt.wantQuery)
			}
			if diff := cmp.Diff(tt.wantSamples, recentSamples(res), sampleOpts); diff != "" {
				t.Errorf("Samples (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantFailed, res.Failed); diff != "" {
				t.Errorf("Failed (-want +got):\n%s", diff)
			}
			if !res.Newest.Equal(tt.wantNewest) {
				t.Errorf("Newest = %v, want %v", res.Newest, tt.wantNewest)
			}
			wantInterval := p.Step
			if wantInterval == 0 {
				wantInterval = 30 * time.Second
			}
			if res.Interval != wantInterval {
				t.Errorf("Interval = %v, want %v", res.Interval, wantInterval)
			}
		})
	}
}

// TestPrometheusCapturedAnswer reads an answer captured from Debian's
// Prometheus 2.42 scraping testdata/dcgm-exporter-gpu*.prom (1s steps at
// .250 of a second, the query for gpu1, gpu2 and gpu9).
func TestPrometheusCapturedAnswer(t *testing.T) {
	srv := newFakePrometheus(t, http.StatusOK, readFixture(t, "query_range-captured-2.42.json"))
	end := time.UnixMilli(1795987600250)
	p := &Prometheus{URL: srv.URL, Step: time.Second, Window: 4 * time.Second, Now: func() time.Time { return end }}
	res, err := p.Collect(context.Background(), []string{"gpu1", "gpu2", "gpu9"})
	if err != nil {
		t.Fatal(err)
	}
	type want struct{ util, mem, fb float64 }
	steady := map[decide.GPUKey]want{
		{Node: "gpu1", Index: 0}: {0, 0, 62248},
		{Node: "gpu1", Index: 1}: {0, 0, 62248},
		{Node: "gpu2", Index: 0}: {97, 62.4518, 71732},
		{Node: "gpu2", Index: 1}: {88, 41.2906, 71732},
	}
	wantSamples := map[decide.GPUKey][]decide.Sample{}
	for key, w := range steady {
		for i := range 5 {
			wantSamples[key] = append(wantSamples[key], decide.Sample{At: end.Add(time.Duration(i-4) * time.Second),
				UtilPercent: w.util, MemActivityPercent: w.mem, MemUsedMiB: w.fb})
		}
	}
	if diff := cmp.Diff(wantSamples, recentSamples(res), sampleOpts); diff != "" {
		t.Errorf("Samples (-want +got):\n%s", diff)
	}
	if got := slices.Collect(mapKeys(res.Failed)); !slices.Equal(got, []string{"gpu9"}) {
		t.Errorf("Failed = %v, want gpu9 only", res.Failed)
	}
	if !res.Newest.Equal(end) {
		t.Errorf("Newest = %v, want %v", res.Newest, end)
	}
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestPrometheusErrors(t *testing.T) {
	tests := map[string]struct {
		status   int
		body     []byte
		prom     Prometheus
		wantType string // the APIError's Type: Prometheus's errorType
		wantErr  []string
	}{
		"bad_data": {
			status: http.StatusBadRequest, body: readFixture(t, "error-bad-data.json"), wantType: "bad_data",
			wantErr: []string{`prometheus query_range "label_replace(max_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~\"gpu1\"}[30s])`,
				"HTTP 400: bad_data: 1:15: parse error: unclosed left parenthesis"},
		},
		"timeout": {
			status: http.StatusServiceUnavailable, body: readFixture(t, "error-timeout.json"), wantType: "timeout",
			wantErr: []string{"HTTP 503: timeout: query timed out in expression evaluation"},
		},
		"error answer with 200": {
			status: http.StatusOK, body: readFixture(t, "error-bad-data.json"), wantType: "bad_data",
			wantErr: []string{"HTTP 200: bad_data: 1:15: parse error"},
		},
		"proxy error page": {
			status: http.StatusBadGateway, body: []byte("<html><body><h1>502 Bad Gateway</h1></body></html>\n"),
			wantErr: []string{`HTTP 502: "<html><body><h1>502 Bad Gateway</h1></body></html>"`},
		},
		"not JSON": {
			status: http.StatusOK, body: []byte("<!doctype html><title>Grafana</title>"),
			wantErr: []string{"HTTP 200: answer is not Prometheus API JSON", `(body "<!doctype html><title>Grafana</title>")`},
		},
		"empty body": {
			status: http.StatusOK, body: nil,
			wantErr: []string{"answer is not Prometheus API JSON: unexpected end of JSON input (body (empty body))"},
		},
		"not a matrix": {
			status: http.StatusOK, body: readFixture(t, "query-vector.json"),
			wantErr: []string{`answer's resultType is "vector", want "matrix"`},
		},
		"a bad point": {
			status:  http.StatusOK,
			body:    []byte(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1795900000,0]]}]}}`),
			wantErr: []string{`unreadable answer: point: want [time, "value"] at byte 95 (near "0]]}]}}")`},
		},
		"too large": {
			status: http.StatusOK, body: readFixture(t, "query_range-two-nodes.json"), prom: Prometheus{MaxResponseBytes: 1000},
			wantErr: []string{"HTTP 200: the answer for one step is larger than 1000 bytes: raise prometheus.max_response_mib"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			srv := newFakePrometheus(t, tt.status, tt.body)
			p := tt.prom
			p.URL, p.Now = srv.URL, func() time.Time { return promNow }
			res, err := p.Collect(context.Background(), []string{"gpu1"})
			if err == nil {
				t.Fatal("Collect() succeeded, want an error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Collect() error = %v\nwant it to contain %q", err, w)
				}
			}
			var apiErr *APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("Collect() error %T is no *APIError", err)
			}
			if apiErr.Type != tt.wantType || apiErr.HTTPStatus != tt.status || apiErr.Query != p.Query([]string{"gpu1"}) {
				t.Errorf("APIError = %+v, want type %q, status %d and the query", apiErr, tt.wantType, tt.status)
			}
			if len(res.Windows) != 0 || res.Interval != 30*time.Second {
				t.Errorf("Result = %+v, want no samples and the step", res)
			}
			// An answer too large is asked again in halves, down to one step.
			if n := len(srv.requests()); n != 1 && (name != "too large" || n != 7) {
				t.Errorf("%d requests, want 1 (7 when too large: the hour halved down to one step)", n)
			}
		})
	}
}

func TestPrometheusNoRequest(t *testing.T) {
	srv := newFakePrometheus(t, http.StatusOK, readFixture(t, "query_range-empty.json"))
	p := &Prometheus{URL: srv.URL}
	for _, nodes := range [][]string{nil, {}, {""}} {
		res, err := p.Collect(context.Background(), nodes)
		if err != nil || len(res.Windows) != 0 || len(res.Failed) != 0 {
			t.Errorf("Collect(%q) = %+v, %v; want an empty result", nodes, res, err)
		}
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("%d requests for no nodes, want none", n)
	}
	_, err := (&Prometheus{}).Collect(context.Background(), []string{"gpu1"})
	if err == nil || !strings.Contains(err.Error(), "no URL set") {
		t.Errorf("Collect() without URL = %v, want no URL set", err)
	}
}

func TestPrometheusUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	_, err := (&Prometheus{URL: base}).Collect(context.Background(), []string{"gpu1"})
	if err == nil || !strings.HasPrefix(err.Error(), "prometheus query_range: ") {
		t.Errorf("Collect() = %v, want the connection error", err)
	}
}

func TestPrometheusQueryEscapes(t *testing.T) {
	tests := map[string]struct {
		prom  Prometheus
		nodes []string
		want  string // the node matcher
	}{
		"regex characters": {nodes: []string{"gpu-1.rack[2]", "a+b"}, want: `Hostname=~"a\\+b|gpu-1\\.rack\\[2\\]"`},
		"quote":            {nodes: []string{`x"y`}, want: `Hostname=~"x\"y"`},
		"instance":         {prom: Prometheus{NodeLabel: "instance"}, nodes: []string{"n.1"}, want: `instance=~"(?:n\\.1)(?::[0-9]+)?"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			q := tt.prom.Query(tt.nodes)
			if got := strings.Count(q, "{"+tt.want+"}"); got != 3 {
				t.Errorf("Query() = %s\nwant {%s} in each of the three selectors", q, tt.want)
			}
		})
	}
}

// FuzzParseQueryRange checks that no answer makes the parser or the join
// panic, and that what they accept keeps Result's promises: samples in
// time order, every node with samples or a reason.
func FuzzParseQueryRange(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		f.Add(readFixture(f, filepath.Base(file)))
	}
	for _, s := range []string{
		``, `{}`, `null`, `{"status":"success"}`, `{"status":"success","data":null}`,
		`{"status":"success","data":{"resultType":"matrix","result":null}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"Hostname":"gpu1","gpu":"0","strata_metric":"DCGM_FI_DEV_GPU_UTIL"},"values":[[1e300,"1"],[-1,"+Inf"],["x","1"]]}]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"Hostname":"gpu1","gpu":"-1"},"values":[[1,"NaN"]]}]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"Hostname":"gpu1","gpu":"x","strata_metric":"DCGM_FI_DEV_FB_USED"},"values":[]}]}}`,
		// MIG devices and job labels.
		`{"status":"success","data":{"resultType":"matrix","result":[` +
			`{"metric":{"Hostname":"gpu1","gpu":"0","GPU_I_ID":"9","strata_metric":"DCGM_FI_PROF_GR_ENGINE_ACTIVE"},"values":[[1,"0.5"],[2,"0.1"]]},` +
			`{"metric":{"Hostname":"gpu1","gpu":"0","GPU_I_ID":"9","strata_metric":"DCGM_FI_PROF_DRAM_ACTIVE"},"values":[[1,"0.2"]]},` +
			`{"metric":{"Hostname":"gpu1","gpu":"0","GPU_I_ID":"x","strata_metric":"DCGM_FI_PROF_DRAM_ACTIVE"},"values":[[1,"0.2"]]},` +
			`{"metric":{"Hostname":"gpu1","gpu":"0","strata_metric":"DCGM_FI_DEV_GPU_UTIL"},"values":[[1,"0"]]},` +
			`{"metric":{"Hostname":"gpu1","gpu":"1","hpc_job":"7","strata_metric":"DCGM_FI_DEV_GPU_UTIL"},"values":[[1,"3"],[2,"4"]]},` +
			`{"metric":{"Hostname":"gpu1","gpu":"1","hpc_job":"8","strata_metric":"DCGM_FI_PROF_DRAM_ACTIVE"},"values":[[2,"0"]]}]}}`,
	} {
		f.Add([]byte(s))
	}
	nodes := []string{"gpu1", "gpu2", "gpu3"}
	f.Fuzz(func(t *testing.T, body []byte) {
		series, err := parseQueryRange(body)
		if err != nil {
			return
		}
		for _, c := range []promConfig{(&Prometheus{}).config(), (&Prometheus{NodeLabel: "instance"}).config()} {
			res := Result{Windows: map[decide.GPUKey]*decide.Window{}, Failed: map[string]string{}}
			samples, seen, _, _ := c.join(series, nodes)
			held := map[string]*promNode{}
			for _, n := range nodes {
				held[n] = &promNode{gpus: map[int]*decide.Window{}, seen: seen[n]}
				held[n].merge(samples[n], 0, 0, c.step)
			}
			c.collected(nodes, held, &res)
			for key, samples := range recentSamples(res) {
				if !slices.Contains(nodes, key.Node) || res.Failed[key.Node] != "" {
					t.Fatalf("samples for %s, which is not asked for or failed (%q)", key, res.Failed[key.Node])
				}
				if len(samples) == 0 {
					t.Fatalf("%s: an empty sample list", key)
				}
				for i := range samples {
					if i > 0 && !samples[i].At.After(samples[i-1].At) {
						t.Fatalf("%s: samples out of order at %d", key, i)
					}
					if samples[i].At.After(res.Newest) {
						t.Fatalf("%s: sample at %v after Newest %v", key, samples[i].At, res.Newest)
					}
					if fb := samples[i].MemUsedMiB; math.IsNaN(fb) || math.IsInf(fb, 0) {
						t.Fatalf("%s: memory used %v", key, fb)
					}
				}
			}
			for _, n := range nodes {
				has := false
				for key := range res.Windows {
					has = has || key.Node == n
				}
				if !has && res.Failed[n] == "" {
					t.Fatalf("node %s has neither samples nor a reason", n)
				}
			}
		}
	})
}

func TestPrometheusMerge(t *testing.T) {
	nan := math.NaN()
	tests := map[string]struct {
		in   []float64
		want float64
	}{
		"one":             {in: []float64{3}, want: 3},
		"the larger":      {in: []float64{3, 12, 5}, want: 12},
		"zero is a value": {in: []float64{0, -1}, want: 0},
		"NaN first wins":  {in: []float64{nan, 50}, want: nan},
		"NaN last wins":   {in: []float64{50, nan, 60}, want: nan},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var v float64
			var has bool
			for _, x := range tt.in {
				merge(&v, &has, x)
			}
			if !has || !cmp.Equal(v, tt.want, cmpopts.EquateNaNs()) {
				t.Errorf("merge(%v) = %v, %v; want %v", tt.in, v, has, tt.want)
			}
		})
	}
}

// BenchmarkPrometheusParseJoin reads the answer for a thousand 8-GPU
// nodes over the default hour at the default step.
func BenchmarkPrometheusParseJoin(b *testing.B) {
	body, nodes := bigAnswer(1000, 8, 120)
	b.SetBytes(int64(len(body)))
	c := (&Prometheus{}).config()
	b.ResetTimer()
	for b.Loop() {
		series, err := parseQueryRange(body)
		if err != nil {
			b.Fatal(err)
		}
		samples, _, _, _ := c.join(series, nodes)
		if n := len(samples) * len(samples[nodes[0]]); n != 8000 {
			b.Fatalf("%d GPUs", n)
		}
	}
}

// bigAnswer writes an answer with realistic dcgm-exporter labels.
func bigAnswer(nodes, gpus, steps int) ([]byte, []string) {
	var sb strings.Builder
	names := make([]string, nodes)
	sb.WriteString(`{"status":"success","data":{"resultType":"matrix","result":[`)
	first := true
	for n := range nodes {
		names[n] = fmt.Sprintf("gpu%04d", n)
		for g := range gpus {
			for _, m := range []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_DEV_FB_USED"} {
				if !first {
					sb.WriteByte(',')
				}
				first = false
				fmt.Fprintf(&sb, `{"metric":{"DCGM_FI_DRIVER_VERSION":"550.54.15","Hostname":%q,"UUID":"GPU-3f1c2a9e-5b7d-4e21-9a0c-%012d",`+
					`"device":"nvidia%d","gpu":"%d","instance":"10.20.%d.%d:9400","job":"dcgm-exporter","modelName":"NVIDIA H100 80GB HBM3",`+
					`"pci_bus_id":"00000000:18:00.0","strata_metric":%q},"values":[`, names[n], n*gpus+g, g, g, n/250, n%250, m)
				for s := range steps {
					if s > 0 {
						sb.WriteByte(',')
					}
					fmt.Fprintf(&sb, `[%d,"%d"]`, 1795896400+30*s, (s*7+g)%101)
				}
				sb.WriteString("]}")
			}
		}
	}
	sb.WriteString("]}}")
	return []byte(sb.String()), names
}

// After the first read of a node's window, a cycle asks only for the
// steps since the last one (that one again); a node asked for the first
// time is read whole, in a query of its own.
func TestPrometheusAsksForNewSteps(t *testing.T) {
	srv := newFakePrometheus(t, http.StatusOK, readFixture(t, "query_range-two-nodes.json"))
	now := promNow
	p := &Prometheus{URL: srv.URL, Now: func() time.Time { return now }}
	if _, err := p.Collect(context.Background(), []string{"gpu1", "gpu2"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(65 * time.Second)
	if _, err := p.Collect(context.Background(), []string{"gpu1", "gpu2", "gpu3"}); err != nil {
		t.Fatal(err)
	}
	type span struct{ start, end, nodes string }
	var got []span
	for _, r := range srv.requests() {
		nodes := r.Form.Get("query")
		nodes = nodes[strings.Index(nodes, `=~"`)+3:]
		got = append(got, span{r.Form.Get("start"), r.Form.Get("end"), nodes[:strings.Index(nodes, `"`)]})
	}
	want := []span{
		{"1795896390.000", "1795899990.000", "gpu1|gpu2"}, // the hour
		{"1795896450.000", "1795900050.000", "gpu3"},      // a new node: its hour
		{"1795899990.000", "1795900050.000", "gpu1|gpu2"}, // the last step again, and the new ones
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(span{})); diff != "" {
		t.Errorf("queries (-want +got):\n%s", diff)
	}
}

// TestPrometheusJobLabels: over a replayed dcgm-exporter exposition with
// its HPC job mapping on, each GPU's series are repeated per job with an
// hpc_job label. The copies are one GPU's samples, and the jobs of the
// series that reach the GPU's newest step are its holders: a job whose
// label was there earlier in the window and is gone (it ended) is not,
// a label that is not a job id says nothing, and without labels (or with
// JobLabel "-") there is no map, as before.
func TestPrometheusJobLabels(t *testing.T) {
	body := readFixture(t, "dcgm-exporter-hpc-job.prom")
	now := promNow
	gpu2Before := strings.ReplaceAll(grepLines(string(body), `gpu="2"`), `hpc_job="1"`, `hpc_job="99"`)
	// GPU 1's copies of a label that is no job id (a site's own naming).
	oddLabel := strings.ReplaceAll(grepLines(string(body), `gpu="1"`), `hpc_job="2"`, `hpc_job="train-7"`)
	k := func(i int) decide.GPUKey { return decide.GPUKey{Node: "gpu1", Index: i} }
	for name, tc := range map[string]struct {
		exps     []dcgmpromtest.Exposition
		jobLabel string
		want     map[decide.GPUKey][]int64
	}{
		"labels: each GPU's jobs at its newest step": {
			exps: []dcgmpromtest.Exposition{
				{Body: body},
				// Job 99 held GPU 2 until ten minutes ago.
				{Body: []byte(gpu2Before), Until: now.Add(-10 * time.Minute)},
				{Body: []byte(oddLabel)},
			},
			want: map[decide.GPUKey][]int64{k(0): {2}, k(1): {2}, k(2): {1}, k(3): {1, 4711}},
		},
		"no labels": {
			exps: []dcgmpromtest.Exposition{{Body: regexp.MustCompile(`,hpc_job="[^"]*"`).ReplaceAll(body, nil)}},
		},
		"labels not read": {
			exps: []dcgmpromtest.Exposition{{Body: body}}, jobLabel: "-",
		},
	} {
		t.Run(name, func(t *testing.T) {
			prom := dcgmpromtest.New(t, tc.exps...)
			p := &Prometheus{URL: prom.URL, Step: 30 * time.Second, Window: time.Hour, JobLabel: tc.jobLabel,
				Now: func() time.Time { return now }}
			res, err := p.Collect(t.Context(), []string{"gpu1"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, res.Holders); diff != "" {
				t.Errorf("Holders (-want +got):\n%s", diff)
			}
			if wantFrom := MapFromDCGM; tc.want != nil && res.MapFrom != wantFrom {
				t.Errorf("MapFrom = %v, want %v", res.MapFrom, wantFrom)
			}
			// The per-job copies are one GPU's samples: one sample a step,
			// of the GPU's own values.
			if got := len(res.Windows); got != 4 {
				t.Fatalf("%d GPUs, want 4: %v", got, slices.Collect(maps.Keys(res.Windows)))
			}
			for key, want := range map[decide.GPUKey]decide.Sample{k(0): {UtilPercent: 95, MemActivityPercent: 61.2, MemUsedMiB: 71730},
				k(3): {UtilPercent: 0, MemActivityPercent: 0, MemUsedMiB: 2310}} {
				ss := recentSamples(res)[key]
				if n := res.Windows[key].Len(); n != 121 {
					t.Errorf("%s: %d samples, want 121 (an hour of 30 s steps, both ends)", key, n)
					continue
				}
				got := ss[len(ss)-1]
				want.At = now.Truncate(30 * time.Second) // the newest step
				if diff := cmp.Diff(want, got, sampleOpts); diff != "" {
					t.Errorf("%s newest sample (-want +got):\n%s", key, diff)
				}
			}
			// A steady cycle re-reads the last steps only, and keeps the map.
			now = now.Add(30 * time.Second)
			defer func() { now = promNow }()
			res, err = p.Collect(t.Context(), []string{"gpu1"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, res.Holders); diff != "" {
				t.Errorf("next cycle's Holders (-want +got):\n%s", diff)
			}
		})
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestPrometheusMIG: over a replayed dcgm-exporter exposition of a node
// whose GPU 0 is in MIG mode (GPU instances 1 and 9, both 1g.10gb) beside
// a whole GPU 1, each MIG device is judged for itself under Slurm's index
// of it (GPU 0's instances in the order of their ids, then GPU 1): its
// utilisation is its graphics engines' activity, its memory activity and
// memory used its own. GPU 0 as a whole (whose utilisation reads 0 while
// instance 9 works) is not judged. A cycle after instance 9 is destroyed
// starts the node over.
func TestPrometheusMIG(t *testing.T) {
	body := readFixture(t, "dcgm-exporter-mig.prom")
	prom := dcgmpromtest.New(t, dcgmpromtest.Exposition{Body: body})
	now := promNow
	p := &Prometheus{URL: prom.URL, Step: 30 * time.Second, Window: time.Hour, Now: func() time.Time { return now }}
	res, err := p.Collect(t.Context(), []string{"gpu1"})
	if err != nil {
		t.Fatal(err)
	}
	k := func(i int) decide.GPUKey { return decide.GPUKey{Node: "gpu1", Index: i} }
	newest := now.Truncate(30 * time.Second)
	want := map[decide.GPUKey]decide.Sample{
		k(0): {At: newest, UtilPercent: 0, MemActivityPercent: 0, MemUsedMiB: 212},              // GPU 0, instance 1
		k(1): {At: newest, UtilPercent: 91.2043, MemActivityPercent: 37.1588, MemUsedMiB: 9650}, // GPU 0, instance 9
		k(2): {At: newest, UtilPercent: 97, MemActivityPercent: 62.4518, MemUsedMiB: 71732},     // GPU 1
	}
	if len(res.Windows) != len(want) {
		t.Fatalf("%d GPUs and MIG devices, want %d: %v", len(res.Windows), len(want), slices.Collect(maps.Keys(res.Windows)))
	}
	for key, w := range want {
		ss := recentSamples(res)[key]
		if n := res.Windows[key].Len(); n != 121 {
			t.Errorf("%s: %d samples, want 121", key, n)
			continue
		}
		if diff := cmp.Diff(w, ss[len(ss)-1], sampleOpts); diff != "" {
			t.Errorf("%s newest sample (-want +got):\n%s", key, diff)
		}
	}
	// Instance 9 destroyed: the keys name other devices, the node starts
	// over from this cycle's steps.
	now = now.Add(30 * time.Second)
	if err := prom.Set(dcgmpromtest.Exposition{Body: regexp.MustCompile(`(?m)^.*GPU_I_ID="9".*\n`).ReplaceAll(body, nil)}); err != nil {
		t.Fatal(err)
	}
	res, err = p.Collect(t.Context(), []string{"gpu1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := recentSamples(res); len(got) != 2 || len(got[k(1)]) != 2 || got[k(1)][1].UtilPercent != 97 {
		t.Errorf("after instance 9 went: %v; want instance 1 and GPU 1 (now Slurm's 1), read afresh (2 steps)", got)
	}
}
