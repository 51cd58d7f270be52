package slurmrest_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
)

// TestRequeueSentOnce drops the connection of a REST requeue after the
// request reached slurmrestd. The requeue is a GET, which Go's transport
// would resend by itself on a reused keep-alive connection, requeueing the
// job twice; it must reach slurmrestd exactly once and fail.
func TestRequeueSentOnce(t *testing.T) {
	ctx := context.Background()
	srv := slurmresttest.NewServer(t, filepath.Join("testdata", "replay", "slurm-26.05"))
	// Keep-alives on, as in production: the ping leaves an idle connection
	// the requeue would otherwise reuse.
	c, err := slurmrest.New(ctx, slurmrest.Config{URL: srv.URL, User: "root", Tokens: slurmrest.StaticToken("replay-token"),
		HTTPClient: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	const path = "/slurm/v0.0.45/job/1/requeue"
	srv.Handle(http.MethodGet, path, slurmresttest.Drop())
	if err := c.Requeue(ctx, 1, slurmrest.RequeueOptions{}); err == nil {
		t.Error("requeue over a dropped connection succeeded")
	}
	if n := srv.Count(http.MethodGet, path); n != 1 {
		t.Errorf("requeue reached slurmrestd %d times, want exactly 1", n)
	}
}
