package web

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/strata-hpc/strata/portal-api/internal/store"
)

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

type signinData struct {
	OIDC    bool
	Next    string
	Problem string
}

func (h *Handler) signinPage(w http.ResponseWriter, r *http.Request) {
	v := h.visitor(r)
	if v.token != "" {
		http.Redirect(w, r, localPath(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	if user, ok := h.fromProxy(r); ok {
		if err := h.startSession(w, r, user, "proxy", v.lang); err == nil {
			http.Redirect(w, r, localPath(r.URL.Query().Get("next")), http.StatusSeeOther)
			return
		}
	}
	d := signinData{OIDC: h.cfg.OIDC != nil, Next: localPath(r.URL.Query().Get("next"))}
	if r.URL.Query().Get("out") != "" {
		d.Problem = "signin.signed_out"
	}
	h.render(w, r, http.StatusOK, "signin", h.page(r, v, "signin.title", "", d))
}

// linkPage asks for a click before it spends a one-time link: a mail
// scanner or a chat's link preview that fetches the URL does not sign in
// (and does not use up the link).
func (h *Handler) linkPage(w http.ResponseWriter, r *http.Request) {
	v := h.visitor(r)
	h.render(w, r, http.StatusOK, "signin_link", h.page(r, v, "signin.title", "", struct{ Token string }{r.URL.Query().Get("t")}))
}

func (h *Handler) linkUse(w http.ResponseWriter, r *http.Request) {
	v := h.visitor(r)
	user, err := h.cfg.Store.UseLoginLink(r.Context(), r.PostFormValue("token"))
	if err != nil {
		if !errors.Is(err, store.ErrLoginLinkInvalid) {
			h.log.Error("sign-in link not checked", "error", err)
		}
		h.render(w, r, http.StatusUnauthorized, "signin", h.page(r, v, "signin.title", "",
			signinData{OIDC: h.cfg.OIDC != nil, Next: "/", Problem: "signin.link_invalid"}))
		return
	}
	if err := h.startSession(w, r, user, ViaLink, v.lang); err != nil {
		h.log.Error("page session not started", "user", user, "error", err)
		h.problem(w, r, http.StatusInternalServerError, "error.internal.title", "error.internal")
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
