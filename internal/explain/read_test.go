package explain_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/strata-hpc/strata/internal/explain"
	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
)

// TestRead reads a snapshot from the slurmrestd of each release (its
// captured exchanges): every part is there; without the fair-share tree
// the snapshot says why; an auth failure there is still an error.
func TestRead(t *testing.T) {
	for _, release := range []string{"24.11", "26.05"} {
		t.Run(release, func(t *testing.T) {
			ctx := context.Background()
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			srv := slurmresttest.NewServer(t, slurmresttest.Dir(release))
			c, err := slurmrest.New(ctx, slurmrest.Config{URL: srv.URL, User: "root", Tokens: slurmrest.StaticToken("replay-token")})
			if err != nil {
				t.Fatal(err)
			}
			s, err := explain.Read(ctx, c, log)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Associations) == 0 || len(s.Users) == 0 || len(s.QOS) == 0 || len(s.Partitions) == 0 || len(s.Nodes) == 0 ||
				len(s.Shares) == 0 || s.SharesUnavailable != "" {
				t.Errorf("snapshot: %d associations, %d users, %d QOS, %d jobs, %d partitions, %d nodes, %d shares (%q)",
					len(s.Associations), len(s.Users), len(s.QOS), len(s.Jobs), len(s.Partitions), len(s.Nodes), len(s.Shares), s.SharesUnavailable)
			}

			sharesPath := ""
			for _, r := range srv.Requests() {
				if strings.HasSuffix(strings.TrimSuffix(r.Path, "/"), "/shares") {
					sharesPath = r.Path
				}
			}
			if sharesPath == "" {
				t.Fatal("Read did not ask for the fair-share tree")
			}
			srv.Handle(http.MethodGet, sharesPath, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusNotFound)
			}))
			if s, err = explain.Read(ctx, c, log); err != nil || s.Shares != nil || s.SharesUnavailable == "" || len(s.Associations) == 0 {
				t.Errorf("without shares: %v, shares %v, unavailable %q: want the rest, and why shares are missing", err, s.Shares, s.SharesUnavailable)
			}
			srv.Handle(http.MethodGet, sharesPath, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusUnauthorized)
			}))
			var auth *slurmrest.AuthError
			if _, err = explain.Read(ctx, c, log); !errors.As(err, &auth) {
				t.Errorf("auth failure on shares: %v, want an *slurmrest.AuthError", err)
			}
		})
	}
}
