// Package store keeps strata-portal-api's state in SQLite (through
// internal/sqlite's opener and numbered migrations): personal API tokens,
// of which only a SHA-256 hash is kept (the token itself is shown once,
// when it is made), the audit log of every action the portal carries out
// for someone, the submissions made through it, and its sessions
// (sessions.go).
//
// The audit log is written in two steps: Intent before the action, Finish
// with its result after. A crash between them leaves an intent without a
// result, never an action without a record; and a request is answered
// only after its record is written.
package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/strata-hpc/strata/internal/sqlite"
)

// TokenPrefix starts every personal token, so that a leaked one is
// recognised by secret scanners and told apart from an OIDC token.
const TokenPrefix = "strata_pat_"

// ErrNotFound is returned for a token the store does not hold.
var ErrNotFound = errors.New("not found")

var migrations = []sqlite.Migration{
	{Name: "tokens", SQL: `CREATE TABLE tokens (
		id INTEGER PRIMARY KEY,
		user TEXT NOT NULL,
		hash TEXT NOT NULL UNIQUE,
		note TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		expires_at INTEGER NOT NULL,
		revoked_at INTEGER
	);
	CREATE INDEX tokens_user ON tokens(user);`},
	{Name: "audit", SQL: `CREATE TABLE audit (
		id INTEGER PRIMARY KEY,
		at INTEGER NOT NULL,
		user TEXT NOT NULL,
		via TEXT NOT NULL,
		cluster TEXT NOT NULL,
		action TEXT NOT NULL,
		target TEXT NOT NULL,
		detail TEXT NOT NULL DEFAULT '',
		result TEXT,
		error TEXT NOT NULL DEFAULT '',
		finished_at INTEGER
	);
	CREATE INDEX audit_at ON audit(at);`},
	{Name: "submissions", SQL: `CREATE TABLE submissions (
		id INTEGER PRIMARY KEY,
		at INTEGER NOT NULL,
		user TEXT NOT NULL,
		cluster TEXT NOT NULL,
		template TEXT NOT NULL,
		params TEXT NOT NULL,
		job_id INTEGER,
		audit_id INTEGER NOT NULL REFERENCES audit(id)
	);
	CREATE INDEX submissions_user ON submissions(user);`},
	sessionsMigration,
	{Name: "revoked users", SQL: `CREATE TABLE revoked_users (
		user TEXT PRIMARY KEY,
		revoked_at INTEGER NOT NULL
	);`},
	pagesMigration,
}

// Store is the portal's database.
type Store struct {
	db    *sql.DB
	now   func() time.Time
	retry sqlite.Retry
}

// Open opens (and creates or upgrades) the database at path.
func Open(ctx context.Context, path string) (*Store, error) {
	db, err := sqlite.Open(ctx, path, "strata-portal-api", migrations)
	if err != nil {
		return nil, err
	}
	return &Store{db: db, now: time.Now}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// SetClock replaces time.Now, for tests.
func (s *Store) SetClock(now func() time.Time) { s.now = now }

func (s *Store) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := s.retry.Do(ctx, func() error {
		var err error
		res, err = s.db.ExecContext(ctx, q, args...)
		return err
	})
	return res, err
}

// Token is a personal token as stored: never the token itself.
type Token struct {
	ID        int64
	User      string
	Note      string
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt time.Time // zero while valid
}

// Hash is what the store keeps of a token.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// CreateToken makes a random token for user that expires after ttl, stores
// its hash and returns the token: the only time it is seen.
func (s *Store) CreateToken(ctx context.Context, user, note string, ttl time.Duration) (string, Token, error) {
	if user == "" {
		return "", Token{}, errors.New("create token: no user")
	}
	if ttl <= 0 {
		return "", Token{}, errors.New("create token: the lifetime must be positive")
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", Token{}, fmt.Errorf("create token: %w", err)
	}
	tok := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	now := s.now().UTC().Truncate(time.Second)
	t := Token{User: user, Note: note, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	res, err := s.exec(ctx, `INSERT INTO tokens(user, hash, note, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		user, Hash(tok), note, now.Unix(), t.ExpiresAt.Unix())
	if err != nil {
		return "", Token{}, fmt.Errorf("create token: %w", err)
	}
	t.ID, _ = res.LastInsertId()
	return tok, t, nil
}

// ErrTokenInvalid is returned by LookupToken for a token that is unknown,
// expired or revoked; which of these is not said to the caller.
var ErrTokenInvalid = errors.New("the token is unknown, expired or revoked")

// LookupToken returns the user of a valid token.
func (s *Store) LookupToken(ctx context.Context, token string) (string, error) {
	user, _, err := s.LookupTokenID(ctx, token)
	return user, err
}

// LookupTokenID returns the user and the id of a valid token: what a
// credential made from the token (a session's cookie) keeps, so that it
// ends with the token (TokenValid).
func (s *Store) LookupTokenID(ctx context.Context, token string) (string, int64, error) {
	if !strings.HasPrefix(token, TokenPrefix) {
		return "", 0, ErrTokenInvalid
	}
	var (
		id      int64
		user    string
		exp     int64
		revoked sql.NullInt64
	)
	err := s.db.QueryRowContext(ctx, `SELECT id, user, expires_at, revoked_at FROM tokens WHERE hash = ?`, Hash(token)).
		Scan(&id, &user, &exp, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, ErrTokenInvalid
	}
	if err != nil {
		return "", 0, fmt.Errorf("look up token: %w", err)
	}
	if revoked.Valid || !s.now().Before(time.Unix(exp, 0)) {
		return "", 0, ErrTokenInvalid
	}
	return user, id, nil
}

// TokenValid is nil while the token of id is neither revoked nor expired,
// and ErrTokenInvalid after.
func (s *Store) TokenValid(ctx context.Context, id int64) error {
	var exp int64
	var revoked sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT expires_at, revoked_at FROM tokens WHERE id = ?`, id).Scan(&exp, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrTokenInvalid
	}
	if err != nil {
		return fmt.Errorf("look up token %d: %w", id, err)
	}
	if revoked.Valid || !s.now().Before(time.Unix(exp, 0)) {
		return ErrTokenInvalid
	}
	return nil
}

// RevokeUser revokes every token of user and records when: a credential
// the portal made for user before then (a session's cookie, whatever
// signed the user in) is refused from now on (UserRevokedSince). It
// returns how many tokens it revoked.
func (s *Store) RevokeUser(ctx context.Context, user string) (int64, error) {
	if user == "" {
		return 0, errors.New("revoke user: no user")
	}
	now := s.now().Unix()
	var n int64
	err := s.retry.Do(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		res, err := tx.ExecContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE user = ? AND revoked_at IS NULL`, now, user)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		if _, err := tx.ExecContext(ctx, `INSERT INTO revoked_users(user, revoked_at) VALUES (?, ?)
			ON CONFLICT(user) DO UPDATE SET revoked_at = excluded.revoked_at`, user, now); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return 0, fmt.Errorf("revoke user %s: %w", user, err)
	}
	return n, nil
}

// UserRevokedSince says whether user was revoked (RevokeUser) at or after
// t: a credential made at t is then void.
func (s *Store) UserRevokedSince(ctx context.Context, user string, t time.Time) (bool, error) {
	var at int64
	err := s.db.QueryRowContext(ctx, `SELECT revoked_at FROM revoked_users WHERE user = ?`, user).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up the revocation of %s: %w", user, err)
	}
	return at >= t.Unix(), nil
}

// Tokens lists the tokens of user, or of everyone when user is "".
func (s *Store) Tokens(ctx context.Context, user string) ([]Token, error) {
	q := `SELECT id, user, note, created_at, expires_at, revoked_at FROM tokens`
	var args []any
	if user != "" {
		q += ` WHERE user = ?`
		args = append(args, user)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		var t Token
		var created, exp int64
		var revoked sql.NullInt64
		if err := rows.Scan(&t.ID, &t.User, &t.Note, &created, &exp, &revoked); err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		t.CreatedAt, t.ExpiresAt = time.Unix(created, 0).UTC(), time.Unix(exp, 0).UTC()
		if revoked.Valid {
			t.RevokedAt = time.Unix(revoked.Int64, 0).UTC()
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeToken revokes a token by its id; ErrNotFound when there is none
// or it is already revoked.
func (s *Store) RevokeToken(ctx context.Context, id int64) error {
	res, err := s.exec(ctx, `UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, s.now().Unix(), id)
	if err != nil {
		return fmt.Errorf("revoke token %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("revoke token %d: %w (or already revoked)", id, ErrNotFound)
	}
	return nil
}

// Audit is one record of the audit log.
type Audit struct {
	ID      int64
	At      time.Time
	User    string
	Via     string // oidc, token, proxy
	Cluster string
	Action  string // cancel, hold, drain, submit, ...
	Target  string // job id, node name, template
	Detail  string
	// Result is "" while the action is under way (or was cut short by a
	// crash), then "ok" or "failed".
	Result     string
	Error      string
	FinishedAt time.Time
}

// Results of an audited action.
const (
	ResultOK     = "ok"
	ResultFailed = "failed"
	// ResultRefused: refused, by Slurm or by the portal, and not done.
	ResultRefused = "refused"
	// ResultUnknown: the portal stopped while the action was under way,
	// and what became of it could not be told at the next start.
	ResultUnknown = "unknown"
)

// Intent records an action before it is carried out and returns its id:
// if this fails, the action must not be carried out.
func (s *Store) Intent(ctx context.Context, a Audit) (int64, error) {
	res, err := s.exec(ctx, `INSERT INTO audit(at, user, via, cluster, action, target, detail) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		s.now().UnixMilli(), a.User, a.Via, a.Cluster, a.Action, a.Target, a.Detail)
	if err != nil {
		return 0, fmt.Errorf("audit %s of %s: %w", a.Action, a.Target, err)
	}
	return res.LastInsertId()
}

// Finish records the result of an action Intent recorded; actionErr nil
// is success.
func (s *Store) Finish(ctx context.Context, id int64, actionErr error) error {
	result, msg := ResultOK, ""
	if actionErr != nil {
		result, msg = ResultFailed, actionErr.Error()
	}
	// The request may be gone; the record must still be written.
	ctx = context.WithoutCancel(ctx)
	if _, err := s.exec(ctx, `UPDATE audit SET result = ?, error = ?, finished_at = ? WHERE id = ?`,
		result, msg, s.now().UnixMilli(), id); err != nil {
		return fmt.Errorf("audit record %d: %w", id, err)
	}
	return nil
}

// Settle records the result of an action Intent recorded, as result
// (ResultOK, ResultFailed, ResultRefused, ResultUnknown) with msg.
func (s *Store) Settle(ctx context.Context, id int64, result, msg string) error {
	switch result {
	case ResultOK, ResultFailed, ResultRefused, ResultUnknown:
	default:
		return fmt.Errorf("audit record %d: %q is not a result", id, result)
	}
	ctx = context.WithoutCancel(ctx)
	if _, err := s.exec(ctx, `UPDATE audit SET result = ?, error = ?, finished_at = ? WHERE id = ?`,
		result, msg, s.now().UnixMilli(), id); err != nil {
		return fmt.Errorf("audit record %d: %w", id, err)
	}
	return nil
}

// Refused records an action refused before it was tried (the caller may
// not do it): one record, finished at once with ResultRefused and why.
func (s *Store) Refused(ctx context.Context, a Audit, why string) (int64, error) {
	now := s.now().UnixMilli()
	res, err := s.exec(context.WithoutCancel(ctx), `INSERT INTO audit(at, user, via, cluster, action, target, detail, result, error, finished_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, now, a.User, a.Via, a.Cluster, a.Action, a.Target, a.Detail, ResultRefused, why, now)
	if err != nil {
		return 0, fmt.Errorf("audit the refused %s of %s: %w", a.Action, a.Target, err)
	}
	return res.LastInsertId()
}

// Unfinished returns the records of actions under way, oldest first: at
// start, those a stopped portal left.
func (s *Store) Unfinished(ctx context.Context) ([]Audit, error) {
	return s.audits(ctx, `SELECT id, at, user, via, cluster, action, target, detail, result, error, finished_at
		FROM audit WHERE result IS NULL ORDER BY id`)
}

// AuditLog returns the records, newest first, at most limit.
func (s *Store) AuditLog(ctx context.Context, limit int) ([]Audit, error) {
	return s.audits(ctx, `SELECT id, at, user, via, cluster, action, target, detail, result, error, finished_at
		FROM audit ORDER BY id DESC LIMIT ?`, limit)
}

func (s *Store) audits(ctx context.Context, q string, args ...any) ([]Audit, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer rows.Close()
	var out []Audit
	for rows.Next() {
		var a Audit
		var at int64
		var result sql.NullString
		var fin sql.NullInt64
		if err := rows.Scan(&a.ID, &at, &a.User, &a.Via, &a.Cluster, &a.Action, &a.Target, &a.Detail, &result, &a.Error, &fin); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		a.At, a.Result = time.UnixMilli(at).UTC(), result.String
		if fin.Valid {
			a.FinishedAt = time.UnixMilli(fin.Int64).UTC()
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Submission is one job submitted through the portal.
type Submission struct {
	ID       int64
	At       time.Time
	User     string
	Cluster  string
	Template string
	Params   string // JSON of the parameters as given
	JobID    int64  // 0 when Slurm refused it
	AuditID  int64
}

// RecordSubmission records a submission; its audit record is written first.
func (s *Store) RecordSubmission(ctx context.Context, sub Submission) (int64, error) {
	var job any
	if sub.JobID > 0 {
		job = sub.JobID
	}
	res, err := s.exec(context.WithoutCancel(ctx), `INSERT INTO submissions(at, user, cluster, template, params, job_id, audit_id) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		s.now().UnixMilli(), sub.User, sub.Cluster, sub.Template, sub.Params, job, sub.AuditID)
	if err != nil {
		return 0, fmt.Errorf("record submission of %s: %w", sub.Template, err)
	}
	return res.LastInsertId()
}

// Submissions lists the submissions of user ("" for all), newest first.
func (s *Store) Submissions(ctx context.Context, user string, limit int) ([]Submission, error) {
	q := `SELECT id, at, user, cluster, template, params, job_id, audit_id FROM submissions`
	args := []any{}
	if user != "" {
		q += ` WHERE user = ?`
		args = append(args, user)
	}
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("submissions: %w", err)
	}
	defer rows.Close()
	var out []Submission
	for rows.Next() {
		var sub Submission
		var at int64
		var job sql.NullInt64
		if err := rows.Scan(&sub.ID, &at, &sub.User, &sub.Cluster, &sub.Template, &sub.Params, &job, &sub.AuditID); err != nil {
			return nil, fmt.Errorf("submissions: %w", err)
		}
		sub.At, sub.JobID = time.UnixMilli(at).UTC(), job.Int64
		out = append(out, sub)
	}
	return out, rows.Err()
}
