// Package dcgmprom is the one client of a Prometheus that scrapes
// dcgm-exporter on the GPU nodes, and the one definition of an idle GPU,
// for the whole product: reclaimd's Prometheus source (which reclaims idle
// GPUs) and the portal API (which shows them to operators and owners)
// both read dcgm-exporter's series through Client and both judge a GPU
// with Idle, so the operator's screen and reclaim never disagree about
// the same GPU.
//
// Client sends a query (instant or range) as a form POST, bounded in size,
// and turns an answer other than a result into an *APIError with
// Prometheus's own errorType and message. Callers that read large range
// answers with their own decoder (reclaimd) take the body from Fetch;
// others read the series with Query and QueryRange.
package dcgmprom

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// dcgm-exporter's label and metric names: the defaults of every reader.
const (
	// NodeLabel names the Slurm node (dcgm-exporter's own).
	NodeLabel = "Hostname"
	// GPULabel holds the GPU index, as Slurm's gres.conf numbers it.
	GPULabel = "gpu"
	// JobLabel names the job on a GPU where dcgm-exporter's HPC job
	// mapping is on (--hpc-job-mapping-dir: a file per GPU index, written
	// by the batch system's prolog, listing the jobs on that GPU): each
	// series of the GPU is repeated once per job, with the job's id here.
	JobLabel = "hpc_job"
	// UtilMetric is the GPU utilisation in percent.
	UtilMetric = "DCGM_FI_DEV_GPU_UTIL"
	// MemActivityMetric is the memory activity, a 0–1 ratio (a
	// profiling metric).
	MemActivityMetric = "DCGM_FI_PROF_DRAM_ACTIVE"
	// MemCopyUtilMetric is the other memory activity, in percent: the
	// one a site without the profiling metrics uses.
	MemCopyUtilMetric = "DCGM_FI_DEV_MEM_COPY_UTIL"
	// FBUsedMetric is the frame buffer in use, in MiB.
	FBUsedMetric = "DCGM_FI_DEV_FB_USED"
	// MIGUtilMetric is the graphics engines' activity, a 0–1 ratio (a
	// profiling metric): the utilisation of a MIG device, which has no
	// DCGM_FI_DEV_GPU_UTIL of its own.
	MIGUtilMetric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
	// GPUInstanceLabel holds the GPU instance id of a MIG device's series
	// (absent on a whole GPU's); GPUInstanceProfileLabel its profile,
	// e.g. "1g.10gb", the type Slurm's gres names it by.
	GPUInstanceLabel        = "GPU_I_ID"
	GPUInstanceProfileLabel = "GPU_I_PROFILE"
)

// Threshold is what counts as idle: a GPU whose utilisation is at or
// below MaxUtilPercent and whose memory activity is at or below
// MaxMemActivityPercent. reclaimd's rules (reclaimrules.IdleDef) give it
// per class; the portal's overview gives the utilisation alone.
type Threshold struct {
	MaxUtilPercent        float64
	MaxMemActivityPercent float64
}

// Idle is the one definition of an idle GPU: utilisation and memory
// activity (both in percent, each the most seen over the time judged)
// at or below the threshold's. A value that is not a number (NaN) is
// not idle: a GPU without a measure is never judged idle.
func Idle(utilPercent, memActivityPercent float64, t Threshold) bool {
	return utilPercent <= t.MaxUtilPercent && memActivityPercent <= t.MaxMemActivityPercent
}

// IdleUtil is Idle for a reader that has the utilisation alone (the
// portal's view now): its memory activity is not held against it.
func IdleUtil(utilPercent float64, t Threshold) bool {
	return Idle(utilPercent, math.Inf(-1), t)
}

// Client asks one Prometheus.
type Client struct {
	// URL is Prometheus's base URL, e.g. "http://prometheus:9090" (a path
	// prefix such as "/prometheus" is kept).
	URL string
	// HTTP sends the requests; nil: a client with a 30 s timeout.
	HTTP *http.Client
	// MaxBytes bounds each answer read (0: 64 MiB).
	MaxBytes int64
}

// DefaultMaxBytes is the bound of an answer when Client.MaxBytes is 0.
const DefaultMaxBytes = 64 << 20

var defaultHTTP = &http.Client{Timeout: 30 * time.Second}

// APIError is an answer from Prometheus that is not a result: an HTTP
// error, a "status":"error" answer, or a body that is not Prometheus's
// JSON.
type APIError struct {
	// Endpoint is the API asked: "query" or "query_range" ("" reads as
	// query_range).
	Endpoint string
	// Query is the PromQL query sent.
	Query string
	// HTTPStatus is the answer's HTTP status code.
	HTTPStatus int
	// Type and Message are Prometheus's errorType and error ("bad_data",
	// "parse error at char 5: ..."); Type is empty where the body was not
	// Prometheus's error JSON, and Message then quotes the body or says
	// what was wrong with it.
	Type, Message string
}

// Error says what Prometheus answered to which query; a long query is
// shortened.
func (e *APIError) Error() string {
	q := e.Query
	if len(q) > 300 {
		q = q[:300] + "…"
	}
	msg := e.Message
	if e.Type != "" {
		msg = e.Type + ": " + msg
	}
	return fmt.Sprintf("prometheus %s %q: HTTP %d: %s", cmp.Or(e.Endpoint, "query_range"), q, e.HTTPStatus, msg)
}

// TooLargeError is an answer over the client's MaxBytes.
type TooLargeError struct{ *APIError }

// Unwrap gives the APIError.
func (e *TooLargeError) Unwrap() error { return e.APIError }

// Fetch POSTs form (a form, so a long query fits) to /api/v1/<endpoint>
// and returns the body of a 200 answer, read into buf (reused when large
// enough). An answer over MaxBytes is a *TooLargeError; another status an
// *APIError with Prometheus's error when it sent one.
func (c *Client) Fetch(ctx context.Context, endpoint string, form url.Values, buf []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.URL, "/")+"/api/v1/"+endpoint,
		strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", endpoint, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	limit := c.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	body, err := ReadBody(resp, limit, buf)
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: read answer: %w", endpoint, err)
	}
	query := form.Get("query")
	if int64(len(body)) > limit {
		return nil, &TooLargeError{&APIError{Endpoint: endpoint, Query: query, HTTPStatus: resp.StatusCode, Message: fmt.Sprintf(
			"the answer is larger than %d bytes", limit)}}
	}
	if resp.StatusCode != http.StatusOK {
		// Prometheus answers errors (400 bad_data, 422 execution, 503
		// timeout) with its error JSON; a proxy in front may not.
		var env envelope
		if json.Unmarshal(body, &env) == nil && env.Status == "error" {
			return nil, &APIError{Endpoint: endpoint, Query: query, HTTPStatus: resp.StatusCode, Type: env.ErrorType, Message: env.Error}
		}
		return nil, &APIError{Endpoint: endpoint, Query: query, HTTPStatus: resp.StatusCode, Message: Snippet(body)}
	}
	return body, nil
}

// envelope is the frame of every Prometheus API answer, less its data.
type envelope struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
}

// ReadBody reads at most limit+1 bytes of the answer into buf, grown to
// the answer's length where it says it.
func ReadBody(resp *http.Response, limit int64, buf []byte) ([]byte, error) {
	buf = buf[:0]
	if n := resp.ContentLength; n >= 0 && n <= limit && int64(cap(buf)) <= n {
		buf = make([]byte, 0, n+bytes.MinRead)
	}
	r := io.LimitReader(resp.Body, limit+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// Snippet quotes the start of a body for an error.
func Snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return strconv.Quote(s)
}

// Point is one sample of a series.
type Point struct {
	Time  time.Time
	Value float64
}

// Series is one series of an answer: its labels and its points, those
// that are numbers (NaN and infinities are left out).
type Series struct {
	Labels map[string]string
	Points []Point
}

// Query asks for the instant vector of q at t.
func (c *Client) Query(ctx context.Context, q string, t time.Time) ([]Series, error) {
	body, err := c.Fetch(ctx, "query", url.Values{"query": {q}, "time": {strconv.FormatInt(t.Unix(), 10)}}, nil)
	if err != nil {
		return nil, err
	}
	return ParseAnswer(body)
}

// QueryRange asks for the matrix of q from start to end by step (whole
// seconds).
func (c *Client) QueryRange(ctx context.Context, q string, start, end time.Time, step time.Duration) ([]Series, error) {
	body, err := c.Fetch(ctx, "query_range", url.Values{"query": {q}, "start": {strconv.FormatInt(start.Unix(), 10)},
		"end": {strconv.FormatInt(end.Unix(), 10)}, "step": {Duration(step)}}, nil)
	if err != nil {
		return nil, err
	}
	return ParseAnswer(body)
}

// Duration writes d as PromQL does, in whole seconds (at least 1).
func Duration(d time.Duration) string {
	return strconv.FormatInt(max(int64(d/time.Second), 1), 10) + "s"
}

// ParseAnswer reads a successful query or query_range answer: a vector
// (one point a series) or a matrix.
func ParseAnswer(body []byte) ([]Series, error) {
	var ans struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
				Values [][]any           `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("prometheus answer: %w", err)
	}
	if ans.Status != "success" {
		return nil, fmt.Errorf("prometheus: %s: %s", cmp.Or(ans.ErrorType, ans.Status), ans.Error)
	}
	if t := ans.Data.ResultType; t != "matrix" && t != "vector" {
		return nil, fmt.Errorf("prometheus answer: a %q, not a matrix or vector", t)
	}
	out := make([]Series, 0, len(ans.Data.Result))
	for _, r := range ans.Data.Result {
		s := Series{Labels: r.Metric}
		values := r.Values
		if ans.Data.ResultType == "vector" {
			values = [][]any{r.Value}
		}
		for _, v := range values {
			pt, err := point(v)
			if err != nil {
				return nil, err
			}
			if !math.IsNaN(pt.Value) && !math.IsInf(pt.Value, 0) {
				s.Points = append(s.Points, pt)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// point reads [<unix seconds>, "<value>"].
func point(v []any) (Point, error) {
	if len(v) != 2 {
		return Point{}, fmt.Errorf("prometheus answer: a point of %d values", len(v))
	}
	ts, ok := v[0].(float64)
	str, ok2 := v[1].(string)
	if !ok || !ok2 || math.IsNaN(ts) || math.IsInf(ts, 0) {
		return Point{}, errors.New("prometheus answer: a point is not [time, \"value\"]")
	}
	x, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return Point{}, fmt.Errorf("prometheus answer: value %q: %w", str, err)
	}
	sec, frac := math.Modf(ts)
	return Point{Time: time.Unix(int64(sec), int64(frac*1e9)).UTC(), Value: x}, nil
}
