package store

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/reclaimapi"
	"github.com/strata-hpc/strata/internal/sqlite/sqlitetest"
)

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestIntentSurvivesRestartAndFinishesOnce(t *testing.T) {
	eachDB(t, testIntentSurvivesRestartAndFinishesOnce)
}

func testIntentSurvivesRestartAndFinishesOnce(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.open(t)
	id, err := s.Intent(ctx, Record{JobID: 42, Tenant: "acme", Kind: "requeue", Rule: "train", Reason: "8 of 8 GPUs idle for 30m0s",
		Evidence: json.RawMessage(`{"idle_gpus":8}`), GPUs: []GPU{{Node: "gpu1", Index: 0}, {Node: "gpu1", Index: 1}}, DecidedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Intent(ctx, Record{JobID: 43, Kind: "warn", Reason: "dry", Status: StatusDryRun, DecidedAt: t0}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// A new process finds the open intent, and only that one.
	s = b.open(t)
	pending, err := s.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{{ID: id, JobID: 42, Tenant: "acme", Kind: "requeue", Rule: "train", Reason: "8 of 8 GPUs idle for 30m0s",
		Evidence: json.RawMessage(`{"idle_gpus":8}`), GPUs: []GPU{{Node: "gpu1", Index: 0}, {Node: "gpu1", Index: 1}}, Status: StatusIntent, DecidedAt: t0}}
	if diff := cmp.Diff(want, pending); diff != "" {
		t.Fatalf("pending after restart (-want +got):\n%s", diff)
	}
	if err := s.Finish(ctx, id, StatusDone, "", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, id, StatusDone, "", t0.Add(2*time.Second)); err == nil || !strings.Contains(err.Error(), "not an open intent") {
		t.Errorf("second Finish: err = %v, want a refusal", err)
	}
	if p, _ := s.Pending(ctx); len(p) != 0 {
		t.Errorf("pending after finish: %v", p)
	}
	recs, err := s.Job(ctx, 42)
	if err != nil || len(recs) != 1 || recs[0].Status != StatusDone || recs[0].DoneAt == nil || !recs[0].DoneAt.Equal(t0.Add(time.Second)) {
		t.Errorf("job 42 records = %+v, %v", recs, err)
	}
	dry, _ := s.Job(ctx, 43)
	if len(dry) != 1 || dry[0].Status != StatusDryRun || dry[0].DoneAt == nil {
		t.Errorf("dry-run record = %+v: want finished at once", dry)
	}
}

func TestSince(t *testing.T) { eachDB(t, testSince) }

func testSince(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.open(t)
	for i := 0; i < 5; i++ {
		if _, err := s.Intent(ctx, Record{JobID: int64(i), Kind: "warn", Reason: "r", DecidedAt: t0.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Since(ctx, t0.Add(2*time.Minute), 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].JobID != 2 || got[1].JobID != 3 {
		t.Errorf("since +2m, limit 2 = %+v, want jobs 2 and 3", got)
	}
}

func TestStates(t *testing.T) { eachDB(t, testStates) }

func testStates(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.open(t)
	if err := s.SaveStates(ctx, map[int64]json.RawMessage{1: json.RawMessage(`{"phase":"warned"}`), 2: json.RawMessage(`{"phase":"observed"}`)}, nil, t0); err != nil {
		t.Fatal(err)
	}
	// Job 2 ended: only job 1 is kept, with its new state.
	if err := s.SaveStates(ctx, map[int64]json.RawMessage{1: json.RawMessage(`{"phase":"signalled"}`)}, map[int64]bool{1: true}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err := s.States(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int64]json.RawMessage{1: json.RawMessage(`{"phase":"signalled"}`)}, got); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
}

// Open creates the current schema, and refuses a database from a newer
// reclaimd.
func TestSchemaVersion(t *testing.T) { eachDB(t, testSchemaVersion) }

func testSchemaVersion(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.open(t)
	if v, err := s.SchemaVersion(ctx); err != nil || v != len(migrations) {
		t.Fatalf("schema version = %d, %v; want %d", v, err, len(migrations))
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_migrations(version, applied_at) VALUES(99, 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := b.reopen(t); err == nil || !strings.Contains(err.Error(), "schema version 99 is newer than this reclaimd knows") {
		t.Errorf("Open of a newer schema: err = %v", err)
	}
}

// A database of every earlier schema (testdata/schema-N.sql, made from
// the CREATE statements of the release that wrote it) opens, migrates to
// the current schema, and keeps its rows: the open intent a crash left is
// still pending, and a reclaimd of that release would now refuse it.
func TestOpenEarlierSchemas(t *testing.T) {
	for _, file := range sqlitetest.Schemas(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "reclaimd.db")
			sqlitetest.Seed(t, path, file)
			s := open(t, path)
			if v, err := s.SchemaVersion(ctx); err != nil || v != len(migrations) {
				t.Errorf("schema version %d, %v; want %d", v, err, len(migrations))
			}
			pending, err := s.Pending(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := []Record{{ID: 2, JobID: 42, Tenant: "acme", Account: "acme-p", User: "alice", Kind: "requeue", Rule: "train",
				Reason: "8 of 8 GPUs idle for 30m0s", Evidence: json.RawMessage(`{"idle_gpus":8}`), GPUs: []GPU{{Node: "gpu1", Index: 0}, {Node: "gpu1", Index: 1}},
				Status: StatusIntent, DecidedAt: time.UnixMilli(1764417660000).UTC()}}
			if diff := cmp.Diff(want, pending); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
			if recs, err := s.Job(ctx, 42); err != nil || len(recs) != 2 || recs[0].Status != StatusDone || recs[0].DoneAt == nil {
				t.Errorf("records of job 42: %+v, %v", recs, err)
			}
			states, err := s.States(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[int64]json.RawMessage{42: json.RawMessage(`{"phase":"warned"}`)}, states); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
			if err := s.Finish(ctx, 2, StatusDone, "", time.UnixMilli(1764417720000)); err != nil {
				t.Errorf("Finish on the migrated database: %v", err)
			}
			var meta string
			if err := s.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key='schema'`).Scan(&meta); err != nil || meta == "1" {
				t.Errorf("meta schema = %q, %v: a first-release reclaimd would take the database for its own", meta, err)
			}
		})
	}
}

// TestUpcoming: a job's next step is saved, replaced and removed, and read
// back as it was saved, on either database.
func TestUpcoming(t *testing.T) { eachDB(t, testUpcoming) }

func testUpcoming(t *testing.T, b *backend) {
	ctx := t.Context()
	s := b.open(t)
	at := time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC)
	if _, ok, err := s.Upcoming(ctx, 7); err != nil || ok {
		t.Fatalf("before any: %v %v", ok, err)
	}
	if err := s.SaveUpcoming(ctx, map[int64]reclaimapi.Upcoming{7: {Action: "warn", At: at}, 8: {Action: "signal", At: at.Add(time.Minute)}}, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveUpcoming(ctx, map[int64]reclaimapi.Upcoming{7: {Action: "requeue", At: at.Add(time.Hour)}}, []int64{8}, false); err != nil {
		t.Fatal(err)
	}
	if u, ok, err := s.Upcoming(ctx, 7); err != nil || !ok || u.Action != "requeue" || !u.At.Equal(at.Add(time.Hour)) {
		t.Errorf("job 7: %+v %v %v; want the requeue an hour on", u, ok, err)
	}
	if u, ok, err := s.Upcoming(ctx, 8); err != nil || ok {
		t.Errorf("job 8, removed: %+v %v %v", u, ok, err)
	}
	if err := s.SaveUpcoming(ctx, map[int64]reclaimapi.Upcoming{9: {Action: "cancel", At: at}}, nil, true); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Upcoming(ctx, 7); err != nil || ok {
		t.Errorf("job 7 after a save of all: %v %v; want gone", ok, err)
	}
	if u, ok, err := s.Upcoming(ctx, 9); err != nil || !ok || u.Action != "cancel" {
		t.Errorf("job 9 after a save of all: %+v %v %v", u, ok, err)
	}
}
