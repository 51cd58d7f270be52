package dcgmprom

import (
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestIdle: the one definition of an idle GPU, at and around the
// threshold, and a GPU without a measure (NaN) never idle.
func TestIdle(t *testing.T) {
	th := Threshold{MaxUtilPercent: 5, MaxMemActivityPercent: 1}
	for name, tc := range map[string]struct {
		util, mem float64
		want      bool
	}{
		"both under":         {0, 0, true},
		"util at the max":    {5, 0.5, true},
		"util over":          {5.01, 0, false},
		"memory at the max":  {1, 1, true},
		"memory over":        {1, 1.5, false},
		"util not a number":  {math.NaN(), 0, false},
		"memory not a value": {0, math.NaN(), false},
	} {
		if got := Idle(tc.util, tc.mem, th); got != tc.want {
			t.Errorf("%s: Idle(%g, %g) = %v, want %v", name, tc.util, tc.mem, got, tc.want)
		}
	}
	if !IdleUtil(5, th) || IdleUtil(6, th) || IdleUtil(math.NaN(), th) {
		t.Error("IdleUtil does not judge the utilisation alone as Idle does")
	}
	// Zero thresholds: only a GPU doing nothing at all is idle.
	if !Idle(0, 0, Threshold{}) || Idle(0.1, 0, Threshold{}) {
		t.Error("a zero threshold")
	}
}

// TestFetch: what the client sends, and each kind of answer: a result, a
// Prometheus error, a proxy's error, an answer over the bound.
func TestFetch(t *testing.T) {
	var got url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		got = r.PostForm
		switch r.URL.Path {
		case "/prom/api/v1/query":
			_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"Hostname":"gpu1","gpu":"0"},"value":[1795983872,"42"]}]}}`))
		case "/prom/api/v1/query_range":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"parse error"}`))
		default:
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(strings.Repeat("x", 300)))
		}
	}))
	t.Cleanup(srv.Close)
	c := &Client{URL: srv.URL + "/prom/"}
	at := time.Unix(1795983872, 0)
	series, err := c.Query(t.Context(), "up", at)
	if err != nil || len(series) != 1 || series[0].Labels["Hostname"] != "gpu1" || len(series[0].Points) != 1 ||
		series[0].Points[0].Value != 42 || !series[0].Points[0].Time.Equal(at) {
		t.Fatalf("Query = %+v, %v", series, err)
	}
	if got.Get("query") != "up" || got.Get("time") != "1795983872" {
		t.Errorf("sent %v", got)
	}
	_, err = c.QueryRange(t.Context(), "bad(", at.Add(-time.Minute), at, 30*time.Second)
	var ae *APIError
	if !errors.As(err, &ae) || ae.HTTPStatus != 400 || ae.Type != "bad_data" || ae.Query != "bad(" || ae.Endpoint != "query_range" {
		t.Errorf("QueryRange error = %#v", err)
	}
	if got.Get("step") != "30s" || got.Get("start") != "1795983812" {
		t.Errorf("sent %v", got)
	}
	_, err = (&Client{URL: srv.URL}).Fetch(t.Context(), "other", url.Values{"query": {"q"}}, nil)
	if !errors.As(err, &ae) || ae.HTTPStatus != 502 || ae.Type != "" || !strings.HasSuffix(ae.Message, `…"`) {
		t.Errorf("a proxy's error = %#v", err)
	}
	_, err = (&Client{URL: srv.URL + "/prom", MaxBytes: 10}).Fetch(t.Context(), "query", url.Values{"query": {"q"}}, nil)
	var big *TooLargeError
	if !errors.As(err, &big) || !errors.As(err, &ae) {
		t.Errorf("an answer over the bound = %#v", err)
	}
}

// FuzzParseAnswer: any body is read without a panic, and what it reads
// holds numbers only.
func FuzzParseAnswer(f *testing.F) {
	f.Add([]byte(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"gpu":"0"},"values":[[1,"1"],[2,"NaN"]]}]}}`))
	f.Add([]byte(`{"status":"error","errorType":"bad_data","error":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		series, err := ParseAnswer(body)
		if err != nil {
			return
		}
		for _, s := range series {
			for _, p := range s.Points {
				if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
					t.Fatalf("a point %v", p)
				}
			}
		}
	})
}
