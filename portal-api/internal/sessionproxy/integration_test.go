//go:build integration

package sessionproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/testbed"
	"github.com/strata-hpc/strata/portal-api/internal/session"
	"github.com/strata-hpc/strata/portal-api/internal/session/sessiontest"
	"github.com/strata-hpc/strata/portal-api/internal/templates"
)

// The shipped session templates, run as alice's jobs on a test bed
// started with `testbed.sh up --sessions` (JupyterLab and ttyd in its
// root), reached through the proxy as the portal reaches them: the
// Lookup reads the job from a snapshot (the portal's poller) and the
// connection file with session.Resolve.

const shippedTemplates = "../../../etc/strata/templates"

// live is one session job on a bed and the proxy in front of it.
type live struct {
	b       *testbed.Bed
	admin   *slurmrest.Client
	id      string // the session's id
	work    string // the job's working directory, inside the root
	dir     string // the session folder, on the host
	uid     uint32 // alice's
	jobID   int64
	front   *httptest.Server
	proxy   *Proxy
	target  session.Target // the first valid connection file
	conn    []byte         // that file as the job wrote it
	started struct{ running, file, usable time.Duration }

	mu  sync.Mutex
	job session.Job
	pin session.Pin
}

// startSession submits the template as alice with values, waits until its
// server answers through the proxy at ready (a path under the proxy), and
// records how long each step took from the submission.
func startSession(t *testing.T, b *testbed.Bed, name string, values map[string]string, ready string) *live {
	t.Helper()
	if !b.Sessions {
		t.Skipf("test bed %s has no session servers: start it with testbed.sh up --sessions", b.Name)
	}
	ctx := testbed.Context(t)
	set, err := templates.Load(shippedTemplates)
	if err != nil {
		t.Fatal(err)
	}
	uid, err := sessiontest.UserID(b, "alice")
	if err != nil {
		t.Fatal(err)
	}
	l := &live{b: b, admin: b.Client(t), id: testbed.Unique("s"), uid: uid}
	l.work = path.Join(b.JobDir, l.id)
	if err := os.Mkdir(b.HostPath(l.work), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(b.HostPath(l.work), int(l.uid), int(l.uid)); err != nil {
		t.Fatal(err)
	}
	l.dir = b.HostPath(path.Join(l.work, "session"))
	spec, err := set.Render(name, values, templates.User{Name: "alice", Account: b.Account, WorkDir: l.work,
		Environment: []string{"HOME=/home/alice", "USER=alice", "LANG=C.UTF-8", "STRATA_SESSION_ID=" + l.id,
			"STRATA_SESSION_DIR=" + path.Join(l.work, "session")}})
	if err != nil {
		t.Fatal(err)
	}
	spec.StdOut = path.Join(l.work, "job.out")
	signer, err := slurmrest.NewKeySigner(b.JWTKey, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.Config()
	cfg.Tokens = signer
	asUser, err := slurmrest.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	res, err := asUser.Submit(ctx, "alice", spec)
	if err != nil {
		t.Fatalf("submit the %s template as alice: %v", name, err)
	}
	l.jobID = res.JobID
	t.Cleanup(func() { _ = l.admin.Cancel(context.Background(), l.jobID) })
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(b.HostPath(spec.StdOut))
			t.Logf("output of job %d:\n%s", l.jobID, out)
		}
	})
	j := testbed.WaitJob(t, l.admin, l.jobID, 3*time.Minute, "running", func(j slurmrest.Job) bool {
		return j.State.Base() == "RUNNING"
	})
	l.started.running = time.Since(t0)
	l.job = session.Job{State: "RUNNING", Nodes: j.Nodes}
	l.proxy, err = New(Config{Lookup: l.lookup, Transport: &http.Transport{DialContext: sessiontest.NodeDialer(b)}})
	if err != nil {
		t.Fatal(err)
	}
	l.front = httptest.NewServer(l.proxy)
	t.Cleanup(l.front.Close)
	// The folder appears when the script makes it; until the server
	// answers there is no file (ErrNoFile, or the folder's absence).
	for i, end := 0, time.Now().Add(2*time.Minute); ; i++ {
		tg, err := session.Resolve(l.dir, l.uid, l.job, session.Pin{})
		if err == nil {
			l.target = tg
			break
		}
		if time.Now().After(end) {
			t.Fatalf("job %d: no usable connection file after 2 minutes: %v", l.jobID, err)
		}
		if i%40 == 39 { // every 2 s: has the job ended (its server failed)?
			if j, err := l.admin.Job(ctx, l.jobID); err == nil && j.State.Base() != "RUNNING" {
				t.Fatalf("job %d ended (%s) before its server wrote the connection file", l.jobID, j.State)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.started.file = time.Since(t0)
	if l.conn, err = os.ReadFile(filepath.Join(l.dir, session.FileName)); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.pin = session.Pin{Host: l.target.Host, Port: l.target.Port}
	l.mu.Unlock()
	for end := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		res, err := http.Get(l.url(ready))
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(end) {
			t.Fatalf("%s: not ready through the proxy after a minute: %v %v", ready, res, err)
		}
	}
	l.started.usable = time.Since(t0)
	t.Logf("%s job %d on %s: running after %s, connection file after %s, usable through the proxy after %s",
		name, l.jobID, l.target.Host, l.started.running.Round(time.Millisecond), l.started.file.Round(time.Millisecond),
		l.started.usable.Round(time.Millisecond))
	return l
}

// lookup is the proxy's Lookup: the job from the snapshot, the file from
// the session folder.
func (l *live) lookup(_ *http.Request, id string) (session.Target, error) {
	if id != l.id {
		return session.Target{}, ErrNotFound
	}
	l.mu.Lock()
	job, pin := l.job, l.pin
	l.mu.Unlock()
	return session.Resolve(l.dir, l.uid, job, pin)
}

func (l *live) url(p string) string { return l.front.URL + Prefix + l.id + "/proxy/" + p }

func (l *live) wsURL(p string) string { return "ws" + strings.TrimPrefix(l.url(p), "http") }

// direct is the server's own URL for p, past the proxy.
func (l *live) direct(p string) string {
	return "http://" + net.JoinHostPort(l.b.NodeAddr, strconv.Itoa(l.target.Port)) + Prefix + l.id + "/proxy/" + p
}

// writeConn replaces the connection file as the job's user would.
func (l *live) writeConn(t *testing.T, data []byte) {
	t.Helper()
	tmp := filepath.Join(l.dir, ".test-conn")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, int(l.uid), int(l.uid)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(l.dir, session.FileName)); err != nil {
		t.Fatal(err)
	}
}

// finish cancels the job and refreshes the snapshot from slurmrestd.
func (l *live) finish(t *testing.T) {
	t.Helper()
	if err := l.admin.Cancel(testbed.Context(t), l.jobID); err != nil {
		t.Fatal(err)
	}
	j := testbed.WaitJob(t, l.admin, l.jobID, time.Minute, "ended", func(j slurmrest.Job) bool {
		return j.State.Base() != "RUNNING" && j.State.Base() != "PENDING"
	})
	l.mu.Lock()
	l.job = session.Job{State: j.State.Base(), Nodes: j.Nodes}
	l.mu.Unlock()
}

// refusal asks the proxy for p and wants status with the error code.
func refusal(t *testing.T, l *live, p string, status int, code string) {
	t.Helper()
	res, err := http.Get(l.url(p))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	if res.StatusCode != status || e.Error.Code != code {
		t.Errorf("GET %s: %d %s, want %d %s", p, res.StatusCode, body, status, code)
	}
	if bytes.Contains(body, []byte(l.target.Secret)) {
		t.Errorf("GET %s: the refusal holds the server's secret", p)
	}
}

// refusals rewrites the connection file of the running server l to name
// another port, another node, and no secret, and wants each refused; the
// job's own file then works again.
func refusals(t *testing.T, l *live, p string) {
	var conn map[string]any
	if err := json.Unmarshal(l.conn, &conn); err != nil {
		t.Fatal(err)
	}
	other := ""
	for _, n := range l.b.Nodes {
		if !slices.Contains(l.job.Nodes, n) {
			other = n
			break
		}
	}
	with := func(k string, v any) []byte {
		c := map[string]any{}
		for k, v := range conn {
			c[k] = v
		}
		c[k] = v
		data, _ := json.Marshal(c)
		return data
	}
	for _, tc := range []struct {
		name   string
		file   []byte
		status int
		code   string
	}{
		{"another port", with("port", l.target.Port+1), http.StatusBadGateway, CodeWrongPort},
		{"another node", with("host", other), http.StatusBadGateway, CodeWrongHost},
		{"no secret", with("secret", ""), http.StatusBadGateway, CodeNoSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l.writeConn(t, tc.file)
			defer l.writeConn(t, l.conn)
			refusal(t, l, p, tc.status, tc.code)
		})
	}
	// Past the proxy, without its secret, the real server refuses too.
	res, err := http.Get(l.direct(p))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden && res.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET %s without the secret, past the proxy: %d, want 401 or 403", p, res.StatusCode)
	}
	res, err = http.Get(l.url(p))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET %s with the job's own file back: %d, want 200", p, res.StatusCode)
	}
}

// TestJupyterLabSession: alice's JupyterLab through the proxy: a Jupyter
// API call, a kernel round trip (1+1 is 2), the kernel sees the job's
// GPUs in CUDA_VISIBLE_DEVICES; the proxy refuses a file naming another
// port or node, one without a secret, and the finished session; and the
// proxy's overhead per request against the same server reached directly.
func TestJupyterLabSession(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		l := startSession(t, b, "jupyterlab", map[string]string{"gpus": "2", "hours": "1"}, "lab")
		ctx := testbed.Context(t)

		res, err := http.Get(l.url("api/status"))
		if err != nil {
			t.Fatal(err)
		}
		var status struct {
			Started string `json:"started"`
		}
		err = json.NewDecoder(res.Body).Decode(&status)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || err != nil || status.Started == "" {
			t.Fatalf("GET api/status through the proxy: %d, %v, %+v", res.StatusCode, err, status)
		}

		res, err = http.Post(l.url("api/kernels"), "application/json", strings.NewReader(`{"name":"python3"}`))
		if err != nil {
			t.Fatal(err)
		}
		var kernel struct {
			ID string `json:"id"`
		}
		err = json.NewDecoder(res.Body).Decode(&kernel)
		res.Body.Close()
		if res.StatusCode != http.StatusCreated || err != nil || kernel.ID == "" {
			t.Fatalf("POST api/kernels through the proxy: %d, %v", res.StatusCode, err)
		}
		ws, wres, err := websocket.Dial(ctx, l.wsURL("api/kernels/"+kernel.ID+"/channels"), &websocket.DialOptions{
			HTTPHeader: http.Header{"Origin": {l.front.URL}}})
		if wres != nil && wres.Body != nil {
			defer wres.Body.Close()
		}
		if err != nil {
			t.Fatalf("the kernel's WebSocket through the proxy: %v", err)
		}
		defer ws.Close(websocket.StatusNormalClosure, "")
		ws.SetReadLimit(16 << 20)
		if got := execute(t, ctx, ws, "1+1"); got != "2" {
			t.Errorf("1+1 in the kernel: %q, want 2", got)
		}
		j, err := l.admin.Job(ctx, l.jobID)
		if err != nil {
			t.Fatal(err)
		}
		var idx []string
		for _, g := range j.GPUs {
			idx = append(idx, strconv.Itoa(g.Index))
		}
		want := "'" + strings.Join(idx, ",") + "'"
		if got := execute(t, ctx, ws, "import os; os.environ.get('CUDA_VISIBLE_DEVICES')"); len(idx) != 2 || got != want {
			t.Errorf("CUDA_VISIBLE_DEVICES in the kernel: %s, want the job's 2 GPUs %v as %s", got, j.GPUs, want)
		}

		t.Run("overhead", func(t *testing.T) { overhead(t, l, "api/status") })
		t.Run("refused", func(t *testing.T) { refusals(t, l, "api/status") })
		l.finish(t)
		refusal(t, l, "api/status", http.StatusConflict, CodeNotRunning)
	})
}

// execute runs code in the kernel behind ws and returns its result.
func execute(t *testing.T, ctx context.Context, ws *websocket.Conn, code string) string {
	t.Helper()
	got, err := sessiontest.Execute(ctx, ws, code)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// overhead times GET p on the real server directly (with its secret, as
// the proxy sends it) and through the proxy, interleaved, and prints both
// side by side. STRATA_SESSION_BENCH_N sets the number of requests of
// each (default 1000).
func overhead(t *testing.T, l *live, p string) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("STRATA_SESSION_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	get := func(url string, auth bool) time.Duration {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if auth {
			req.Header.Set("Authorization", "token "+l.target.Secret)
		}
		t0 := time.Now()
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		d := time.Since(t0)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", url, res.StatusCode)
		}
		return d
	}
	for range 20 { // warm both paths' connections
		get(l.direct(p), true)
		get(l.url(p), false)
	}
	direct, proxied := make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		direct[i] = get(l.direct(p), true)
		proxied[i] = get(l.url(p), false)
	}
	pct := func(ds []time.Duration, q int) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, len(s)*q/100)]
	}
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }
	var tbl strings.Builder
	fmt.Fprintf(&tbl, "GET %s on JupyterLab, %d requests each, interleaved\n", p, n)
	fmt.Fprintf(&tbl, "%-8s %10s %10s\n", "path", "p50", "p99")
	fmt.Fprintf(&tbl, "%-8s %10s %10s\n", "direct", us(pct(direct, 50)), us(pct(direct, 99)))
	fmt.Fprintf(&tbl, "%-8s %10s %10s\n", "proxy", us(pct(proxied, 50)), us(pct(proxied, 99)))
	fmt.Fprintf(&tbl, "%-8s %10s %10s\n", "overhead", us(pct(proxied, 50)-pct(direct, 50)), us(pct(proxied, 99)-pct(direct, 99)))
	fmt.Fprintf(&tbl, "submission to usable: running %s, connection file %s, /lab through the proxy %s",
		l.started.running.Round(time.Millisecond), l.started.file.Round(time.Millisecond), l.started.usable.Round(time.Millisecond))
	t.Logf("\n%s", tbl.String())
}

// TestTerminalSession: alice's web terminal through the proxy's
// WebSocket, in ttyd's protocol: `echo $SLURM_JOB_ID` reads the job's id
// back; the proxy refuses the file's variants and the finished session.
func TestTerminalSession(t *testing.T) {
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		l := startSession(t, b, "terminal", map[string]string{"gpus": "1", "hours": "1"}, "")
		ctx := testbed.Context(t)

		// ttyd's page fetches its token (the credential, base64) and
		// sends it first on the WebSocket.
		res, err := http.Get(l.url("token"))
		if err != nil {
			t.Fatal(err)
		}
		var tok struct {
			Token string `json:"token"`
		}
		err = json.NewDecoder(res.Body).Decode(&tok)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || err != nil || tok.Token == "" {
			t.Fatalf("GET token through the proxy: %d, %v", res.StatusCode, err)
		}
		ws, wres, err := websocket.Dial(ctx, l.wsURL("ws"), &websocket.DialOptions{
			Subprotocols: []string{sessiontest.TerminalSubprotocol}, HTTPHeader: http.Header{"Origin": {l.front.URL}}})
		if wres != nil && wres.Body != nil {
			defer wres.Body.Close()
		}
		if err != nil {
			t.Fatalf("the terminal's WebSocket through the proxy: %v", err)
		}
		defer ws.Close(websocket.StatusNormalClosure, "")
		if out, err := sessiontest.Terminal(ctx, ws, tok.Token, "echo $SLURM_JOB_ID", strconv.FormatInt(l.jobID, 10)); err != nil {
			t.Fatalf("job id %d: %v; it printed:\n%q", l.jobID, err, out)
		}

		t.Run("refused", func(t *testing.T) { refusals(t, l, "token") })
		l.finish(t)
		refusal(t, l, "token", http.StatusConflict, CodeNotRunning)
	})
}
