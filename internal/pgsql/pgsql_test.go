package pgsql

import (
	"net/url"
	"strings"
	"testing"
)

func TestCheckURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string // "" ok, else a part of the error
	}{
		{"postgres://strata@db.example.org/strata_portal", ""},
		{"postgresql://strata@db.example.org:6432/strata_portal?sslmode=verify-full", ""},
		{"postgres://strata@[::1]:5432/portal?sslmode=disable", ""},
		{"postgres://strata:hunter2@db.example.org/strata_portal", "holds a password"},
		{"postgres://strata@db.example.org/strata_portal?password=hunter2", "password= parameter"},
		{"postgres://strata@/strata_portal", "no host"},
		{"postgres://strata@db.example.org", "no database"},
		{"postgres://strata@db.example.org/", "no database"},
		{"postgres://db.example.org/strata_portal", "no user"},
		{"mysql://strata@db.example.org/x", "want postgres://"},
		{"postgres://strata@db.example.org:notaport/x", "not a URL"},
		{"postgres://strata@db.example.org/x?sslmode=sometimes", "driver cannot read it"},
	} {
		err := CheckURL(tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.url, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error repeats the password: %v", tc.url, err)
		}
	}
}

// FuzzCheckURL: whatever the URL, an error never repeats its password.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"postgres://u:pw@h/d", "postgres://u@h/d?password=pw", "postgresql://u:p%40w@h:1/d", "postgres://:@/", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		err := CheckURL(raw)
		if err == nil {
			u, perr := url.Parse(raw)
			if perr != nil {
				t.Fatalf("%q passed but does not parse", raw)
			}
			if _, has := u.User.Password(); has || u.Query().Has("password") {
				t.Fatalf("%q passed with a password", raw)
			}
			return
		}
		u, perr := url.Parse(raw)
		if perr != nil {
			return
		}
		for _, pw := range append(u.Query()["password"], passwordOf(u)) {
			if len(pw) >= 4 && strings.Contains(err.Error(), pw) {
				t.Fatalf("%q: the error repeats the password: %v", raw, err)
			}
		}
	})
}

func passwordOf(u *url.URL) string {
	pw, _ := u.User.Password()
	return pw
}

func TestRebind(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`SELECT a FROM t WHERE b = ? AND c = ?`, `SELECT a FROM t WHERE b = $1 AND c = $2`},
		{`INSERT INTO t("user", x) VALUES (?, '?') RETURNING id`, `INSERT INTO t("user", x) VALUES ($1, '?') RETURNING id`},
		{`SELECT "a?b", ? FROM t WHERE s = 'it''s ?' AND u = ?`, `SELECT "a?b", $1 FROM t WHERE s = 'it''s ?' AND u = $2`},
		{`?,?,?,?,?,?,?,?,?,?,?`, `$1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11`},
	} {
		if got := Rebind(tc.in); got != tc.want {
			t.Errorf("Rebind(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestIsURL(t *testing.T) {
	for s, want := range map[string]bool{"postgres://h/d": true, "postgresql://h/d": true, "/var/lib/strata/portal.db": false, "Postgres://x": false, "": false} {
		if IsURL(s) != want {
			t.Errorf("IsURL(%q) = %v", s, !want)
		}
	}
}
