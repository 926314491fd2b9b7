-- Spend caps per model family and the lifetime (`total`) period (Gatehouse extensions to
-- the reference's limits).

-- A limit may name a model family (model '' binds every model). One limit per scope,
-- period and model: SQLite cannot change a table's UNIQUE constraint, so the table is
-- rebuilt under its own name.
ALTER TABLE spend_limits RENAME TO spend_limits_before_0010;
CREATE TABLE spend_limits (
    id                  TEXT PRIMARY KEY,
    scope_type          TEXT    NOT NULL,
    scope_id            TEXT    NOT NULL,
    period              TEXT    NOT NULL,
    amount_cents        INTEGER,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    pooled_amount_cents INTEGER,
    pooled_enabled      INTEGER NOT NULL DEFAULT 0,
    model               TEXT    NOT NULL DEFAULT '',
    UNIQUE (scope_type, scope_id, period, model)
);
INSERT INTO spend_limits (id, scope_type, scope_id, period, amount_cents, created_at, updated_at,
    pooled_amount_cents, pooled_enabled, model)
SELECT id, scope_type, scope_id, period, amount_cents, created_at, updated_at,
    pooled_amount_cents, pooled_enabled, ''
FROM spend_limits_before_0010;
DROP TABLE spend_limits_before_0010;

-- Per person, model family and period: that family's settled spend and what open
-- reservations of its requests hold (the rows of every model stay in `spend`). `total`
-- rows start at 0 and are never expired.
CREATE TABLE family_spend (
    principal      TEXT    NOT NULL,
    family         TEXT    NOT NULL,
    period         TEXT    NOT NULL,
    period_start   INTEGER NOT NULL,
    spent_micro    INTEGER NOT NULL DEFAULT 0,
    reserved_micro INTEGER NOT NULL DEFAULT 0,
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (principal, family, period, period_start)
);

-- The model family of a reservation's (or lease's) requests, if any: its settlement
-- moves that family's rows with the person's.
ALTER TABLE reservations ADD COLUMN family TEXT;

-- Lifetime spend of every model, seeded with the monthly rows still kept (retention may
-- have removed older months) and what open reservations hold now (their settlement
-- drops that hold again).
INSERT INTO spend (principal, period, period_start, spent_micro, reserved_micro, updated_at)
SELECT principal, 'total', 0,
    CAST(MIN(TOTAL(spent), 9223372036854775807.0) AS INTEGER),
    CAST(MIN(TOTAL(held), 9223372036854775807.0) AS INTEGER),
    MAX(at)
FROM (
    SELECT principal, spent_micro AS spent, 0 AS held, updated_at AS at
    FROM spend WHERE period = 'monthly'
    UNION ALL
    SELECT principal, 0, amount_micro, created_at FROM reservations WHERE state = 'open'
)
GROUP BY principal;

-- Each model family's spend so far, from the usage rows kept, for the people whose spend
-- is kept: a family's cap set right after the upgrade sees its period-to-date. A row's
-- family is its requested model's (`claude-<family>-…`, and the older `claude-3-…-sonnet`
-- and `-haiku` ids), as `models::family` reads the ids the gateway has served.
WITH u AS (
    SELECT substr(principal, 6) AS sub, lower(model) AS m, created_at AS at, cost_micro_usd AS cost
    FROM usage_events
    WHERE principal LIKE 'user:%' AND cost_micro_usd > 0
      AND EXISTS (SELECT 1 FROM spend s WHERE s.principal = substr(usage_events.principal, 6))
), f AS (
    SELECT sub, at, cost,
        CASE
            WHEN m LIKE 'claude-opus-%' THEN 'opus'
            WHEN m LIKE 'claude-sonnet-%' OR m LIKE 'claude-3-%-sonnet-%' THEN 'sonnet'
            WHEN m LIKE 'claude-haiku-%' OR m LIKE 'claude-3-%-haiku-%' THEN 'haiku'
            WHEN m LIKE 'claude-fable-%' THEN 'fable'
            WHEN m LIKE 'claude-mythos-%' THEN 'mythos'
        END AS family,
        at - at % 86400000 AS day,
        (at / 86400000 - (at / 86400000 + 3) % 7) * 86400000 AS week,
        CAST(strftime('%s', at / 1000, 'unixepoch', 'start of month') AS INTEGER) * 1000 AS month
    FROM u
)
INSERT INTO family_spend (principal, family, period, period_start, spent_micro, reserved_micro,
    updated_at)
SELECT sub, family, period, start, CAST(MIN(TOTAL(cost), 9223372036854775807.0) AS INTEGER), 0,
    MAX(at)
FROM (
    SELECT sub, family, 'daily' AS period, day AS start, cost, at FROM f
    UNION ALL SELECT sub, family, 'weekly', week, cost, at FROM f
    UNION ALL SELECT sub, family, 'monthly', month, cost, at FROM f
    UNION ALL SELECT sub, family, 'total', 0, cost, at FROM f
)
WHERE family IS NOT NULL
GROUP BY sub, family, period, start;
