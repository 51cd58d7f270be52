package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"
)

// requestCounter counts the requests a client sends to slurmrestd, reads
// (GET) and writes apart: what `apply` reports, and what the benchmark
// compares with per-object sacctmgr.
type requestCounter struct {
	next          http.RoundTripper
	log           *slog.Logger // each request at debug, with its time; nil: none
	reads, writes atomic.Int64
}

func (r *requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		r.reads.Add(1)
	} else {
		r.writes.Add(1)
	}
	start := time.Now()
	resp, err := r.next.RoundTrip(req)
	if r.log != nil {
		// Until the headers: slurmrestd answers once slurmdbd is done.
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		r.log.Debug("slurmrestd request", "method", req.Method, "path", req.URL.Path, "bytes", req.ContentLength,
			"status", status, "took", time.Since(start))
	}
	return resp, err
}

// client is an HTTP client that counts through r; timeout bounds one
// request (a batch of 500 users takes slurmdbd a few seconds).
func (r *requestCounter) client(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: r}
}

// summary is the line apply ends with, e.g. "12 requests to slurmrestd
// (5 reads, 7 writes) and 2 sacctmgr runs in 1.2s".
func (r *requestCounter) summary(sacctmgrRuns int64, elapsed time.Duration) string {
	rd, wr := r.reads.Load(), r.writes.Load()
	return fmt.Sprintf("%d requests to slurmrestd (%d reads, %d writes) and %d sacctmgr runs in %s", rd+wr, rd, wr, sacctmgrRuns, elapsed.Round(time.Millisecond))
}

// requestTimeout bounds one request to slurmrestd: reading 40,000
// associations, or writing a batch of 500 users, takes seconds.
const requestTimeout = 2 * time.Minute

const applyDoc = `Without --apply, apply shows the plan and writes nothing.

With --apply it writes the changes in plan order (QOS, accounts with parents first, users and
their associations, then removals), in batches: consecutive changes of one kind go to slurmrestd
as one list request (--batch-size changes at most; creating accounts takes one more request per
parent account). Removals and default-account moves are written one at a time.

Where it reads through sacctmgr (--read-with auto or sacctmgr), a run of 500 or more changes that
only create (accounts and users slurmdbd has no trace of, with their limits: a first apply, a new
tenant) goes to slurmdbd as a sacctmgr flat file, "sacctmgr load", instead: one load, or for
many users the accounts first and then the users in parts loaded side by side and committed in
order. A load keeps all of its part or nothing, so apply stops as exactly as with batches: what
a failed load did not keep is written in batches, which stop at the change at fault.

A batch that fails is written again one change at a time, so apply stops at the change that
fails, and every change before it is applied: slurmdbd keeps nothing of a list request it refuses.
Run apply again to continue: it plans from what Slurm has, so it converges, and a second apply of
the same file writes nothing.

Slurm is read before the writes and again after them, to check that slurmdbd kept every change
(see --read-with for how the associations are read).

One apply --apply of a cluster at a time on a host: it takes the flock
--lock-dir/strata-policy-<cluster>.lock (/run/lock) before it reads Slurm, and a second one fails
at once, exit 1, naming the process that holds it. Stopped by SIGTERM or SIGINT, apply ends its
requests, tells its sacctmgr loads no at their question (a load still working gets 60 seconds to
reach it, then is killed), so that slurmdbd has rolled them back when it exits, and says how far it
got; killed (SIGKILL), it takes its sacctmgr runs with it (none commits a load afterwards), and
slurmdbd rolls back each load it was serving once the request in progress ends. Either way what slurmdbd holds is a prefix of the plan
(the batch in progress may leave records without their settings, which no job can use), and the
next apply finishes it.

apply ends with the number of requests it sent to slurmrestd (reads and writes), the number of
sacctmgr runs, and its time.`
