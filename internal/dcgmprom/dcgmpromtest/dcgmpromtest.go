// Package dcgmpromtest is a Prometheus for tests that holds replayed
// dcgm-exporter expositions (the text format dcgm-exporter serves on
// /metrics) as if it had scraped each one at every step, and answers the
// range queries reclaimd's Prometheus source sends:
//
//	label_replace(max_over_time(METRIC{NODE_LABEL=~"RE"}[STEP]), "strata_metric", "METRIC", "", "") or ...
//
// (a selector may also ask for series that have a label: LABEL!="").
// Each series of a named metric whose node label matches RE is answered
// with its exposition's value at every step of the range (max_over_time
// of a constant is the constant), its labels as exposed plus
// strata_metric. It reads nothing else of PromQL: a query of another
// shape is answered with Prometheus's bad_data error.
package dcgmpromtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Exposition is one replayed scrape.
type Exposition struct {
	// Body is the exposition, as dcgm-exporter serves it.
	Body []byte
	// From and Until bound the steps at which its series exist (zero:
	// unbounded), as a series appears and disappears in Prometheus when
	// an exporter's labels change.
	From, Until time.Time
}

// Server is the fake Prometheus.
type Server struct {
	*httptest.Server
	mu   sync.Mutex
	exps []parsed
	// Queries counts the range queries answered.
	Queries int
}

type parsed struct {
	fams        map[string]*dto.MetricFamily
	from, until time.Time
}

// New starts a Server over the expositions; it is closed when t ends.
func New(t testing.TB, exps ...Exposition) *Server {
	t.Helper()
	s := &Server{}
	if err := s.Set(exps...); err != nil {
		t.Fatal(err)
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Set replaces the expositions.
func (s *Server) Set(exps ...Exposition) error {
	out := make([]parsed, 0, len(exps))
	for i, e := range exps {
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(bytes.NewReader(e.Body))
		if err != nil {
			return fmt.Errorf("exposition %d: %w", i, err)
		}
		out = append(out, parsed{fams: fams, from: e.From, until: e.Until})
	}
	s.mu.Lock()
	s.exps = out
	s.mu.Unlock()
	return nil
}

var (
	metricRe  = regexp.MustCompile(`max_over_time\(([A-Za-z_:][A-Za-z0-9_:]*)\{([A-Za-z_][A-Za-z0-9_]*)=~("(?:[^"\\]|\\.)*")(,[A-Za-z_][A-Za-z0-9_]*!="")?\}`)
	nameLabel = "strata_metric"
)

type series struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	bad := func(msg string) {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": "bad_data", "error": msg})
	}
	if r.URL.Path != "/api/v1/query_range" {
		bad("only query_range is answered here: " + r.URL.Path)
		return
	}
	if err := r.ParseForm(); err != nil {
		bad(err.Error())
		return
	}
	start, err1 := strconv.ParseFloat(r.Form.Get("start"), 64)
	end, err2 := strconv.ParseFloat(r.Form.Get("end"), 64)
	step, err3 := strconv.ParseFloat(r.Form.Get("step"), 64)
	if err1 != nil || err2 != nil || err3 != nil || step <= 0 || end < start {
		bad(fmt.Sprintf("bad start, end or step: %q %q %q", r.Form.Get("start"), r.Form.Get("end"), r.Form.Get("step")))
		return
	}
	matches := metricRe.FindAllStringSubmatch(r.Form.Get("query"), -1)
	if len(matches) == 0 {
		bad("not a query of reclaimd's shape: " + r.Form.Get("query"))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Queries++
	startMs, endMs, stepMs := int64(math.Round(start*1e3)), int64(math.Round(end*1e3)), int64(math.Round(step*1e3))
	result := []series{}
	for _, m := range matches {
		name, label := m[1], m[2]
		pattern, err := strconv.Unquote(m[3])
		if err != nil {
			bad(err.Error())
			return
		}
		re, err := regexp.Compile("^(?:" + pattern + ")$")
		if err != nil {
			bad(err.Error())
			return
		}
		for _, e := range s.exps {
			fam := e.fams[name]
			if fam == nil {
				continue
			}
			for _, mt := range fam.GetMetric() {
				labels := map[string]string{nameLabel: name}
				for _, lp := range mt.GetLabel() {
					labels[lp.GetName()] = lp.GetValue()
				}
				if !re.MatchString(labels[label]) {
					continue
				}
				if m[4] != "" && labels[strings.TrimSuffix(m[4][1:], `!=""`)] == "" {
					continue // label!="": series that have the label
				}
				v := mt.GetGauge().GetValue()
				if mt.GetCounter() != nil {
					v = mt.GetCounter().GetValue()
				}
				var vals [][2]any
				for ms := startMs; ms <= endMs; ms += stepMs {
					at := time.UnixMilli(ms)
					if (!e.from.IsZero() && at.Before(e.from)) || (!e.until.IsZero() && at.After(e.until)) {
						continue
					}
					vals = append(vals, [2]any{float64(ms) / 1e3, strconv.FormatFloat(v, 'f', -1, 64)})
				}
				if len(vals) > 0 {
					result = append(result, series{Metric: labels, Values: vals})
				}
			}
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success",
		"data": map[string]any{"resultType": "matrix", "result": result}})
}
