-- A strata-bridge database of schema version 3 (the lease, in milliseconds; versions.action,
-- versions.generation, events.generation), with rows.
CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);
INSERT INTO schema_migrations VALUES (1, 1764417600000);
INSERT INTO schema_migrations VALUES (2, 1764417600000);
INSERT INTO schema_migrations VALUES (3, 1764417600000);
CREATE TABLE deployments (
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
	finished_at  INTEGER,
	tier TEXT NOT NULL DEFAULT 'dedicated',
	action TEXT NOT NULL DEFAULT 'deploy',
	generation INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX versions_name ON versions(name, job_id);
CREATE TABLE events (
	id      INTEGER PRIMARY KEY AUTOINCREMENT,
	name    TEXT NOT NULL,
	job_id  INTEGER NOT NULL DEFAULT 0,
	action  TEXT NOT NULL,
	outcome TEXT NOT NULL,
	message TEXT NOT NULL DEFAULT '',
	at      INTEGER NOT NULL,
	generation INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX events_name ON events(name, id);
CREATE TABLE leases (
	name        TEXT PRIMARY KEY,
	holder      TEXT NOT NULL,
	generation  INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	acquired_at INTEGER NOT NULL
);
CREATE TABLE seen (
	job_id   INTEGER PRIMARY KEY,
	outcome  TEXT NOT NULL,
	message  TEXT NOT NULL DEFAULT '',
	attempts INTEGER NOT NULL,
	done     INTEGER NOT NULL,
	at       INTEGER NOT NULL
);
INSERT INTO deployments VALUES ('llama', 'strata-acme', 'acme', 'p', 'active', 101, 1764417600000, 1764417660000);
INSERT INTO versions VALUES (101, 'llama', 'strata-acme', 'acme', 'p', 'acme-p', 'alice', 2, 1, '/shared/models/llama',
	'{"name":"llama"}', '[{"kind":"Deployment"}]', 'ready', '1/1 ready', 1764417600000, 1764417660000, 'dedicated', 'deploy', 1);
INSERT INTO events VALUES (1, 'llama', 101, 'deploy', 'ready', '1/1 ready', 1764417660000, 1);
INSERT INTO seen VALUES (101, 'ready', '', 1, 1, 1764417660000);
