-- A reclaimd database of its first schema, as its first release wrote it
-- (reclaimd/internal/store/store.go at cde9836: the version in meta, no
-- schema_migrations), with rows: a finished warning and the open intent
-- a crash left behind.
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS job_state (
	job_id     INTEGER PRIMARY KEY,
	state      TEXT NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	job_id     INTEGER NOT NULL,
	tenant     TEXT NOT NULL DEFAULT '',
	account    TEXT NOT NULL DEFAULT '',
	user       TEXT NOT NULL DEFAULT '',
	kind       TEXT NOT NULL,
	rule       TEXT NOT NULL DEFAULT '',
	reason     TEXT NOT NULL,
	evidence   TEXT NOT NULL DEFAULT 'null',
	gpus       TEXT NOT NULL DEFAULT '[]',
	status     TEXT NOT NULL,
	error      TEXT NOT NULL DEFAULT '',
	decided_at INTEGER NOT NULL,
	done_at    INTEGER
);
CREATE INDEX IF NOT EXISTS records_job ON records(job_id, id);
CREATE INDEX IF NOT EXISTS records_time ON records(decided_at, id);
CREATE INDEX IF NOT EXISTS records_status ON records(status);
INSERT INTO meta(key, value) VALUES('schema', '1');
INSERT INTO job_state VALUES (42, '{"phase":"warned"}', 1764417660000);
INSERT INTO records(id, job_id, tenant, account, user, kind, rule, reason, evidence, gpus, status, error, decided_at, done_at)
	VALUES (1, 42, 'acme', 'acme-p', 'alice', 'warn', 'train', '8 of 8 GPUs idle for 20m0s', '{"idle_gpus":8}',
		'[{"node":"gpu1","index":0},{"node":"gpu1","index":1}]', 'done', '', 1764417600000, 1764417601000);
INSERT INTO records(id, job_id, tenant, account, user, kind, rule, reason, evidence, gpus, status, error, decided_at, done_at)
	VALUES (2, 42, 'acme', 'acme-p', 'alice', 'requeue', 'train', '8 of 8 GPUs idle for 30m0s', '{"idle_gpus":8}',
		'[{"node":"gpu1","index":0},{"node":"gpu1","index":1}]', 'intent', '', 1764417660000, NULL);
