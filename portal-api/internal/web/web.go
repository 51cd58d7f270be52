// Package web serves the portal's pages: server-rendered html/template
// pages over the same core and the same rbac.Allowed as the JSON API,
// with sign-in (OIDC code flow with PKCE, a trusted proxy's header, or a
// one-time link), page sessions kept server-side in the store, English
// and Korean (internal/i18n), and light and dark themes. Every page and
// form works without JavaScript; the script only refreshes in place.
//
// Every response carries the CSP of Secure; every state-changing request
// passes net/http.CrossOriginProtection.
package web

import (
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	assets "github.com/strata-hpc/strata/portal-api/web"

	"github.com/strata-hpc/strata/portal-api/internal/auth"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
	"github.com/strata-hpc/strata/portal-api/internal/store"
)

// Cookie names. The __Host- prefix makes the browser refuse them unless
// Secure, Path=/ and without Domain: no other host, not even a
// subdomain such as a session's, can set or see them.
const (
	SessionCookie = "__Host-strata"
	oidcCookie    = "__Host-strata-oidc"
	prefsCookie   = "__Host-strata-prefs"
)

// Via of a page session signed in with a one-time link.
const ViaLink = "link"

// Config configures the pages.
type Config struct {
	Store *store.Store
	// Auth believes a trusted reverse proxy's user header; nil: no proxy
	// sign-in.
	Auth *auth.Authenticator
	// OIDC is the identity provider's code flow; nil: none.
	OIDC *OIDC
	// IdleTimeout and MaxAge end a page session after so long without a
	// request, and so long after sign-in, whatever its use.
	IdleTimeout, MaxAge time.Duration
	Log                 *slog.Logger
	// Source is the core the data pages read; nil: the pages that need
	// it answer "unavailable".
	Source Source
}

// Handler serves the pages.
type Handler struct {
	cfg     Config
	pages   *Renderer
	handler http.Handler
	log     *slog.Logger
}

// New parses every template (an error stops the start) and routes the
// pages.
func New(cfg Config) (*Handler, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = time.Hour
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 12 * time.Hour
	}
	pages, err := ParseTemplates(assets.Templates)
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, pages: pages, log: cfg.Log}
	static, err := fs.Sub(assets.Static, "static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", cacheable(http.FileServerFS(static))))
	mux.HandleFunc("GET /signin", h.signinPage)
	mux.HandleFunc("GET /signin/link", h.linkPage)
	mux.HandleFunc("POST /signin/link", h.linkUse)
	mux.HandleFunc("GET /signin/oidc", h.oidcStart)
	mux.HandleFunc("GET /signin/callback", h.oidcCallback)
	mux.HandleFunc("POST /signout", h.signout)
	mux.HandleFunc("POST /prefs", h.prefs)
	mux.HandleFunc("GET /{$}", h.signedIn(h.home))
	if cfg.Source != nil {
		h.routeData(mux)
		h.routeSessions(mux)
		h.routeNotices(mux)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.problem(w, r, http.StatusNotFound, "error.not_found.title", "error.not_found")
	})
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.log.Info("page request refused: cross-origin", "path", r.URL.Path, "origin", r.Header.Get("Origin"))
		h.problem(w, r, http.StatusForbidden, "error.cross_origin.title", "error.cross_origin")
	}))
	h.handler = cop.Handler(mux)
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.handler.ServeHTTP(w, r) }

// Pages is the renderer, for tests.
func (h *Handler) Pages() *Renderer { return h.pages }

func cacheable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

// visitor is who asks for a page: the page session, if any, and the
// language and theme to answer in.
type visitor struct {
	token string
	sess  store.PageSession
	l     i18n.L
	theme string
	lang  string
}

func (h *Handler) visitor(r *http.Request) visitor {
	v := visitor{}
	if c, err := r.Cookie(SessionCookie); err == nil {
		if s, err := h.cfg.Store.TouchPageSession(r.Context(), c.Value, h.cfg.IdleTimeout); err == nil {
			v.token, v.sess = c.Value, s
			v.lang, v.theme = s.Lang, s.Theme
		} else if !errors.Is(err, store.ErrPageSessionInvalid) {
			h.log.Warn("page session lookup failed", "error", err)
		}
	}
	if v.token == "" {
		v.lang, v.theme = prefsOf(r)
	}
	v.l = i18n.For(v.lang, r.Header.Get("Accept-Language"))
	return v
}

func (h *Handler) page(r *http.Request, v visitor, titleKey, nav string, data any) Page {
	return Page{L: v.l, LangChoice: v.lang, Theme: v.theme, User: v.sess.User, TitleKey: titleKey, Nav: nav, Path: r.URL.RequestURI(), Data: data}
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, code int, name string, p Page) {
	if err := h.pages.Render(w, code, name, p); err != nil {
		h.log.Error("page not rendered", "page", name, "error", err)
		http.Error(w, "the page could not be drawn; the portal's log says why", http.StatusInternalServerError)
	}
}

type problemData struct{ TitleKey, MessageKey string }

func (h *Handler) problem(w http.ResponseWriter, r *http.Request, code int, titleKey, msgKey string) {
	v := h.visitor(r)
	p := h.page(r, v, titleKey, "", problemData{TitleKey: titleKey, MessageKey: msgKey})
	// A refusal says nothing of what was asked, not even its address.
	p.Path = "/"
	h.render(w, r, code, "error", p)
}

// signedIn runs next for a signed-in visitor; anyone else is signed in by
// the trusted proxy's header, or sent to the sign-in page.
func (h *Handler) signedIn(next func(http.ResponseWriter, *http.Request, visitor)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := h.visitor(r)
		if v.token == "" {
			if user, ok := h.fromProxy(r); ok {
				if err := h.startSession(w, r, user, auth.ViaProxy, v.lang); err != nil {
					h.log.Error("page session not started", "user", user, "error", err)
					h.problem(w, r, http.StatusInternalServerError, "error.internal.title", "error.internal")
					return
				}
				http.Redirect(w, r, r.URL.RequestURI(), http.StatusSeeOther)
				return
			}
			http.Redirect(w, r, "/signin?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		next(w, r, v)
	}
}

func (h *Handler) fromProxy(r *http.Request) (string, bool) {
	if h.cfg.Auth == nil || r.Header.Get("Authorization") != "" {
		return "", false
	}
	id, err := h.cfg.Auth.Authenticate(r)
	if err != nil || id.Via != auth.ViaProxy {
		return "", false
	}
	return id.User, true
}

func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, user, via, lang string) error {
	if c, err := r.Cookie(SessionCookie); err == nil {
		// A new sign-in replaces the old session: no fixation.
		_ = h.cfg.Store.EndPageSession(r.Context(), c.Value)
	}
	tok, _, err := h.cfg.Store.CreatePageSession(r.Context(), user, via, lang, h.cfg.MaxAge)
	if err != nil {
		return err
	}
	h.log.Info("signed in to the pages", "user", user, "via", via)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: tok, Path: "/", MaxAge: int(h.cfg.MaxAge / time.Second),
		Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	return nil
}

func (h *Handler) signout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		if err := h.cfg.Store.EndPageSession(r.Context(), c.Value); err != nil {
			h.log.Error("page session not ended", "error", err)
			h.problem(w, r, http.StatusInternalServerError, "error.internal.title", "error.internal")
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/signin?out=1", http.StatusSeeOther)
}

// prefs keeps the language and theme: in the page session, or before
// sign-in in a cookie of their own.
func (h *Handler) prefs(w http.ResponseWriter, r *http.Request) {
	lang, theme := r.PostFormValue("lang"), r.PostFormValue("theme")
	if lang != "en" && lang != "ko" {
		lang = ""
	}
	if theme != "light" && theme != "dark" {
		theme = ""
	}
	v := h.visitor(r)
	if v.token != "" {
		if err := h.cfg.Store.SetPagePrefs(r.Context(), v.token, lang, theme); err != nil {
			h.log.Error("preferences not kept", "error", err)
			h.problem(w, r, http.StatusInternalServerError, "error.internal.title", "error.internal")
			return
		}
	} else {
		http.SetCookie(w, &http.Cookie{Name: prefsCookie, Value: lang + "." + theme, Path: "/", MaxAge: 365 * 24 * 3600,
			Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	}
	http.Redirect(w, r, localPath(r.PostFormValue("next")), http.StatusSeeOther)
}

func prefsOf(r *http.Request) (lang, theme string) {
	c, err := r.Cookie(prefsCookie)
	if err != nil {
		return "", ""
	}
	lang, theme, _ = strings.Cut(c.Value, ".")
	if lang != "en" && lang != "ko" {
		lang = ""
	}
	if theme != "light" && theme != "dark" {
		theme = ""
	}
	return lang, theme
}

// localPath is p when it is a path of this site, else "/": a sign-in
// never sends the browser to another host.
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") || strings.ContainsAny(p, "\r\n") {
		return "/"
	}
	return p
}

func (h *Handler) home(w http.ResponseWriter, r *http.Request, v visitor) {
	var d *homeData
	if h.cfg.Source != nil {
		hd := h.homeData(r, v)
		d = &hd
	}
	h.render(w, r, http.StatusOK, "home", h.page(r, v, "home.title", "home", d))
}
