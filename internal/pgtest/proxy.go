package pgtest

import (
	"io"
	"net"
	"net/url"
	"testing"
)

// Unanswered is d's URL with its host replaced by a loopback address
// that refuses connections (nothing listens there) until Proxy opens it:
// for a test of a daemon started while its database does not answer.
func Unanswered(t testing.TB, d DB) (dbURL, addr string) {
	t.Helper()
	u, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	_ = l.Close()
	u.Host = addr
	return u.String(), addr
}

// Proxy opens addr (from Unanswered) as a proxy to d's server, until the
// test ends: the database answers there from now on.
func Proxy(t testing.TB, d DB, addr string) {
	t.Helper()
	u, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	server := u.Host
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("open %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				s, err := net.Dial("tcp", server)
				if err != nil {
					return
				}
				defer func() { _ = s.Close() }()
				go func() { _, _ = io.Copy(s, c) }()
				_, _ = io.Copy(c, s)
			}()
		}
	}()
}
