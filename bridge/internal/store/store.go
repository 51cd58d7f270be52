// Package store keeps strata-bridge's state in SQLite, or in PostgreSQL
// when a site runs a standby bridge (lease.go): one row per
// deployment (a model served under a name in a tenant's namespace, and the
// version in force), one row per version (keyed by the Slurm job id that
// produced the model: the spec, the rendered objects, the rollout's
// outcome), an event log of every deploy, rollback and delete, and the set
// of finished jobs the watcher has already judged, so each job is deployed
// once however often it is listed.
//
// The schema is created and upgraded by internal/sqlite's numbered
// migrations, each in both dialects (internal/pgsql runs the PostgreSQL
// text); a database written by a newer bridge is refused rather than
// guessed at. Every write that finds the database locked by another
// process is tried again with a bounded backoff (sqlite.Retry); a write
// that still fails returns its error, and the caller does not report the
// action as done.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/strata-hpc/strata/internal/bridgeapi"
	"github.com/strata-hpc/strata/internal/pgsql"
	"github.com/strata-hpc/strata/internal/secretfile"
	"github.com/strata-hpc/strata/internal/sqlite"
)

// Outcomes of a version's last rollout.
const (
	OutcomeApplying = "applying" // objects being applied; a crash leaves it here
	OutcomeReady    = "ready"    // rolled out: every replica updated and available
	OutcomeTimeout  = "timeout"  // applied, but the rollout did not finish in time
	OutcomeFailed   = "failed"   // the apply or the rollout failed
)

// Deployment states.
const (
	StateActive  = "active"
	StateDeleted = "deleted" // its objects were removed; versions are kept
)

// ErrNotFound is returned for a deployment or version the store does not
// hold.
var ErrNotFound = errors.New("not found")

// NameTakenError says a deployment name belongs to another tenant.
type NameTakenError struct {
	Name, Tenant, Namespace string
}

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("deployment name %q is in use by tenant %s (namespace %s)", e.Name, e.Tenant, e.Namespace)
}

// Deployment is a model served under one name (the bridge's API contract).
type Deployment = bridgeapi.Deployment

// Version is one deploy of a deployment, keyed by the Slurm job that
// produced the model (the bridge's API contract).
type Version = bridgeapi.Version

// Event is one action on a deployment (the bridge's API contract).
type Event = bridgeapi.Event

// Seen is the watcher's verdict on one finished job.
type Seen struct {
	JobID    int64     `json:"job_id"`
	Outcome  string    `json:"outcome"`
	Message  string    `json:"message,omitempty"`
	Attempts int       `json:"attempts"`
	Done     bool      `json:"done"`
	At       time.Time `json:"at"`
}

// Usage is what one active deployment holds of its tenant's serving quota.
type Usage struct {
	Name        string
	Tenant      string
	JobID       int64
	GPUs        int
	Tier        string
	MaxReplicas int
}

// migrations create and upgrade the schema; entry i is version i+1. Never
// edit a released entry: append a new one, and add the schema it leaves
// behind to testdata (see TestOpenEarlierSchemas).
var migrations = []sqlite.Migration{
	{Name: "deployments, versions, events, seen", SQL: `CREATE TABLE deployments (
		name       TEXT PRIMARY KEY,
		namespace  TEXT NOT NULL,
		tenant     TEXT NOT NULL,
		project    TEXT NOT NULL DEFAULT '',
		state      TEXT NOT NULL,
		current    INTEGER,
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL
	);
	CREATE TABLE versions (
		job_id       INTEGER PRIMARY KEY,
		name         TEXT NOT NULL,
		namespace    TEXT NOT NULL,
		tenant       TEXT NOT NULL,
		project      TEXT NOT NULL DEFAULT '',
		account      TEXT NOT NULL DEFAULT '',
		user         TEXT NOT NULL DEFAULT '',
		gpus         INTEGER NOT NULL,
		max_replicas INTEGER NOT NULL,
		model        TEXT NOT NULL,
		spec         TEXT NOT NULL,
		objects      TEXT NOT NULL,
		outcome      TEXT NOT NULL,
		message      TEXT NOT NULL DEFAULT '',
		created_at   INTEGER NOT NULL,
		finished_at  INTEGER
	);
	CREATE INDEX versions_name ON versions(name, job_id);
	CREATE TABLE events (
		id      INTEGER PRIMARY KEY AUTOINCREMENT,
		name    TEXT NOT NULL,
		job_id  INTEGER NOT NULL DEFAULT 0,
		action  TEXT NOT NULL,
		outcome TEXT NOT NULL,
		message TEXT NOT NULL DEFAULT '',
		at      INTEGER NOT NULL
	);
	CREATE INDEX events_name ON events(name, id);
	CREATE TABLE seen (
		job_id   INTEGER PRIMARY KEY,
		outcome  TEXT NOT NULL,
		message  TEXT NOT NULL DEFAULT '',
		attempts INTEGER NOT NULL,
		done     INTEGER NOT NULL,
		at       INTEGER NOT NULL
	);`, Postgres: `CREATE TABLE deployments (
		name       TEXT PRIMARY KEY,
		namespace  TEXT NOT NULL,
		tenant     TEXT NOT NULL,
		project    TEXT NOT NULL DEFAULT '',
		state      TEXT NOT NULL,
		current    BIGINT,
		created_at BIGINT NOT NULL,
		updated_at BIGINT NOT NULL
	);
	CREATE TABLE versions (
		job_id       BIGINT PRIMARY KEY,
		name         TEXT NOT NULL,
		namespace    TEXT NOT NULL,
		tenant       TEXT NOT NULL,
		project      TEXT NOT NULL DEFAULT '',
		account      TEXT NOT NULL DEFAULT '',
		"user"       TEXT NOT NULL DEFAULT '',
		gpus         INTEGER NOT NULL,
		max_replicas INTEGER NOT NULL,
		model        TEXT NOT NULL,
		spec         TEXT NOT NULL,
		objects      TEXT NOT NULL,
		outcome      TEXT NOT NULL,
		message      TEXT NOT NULL DEFAULT '',
		created_at   BIGINT NOT NULL,
		finished_at  BIGINT
	);
	CREATE INDEX versions_name ON versions(name, job_id);
	CREATE TABLE events (
		id      BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
		name    TEXT NOT NULL,
		job_id  BIGINT NOT NULL DEFAULT 0,
		action  TEXT NOT NULL,
		outcome TEXT NOT NULL,
		message TEXT NOT NULL DEFAULT '',
		at      BIGINT NOT NULL
	);
	CREATE INDEX events_name ON events(name, id);
	CREATE TABLE seen (
		job_id   BIGINT PRIMARY KEY,
		outcome  TEXT NOT NULL,
		message  TEXT NOT NULL DEFAULT '',
		attempts INTEGER NOT NULL,
		done     INTEGER NOT NULL,
		at       BIGINT NOT NULL
	);`},
	// The GPU sharing tier of a version: its GPUs count against that
	// tier's quota. Versions before tiers had whole GPUs.
	{Name: "versions.tier", SQL: `ALTER TABLE versions ADD COLUMN tier TEXT NOT NULL DEFAULT 'dedicated';`,
		Postgres: `ALTER TABLE versions ADD COLUMN tier TEXT NOT NULL DEFAULT 'dedicated';`},
	leaseMigration,
	leaseTimesMigration,
}

// Store is the bridge's database, SQLite or PostgreSQL.
type Store struct {
	db    *dbx
	retry sqlite.Retry
	// lease fences every write on PostgreSQL (SetLease): a write whose
	// generation is no longer the lease's is refused.
	lease *Lease
}

// App names the bridge in the error for a database of a newer release.
const App = "strata-bridge"

// Options tune how long a write waits for a lock another process holds.
type Options struct {
	BusyTimeout time.Duration // one statement's wait; default sqlite.BusyTimeout
	Retry       sqlite.Retry  // tries of a write still locked; default sqlite.DefaultRetry
}

// Open opens (and creates or upgrades) the database at path.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenOptions(ctx, path, Options{Retry: sqlite.DefaultRetry})
}

// OpenOptions is Open with options.
func OpenOptions(ctx context.Context, path string, o Options) (*Store, error) {
	db, err := sqlite.OpenOptions(ctx, path, App, migrations, sqlite.Options{BusyTimeout: o.BusyTimeout})
	if err != nil {
		return nil, err
	}
	return &Store{db: &dbx{DB: db}, retry: o.Retry}, nil
}

// Database names the bridge's database as its configuration does.
type Database struct {
	// Path is the SQLite file, used when URL is "".
	Path string
	// URL is a postgres:// URL without a password; "" for SQLite.
	URL string
	// PasswordFile holds the PostgreSQL password.
	PasswordFile string
	// Rule is the secret-file rule the password file is held to.
	Rule secretfile.Rule
}

// OpenDatabase opens the database d names: PostgreSQL for a URL, SQLite
// at Path otherwise. Either is brought up to date, and one of a newer
// release refused.
func OpenDatabase(ctx context.Context, d Database) (*Store, error) {
	if d.URL == "" {
		return Open(ctx, d.Path)
	}
	db, err := pgsql.Open(ctx, pgsql.Config{URL: d.URL, PasswordFile: d.PasswordFile, Rule: d.Rule, What: "store.database"}, App, migrations)
	if err != nil {
		return nil, err
	}
	return &Store{db: &dbx{DB: db, Postgres: true}, retry: sqlite.DefaultRetry}, nil
}

// SchemaVersion is the number of migrations the database has had.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	return sqlite.SchemaVersion(ctx, s.db.DB)
}

// Migrations is the number of schema steps this release knows.
func Migrations() int { return len(migrations) }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

func nullTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMS(v.Int64)
	return &t
}

// StartVersion records a version about to be applied by action (deploy
// or rollback; outcome applying) and creates its deployment, or re-opens
// a deleted one. A version of the same job recorded before is replaced:
// the spec or the configuration may have changed since. It fails with a
// *NameTakenError when the name is an active deployment of another
// tenant or namespace.
func (s *Store) StartVersion(ctx context.Context, v Version, action string) error {
	return s.writeTx(ctx, func(tx *txx, gen int64) error { return startVersion(ctx, tx, gen, v, action) })
}

func startVersion(ctx context.Context, tx *txx, gen int64, v Version, action string) error {
	var ns, tenant, state string
	err := tx.QueryRowContext(ctx, `SELECT namespace, tenant, state FROM deployments WHERE name=?`, v.Name).Scan(&ns, &tenant, &state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO deployments(name, namespace, tenant, project, state, created_at, updated_at)
			VALUES(?,?,?,?,?,?,?)`, v.Name, v.Namespace, v.Tenant, v.Project, StateActive, ms(v.CreatedAt), ms(v.CreatedAt)); err != nil {
			return fmt.Errorf("record deployment %s: %w", v.Name, err)
		}
	case err != nil:
		return err
	case state == StateActive && (ns != v.Namespace || tenant != v.Tenant):
		return &NameTakenError{Name: v.Name, Tenant: tenant, Namespace: ns}
	default:
		if _, err := tx.ExecContext(ctx, `UPDATE deployments SET namespace=?, tenant=?, project=?, state=?, updated_at=? WHERE name=?`,
			v.Namespace, v.Tenant, v.Project, StateActive, ms(v.CreatedAt), v.Name); err != nil {
			return fmt.Errorf("record deployment %s: %w", v.Name, err)
		}
	}
	var other string
	err = tx.QueryRowContext(ctx, `SELECT name FROM versions WHERE job_id=?`, v.JobID).Scan(&other)
	if err == nil && other != v.Name {
		return fmt.Errorf("job %d is already version of deployment %s; one job serves under one name", v.JobID, other)
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	spec, objects := v.Spec, v.Objects
	if len(spec) == 0 {
		spec = json.RawMessage("null")
	}
	if len(objects) == 0 {
		objects = json.RawMessage("[]")
	}
	if action == "" {
		action = "deploy"
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO versions(job_id, name, namespace, tenant, project, account, "user", gpus, tier, max_replicas, model,
			spec, objects, outcome, message, created_at, finished_at, action, generation) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,'',?,NULL,?,?)
		ON CONFLICT(job_id) DO UPDATE SET namespace=excluded.namespace, tenant=excluded.tenant, project=excluded.project,
			account=excluded.account, "user"=excluded."user", gpus=excluded.gpus, tier=excluded.tier, max_replicas=excluded.max_replicas, model=excluded.model,
			spec=excluded.spec, objects=excluded.objects, outcome=excluded.outcome, message='', finished_at=NULL,
			action=excluded.action, generation=excluded.generation`,
		v.JobID, v.Name, v.Namespace, v.Tenant, v.Project, v.Account, v.User, v.GPUs, tierOrDedicated(v.Tier), v.MaxReplicas, v.ModelPath,
		string(spec), string(objects), OutcomeApplying, ms(v.CreatedAt), action, gen); err != nil {
		return fmt.Errorf("record version job-%d of %s: %w", v.JobID, v.Name, err)
	}
	return nil
}

// Finish is the end of a deploy or rollback.
type Finish struct {
	Name    string
	JobID   int64
	Action  string // deploy or rollback
	Outcome string
	// EventOutcome is the event's outcome when it says more than the
	// version's ("unchanged" for a ready version that changed nothing).
	EventOutcome string
	Message      string
	// Applied says the version's objects are in the cluster now (whatever
	// the rollout did): the version becomes the deployment's current one.
	Applied bool
	At      time.Time
}

// FinishVersion records the outcome of a version's rollout and an event,
// and makes the version current when its objects were applied, in one
// transaction.
func (s *Store) FinishVersion(ctx context.Context, f Finish) error {
	return s.writeTx(ctx, func(tx *txx, gen int64) error { return finishVersion(ctx, tx, gen, f) })
}

func finishVersion(ctx context.Context, tx *txx, gen int64, f Finish) error {
	res, err := tx.ExecContext(ctx, `UPDATE versions SET outcome=?, message=?, finished_at=?, generation=? WHERE job_id=? AND name=?`,
		f.Outcome, f.Message, ms(f.At), gen, f.JobID, f.Name)
	if err != nil {
		return fmt.Errorf("finish version job-%d: %w", f.JobID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("finish version job-%d of %s: %w", f.JobID, f.Name, ErrNotFound)
	}
	if f.Applied {
		if _, err := tx.ExecContext(ctx, `UPDATE deployments SET current=?, state=?, updated_at=? WHERE name=?`,
			f.JobID, StateActive, ms(f.At), f.Name); err != nil {
			return fmt.Errorf("set current version of %s: %w", f.Name, err)
		}
	}
	ev := Event{Name: f.Name, JobID: f.JobID, Action: f.Action, Outcome: f.Outcome, Message: f.Message, At: f.At}
	if f.EventOutcome != "" {
		ev.Outcome = f.EventOutcome
	}
	return addEvent(ctx, tx, gen, ev)
}

// MarkDeleted records that a deployment's objects were removed. Its
// versions stay, so a later deploy of the name starts a new history with
// the old one still readable.
func (s *Store) MarkDeleted(ctx context.Context, name, message string, at time.Time) error {
	return s.writeTx(ctx, func(tx *txx, gen int64) error {
		res, err := tx.ExecContext(ctx, `UPDATE deployments SET state=?, current=NULL, updated_at=? WHERE name=?`, StateDeleted, ms(at), name)
		if err != nil {
			return fmt.Errorf("delete deployment %s: %w", name, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("deployment %s: %w", name, ErrNotFound)
		}
		return addEvent(ctx, tx, gen, Event{Name: name, Action: "delete", Outcome: "deleted", Message: message, At: at})
	})
}

func addEvent(ctx context.Context, tx *txx, gen int64, e Event) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO events(name, job_id, action, outcome, message, at, generation) VALUES(?,?,?,?,?,?,?)`,
		e.Name, e.JobID, e.Action, e.Outcome, e.Message, ms(e.At), gen); err != nil {
		return fmt.Errorf("record event: %w", err)
	}
	return nil
}

// AddEvent records an event that changes no version (a refusal, a no-op).
func (s *Store) AddEvent(ctx context.Context, e Event) error {
	return s.writeTx(ctx, func(tx *txx, gen int64) error { return addEvent(ctx, tx, gen, e) })
}

const deploymentColumns = `name, namespace, tenant, project, state, current, created_at, updated_at`

func scanDeployments(rows *sql.Rows) ([]Deployment, error) {
	defer rows.Close()
	var out []Deployment
	for rows.Next() {
		var d Deployment
		var cur sql.NullInt64
		var created, updated int64
		if err := rows.Scan(&d.Name, &d.Namespace, &d.Tenant, &d.Project, &d.State, &cur, &created, &updated); err != nil {
			return nil, err
		}
		d.Current = cur.Int64
		d.CreatedAt, d.UpdatedAt = fromMS(created), fromMS(updated)
		out = append(out, d)
	}
	return out, rows.Err()
}

// Deployment returns one deployment.
func (s *Store) Deployment(ctx context.Context, name string) (Deployment, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+deploymentColumns+` FROM deployments WHERE name=?`, name)
	if err != nil {
		return Deployment{}, err
	}
	ds, err := scanDeployments(rows)
	if err != nil {
		return Deployment{}, err
	}
	if len(ds) == 0 {
		return Deployment{}, fmt.Errorf("deployment %s: %w", name, ErrNotFound)
	}
	return ds[0], nil
}

// Deployments returns every deployment, deleted ones too, by name.
func (s *Store) Deployments(ctx context.Context) ([]Deployment, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+deploymentColumns+` FROM deployments ORDER BY name`)
	if err != nil {
		return nil, err
	}
	return scanDeployments(rows)
}

const versionColumns = `job_id, name, namespace, tenant, project, account, "user", gpus, tier, max_replicas, model, spec, objects, outcome, message,
	created_at, finished_at`

func scanVersions(rows *sql.Rows) ([]Version, error) {
	defer rows.Close()
	var out []Version
	for rows.Next() {
		var v Version
		var spec, objects string
		var created int64
		var finished sql.NullInt64
		if err := rows.Scan(&v.JobID, &v.Name, &v.Namespace, &v.Tenant, &v.Project, &v.Account, &v.User, &v.GPUs, &v.Tier, &v.MaxReplicas,
			&v.ModelPath, &spec, &objects, &v.Outcome, &v.Message, &created, &finished); err != nil {
			return nil, err
		}
		v.Spec, v.Objects = json.RawMessage(spec), json.RawMessage(objects)
		v.CreatedAt, v.FinishedAt = fromMS(created), nullTime(finished)
		out = append(out, v)
	}
	return out, rows.Err()
}

// Version returns the version of one job.
func (s *Store) Version(ctx context.Context, jobID int64) (Version, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+versionColumns+` FROM versions WHERE job_id=?`, jobID)
	if err != nil {
		return Version{}, err
	}
	vs, err := scanVersions(rows)
	if err != nil {
		return Version{}, err
	}
	if len(vs) == 0 {
		return Version{}, fmt.Errorf("version job-%d: %w", jobID, ErrNotFound)
	}
	return vs[0], nil
}

// Versions returns the versions of a deployment, oldest first.
func (s *Store) Versions(ctx context.Context, name string) ([]Version, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+versionColumns+` FROM versions WHERE name=? ORDER BY created_at, job_id`, name)
	if err != nil {
		return nil, err
	}
	return scanVersions(rows)
}

// Events returns the events of a deployment, oldest first.
func (s *Store) Events(ctx context.Context, name string) ([]Event, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, job_id, action, outcome, message, at FROM events WHERE name=? ORDER BY id`, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var at int64
		if err := rows.Scan(&e.ID, &e.Name, &e.JobID, &e.Action, &e.Outcome, &e.Message, &at); err != nil {
			return nil, err
		}
		e.At = fromMS(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Usage returns what every active deployment of tenant holds of its
// serving quota, from its current version.
func (s *Store) Usage(ctx context.Context, tenant string) ([]Usage, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT d.name, d.tenant, v.job_id, v.gpus, v.tier, v.max_replicas
		FROM deployments d JOIN versions v ON v.job_id = d.current
		WHERE d.state=? AND d.tenant=? ORDER BY d.name`, StateActive, tenant)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Usage
	for rows.Next() {
		var u Usage
		if err := rows.Scan(&u.Name, &u.Tenant, &u.JobID, &u.GPUs, &u.Tier, &u.MaxReplicas); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// MarkSeen records the watcher's verdict on a job and counts the attempt.
// done means the job is settled (deployed, refused, not asking to be
// served, or failed too often) and is not looked at again.
func (s *Store) MarkSeen(ctx context.Context, jobID int64, outcome, message string, done bool, at time.Time) (Seen, error) {
	if err := s.writeTx(ctx, func(tx *txx, _ int64) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO seen(job_id, outcome, message, attempts, done, at) VALUES(?,?,?,1,?,?)
		ON CONFLICT(job_id) DO UPDATE SET outcome=excluded.outcome, message=excluded.message, attempts=seen.attempts+1,
			done=excluded.done, at=excluded.at`, jobID, outcome, message, b2i(done), ms(at))
		return err
	}); err != nil {
		return Seen{}, fmt.Errorf("mark job %d seen: %w", jobID, err)
	}
	return s.Seen(ctx, jobID)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Seen returns the watcher's verdict on one job.
func (s *Store) Seen(ctx context.Context, jobID int64) (Seen, error) {
	var v Seen
	var at int64
	var done int
	err := s.db.QueryRowContext(ctx, `SELECT job_id, outcome, message, attempts, done, at FROM seen WHERE job_id=?`, jobID).
		Scan(&v.JobID, &v.Outcome, &v.Message, &v.Attempts, &done, &at)
	v.Done = done != 0
	if errors.Is(err, sql.ErrNoRows) {
		return Seen{}, fmt.Errorf("job %d: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return Seen{}, err
	}
	v.At = fromMS(at)
	return v, nil
}

// Settled returns the ids of the jobs the watcher is done with.
func (s *Store) Settled(ctx context.Context) (map[int64]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT job_id FROM seen WHERE done=1`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// PruneSeen forgets verdicts older than before; slurmctld forgets finished
// jobs long before (MinJobAge), so they are never listed again.
func (s *Store) PruneSeen(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *txx, _ int64) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM seen WHERE at < ?`, ms(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune seen jobs: %w", err)
	}
	return n, nil
}

// tierOrDedicated is the tier a version is stored with: "" is whole GPUs.
func tierOrDedicated(tier string) string {
	if tier == "" {
		return "dedicated"
	}
	return tier
}

// Pending is a version whose apply began and never finished: the bridge
// that applied it stopped (it died, or lost its lease) in the middle.
type Pending struct {
	Version
	Action string // deploy or rollback
}

// Applying returns the versions whose outcome is still applying, oldest
// first: what a bridge that takes the lease over finishes.
func (s *Store) Applying(ctx context.Context) ([]Pending, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT job_id, action FROM versions WHERE outcome=? ORDER BY created_at, job_id`, OutcomeApplying)
	if err != nil {
		return nil, err
	}
	type ja struct {
		id     int64
		action string
	}
	var ids []ja
	for rows.Next() {
		var x ja
		if err := rows.Scan(&x.id, &x.action); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []Pending
	for _, x := range ids {
		v, err := s.Version(ctx, x.id)
		if err != nil {
			return nil, err
		}
		out = append(out, Pending{Version: v, Action: x.action})
	}
	return out, nil
}
