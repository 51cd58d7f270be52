package slurmrest

import (
	"context"
	"net/http"
)

// Actions that slurmrestd serves as GET (requeue is GET /job/{id}/requeue)
// must not be sent twice. Go's HTTP transport resends a GET on its own
// when a reused keep-alive connection breaks before the answer, which it
// takes for an idempotent request; a requeue whose answer was lost would
// then be made again. Such requests travel on a connection of their own,
// which is never reused and so never resent.

type onceKey struct{}

// once marks ctx so that requests made with it are sent at most once.
func once(ctx context.Context) context.Context { return context.WithValue(ctx, onceKey{}, true) }

// onceTransport sends requests marked by once on a transport without
// keep-alives, and every other request on the base transport.
type onceTransport struct {
	base  http.RoundTripper
	fresh http.RoundTripper
}

func (t *onceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if v, _ := req.Context().Value(onceKey{}).(bool); v {
		return t.fresh.RoundTrip(req)
	}
	return t.base.RoundTrip(req)
}

// withOnce returns a copy of hc whose transport honours once. A transport
// that is not an *http.Transport cannot be cloned without keep-alives:
// its marked requests are sent with Close set, which is the best that can
// be done from outside it.
func withOnce(hc *http.Client) *http.Client {
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	var fresh http.RoundTripper
	if t, ok := base.(*http.Transport); ok {
		f := t.Clone()
		f.DisableKeepAlives = true
		fresh = f
	} else {
		fresh = closeTransport{base}
	}
	c := *hc
	c.Transport = &onceTransport{base: base, fresh: fresh}
	return &c
}

type closeTransport struct{ base http.RoundTripper }

func (t closeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Close = true
	return t.base.RoundTrip(r)
}
