package reclaimclient

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// answers are reclaimd's own, as its API served them
// (reclaimd/internal/controller/testdata/api).
const answers = "../../../reclaimd/internal/controller/testdata/api/"

// TestClient: each route read into the contract from reclaimd's real
// answers; a 404 is ErrNotFound, another status a StatusError, an answer
// that is not the contract's (or of another job, or too large) an
// AnswerError; only the reads the portal bounds are counted.
func TestClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		file := map[string]string{"/v1/jobs/910101/attempts": "attempts-910101.json", "/v1/decisions": "decisions.json",
			"/v1/failures": "failures.json", "/v1/nodes/health": "nodes-health.json"}[r.URL.Path]
		switch {
		case file != "":
			if (r.URL.Path == "/v1/decisions" || r.URL.Path == "/v1/failures") && (r.URL.Query().Get("since") != "2026-11-22T20:24:32Z" || r.URL.Query().Get("limit") != "10000") {
				http.Error(w, "bad query "+r.URL.RawQuery, http.StatusBadRequest)
				return
			}
			b, _ := os.ReadFile(answers + file)
			_, _ = w.Write(b)
		case r.URL.Path == "/v1/jobs/7/reclaim":
			_, _ = w.Write([]byte(`{"job_id": 7, "state": {"phase": "warned"}, "decisions": [{"id": 1, "job_id": 7, "action": "warn", "reason": "idle", "outcome": "done", "decided_at": "2026-11-29T12:00:00Z"}]}`))
		case r.URL.Path == "/v1/jobs/8/reclaim":
			_, _ = w.Write([]byte(`{"job_id": 9, "decisions": []}`))
		case r.URL.Path == "/v1/jobs/9/reclaim":
			_, _ = w.Write([]byte(`<html>`))
		case r.URL.Path == "/v1/jobs/10/reclaim":
			http.Error(w, "boom", http.StatusInternalServerError)
		case r.URL.Path == "/v1/jobs/11/reclaim":
			_, _ = w.Write([]byte(strings.Repeat(" ", MaxJobBytes+1)))
		default:
			http.Error(w, `{"error": "no record"}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	reqs := NewRequests(prometheus.NewRegistry())
	c := New(Config{Cluster: "gpu1", URL: srv.URL + "/", Requests: reqs})
	ctx := t.Context()
	since := time.Date(2026, 11, 22, 20, 24, 32, 0, time.UTC)

	at, err := c.Attempts(ctx, 910101)
	if err != nil || at.JobID != 910101 || len(at.Attempts) != 2 || at.Attempts[0].Account != "acme-llm" || at.Attempts[0].Class != "nccl" {
		t.Fatalf("Attempts = %+v, %v", at, err)
	}
	if _, err := c.Attempts(ctx, 910103); !errors.Is(err, ErrNotFound) {
		t.Errorf("attempts of a job without = %v", err)
	}
	ds, err := c.Decisions(ctx, since, Limit)
	if err != nil || len(ds) == 0 || ds[0].DecidedAt.IsZero() {
		t.Errorf("Decisions = %d, %v", len(ds), err)
	}
	fs, err := c.Failures(ctx, since, Limit)
	if err != nil || len(fs) == 0 {
		t.Errorf("Failures = %d, %v", len(fs), err)
	}
	ns, err := c.NodesHealth(ctx)
	if err != nil || len(ns) == 0 {
		t.Errorf("NodesHealth = %d, %v", len(ns), err)
	}
	rec, err := c.JobReclaim(ctx, 7)
	if err != nil || len(rec.Records) != 1 || rec.Records[0].Kind != "warn" || string(rec.State) != `{"phase": "warned"}` {
		t.Errorf("JobReclaim = %+v, %v", rec, err)
	}
	var ae *AnswerError
	for id, what := range map[int64]string{8: "another job's", 9: "not JSON", 11: "too large"} {
		if _, err := c.JobReclaim(ctx, id); !errors.As(err, &ae) {
			t.Errorf("%s record = %v, want an AnswerError", what, err)
		}
	}
	var se *StatusError
	if _, err := c.JobReclaim(ctx, 10); !errors.As(err, &se) || se.Status != 500 {
		t.Errorf("a 500 = %v", err)
	}
	if _, err := c.JobReclaim(ctx, 12); !errors.Is(err, ErrNotFound) {
		t.Errorf("no record = %v", err)
	}
	// Attempts, decisions, failures and health are counted; a job's
	// record (one per reader's request, as the route it serves) is not.
	var m dto.Metric
	if err := reqs.WithLabelValues("gpu1", "ok").Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n != 5 {
		t.Errorf("counted %g reads, want 5", n)
	}
}
