package sessionproxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strata-hpc/strata/portal-api/internal/session"
)

// gathered is every sample of reg, as `name{k="v",...}` (labels sorted).
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			sort.Strings(labels)
			key := mf.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// expect checks samples of reg; it waits a moment for the proxy to count
// a connection its client already saw end.
func expect(t *testing.T, reg *prometheus.Registry, step string, want map[string]float64) {
	t.Helper()
	var got map[string]float64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got = gathered(t, reg)
		same := true
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				same = false
			}
		}
		if same || time.Now().After(deadline) {
			break
		}
	}
	for k, v := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: no series %s", step, k)
		} else if g != v {
			t.Errorf("%s: %s = %g, want %g", step, k, g, v)
		}
	}
}

// TestMetrics: the connections open, the cap and a session at it, the
// refusals by code, and the requests and bytes passed by kind and
// protocol, each series there from the start; no label names the session.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	b := newBed(t, session.TTYD, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/ws") {
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer c.CloseNow()
			for {
				typ, msg, err := c.Read(r.Context())
				if err != nil {
					return
				}
				if err := c.Write(r.Context(), typ, msg); err != nil {
					return
				}
			}
		}
		if r.URL.Query().Get("hold") == "1" {
			held <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}), Config{MaxConns: 2, Registry: reg})

	expect(t, reg, "at start", map[string]float64{
		MetricConnections: 0, MetricMaxConnections: 2, MetricBusiest: 0, MetricSessionsAtCap: 0,
		MetricRefusals + `{code="session_busy"}`:                     0,
		MetricRefusals + `{code="session_not_found"}`:                0,
		MetricRequests + `{kind="jupyterlab",protocol="http"}`:       0,
		MetricRequests + `{kind="ttyd",protocol="websocket"}`:        0,
		MetricResponseBodyBytes + `{kind="code-server"}`:             0,
		MetricResponseBodyBytes + `{kind="ttyd"}`:                    0,
		MetricRequests + `{kind="code-server",protocol="websocket"}`: 0,
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b.url("ws"), "http"), nil)
	if res != nil && res.Body != nil {
		defer res.Body.Close()
	}
	if err != nil {
		t.Fatalf("dial through the proxy: %v", err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte("frames are not counted as bytes")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ws.Read(ctx); err != nil {
		t.Fatal(err)
	}
	expect(t, reg, "one WebSocket", map[string]float64{MetricConnections: 1, MetricBusiest: 1, MetricSessionsAtCap: 0,
		MetricRequests + `{kind="ttyd",protocol="websocket"}`: 1})

	var done sync.WaitGroup
	done.Go(func() {
		res, err := http.Get(b.url("x?hold=1"))
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	})
	<-held
	expect(t, reg, "at the cap", map[string]float64{MetricConnections: 2, MetricBusiest: 2, MetricSessionsAtCap: 1})
	if res := get(t, b.url("x")); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("past the cap: %d, want 429", res.StatusCode)
	}
	if res := get(t, b.front.URL+"/v1/sessions/s2/proxy/x"); res.StatusCode != http.StatusNotFound {
		t.Fatalf("another session: %d, want 404", res.StatusCode)
	}
	expect(t, reg, "refused", map[string]float64{
		MetricRefusals + `{code="session_busy"}`:         1,
		MetricRefusals + `{code="session_not_found"}`:    1,
		MetricRequests + `{kind="ttyd",protocol="http"}`: 1, // the held one; a refused request is not passed
	})

	close(release)
	done.Wait()
	_ = ws.Close(websocket.StatusNormalClosure, "")
	if res := get(t, b.url("x")); res.StatusCode != http.StatusOK || string(res.Body) != "ok" {
		t.Fatalf("after the others ended: %d %s", res.StatusCode, res.Body)
	}
	expect(t, reg, "all ended", map[string]float64{MetricConnections: 0, MetricBusiest: 0, MetricSessionsAtCap: 0,
		MetricRequests + `{kind="ttyd",protocol="http"}`: 2,
		MetricResponseBodyBytes + `{kind="ttyd"}`:        float64(2 * len("ok")),
	})

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	mres, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(mres.Body)
	mres.Body.Close()
	if strings.Contains(string(text), "s1") {
		t.Errorf("the exposition names the session:\n%s", text)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (apt-get install prometheus): the lint is skipped")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(string(text))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
