// Package sessionproxy is the reverse proxy of /v1/sessions/{id}/proxy/:
// it forwards HTTP and WebSocket requests of a session's owner to the
// server the session's job runs, and nowhere else.
//
// The rules, each tested:
//
//   - the destination is exactly the host:port of the session's checked
//     connection file (a session.Target from Config.Lookup, which the
//     server builds with session.Resolve: the job runs, on that node, on
//     the pinned port, with a secret); the dialer refuses any other
//     address, and no HTTP_PROXY from the environment is used;
//   - the browser's own credentials (Authorization, Proxy-Authorization,
//     the portal's cookies named in Config.DropCookies) never reach the
//     server; the proxy adds the server's secret itself, as the server
//     kind expects it (JupyterLab: "Authorization: token S"; ttyd: basic
//     auth "strata:S", its --credential; code-server: its session cookie,
//     S being the HASHED_PASSWORD it was started with), so the secret is
//     never in the browser's URL or history;
//   - a response header that holds the secret is dropped, the secret is
//     removed from HTML, JSON and JavaScript bodies until no copy is left,
//     not even one formed by removing another (JupyterLab writes its
//     token into its page config), and the proxy's own errors are
//     fixed texts, so nothing the proxy returns carries it (ttyd's /token
//     answer, the base64 credential its page hands back in the terminal's
//     WebSocket, is the exception: ttyd refuses the terminal without it);
//   - responses stream (FlushInterval -1): a notebook's output or a large
//     download is not buffered; WebSocket upgrades pass through
//     (httputil.ReverseProxy switches protocols itself);
//   - at most Config.MaxConns requests or WebSockets per session at once;
//     past that, 429.
//
// Its metrics (metrics.go, on Config.Registry) count the connections open
// now, the cap and the sessions at it, refusals by code, and the requests
// and response bytes passed, by server kind; none names a session or a
// user.
//
// A refusal is JSON, {"error":{"code":"...","message":"..."}}, with a
// code that stays stable (see the Code* constants).
//
// The Host header is the browser's (the portal's host), not the node's:
// JupyterLab and ttyd compare a WebSocket's Origin with it, and the
// servers are started with the proxy's base path, so the URLs they write
// are the portal's. code-server is the exception: it serves at its root
// with relative URLs, so its prefix is stripped.
package sessionproxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-hpc/strata/internal/userfile"
	"github.com/strata-hpc/strata/portal-api/internal/session"
)

// Prefix is where session routes live; a proxied path is
// Prefix + id + "/proxy/...".
const Prefix = "/v1/sessions/"

// DefaultMaxConns is the cap of concurrent requests and WebSockets per
// session when Config.MaxConns is 0: a JupyterLab tab opens a handful
// (kernels, terminals, events, contents), a few tabs stay well under it.
const DefaultMaxConns = 64

// ErrNotFound is what Lookup returns for a session that does not exist or
// is not the caller's: both are 404, so another user's session is not
// told apart from none.
var ErrNotFound = errors.New("no such session")

// Stable error codes of the proxy's refusals.
const (
	CodeNotFound       = "session_not_found"
	CodeNotRunning     = "session_not_running"
	CodeStarting       = "session_starting"
	CodeWrongHost      = "session_wrong_host"
	CodeWrongPort      = "session_wrong_port"
	CodeNoSecret       = "session_no_secret"
	CodeBadConnection  = "session_bad_connection_file"
	CodeBusy           = "session_busy"
	CodeUnreachable    = "session_unreachable"
	CodeInternal       = "internal"
	codeSessionCookie  = "code-server-session"
	ttydUser           = "strata"
	defaultDialTimeout = 10 * time.Second
)

// Lookup returns the checked target of session id for the request's user
// (the server authenticates the request before the proxy sees it). It
// returns ErrNotFound for a session that is not the user's, and the
// session package's errors (session.ErrNotRunning, ErrNoFile, ErrHost,
// ErrPort, ErrNoSecret, ...) as session.Resolve gives them.
type Lookup func(r *http.Request, id string) (session.Target, error)

// Config configures a Proxy.
type Config struct {
	Lookup Lookup
	// MaxConns caps concurrent requests per session; 0 is DefaultMaxConns.
	MaxConns int
	// DropCookies are the portal's own cookies (its login session),
	// never forwarded to a session's server.
	DropCookies []string
	// Transport reaches the servers; nil is a transport that dials only
	// the target's address, with no proxy from the environment.
	Transport *http.Transport
	// Error writes a refusal; nil writes {"error":{"code","message"}}.
	Error  func(w http.ResponseWriter, r *http.Request, status int, code, msg string)
	Logger *slog.Logger
	// Registry takes the proxy's metrics; nil: a registry of its own.
	Registry prometheus.Registerer
}

// Proxy is the handler of Prefix + "{id}/proxy/".
type Proxy struct {
	cfg   Config
	rp    *httputil.ReverseProxy
	mu    sync.Mutex
	conns map[string]int
	m     *metrics
}

type ctxKey struct{}

type route struct {
	id     string
	target session.Target
}

// New returns a Proxy for cfg.
func New(cfg Config) (*Proxy, error) {
	if cfg.Lookup == nil {
		return nil, errors.New("session proxy: no Lookup: the proxy must know where each session runs")
	}
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("session proxy: MaxConns %d: give 0 for the default or a positive cap", cfg.MaxConns)
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Error == nil {
		cfg.Error = WriteError
	}
	tr := cfg.Transport
	if tr == nil {
		tr = &http.Transport{
			Proxy:                 nil,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 0, // a long request (a large export) is the server's to time
			ForceAttemptHTTP2:     false,
		}
	} else {
		tr = tr.Clone()
	}
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: defaultDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	tr.Proxy = nil
	// Bodies come back uncompressed, so the secret can be scrubbed.
	tr.DisableCompression = true
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		rt, ok := ctx.Value(ctxKey{}).(route)
		if !ok || addr != rt.target.Addr() {
			return nil, fmt.Errorf("session proxy: refused to dial %s: not the session's server", addr)
		}
		return dial(ctx, network, addr)
	}
	p := &Proxy{cfg: cfg, conns: map[string]int{}}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	p.register(cfg.Registry)
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      tr,
		FlushInterval:  -1,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.proxyError,
		ErrorLog:       slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return p, nil
}

// ServeHTTP proxies r if its path is Prefix + id + "/proxy/..." of a
// session the Lookup finds running.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionID(r.URL.Path)
	if !ok {
		p.reject(w, r, http.StatusNotFound, CodeNotFound, "no such session")
		return
	}
	if r.URL.Path == Prefix+id+"/proxy" {
		http.Redirect(w, r, Prefix+id+"/proxy/", http.StatusFound)
		return
	}
	target, err := p.cfg.Lookup(r, id)
	if err != nil {
		p.refuse(w, r, id, err)
		return
	}
	if target.Secret == "" {
		p.refuse(w, r, id, session.ErrNoSecret)
		return
	}
	if !p.acquire(id) {
		p.cfg.Logger.Warn("session_busy", "session_id", id, "max_conns", p.cfg.MaxConns,
			"reason", "the session has as many requests and WebSockets open as the proxy allows")
		w.Header().Set("Retry-After", "5")
		p.reject(w, r, http.StatusTooManyRequests, CodeBusy,
			fmt.Sprintf("the session has %d connections open, its limit: close a tab or wait", p.cfg.MaxConns))
		return
	}
	defer p.release(id)
	p.m.requests.WithLabelValues(string(target.Kind), protocol(r)).Inc()
	ctx := context.WithValue(r.Context(), ctxKey{}, route{id: id, target: target})
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// Active is the number of requests and WebSockets session id has open.
func (p *Proxy) Active(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns[id]
}

func (p *Proxy) acquire(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns[id] >= p.cfg.MaxConns {
		return false
	}
	p.conns[id]++
	return true
}

func (p *Proxy) release(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns[id]--; p.conns[id] <= 0 {
		delete(p.conns, id)
	}
}

// sessionID takes id from Prefix + id + "/proxy" or "/proxy/...".
func sessionID(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, Prefix)
	if !ok {
		return "", false
	}
	id, tail, _ := strings.Cut(rest, "/")
	if id == "" || len(id) > 128 || strings.ContainsFunc(id, func(r rune) bool {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
		return !ok
	}) {
		return "", false
	}
	if tail != "proxy" && !strings.HasPrefix(tail, "proxy/") {
		return "", false
	}
	return id, true
}

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	rt := pr.In.Context().Value(ctxKey{}).(route)
	t := rt.target
	out := pr.Out
	out.URL.Scheme = "http"
	out.URL.Host = t.Addr()
	out.Host = pr.In.Host
	if t.Kind == session.CodeServer {
		base := Prefix + rt.id + "/proxy"
		out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, base)
		out.URL.RawPath = strings.TrimPrefix(pr.In.URL.RawPath, base)
		if out.URL.Path == "" {
			out.URL.Path = "/"
		}
	}
	pr.SetXForwarded()
	out.Header.Del("Authorization")
	out.Header.Del("Proxy-Authorization")
	drop := append([]string{codeSessionCookie}, p.cfg.DropCookies...)
	var keep []string
	for _, c := range pr.In.Cookies() {
		if !containsFold(drop, c.Name) {
			keep = append(keep, c.String())
		}
	}
	out.Header.Del("Cookie")
	// Bodies come back uncompressed, so the secret can be scrubbed from
	// them; the portal's front may compress again.
	out.Header.Del("Accept-Encoding")
	switch t.Kind {
	case session.JupyterLab:
		out.Header.Set("Authorization", "token "+t.Secret)
	case session.TTYD:
		out.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(ttydUser+":"+t.Secret)))
	case session.CodeServer:
		keep = append(keep, (&http.Cookie{Name: codeSessionCookie, Value: t.Secret}).String())
	}
	if len(keep) > 0 {
		out.Header.Set("Cookie", strings.Join(keep, "; "))
	}
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// modifyResponse drops every response header that carries the secret (a
// server echoing its credential in a cookie or a redirect).
func (p *Proxy) modifyResponse(res *http.Response) error {
	rt, ok := res.Request.Context().Value(ctxKey{}).(route)
	if !ok {
		return nil
	}
	secret := rt.target.Secret
	for k, vs := range res.Header {
		for _, v := range vs {
			if strings.Contains(v, secret) || strings.Contains(v, base64.StdEncoding.EncodeToString([]byte(ttydUser+":"+secret))) {
				p.cfg.Logger.Warn("session_header_dropped", "session_id", rt.id, "header", k, "reason", "holds the server's secret")
				res.Header.Del(k)
				break
			}
		}
	}
	if scrubbed(res.Header.Get("Content-Type")) {
		res.Body = newScrubber(res.Body, secret)
		res.ContentLength = -1
		res.Header.Del("Content-Length")
	}
	// An upgrade's body is the server's connection, which the reverse
	// proxy takes as it is: its frames are not counted.
	if res.StatusCode != http.StatusSwitchingProtocols && res.Body != nil && res.Body != http.NoBody {
		res.Body = &countedBody{ReadCloser: res.Body, c: p.m.bytes.WithLabelValues(string(rt.target.Kind))}
	}
	return nil
}

func (p *Proxy) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	rt, _ := r.Context().Value(ctxKey{}).(route)
	if errors.Is(err, context.Canceled) {
		return // the browser went away
	}
	p.cfg.Logger.Warn("session_unreachable", "session_id", rt.id, "target", rt.target, "error", err.Error())
	p.reject(w, r, http.StatusBadGateway, CodeUnreachable, "the session's server does not answer: it may be starting or have stopped")
}

// refuse answers a Lookup error; the error itself is logged, never sent.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, id string, err error) {
	status, code, msg := classify(err)
	if status >= 500 {
		p.cfg.Logger.Warn("session_refused", "session_id", id, "code", code, "error", err.Error())
	}
	if code == CodeStarting {
		w.Header().Set("Retry-After", "2")
	}
	p.reject(w, r, status, code, msg)
}

// reject writes a refusal and counts it by its code.
func (p *Proxy) reject(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	p.m.refusals.WithLabelValues(code).Inc()
	p.cfg.Error(w, r, status, code, msg)
}

func classify(err error) (int, string, string) {
	switch {
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, CodeNotFound, "no such session"
	case errors.Is(err, session.ErrNotRunning):
		return http.StatusConflict, CodeNotRunning, "the session's job is not running"
	case errors.Is(err, session.ErrNoFile):
		return http.StatusServiceUnavailable, CodeStarting, "the session's server is starting: try again in a moment"
	case errors.Is(err, session.ErrHost):
		return http.StatusBadGateway, CodeWrongHost, "the session's connection file names a node the job does not run on"
	case errors.Is(err, session.ErrPort):
		return http.StatusBadGateway, CodeWrongPort, "the session's connection file names another port than the session's server"
	case errors.Is(err, session.ErrNoSecret):
		return http.StatusBadGateway, CodeNoSecret, "the session's connection file has no secret"
	case errors.Is(err, session.ErrFormat), errors.Is(err, session.ErrMode), isUserFile(err):
		return http.StatusBadGateway, CodeBadConnection, "the session's connection file cannot be used: see the session's log"
	}
	return http.StatusInternalServerError, CodeInternal, "the session cannot be reached now"
}

func isUserFile(err error) bool {
	var ue *userfile.Error
	return errors.As(err, &ue)
}

// WriteError writes the proxy's JSON refusal.
func WriteError(w http.ResponseWriter, _ *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body.Error.Code, body.Error.Message = code, msg
	_ = json.NewEncoder(w).Encode(body)
}
