package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/strata-hpc/strata/internal/sqlite"
)

var sessionsMigration = sqlite.Migration{Name: "sessions", SQL: `CREATE TABLE sessions (
		id TEXT PRIMARY KEY,
		user TEXT NOT NULL,
		cluster TEXT NOT NULL,
		job_id INTEGER,
		template TEXT NOT NULL,
		server TEXT NOT NULL,
		account TEXT NOT NULL DEFAULT '',
		dir TEXT NOT NULL,
		host TEXT NOT NULL DEFAULT '',
		port INTEGER NOT NULL DEFAULT 0,
		idle_limit INTEGER NOT NULL DEFAULT 0,
		created_at INTEGER NOT NULL,
		last_activity INTEGER,
		ended_at INTEGER,
		end_reason TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX sessions_user ON sessions(user);
	CREATE INDEX sessions_open ON sessions(ended_at);`,
	Postgres: `CREATE TABLE sessions (
		id TEXT PRIMARY KEY,
		"user" TEXT NOT NULL,
		cluster TEXT NOT NULL,
		job_id BIGINT,
		template TEXT NOT NULL,
		server TEXT NOT NULL,
		account TEXT NOT NULL DEFAULT '',
		dir TEXT NOT NULL,
		host TEXT NOT NULL DEFAULT '',
		port INTEGER NOT NULL DEFAULT 0,
		idle_limit BIGINT NOT NULL DEFAULT 0,
		created_at BIGINT NOT NULL,
		last_activity BIGINT,
		ended_at BIGINT,
		end_reason TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX sessions_user ON sessions("user");
	CREATE INDEX sessions_open ON sessions(ended_at);`}

// Session is a session started through the portal: a Slurm job that runs
// a server (JupyterLab, ttyd, code-server) the portal proxies to.
type Session struct {
	// ID names the session in the API and in its folder: 32 hex digits.
	ID       string
	User     string
	Cluster  string
	JobID    int64 // 0 until Slurm took the job
	Template string
	Server   string // session.Kind
	Account  string
	// Dir is the session's folder, where its job writes the connection file.
	Dir string
	// Host and Port are the pin: where the server was found in the first
	// valid connection file; "" and 0 until then.
	Host string
	Port int
	// IdleLimit is the idle time after which the portal ends the session
	// (0: the portal does not; a session with GPUs is reclaimd's).
	IdleLimit time.Duration
	Created   time.Time
	// LastActivity is the server's last activity the portal recorded
	// (zero: none yet).
	LastActivity time.Time
	// Ended is when the session ended (zero while it runs), and
	// EndReason why.
	Ended     time.Time
	EndReason string
}

// NewSessionID makes a session id: 16 random bytes in hex.
func NewSessionID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// CreateSession records a session before its job is submitted, so that a
// crash between the two leaves a record, never a job without one.
func (s *Store) CreateSession(ctx context.Context, ss Session) error {
	if ss.ID == "" || ss.User == "" {
		return errors.New("create session: no id or user")
	}
	_, err := s.exec(context.WithoutCancel(ctx), `INSERT INTO sessions(id, "user", cluster, template, server, account, dir, idle_limit, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, ss.ID, ss.User, ss.Cluster, ss.Template, ss.Server, ss.Account, ss.Dir,
		int64(ss.IdleLimit/time.Second), s.now().UnixMilli())
	if err != nil {
		return fmt.Errorf("create session %s: %w", ss.ID, err)
	}
	return nil
}

// SetSessionJob records the job Slurm took for session id.
func (s *Store) SetSessionJob(ctx context.Context, id string, jobID int64) error {
	return s.update(ctx, "record the job of session "+id, `UPDATE sessions SET job_id = ? WHERE id = ?`, jobID, id)
}

// PinSession records where the session's server was first found; a pin
// already recorded stays (it is false then).
func (s *Store) PinSession(ctx context.Context, id, host string, port int) (bool, error) {
	res, err := s.exec(context.WithoutCancel(ctx), `UPDATE sessions SET host = ?, port = ? WHERE id = ? AND host = ''`, host, port, id)
	if err != nil {
		return false, fmt.Errorf("pin session %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// SessionActivity records the server's last activity at, unless a later
// one is recorded already.
func (s *Store) SessionActivity(ctx context.Context, id string, at time.Time) error {
	return s.update(ctx, "record the activity of session "+id,
		`UPDATE sessions SET last_activity = ? WHERE id = ? AND (last_activity IS NULL OR last_activity < ?)`, at.UnixMilli(), id, at.UnixMilli())
}

// EndSession records that session id ended, and why; the first end
// recorded stays (it is false then).
func (s *Store) EndSession(ctx context.Context, id, reason string, at time.Time) (bool, error) {
	res, err := s.exec(context.WithoutCancel(ctx), `UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL`,
		at.UnixMilli(), reason, id)
	if err != nil {
		return false, fmt.Errorf("end session %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

func (s *Store) update(ctx context.Context, what, q string, args ...any) error {
	if _, err := s.exec(context.WithoutCancel(ctx), q, args...); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

const sessionColumns = `id, "user", cluster, job_id, template, server, account, dir, host, port, idle_limit, created_at, last_activity, ended_at, end_reason`

// GetSession returns session id; ErrNotFound when there is none.
func (s *Store) GetSession(ctx context.Context, id string) (Session, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id)
	if err != nil {
		return Session{}, fmt.Errorf("session %s: %w", id, err)
	}
	out, err := scanSessions(rows)
	if err != nil {
		return Session{}, fmt.Errorf("session %s: %w", id, err)
	}
	if len(out) == 0 {
		return Session{}, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	return out[0], nil
}

// Sessions lists the sessions of user, newest first: those still open,
// and those that ended at or after endedSince.
func (s *Store) Sessions(ctx context.Context, user string, endedSince time.Time) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE "user" = ? AND (ended_at IS NULL OR ended_at >= ?)
		ORDER BY created_at DESC, id`, user, endedSince.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("sessions of %s: %w", user, err)
	}
	out, err := scanSessions(rows)
	if err != nil {
		return nil, fmt.Errorf("sessions of %s: %w", user, err)
	}
	return out, nil
}

// OpenSessions lists every session not ended yet, oldest first.
func (s *Store) OpenSessions(ctx context.Context) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE ended_at IS NULL ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("open sessions: %w", err)
	}
	out, err := scanSessions(rows)
	if err != nil {
		return nil, fmt.Errorf("open sessions: %w", err)
	}
	return out, nil
}

func scanSessions(rows *sql.Rows) ([]Session, error) {
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var ss Session
		var job, last, ended sql.NullInt64
		var idle, created int64
		if err := rows.Scan(&ss.ID, &ss.User, &ss.Cluster, &job, &ss.Template, &ss.Server, &ss.Account, &ss.Dir, &ss.Host, &ss.Port,
			&idle, &created, &last, &ended, &ss.EndReason); err != nil {
			return nil, err
		}
		ss.JobID, ss.IdleLimit, ss.Created = job.Int64, time.Duration(idle)*time.Second, time.UnixMilli(created).UTC()
		if last.Valid {
			ss.LastActivity = time.UnixMilli(last.Int64).UTC()
		}
		if ended.Valid {
			ss.Ended = time.UnixMilli(ended.Int64).UTC()
		}
		out = append(out, ss)
	}
	return out, rows.Err()
}
