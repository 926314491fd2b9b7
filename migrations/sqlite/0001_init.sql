-- Gatehouse SQLite schema, version 1.
-- Timestamps are Unix milliseconds (UTC). Money is integer micro-USD.

-- Short-lived keyed state: device grants, user-code map, rate counters.
CREATE TABLE kv (
    key        TEXT PRIMARY KEY,
    value      BLOB NOT NULL,
    expires_at INTEGER
);
CREATE INDEX kv_expires_at ON kv (expires_at);

-- One row per inference request that reached routing.
CREATE TABLE usage_events (
    id                    INTEGER PRIMARY KEY,
    request_id            TEXT    NOT NULL,
    created_at            INTEGER NOT NULL,
    principal             TEXT    NOT NULL,
    endpoint              TEXT    NOT NULL,
    model                 TEXT    NOT NULL,
    upstream              TEXT,
    upstream_model        TEXT,
    status                INTEGER NOT NULL,
    route_reason          TEXT    NOT NULL,
    stream                INTEGER NOT NULL,
    input_tokens          INTEGER NOT NULL DEFAULT 0,
    output_tokens         INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens     INTEGER NOT NULL DEFAULT 0,
    cache_write_5m_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0,
    web_search_requests   INTEGER NOT NULL DEFAULT 0,
    cost_micro_usd        INTEGER NOT NULL DEFAULT 0,
    usage_source          TEXT    NOT NULL,
    latency_ms            INTEGER NOT NULL,
    ttfb_ms               INTEGER,
    client_disconnected   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX usage_events_created_at ON usage_events (created_at);
CREATE INDEX usage_events_principal ON usage_events (principal, created_at);
CREATE UNIQUE INDEX usage_events_request_id ON usage_events (request_id, created_at);

-- The per-install local client key of the embedded default (hash only).
CREATE TABLE local_keys (
    id         TEXT PRIMARY KEY,
    key_hash   BLOB    NOT NULL,
    created_at INTEGER NOT NULL
);
