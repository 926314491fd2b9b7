-- Spend caps, reservations, per-period spend and the admin audit trail.
-- Money is integer: caps in USD cents, spend and reservations in micro-USD.

-- One cap per scope and period. scope_id is '' for the organization.
CREATE TABLE spend_limits (
    id           TEXT PRIMARY KEY,
    scope_type   TEXT    NOT NULL,
    scope_id     TEXT    NOT NULL,
    period       TEXT    NOT NULL,
    amount_cents INTEGER,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    UNIQUE (scope_type, scope_id, period)
);

-- Every mutation of spend_limits, written in the same transaction.
CREATE TABLE admin_audit (
    id         TEXT PRIMARY KEY,
    at         INTEGER NOT NULL,
    actor      TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    limit_id   TEXT,
    before     TEXT,
    after      TEXT
);
CREATE INDEX admin_audit_at ON admin_audit (at);

-- Per person and period: settled spend and what open reservations hold.
CREATE TABLE spend (
    principal      TEXT    NOT NULL,
    period         TEXT    NOT NULL,
    period_start   INTEGER NOT NULL,
    spent_micro    INTEGER NOT NULL DEFAULT 0,
    reserved_micro INTEGER NOT NULL DEFAULT 0,
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (principal, period, period_start)
);

-- Worst-case cost held at admission; settled to the real cost when the response ends.
CREATE TABLE reservations (
    id            TEXT PRIMARY KEY,
    principal     TEXT    NOT NULL,
    request_id    TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    amount_micro  INTEGER NOT NULL,
    daily_start   INTEGER NOT NULL,
    weekly_start  INTEGER NOT NULL,
    monthly_start INTEGER NOT NULL,
    state         TEXT    NOT NULL,
    settled_micro INTEGER
);
CREATE INDEX reservations_state ON reservations (state);
