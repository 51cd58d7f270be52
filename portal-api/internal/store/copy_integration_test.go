//go:build integration

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/strata-hpc/strata/internal/pgsql"
	"github.com/strata-hpc/strata/internal/pgtest"
)

// fillSQLite makes a portal's SQLite file as a site's portal leaves it:
// tokens (one revoked), a revoked user, finished, refused and open audit
// records, a submission, sessions (one ended), page sessions and sign-in
// links (one used), and a poll lease with its snapshot. It returns the
// file and a token of alice.
func fillSQLite(t *testing.T) (string, string) {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "portal.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Register(ctx, "old-host/42/cafe"); err != nil {
		t.Fatal(err)
	}
	alice, _, err := s.CreateToken(ctx, "alice", "laptop \"quoted\" — ünïcode", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateToken(ctx, "bob", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	_, old, _ := s.CreateToken(ctx, "alice", "old", time.Hour)
	if err := s.RevokeToken(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RevokeUser(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	act := Audit{User: "alice", Via: "token", Cluster: "gpu1", Action: "submit", Target: "train", Detail: "{\"gpus\": 2}"}
	done, _ := s.Intent(ctx, act)
	if err := s.Finish(ctx, done, errors.New("slurm said no, 'really'")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordSubmission(ctx, Submission{User: "alice", Cluster: "gpu1", Template: "train", Params: `{"gpus":2}`, JobID: 4242, AuditID: done}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordSubmission(ctx, Submission{User: "alice", Cluster: "gpu1", Template: "train", Params: `{}`, AuditID: done}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Refused(ctx, Audit{User: "bob", Via: "oidc", Cluster: "gpu1", Action: "drain", Target: "gpu3"}, "not an admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Intent(ctx, Audit{User: "alice", Via: "token", Cluster: "gpu1", Action: "cancel", Target: "4242"}); err != nil {
		t.Fatal(err)
	}
	for i, end := range []bool{false, true} {
		id, _ := NewSessionID()
		if err := s.CreateSession(ctx, Session{ID: id, User: "alice", Cluster: "gpu1", Template: "jupyterlab", Server: "jupyterlab",
			Account: "lab", Dir: "/home/alice/.strata/sessions/" + id, IdleLimit: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetSessionJob(ctx, id, int64(5000+i)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PinSession(ctx, id, "gpu1", 8888); err != nil {
			t.Fatal(err)
		}
		if end {
			if _, err := s.EndSession(ctx, id, "idle for 2h", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := s.CreatePageSession(ctx, "alice", "link", "de", 12*time.Hour); err != nil {
		t.Fatal(err)
	}
	link, _, err := s.CreateLoginLink(ctx, "bob", 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UseLoginLink(ctx, link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateLoginLink(ctx, "alice", 15*time.Minute); err != nil {
		t.Fatal(err)
	}
	l := s.PollLease("gpu1", "old-host/42/cafe", time.Minute)
	if ok, err := l.Acquire(ctx); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := l.Publish(ctx, []byte{0, 1, 2, 0xff}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return path, alice
}

// tableRows is every row of a table as "column=value" texts, the rows
// sorted (the two databases collate text apart).
func tableRows(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), fmt.Sprintf(`SELECT * FROM %q`, table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var row []string
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			row = append(row, fmt.Sprintf("%s=%v", cols[i], v))
		}
		out = append(out, strings.Join(row, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestCopyToPostgres: a portal's SQLite file is copied into an empty
// PostgreSQL database row for row, every table the portal keeps, ids
// included: a dry run says what it would copy and changes nothing; the
// copy then makes the schema, copies in one transaction, and the portal
// on PostgreSQL goes on (the token works, new ids follow the copied ones,
// the open record of the old portal is settled by the new one); the
// runtime tables are not copied; a second copy is refused, and so is a
// target of a newer schema; a target of an older one is brought up to
// date.
func TestCopyToPostgres(t *testing.T) {
	ctx := t.Context()
	path, alice := fillSQLite(t)
	db := pgtest.New(t)
	to := Database{Setting: db.URL, PasswordFile: db.PasswordFile}

	plan, err := CopyToPostgres(ctx, path, to, false)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, tb := range plan.Tables {
		counts[tb.Name] = tb.Source
		if tb.Target != 0 {
			t.Errorf("dry run: %s has %d rows in the empty target", tb.Name, tb.Target)
		}
	}
	want := map[string]int64{"tokens": 3, "audit": 3, "submissions": 2, "sessions": 2, "revoked_users": 1, "page_sessions": 1,
		"login_links": 2, "poll_leases": 1, "portal_instances": 1}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("dry run's counts (-want +got):\n%s", diff)
	}
	if plan.Applied || plan.SourceVersion != Migrations() || plan.TargetVersion != 0 || plan.Rows() != 14 {
		t.Errorf("dry run: %+v, %d rows", plan, plan.Rows())
	}
	raw, err := pgsql.Connect(ctx, pgsql.Config{URL: db.URL, PasswordFile: db.PasswordFile})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if v, err := postgresVersion(ctx, raw); err != nil || v != 0 {
		t.Fatalf("after the dry run the target is at version %d, %v: the dry run changed it", v, err)
	}

	plan, err = CopyToPostgres(ctx, path, to, true)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Applied || plan.TargetVersion != Migrations() {
		t.Errorf("copy: %+v", plan)
	}
	src, err := openReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, tb := range plan.Tables {
		pgRows := tableRows(t, raw, tb.Name)
		if tb.Runtime {
			if len(pgRows) != 0 {
				t.Errorf("runtime table %s was copied: %v", tb.Name, pgRows)
			}
			continue
		}
		if tb.Target != tb.Source {
			t.Errorf("%s: %d rows copied of %d", tb.Name, tb.Target, tb.Source)
		}
		if diff := cmp.Diff(tableRows(t, src, tb.Name), pgRows); diff != "" {
			t.Errorf("%s, SQLite (-) and PostgreSQL (+):\n%s", tb.Name, diff)
		}
	}

	// The portal on PostgreSQL goes on from there.
	st, err := OpenDatabase(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if u, err := st.LookupToken(ctx, alice); err != nil || u != "alice" {
		t.Errorf("alice's token on PostgreSQL: %q, %v", u, err)
	}
	if revoked, _ := st.UserRevokedSince(ctx, "bob", time.Now().Add(-time.Minute)); !revoked {
		t.Error("bob's revocation was not copied")
	}
	_, tok, err := st.CreateToken(ctx, "carol", "", time.Hour)
	if err != nil || tok.ID != 4 {
		t.Errorf("a new token after the copy: id %d, %v; want 4", tok.ID, err)
	}
	if id, err := st.Intent(ctx, Audit{User: "carol", Via: "token", Cluster: "gpu1", Action: "hold", Target: "1"}); err != nil || id != 4 {
		t.Errorf("a new audit record after the copy: id %d, %v; want 4", id, err)
	}
	if err := st.Register(ctx, "new-host/7/beef"); err != nil {
		t.Fatal(err)
	}
	left, err := st.Unfinished(ctx)
	if err != nil || len(left) != 1 || left[0].Instance != "old-host/42/cafe" || left[0].Action != "cancel" {
		t.Errorf("the old portal's open record on PostgreSQL: %+v, %v", left, err)
	}

	// Twice: refused, dry run or not, and nothing changes.
	for _, apply := range []bool{false, true} {
		if _, err := CopyToPostgres(ctx, path, to, apply); !errors.Is(err, ErrTargetNotEmpty) {
			t.Errorf("a second copy (apply %t): %v", apply, err)
		}
	}
	if n := len(tableRows(t, raw, "tokens")); n != 4 {
		t.Errorf("tokens after the refused copy: %d", n)
	}

	// A target of a newer release is refused; one of an older is brought
	// up to date and filled.
	newer := pgtest.New(t)
	nst, err := OpenDatabase(ctx, Database{Setting: newer.URL, PasswordFile: newer.PasswordFile})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nst.db.ExecContext(ctx, `INSERT INTO schema_migrations(version, applied_at) VALUES (?, 0)`, Migrations()+1); err != nil {
		t.Fatal(err)
	}
	nst.Close()
	if _, err := CopyToPostgres(ctx, path, Database{Setting: newer.URL, PasswordFile: newer.PasswordFile}, false); err == nil ||
		!strings.Contains(err.Error(), "newer than this strata-portal-api knows") {
		t.Errorf("a target of a newer release: %v", err)
	}
	older := pgtest.New(t)
	odb, err := pgsql.Open(ctx, pgsql.Config{URL: older.URL, PasswordFile: older.PasswordFile}, App, migrations[:3])
	if err != nil {
		t.Fatal(err)
	}
	odb.Close()
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	plan, err = CopyToPostgres(octx, path, Database{Setting: older.URL, PasswordFile: older.PasswordFile}, true)
	if err != nil || !plan.Applied || plan.TargetVersion != Migrations() {
		t.Errorf("a target at version 3: %+v, %v", plan, err)
	}
}
