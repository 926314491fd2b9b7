-- Gatehouse PostgreSQL schema, version 1 (the same tables as migrations/sqlite).
-- Timestamps are Unix milliseconds (UTC) in BIGINT, as on SQLite, so both backends share
-- one set of queries' meaning. Money is integer micro-USD. Keys that are ordered or
-- compared as cursors use the "C" collation (byte order, like SQLite).

-- Short-lived keyed state: device grants, user-code map, rate counters.
CREATE TABLE kv (
    key        TEXT COLLATE "C" PRIMARY KEY,
    value      BYTEA  NOT NULL,
    expires_at BIGINT
);
CREATE INDEX kv_expires_at ON kv (expires_at);

-- One row per inference request that reached routing.
CREATE TABLE usage_events (
    id                    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id            TEXT    NOT NULL,
    created_at            BIGINT  NOT NULL,
    principal             TEXT    NOT NULL,
    endpoint              TEXT    NOT NULL,
    model                 TEXT    NOT NULL,
    upstream              TEXT,
    upstream_model        TEXT,
    status                INTEGER NOT NULL,
    route_reason          TEXT    NOT NULL,
    stream                BOOLEAN NOT NULL,
    input_tokens          BIGINT  NOT NULL DEFAULT 0,
    output_tokens         BIGINT  NOT NULL DEFAULT 0,
    cache_read_tokens     BIGINT  NOT NULL DEFAULT 0,
    cache_write_5m_tokens BIGINT  NOT NULL DEFAULT 0,
    cache_write_1h_tokens BIGINT  NOT NULL DEFAULT 0,
    web_search_requests   BIGINT  NOT NULL DEFAULT 0,
    cost_micro_usd        BIGINT  NOT NULL DEFAULT 0,
    usage_source          TEXT    NOT NULL,
    latency_ms            BIGINT  NOT NULL,
    ttfb_ms               BIGINT,
    client_disconnected   BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX usage_events_created_at ON usage_events (created_at);
CREATE INDEX usage_events_principal ON usage_events (principal, created_at);
CREATE UNIQUE INDEX usage_events_request_id ON usage_events (request_id, created_at);

-- The per-install local client key of the embedded default (hash only).
CREATE TABLE local_keys (
    id         TEXT PRIMARY KEY,
    key_hash   BYTEA  NOT NULL,
    created_at BIGINT NOT NULL
);
