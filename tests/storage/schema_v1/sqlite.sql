-- skewlab metrics database, schema version 1 (sqlite): the DDL that storage/models.py created before
-- version 2 added worker_metrics.state_bytes, migration_events.bytes_moved and
-- migration_events.pause_batches (generated once with SQLAlchemy's CreateTable / CreateIndex from
-- the version-1 models), followed by a few rows written the version-1 way.
-- tests/test_storage.py opens it with the current code to test the in-place upgrade.

CREATE TABLE runs (
	id INTEGER NOT NULL,
	name TEXT NOT NULL,
	algorithm VARCHAR(64) NOT NULL,
	params TEXT NOT NULL,
	seed BIGINT NOT NULL,
	n_workers INTEGER,
	workload TEXT NOT NULL,
	config TEXT NOT NULL,
	status VARCHAR(16) NOT NULL,
	note TEXT NOT NULL,
	created_at DOUBLE NOT NULL,
	updated_at DOUBLE NOT NULL,
	finished_at DOUBLE,
	PRIMARY KEY (id)
);

CREATE INDEX ix_runs_status ON runs (status);

CREATE TABLE skewlab_meta (
	"key" VARCHAR(64) NOT NULL,
	value TEXT NOT NULL,
	PRIMARY KEY ("key")
);

CREATE TABLE commands (
	id INTEGER NOT NULL,
	run_id INTEGER,
	kind VARCHAR(32) NOT NULL,
	payload TEXT NOT NULL,
	status VARCHAR(16) NOT NULL,
	reason TEXT NOT NULL,
	applied_batch BIGINT,
	created_at DOUBLE NOT NULL,
	updated_at DOUBLE NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE
);

CREATE INDEX ix_commands_status_id ON commands (status, id);

CREATE TABLE dead_letter_batches (
	run_id INTEGER NOT NULL,
	batch_id BIGINT NOT NULL,
	reason VARCHAR(200) NOT NULL,
	PRIMARY KEY (run_id, batch_id, reason),
	FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE
);

CREATE TABLE dead_letters (
	run_id INTEGER NOT NULL,
	reason VARCHAR(200) NOT NULL,
	count BIGINT NOT NULL,
	sample TEXT NOT NULL,
	first_seen DOUBLE NOT NULL,
	last_seen DOUBLE NOT NULL,
	last_batch BIGINT,
	PRIMARY KEY (run_id, reason),
	FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE
);

CREATE TABLE events (
	id INTEGER NOT NULL,
	run_id INTEGER NOT NULL,
	batch_id BIGINT,
	interval BIGINT,
	wall_time DOUBLE NOT NULL,
	kind VARCHAR(64) NOT NULL,
	detail TEXT NOT NULL,
	command_id INTEGER,
	dedupe VARCHAR(128),
	PRIMARY KEY (id),
	FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE
);

CREATE INDEX ix_events_run_id ON events (run_id, id);

CREATE UNIQUE INDEX ux_events_run_dedupe ON events (run_id, dedupe);

CREATE TABLE hot_keys (
	run_id INTEGER NOT NULL,
	batch_id BIGINT NOT NULL,
	rank INTEGER NOT NULL,
	interval BIGINT NOT NULL,
	"key" TEXT NOT NULL,
	fingerprint VARCHAR(16),
	count BIGINT NOT NULL,
	share DOUBLE,
	workers TEXT NOT NULL,
	PRIMARY KEY (run_id, batch_id, rank),
	FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE
);

CREATE INDEX ix_hot_keys_run_interval ON hot_keys (run_id, interval);

CREATE TABLE interval_metrics (
	run_id INTEGER NOT NULL,
	batch_id BIGINT NOT NULL,
	interval BIGINT NOT NULL,
	wall_time DOUBLE NOT NULL,
	tuples BIGINT NOT NULL,
	algorithm VARCHAR(64) NOT NULL,
	n_workers INTEGER,
	imbalance DOUBLE,
	theta_max_observed DOUBLE,
	seeds_imbalance DOUBLE,
	load_variance DOUBLE,
	load_stddev DOUBLE,
	replication DOUBLE,
	routing_table_size BIGINT,
	migration_cost DOUBLE,
	plan_seconds DOUBLE,
	tuples_per_second DOUBLE,
	throughput DOUBLE,
	batch_latency_ms DOUBLE,
	feasible BOOLEAN,
	note TEXT NOT NULL,
	extra TEXT NOT NULL,
	PRIMARY KEY (run_id, batch_id),
	FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE
);

CREATE INDEX ix_interval_metrics_run_interval ON interval_metrics (run_id, interval);

CREATE TABLE migration_events (
	run_id INTEGER NOT NULL,
	batch_id BIGINT NOT NULL,
	seq INTEGER NOT NULL,
	interval BIGINT NOT NULL,
	wall_time DOUBLE NOT NULL,
	algorithm VARCHAR(64) NOT NULL,
	keys_moved BIGINT NOT NULL,
	state_moved DOUBLE,
	migration_cost DOUBLE,
	pause_ms DOUBLE,
	detail TEXT NOT NULL,
	PRIMARY KEY (run_id, batch_id, seq),
	FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE
);

CREATE INDEX ix_migration_events_run_interval ON migration_events (run_id, interval);

CREATE TABLE routing_sizes (
	run_id INTEGER NOT NULL,
	batch_id BIGINT NOT NULL,
	interval BIGINT NOT NULL,
	entries BIGINT NOT NULL,
	memory_bytes BIGINT,
	amax BIGINT,
	PRIMARY KEY (run_id, batch_id),
	FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE
);

CREATE INDEX ix_routing_sizes_run_interval ON routing_sizes (run_id, interval);

CREATE TABLE shadow_results (
	run_id INTEGER NOT NULL,
	batch_id BIGINT NOT NULL,
	algorithm VARCHAR(64) NOT NULL,
	interval BIGINT NOT NULL,
	imbalance DOUBLE,
	replication DOUBLE,
	migration_cost DOUBLE,
	theta_max_observed DOUBLE,
	routing_table_size BIGINT,
	plan_seconds DOUBLE,
	feasible BOOLEAN,
	note TEXT NOT NULL,
	PRIMARY KEY (run_id, batch_id, algorithm),
	FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE
);

CREATE INDEX ix_shadow_results_run_interval ON shadow_results (run_id, interval);

CREATE TABLE worker_metrics (
	run_id INTEGER NOT NULL,
	batch_id BIGINT NOT NULL,
	worker INTEGER NOT NULL,
	interval BIGINT NOT NULL,
	tuples BIGINT NOT NULL,
	cost DOUBLE,
	distinct_keys BIGINT NOT NULL,
	state_size DOUBLE,
	processing_seconds DOUBLE,
	PRIMARY KEY (run_id, batch_id, worker),
	FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE
);

CREATE INDEX ix_worker_metrics_run_interval ON worker_metrics (run_id, interval);

INSERT INTO skewlab_meta (key, value) VALUES ('schema_version', '1');

INSERT INTO runs (name, algorithm, params, seed, n_workers, workload, config, status, note, created_at, updated_at)
VALUES ('v1 run', 'mixed', '{}', 7, 2, 'zipf', '{}', 'finished', '', 1.0, 2.0);

INSERT INTO interval_metrics (run_id, batch_id, interval, wall_time, tuples, algorithm, n_workers, imbalance, note, extra)
VALUES (1, 0, 0, 1.5, 30, 'mixed', 2, 0.33, '', '{}');

INSERT INTO worker_metrics (run_id, batch_id, worker, interval, tuples, cost, distinct_keys, state_size, processing_seconds)
VALUES (1, 0, 0, 0, 20, 20.0, 5, 20.0, 0.01), (1, 0, 1, 0, 10, 10.0, 3, 10.0, 0.02);

INSERT INTO migration_events (run_id, batch_id, seq, interval, wall_time, algorithm, keys_moved, state_moved, migration_cost, pause_ms, detail)
VALUES (1, 0, 0, 0, 1.5, 'mixed', 2, 5.0, 0.1, 3.0, '{}');
