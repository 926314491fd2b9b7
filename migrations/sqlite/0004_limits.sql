-- Inference traffic limits (rate_limits.inference). One SQLite file has one gateway
-- process, which keeps its buckets, day counters and concurrency slots in memory; these
-- tables keep the schema the same as PostgreSQL's, where replicas share them (see
-- migrations/postgres/0004_limits.sql).
CREATE TABLE limit_buckets (
    key        TEXT    PRIMARY KEY,
    tokens     REAL    NOT NULL,
    period     INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE limit_slots (
    id         TEXT    PRIMARY KEY,
    key        TEXT    NOT NULL,
    owner_key  INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
