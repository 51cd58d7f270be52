package service

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/session"
	"github.com/strata-hpc/strata/portal-api/internal/sessionproxy"
)

// viaCookie is how a request that came with the session's cookie is known.
const viaCookie = "session-cookie"

// proxiedSession is the session id of a proxy path (the mux has not set
// the path values when the request is authenticated).
func proxiedSession(p string) string {
	rest, _ := strings.CutPrefix(p, sessionproxy.Prefix)
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// authenticate identifies r: by the API's means (a bearer token, a
// trusted proxy's header); on a session's proxy also by the session's
// cookie, which a browser sends where it cannot send a bearer header (a
// WebSocket, the pages of the session's server).
func (s *Server) authenticate(r *http.Request, proxied bool) (auth.Identity, error) {
	if proxied && s.cfg.Sessions.Origin != nil && r.Header.Get("Authorization") == "" {
		if c, err := r.Cookie(sessionCookie); err == nil {
			cc, ok := s.checkCookie(c.Value, proxiedSession(r.URL.Path))
			if !ok {
				return auth.Identity{}, &auth.Error{Msg: "the session's cookie is expired or not valid",
					Hint: "POST /v1/sessions/{id}/cookie with your token sets a new one"}
			}
			if err := s.cookieRevoked(r.Context(), cc); err != nil {
				return auth.Identity{}, err
			}
			return auth.Identity{User: cc.user, Via: viaCookie, TokenID: cc.token}, nil
		}
	}
	return s.cfg.Auth.Authenticate(r)
}

// cookieRevoked refuses a cookie whose credential was revoked since it
// was made: the personal token it was made from (revoked or expired), or
// its user (strata-portal-api token revoke-user). It is asked on every
// request, so a revocation ends the cookie at its next one.
func (s *Server) cookieRevoked(ctx context.Context, cc cookieClaims) error {
	refused := func(err error) error {
		return &auth.Error{Msg: "the session's cookie was made from a credential that is no longer valid",
			Hint: "sign in again, and POST /v1/sessions/{id}/cookie sets a new one", Err: err}
	}
	if cc.token != 0 {
		if err := s.cfg.Store.TokenValid(ctx, cc.token); err != nil {
			return refused(err)
		}
	}
	revoked, err := s.cfg.Store.UserRevokedSince(ctx, cc.user, cc.made)
	if err != nil {
		return err
	}
	if revoked {
		return refused(errors.New("the user was revoked"))
	}
	return nil
}

const cookieMAC = "strata-session-cookie-v2\x00"

// cookieClaims is what a session's cookie holds.
type cookieClaims struct {
	user string
	exp  time.Time
	// token is the personal token the cookie was made from (0: another
	// credential), and made when the first cookie of the chain was made:
	// renewals keep both, so a revocation after them still ends them.
	token int64
	made  time.Time
}

// cookieValue is the signed value of session id's cookie:
// base64(id|user|exp|token|made) "." base64(HMAC-SHA256).
// decode64 decodes the unpadded base64url of the portal's cookies and
// tokens, and refuses every spelling but the one the portal writes, so a
// cookie or token has exactly one: encoding/base64 skips \r and \n even
// in Strict mode ("ab\ncd" reads as "abcd"), and a one-time launch token
// spent under one spelling would pass again under another.
func decode64(s string) ([]byte, bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || base64.RawURLEncoding.EncodeToString(b) != s {
		return nil, false
	}
	return b, true
}

func (s *Server) cookieValue(id string, cc cookieClaims) string {
	payload := strings.Join([]string{id, cc.user, strconv.FormatInt(cc.exp.Unix(), 10), strconv.FormatInt(cc.token, 10),
		strconv.FormatInt(cc.made.Unix(), 10)}, "|")
	mac := hmac.New(sha256.New, s.sessions.key)
	mac.Write([]byte(cookieMAC + payload))
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// checkCookie returns what a cookie value signed by this server for
// session id holds, not expired.
func (s *Server) checkCookie(v, id string) (cookieClaims, bool) {
	var cc cookieClaims
	p64, m64, ok := strings.Cut(v, ".")
	if !ok || len(v) > 1024 {
		return cc, false
	}
	payload, ok1 := decode64(p64)
	got, ok2 := decode64(m64)
	if !ok1 || !ok2 {
		return cc, false
	}
	mac := hmac.New(sha256.New, s.sessions.key)
	mac.Write([]byte(cookieMAC))
	mac.Write(payload)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return cc, false
	}
	f := strings.Split(string(payload), "|")
	if len(f) != 5 || f[0] != id || f[1] == "" {
		return cc, false
	}
	exp, err1 := strconv.ParseInt(f[2], 10, 64)
	tok, err2 := strconv.ParseInt(f[3], 10, 64)
	made, err3 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return cc, false
	}
	cc = cookieClaims{user: f[1], exp: time.Unix(exp, 0), token: tok, made: time.Unix(made, 0)}
	if !s.cfg.Now().Before(cc.exp) {
		return cookieClaims{}, false
	}
	return cc, true
}

// setCookie gives the browser session id's cookie for user: HttpOnly,
// Secure when the portal serves TLS, SameSite=Strict, only under the
// session's proxy (the path /v1/sessions/{id}/proxy, which a browser
// sends on it and beneath it, and on nothing else).
func (s *Server) setCookie(w http.ResponseWriter, r *http.Request, id string, cc cookieClaims) time.Time {
	exp := s.cfg.Now().Add(s.sessions.lifetime).Truncate(time.Second)
	cc.exp = exp
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.cookieValue(id, cc), Path: sessionproxy.Prefix + id + "/proxy",
		Expires: exp, MaxAge: int(s.sessions.lifetime / time.Second), HttpOnly: true, Secure: r.TLS != nil || s.cfg.Sessions.Origin.secure(), SameSite: http.SameSiteStrictMode})
	return exp
}

// CreateSessionCookie sets the browser's cookie of the caller's session.
func (s *Server) CreateSessionCookie(w http.ResponseWriter, r *http.Request, id api.SessionID) {
	rec, p := s.core.SessionOwned(r.Context(), identity(r.Context()), id)
	if p != nil {
		writeProblem(w, p)
		return
	}
	if s.cfg.Sessions.Origin == nil {
		writeProblem(w, noSessionOrigin())
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if _, on := s.cfg.Sessions.Origin.match(r.Host); !on {
		// On the pages' origin the cookie would be the pages': the
		// answer names where to ask for it.
		writeError(w, http.StatusNotFound, api.NotFound, "sessions' cookies are set on the sessions' origin",
			"POST "+s.cfg.Sessions.Origin.Scheme+"://"+s.cfg.Sessions.Origin.hostOf(rec.ID)+sessionproxy.Prefix+rec.ID+"/cookie")
		return
	}
	who := identity(r.Context())
	exp := s.setCookie(w, r, rec.ID, cookieClaims{user: rec.User, token: who.TokenID, made: s.cfg.Now()})
	writeJSON(w, http.StatusOK, api.SessionCookie{Url: s.cfg.Sessions.Origin.ProxyURL(rec.ID), ExpiresAt: exp.UTC()})
}

// serveProxy is the route of /v1/sessions/{id}/proxy/: the API's
// timeouts are lifted, a cookie past half its life is renewed, a
// terminal's WebSocket is watched for input, and the proxy does the rest
// (its Lookup is lookupSession).
func (s *Server) serveProxy(w http.ResponseWriter, r *http.Request) {
	who := identity(r.Context())
	id := r.PathValue("session")
	// The server's read and write timeouts suit the API's small JSON, not
	// a session's large download or upload, or a stream that goes on: an
	// owner's request through the proxy is bounded by the session's
	// connection cap instead. (A WebSocket, once hijacked, has none.)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})  // not every writer has deadlines (tests)
	_ = rc.SetWriteDeadline(time.Time{}) // likewise
	if who.Via == viaCookie {
		if c, err := r.Cookie(sessionCookie); err == nil {
			// authenticate checked it, revocations included; the renewal
			// keeps the token and the time it was first made.
			if cc, ok := s.checkCookie(c.Value, id); ok && cc.exp.Sub(s.cfg.Now()) < s.sessions.lifetime/2 {
				s.setCookie(w, r, id, cc)
			}
		}
	}
	if isWebSocket(r) {
		if rec, err := s.cfg.Store.GetSession(r.Context(), id); err == nil && rec.User == who.User && rec.Server == string(session.TTYD) {
			w = &inputWatch{ResponseWriter: w, onInput: func() { s.core.TerminalInput(id) }}
		}
	}
	s.sessions.proxy.ServeHTTP(w, r)
}

func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// lookupSession is the proxy's Lookup: the caller's own session (any
// other is ErrNotFound), its job running in the cluster's snapshot now,
// and the connection file checked against it and the pin.
func (s *Server) lookupSession(r *http.Request, id string) (session.Target, error) {
	return s.core.SessionTarget(r.Context(), identity(r.Context()), id)
}

// inputWatch hands the proxy a hijacked connection whose reads (what the
// browser sends) are watched for terminal input.
type inputWatch struct {
	http.ResponseWriter
	onInput func()
}

func (w *inputWatch) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *inputWatch) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	wc := &watchedConn{Conn: conn, onInput: w.onInput}
	return wc, bufio.NewReadWriter(bufio.NewReader(wc), brw.Writer), nil
}

// watchedConn parses the browser's WebSocket frames as they pass.
type watchedConn struct {
	net.Conn
	frames  wsFrames
	onInput func()
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.frames.feed(p[:n]) > 0 {
		c.onInput()
	}
	return n, err
}

// CloseWrite passes a half close on, as the proxy does for a plain conn.
func (c *watchedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("close write: not supported")
}

// ttydInput is the first byte of a ttyd client message that is terminal
// input (ttyd's protocol: '0' input, '1' resize, '2' pause, '3' resume,
// '{' the first message's JSON).
const ttydInput = '0'

// wsFrames reads the client side of a WebSocket (RFC 6455) and counts
// the data frames whose first payload byte is ttyd's input command.
// Control frames (the pongs answering ttyd's pings) and resizes are not
// input. It holds only the state of the frame it is in.
type wsFrames struct {
	hdr    [14]byte
	n      int    // header bytes read
	need   int    // header length, once known (0: not yet)
	left   uint64 // payload bytes still to pass
	pos    uint64 // payload bytes passed of this frame
	opcode byte
	mask   [4]byte
	broken bool // not a WebSocket stream: stop looking
}

// feed reads p and returns the input frames that began in it.
func (f *wsFrames) feed(p []byte) int {
	inputs := 0
	for len(p) > 0 && !f.broken {
		if f.left > 0 {
			if f.pos == 0 && (f.opcode == 1 || f.opcode == 2) && p[0]^f.mask[0] == ttydInput {
				inputs++
			}
			k := min(uint64(len(p)), f.left)
			f.left -= k
			f.pos += k
			p = p[k:]
			continue
		}
		f.hdr[f.n] = p[0]
		f.n++
		p = p[1:]
		if f.n == 2 {
			if f.hdr[1]&0x80 == 0 {
				f.broken = true // a client's frames are masked
				return inputs
			}
			f.need = 2 + 4
			switch f.hdr[1] & 0x7f {
			case 126:
				f.need += 2
			case 127:
				f.need += 8
			}
		}
		if f.n < 2 || f.n < f.need {
			continue
		}
		length := uint64(f.hdr[1] & 0x7f)
		switch length {
		case 126:
			length = uint64(f.hdr[2])<<8 | uint64(f.hdr[3])
		case 127:
			length = 0
			for _, b := range f.hdr[2:10] {
				length = length<<8 | uint64(b)
			}
		}
		copy(f.mask[:], f.hdr[f.need-4:f.need])
		f.opcode, f.left, f.pos, f.n, f.need = f.hdr[0]&0x0f, length, 0, 0, 0
	}
	return inputs
}
