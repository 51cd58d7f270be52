//go:build integration

package slurmrest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strata-hpc/strata/internal/slurmrest"
	"github.com/strata-hpc/strata/internal/slurmrest/slurmresttest"
	"github.com/strata-hpc/strata/internal/testbed"
)

var captureDir = flag.String("capture", "", "save replay records of every test bed under this directory (make capture-slurmrest)")

// Fixed inputs, so the requests recorded here are the requests the replay
// tests (facade_test.go) send.
var (
	replayJob     = replayJobSpec()
	replayQOS     = replayQOSSpec()
	replayAccount = replayAccountSpec()
	replayUser    = slurmrest.UserSpec{Name: "bob", Accounts: []string{"replay-tenant"}, Fairshare: 2}
	replayAssoc   = slurmrest.Association{Account: "replay-tenant", Fairshare: 25,
		GrpTRES: slurmrest.TRESList{{Type: "gres", Name: "gpu", Count: 12}}}
	replaySince = time.Unix(4102444800, 0) // no job changes after 2100-01-01
	replayMark  = "strata: replay"         // the admin comment set by the update exchange
)

// TestCapture records the exchanges the replay tests play back. It runs only
// with -capture, on fresh test beds (make capture-slurmrest), so the first
// job lands on gpu1 with GPUs 0 and 1.
func TestCapture(t *testing.T) {
	if *captureDir == "" {
		t.Skip("-capture not set")
	}
	testbed.Each(t, func(t *testing.T, b *testbed.Bed) {
		ctx := testbed.Context(t)
		rec := &recorder{base: http.DefaultTransport}
		cfg := b.Config()
		cfg.HTTPClient = &http.Client{Transport: rec, Timeout: 30 * time.Second}
		step := func(name string, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		rec.record("probe")
		c, err := slurmrest.New(ctx, cfg)
		step("connect", err)
		rec.record("ping")
		_, err = c.Ping(ctx)
		step("ping", err)
		rec.record("submit")
		res, err := c.Submit(ctx, "alice", replayJob)
		step("submit", err)
		rec.record("")
		testbed.WaitJob(t, c, res.JobID, time.Minute, "running", slurmrest.Job.Running)
		rec.record("job")
		_, err = c.Job(ctx, res.JobID)
		step("job", err)
		rec.record("jobs")
		_, err = c.Jobs(ctx, time.Time{})
		step("jobs", err)
		rec.record("jobs-unchanged")
		_, err = c.Jobs(ctx, replaySince)
		step("jobs unchanged", err)
		for name, call := range map[string]func() error{
			"nodes":        func() error { _, err := c.Nodes(ctx); return err },
			"partitions":   func() error { _, err := c.Partitions(ctx); return err },
			"shares":       func() error { _, err := c.Shares(ctx); return err },
			"accounts":     func() error { _, err := c.Accounts(ctx); return err },
			"associations": func() error { _, err := c.Associations(ctx, slurmrest.AssociationFilter{}); return err },
			"users":        func() error { _, err := c.Users(ctx); return err },
			"qos":          func() error { _, err := c.QOS(ctx); return err },
		} {
			rec.record(name)
			step(name, call())
		}
		rec.record("job-missing")
		if _, err := c.Job(ctx, 999999); !errors.Is(err, slurmrest.ErrNotFound) {
			t.Fatalf("missing job: %v", err)
		}
		rec.record("update")
		step("update", c.Update(ctx, res.JobID, slurmrest.JobUpdate{AdminComment: ptr(replayMark)}))
		rec.record("signal")
		step("signal", c.Signal(ctx, res.JobID, "USR1", true))
		rec.record("requeue")
		step("requeue", c.Requeue(ctx, res.JobID, slurmrest.RequeueOptions{}))
		rec.record("cancel")
		step("cancel", c.Cancel(ctx, res.JobID))
		rec.record("qos-set")
		step("qos set", c.SetQOS(ctx, replayQOS))
		rec.record("account-create")
		step("account create", c.CreateAccount(ctx, b.Cluster, replayAccount))
		rec.record("account-exists")
		if err := c.CreateAccount(ctx, b.Cluster, replayAccount); !errors.Is(err, slurmrest.ErrExists) {
			t.Fatalf("account exists: %v", err)
		}
		rec.record("user-add")
		step("user add", c.AddUser(ctx, b.Cluster, replayUser))
		rec.record("assoc-set")
		a := replayAssoc
		a.Cluster = b.Cluster
		step("assoc set", c.SetAssociations(ctx, []slurmrest.Association{a}))
		rec.record("assoc-delete")
		step("assoc delete", c.DeleteAssociation(ctx, b.Cluster, "replay-tenant", "bob"))
		rec.record("account-delete")
		step("account delete", c.DeleteAccount(ctx, "replay-tenant"))
		rec.record("qos-delete")
		step("qos delete", c.DeleteQOS(ctx, "replay-q"))
		rec.record("badtoken")
		bad := cfg
		bad.User = "nobody"
		bad.Tokens = slurmrest.StaticToken("not-a-token")
		var ae *slurmrest.AuthError
		if _, err := slurmrest.New(ctx, bad); !errors.As(err, &ae) {
			t.Fatalf("bad token: %v", err)
		}
		rec.record("")
		dir := filepath.Join(*captureDir, "slurm-"+b.Version)
		rec.save(t, dir)
		info, err := json.MarshalIndent(replayInfo{Parser: c.Info().Parser, Release: c.Info().Release, Cluster: b.Cluster}, "", "  ")
		step("bed info", err)
		step("bed info", os.WriteFile(filepath.Join(dir, replayInfoFile), append(info, '\n'), 0o644))
	})
}

// recorder is an http.RoundTripper that saves the exchanges made while on.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	on   string // name of the exchange being recorded; "" records nothing
	recs []slurmresttest.Record
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on != "" {
		rec := slurmresttest.Record{Seq: len(r.recs) + 1, Name: r.on, User: req.Header.Get("X-SLURM-USER-NAME"), Method: req.Method, Path: req.URL.Path, Query: req.URL.RawQuery, Status: resp.StatusCode}
		if json.Valid(reqBody) {
			rec.Request = reqBody
		}
		if json.Valid(body) {
			rec.Response = body
		}
		r.recs = append(r.recs, rec)
	}
	return resp, nil
}

func (r *recorder) record(name string) { r.mu.Lock(); r.on = name; r.mu.Unlock() }

// save writes one file per exchange, named after the exchange.
func (r *recorder) save(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, rec := range r.recs {
		seen[rec.Name]++
		name := rec.Name
		if seen[rec.Name] > 1 {
			name = rec.Name + "-" + string(rune('0'+seen[rec.Name]))
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rec); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func deref[T any](p *T) T {
	var zero T
	if p != nil {
		return *p
	}
	return zero
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
