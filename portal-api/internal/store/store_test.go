package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTokens: a token is shown once, only its hash is stored, and it stops
// working when it expires or is revoked.
func TestTokens(t *testing.T) { eachDB(t, testTokens) }

func testTokens(t *testing.T, b *backend) {
	s := b.open(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { return now })
	tok, rec, err := s.CreateToken(t.Context(), "alice", "laptop", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, TokenPrefix) || len(tok) < len(TokenPrefix)+40 {
		t.Errorf("token %q is not a prefixed 256-bit token", tok)
	}
	tok2, _, err := s.CreateToken(t.Context(), "bob", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if tok2 == tok {
		t.Fatal("two tokens are the same")
	}
	for token, want := range map[string]string{tok: "alice", tok2: "bob"} {
		if got, err := s.LookupToken(t.Context(), token); err != nil || got != want {
			t.Errorf("LookupToken = %q, %v; want %s", got, err, want)
		}
	}
	for name, bad := range map[string]string{"unknown": TokenPrefix + "x", "no prefix": "abc", "empty": ""} {
		if _, err := s.LookupToken(t.Context(), bad); !errors.Is(err, ErrTokenInvalid) {
			t.Errorf("%s: LookupToken = %v, want ErrTokenInvalid", name, err)
		}
	}
	// Only the hash is on disk.
	s.Close()
	data, err := b.raw(t)
	if err != nil {
		t.Fatal(err)
	}
	s, err = b.reopen(t)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetClock(func() time.Time { return now })
	if strings.Contains(string(data), tok[len(TokenPrefix):]) {
		t.Error("the token itself is in the database")
	}
	if !strings.Contains(string(data), Hash(tok)) {
		t.Error("the token's hash is not in what was read of the database: the check above saw nothing")
	}
	list, err := s.Tokens(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Token{rec}, list); diff != "" {
		t.Errorf("Tokens (-want +got):\n%s", diff)
	}
	// Expiry.
	now = now.Add(25 * time.Hour)
	if _, err := s.LookupToken(t.Context(), tok); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("expired: %v", err)
	}
	// Revocation.
	now = now.Add(-25 * time.Hour)
	if err := s.RevokeToken(t.Context(), rec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LookupToken(t.Context(), tok); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("revoked: %v", err)
	}
	if err := s.RevokeToken(t.Context(), rec.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second revoke: %v", err)
	}
	if all, _ := s.Tokens(t.Context(), ""); len(all) != 2 || all[0].RevokedAt.IsZero() {
		t.Errorf("Tokens(all) = %+v", all)
	}
}

// TestAudit: an intent is there before its result, and survives a
// restart without one.
func TestAudit(t *testing.T) { eachDB(t, testAudit) }

func testAudit(t *testing.T, b *backend) {
	s := b.open(t)
	id, err := s.Intent(t.Context(), Audit{User: "alice", Via: "token", Cluster: "gpu1", Action: "cancel", Target: "42"})
	if err != nil {
		t.Fatal(err)
	}
	log, err := s.AuditLog(t.Context(), 10)
	if err != nil || len(log) != 1 || log[0].Result != "" {
		t.Fatalf("before Finish: %+v, %v", log, err)
	}
	// A crash here: the intent is on disk.
	s.Close()
	s, err = b.reopen(t)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if log, _ := s.AuditLog(t.Context(), 10); len(log) != 1 || log[0].Action != "cancel" || log[0].Target != "42" {
		t.Fatalf("after restart: %+v", log)
	}
	if err := s.Finish(t.Context(), id, errors.New("slurm said no")); err != nil {
		t.Fatal(err)
	}
	id2, _ := s.Intent(t.Context(), Audit{User: "bob", Via: "oidc", Cluster: "gpu1", Action: "hold", Target: "43"})
	ctx, cancel := contextCanceled(t)
	cancel()
	// The request that asked is gone: the result is written anyway.
	if err := s.Finish(ctx, id2, nil); err != nil {
		t.Fatal(err)
	}
	log, _ = s.AuditLog(t.Context(), 10)
	if len(log) != 2 || log[0].Result != ResultOK || log[1].Result != ResultFailed || log[1].Error != "slurm said no" || log[0].FinishedAt.IsZero() {
		t.Errorf("log = %+v", log)
	}
}

// TestSubmissions: a submission is recorded with its template, parameters,
// job and audit record.
func TestSubmissions(t *testing.T) { eachDB(t, testSubmissions) }

func testSubmissions(t *testing.T, b *backend) {
	s := b.open(t)
	aid, err := s.Intent(t.Context(), Audit{User: "alice", Via: "token", Cluster: "gpu1", Action: "submit", Target: "finetune"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordSubmission(t.Context(), Submission{User: "alice", Cluster: "gpu1", Template: "finetune", Params: `{"epochs":3}`, JobID: 77, AuditID: aid}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordSubmission(t.Context(), Submission{User: "bob", Cluster: "gpu1", Template: "eval", Params: `{}`, AuditID: aid}); err != nil {
		t.Fatal(err)
	}
	subs, err := s.Submissions(t.Context(), "alice", 10)
	if err != nil || len(subs) != 1 || subs[0].JobID != 77 || subs[0].Params != `{"epochs":3}` || subs[0].AuditID != aid {
		t.Errorf("Submissions = %+v, %v", subs, err)
	}
	if all, _ := s.Submissions(t.Context(), "", 10); len(all) != 2 || all[0].JobID != 0 {
		t.Errorf("all = %+v", all)
	}
}

// TestTokenBoundCredentials: what a credential made from a token keeps
// (its id) stops being valid when the token is revoked or expires, and
// revoking a user voids every token of theirs and anything made for them
// before.
func TestTokenBoundCredentials(t *testing.T) { eachDB(t, testTokenBoundCredentials) }

func testTokenBoundCredentials(t *testing.T, b *backend) {
	s := b.open(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { return now })
	tok, _, err := s.CreateToken(t.Context(), "alice", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tok2, _, _ := s.CreateToken(t.Context(), "alice", "", time.Hour)
	bobs, _, _ := s.CreateToken(t.Context(), "bob", "", time.Hour)
	user, id, err := s.LookupTokenID(t.Context(), tok)
	if err != nil || user != "alice" {
		t.Fatalf("LookupTokenID = %q, %d, %v", user, id, err)
	}
	if err := s.TokenValid(t.Context(), id); err != nil {
		t.Errorf("a valid token: %v", err)
	}
	if err := s.TokenValid(t.Context(), 9999); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("an unknown id: %v", err)
	}
	now = now.Add(2 * time.Hour)
	if err := s.TokenValid(t.Context(), id); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("an expired token: %v", err)
	}
	now = now.Add(-2 * time.Hour)
	if err := s.RevokeToken(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if err := s.TokenValid(t.Context(), id); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("a revoked token: %v", err)
	}

	made := now
	if revoked, err := s.UserRevokedSince(t.Context(), "alice", made); err != nil || revoked {
		t.Errorf("alice before her revocation: %t, %v", revoked, err)
	}
	now = now.Add(time.Minute)
	n, err := s.RevokeUser(t.Context(), "alice")
	if err != nil || n != 1 { // tok was revoked already
		t.Fatalf("RevokeUser = %d, %v; want 1 token revoked", n, err)
	}
	if _, err := s.LookupToken(t.Context(), tok2); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("alice's other token after her revocation: %v", err)
	}
	if u, err := s.LookupToken(t.Context(), bobs); err != nil || u != "bob" {
		t.Errorf("bob's token after alice's revocation: %q, %v", u, err)
	}
	if revoked, err := s.UserRevokedSince(t.Context(), "alice", made); err != nil || !revoked {
		t.Errorf("a credential of alice made before her revocation: revoked %t, %v", revoked, err)
	}
	if revoked, _ := s.UserRevokedSince(t.Context(), "alice", now.Add(time.Second)); revoked {
		t.Error("a credential of alice made after her revocation is void")
	}
	if revoked, _ := s.UserRevokedSince(t.Context(), "bob", made); revoked {
		t.Error("bob is revoked with alice")
	}
}

// TestAuditSettle: a result other than ok and failed, a refusal recorded
// at once, and the records a stopped portal left open.
func TestAuditSettle(t *testing.T) { eachDB(t, testAuditSettle) }

func testAuditSettle(t *testing.T, b *backend) {
	s := b.open(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { return now })
	a := Audit{User: "alice", Via: "token", Cluster: "gpu1", Action: "cancel", Target: "42"}
	open1, _ := s.Intent(t.Context(), a)
	done, _ := s.Intent(t.Context(), a)
	open2, _ := s.Intent(t.Context(), a)
	if err := s.Finish(t.Context(), done, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Refused(t.Context(), Audit{User: "bob", Via: "oidc", Cluster: "gpu1", Action: "drain", Target: "gpu3"}, "not an admin"); err != nil {
		t.Fatal(err)
	}
	if s.Dialect() == DialectPostgres {
		// Other portals may share the database: a young open record may
		// be one of theirs, under way.
		if left, err := s.Unfinished(t.Context()); err != nil || len(left) != 0 {
			t.Fatalf("Unfinished within the grace = %+v, %v; want none", left, err)
		}
		now = now.Add(SharedSettleGrace + time.Second)
	}
	left, err := s.Unfinished(t.Context())
	if err != nil || len(left) != 2 || left[0].ID != open1 || left[1].ID != open2 {
		t.Fatalf("Unfinished = %+v, %v; want records %d and %d", left, err, open1, open2)
	}
	if err := s.Settle(t.Context(), open1, ResultRefused, "Access/permission denied"); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(t.Context(), open2, ResultUnknown, "unknown, the portal stopped"); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(t.Context(), open2, "maybe", ""); err == nil {
		t.Error("Settle took a result that is not one")
	}
	if left, _ := s.Unfinished(t.Context()); len(left) != 0 {
		t.Errorf("open after settling: %+v", left)
	}
	log, _ := s.AuditLog(t.Context(), 10)
	var got []string
	for _, r := range log {
		got = append(got, r.Action+":"+r.Result+":"+r.Error)
		if r.FinishedAt.IsZero() {
			t.Errorf("record %d has no finish time", r.ID)
		}
	}
	want := []string{"drain:refused:not an admin", "cancel:unknown:unknown, the portal stopped", "cancel:ok:", "cancel:refused:Access/permission denied"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit log (-want +got):\n%s", diff)
	}
}

// TestAuditInstances: on a database several portals share, the records a
// live portal has open are its actions under way and are left to it;
// those of a portal that stopped beating are returned once its last beat
// is InstanceTimeout old, and those of one that deregistered at once;
// only one settler wins, the portal that opened a record can still finish
// it, and a portal's own records are never returned to it.
func TestAuditInstances(t *testing.T) { eachDB(t, testAuditInstances) }

func testAuditInstances(t *testing.T, b *backend) {
	ctx := t.Context()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	pa, pb, pc := b.open(t), b.open(t), b.open(t)
	for _, p := range []struct {
		s    *Store
		name string
	}{{pa, "portal-a"}, {pb, "portal-b"}, {pc, "portal-c"}} {
		p.s.SetClock(clock)
		if err := p.s.Register(ctx, p.name); err != nil {
			t.Fatal(err)
		}
	}
	if err := (&Store{db: pa.db, now: clock}).Beat(ctx); !errors.Is(err, ErrNoInstance) {
		t.Errorf("Beat before Register: %v", err)
	}
	act := Audit{User: "alice", Via: "token", Cluster: "gpu1", Action: "cancel", Target: "42"}
	a1, _ := pa.Intent(ctx, act)
	b1, _ := pb.Intent(ctx, act)
	b2, _ := pb.Intent(ctx, act)
	if err := pb.Finish(ctx, b2, nil); err != nil {
		t.Fatal(err)
	}
	ids := func(s *Store) []int64 {
		t.Helper()
		recs, err := s.Unfinished(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, s := range []*Store{pa, pb, pc} {
		if got := ids(s); len(got) != 0 {
			t.Errorf("%s: Unfinished while every portal beats = %v; want none", s.Instance(), got)
		}
	}
	// portal-b stops beating (it died); a and c go on.
	now = now.Add(InstanceTimeout / 2)
	for _, s := range []*Store{pa, pc} {
		if err := s.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(InstanceTimeout/2 - time.Second)
	if got := ids(pa); len(got) != 0 {
		t.Errorf("Unfinished within portal-b's timeout = %v; want none", got)
	}
	now = now.Add(2 * time.Second)
	if got := ids(pa); !cmp.Equal(got, []int64{b1}) {
		t.Fatalf("portal-a: Unfinished past portal-b's timeout = %v; want [%d]", got, b1)
	}
	if got := ids(pc); !cmp.Equal(got, []int64{b1}) {
		t.Fatalf("portal-c: Unfinished past portal-b's timeout = %v; want [%d]", got, b1)
	}
	recs, _ := pa.Unfinished(ctx)
	if recs[0].Instance != "portal-b" {
		t.Errorf("the record names instance %q, want portal-b", recs[0].Instance)
	}
	// portal-a stops beating too, but its own record is never its to settle.
	now = now.Add(InstanceTimeout)
	if got := ids(pa); !cmp.Equal(got, []int64{b1}) {
		t.Errorf("portal-a (its own beat old): Unfinished = %v; want [%d] only", got, b1)
	}
	if got := ids(pc); !cmp.Equal(got, []int64{a1, b1}) {
		t.Errorf("portal-c: Unfinished = %v; want [%d %d]", got, a1, b1)
	}
	if err := pa.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	// Two portals settle the same record: one wins.
	won, err := pa.SettleLeftOpen(ctx, b1, ResultUnknown, "unknown, the portal stopped (portal instance portal-b)")
	if err != nil || !won {
		t.Fatalf("the first settle: %v, %v", won, err)
	}
	if won, err := pc.SettleLeftOpen(ctx, b1, ResultFailed, "late"); err != nil || won {
		t.Errorf("the second settle: %v, %v; want false", won, err)
	}
	if _, err := pa.SettleLeftOpen(ctx, b1, "maybe", ""); err == nil {
		t.Error("SettleLeftOpen took a result that is not one")
	}
	// portal-b comes back: its beat registers it again, and the result it
	// learnt replaces "unknown".
	if err := pb.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pb.Finish(ctx, b1, nil); err != nil {
		t.Fatal(err)
	}
	log, _ := pa.AuditLog(ctx, 10)
	for _, r := range log {
		if r.ID == b1 && (r.Result != ResultOK || r.Instance != "portal-b") {
			t.Errorf("record %d after portal-b finished it: %+v", b1, r)
		}
	}
	// portal-c stops cleanly with a record open: it is settled at once.
	c1, _ := pc.Intent(ctx, act)
	if err := pc.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ids(pa); !cmp.Equal(got, []int64{c1}) {
		t.Errorf("Unfinished after portal-c deregistered = %v; want [%d]", got, c1)
	}
	if _, err := pa.SettleLeftOpen(ctx, c1, ResultUnknown, "stopped"); err != nil {
		t.Fatal(err)
	}
	insts, err := pa.Instances(ctx)
	if err != nil || len(insts) != 3 || insts[2].Name != "portal-c" || insts[2].StoppedAt.IsZero() || !insts[0].StoppedAt.IsZero() {
		t.Errorf("Instances = %+v, %v", insts, err)
	}
	// A week on: the stopped and the silent instances without an open
	// record go; portal-a, silent but with a1 open, stays.
	now = now.Add(KeepInstances + time.Hour)
	if err := pb.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := pa.PruneInstances(ctx); err != nil || n != 1 {
		t.Errorf("PruneInstances = %d, %v; want 1 (portal-c)", n, err)
	}
	insts, _ = pa.Instances(ctx)
	var names []string
	for _, in := range insts {
		names = append(names, in.Name)
	}
	if !cmp.Equal(names, []string{"portal-a", "portal-b"}) {
		t.Errorf("after pruning: %v", names)
	}
}
