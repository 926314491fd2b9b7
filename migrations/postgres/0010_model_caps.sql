-- Spend caps per model family and the lifetime (`total`) period (Gatehouse extensions to
-- the reference's limits).

-- A limit may name a model family (model '' binds every model). One limit per scope,
-- period and model.
ALTER TABLE spend_limits ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE spend_limits DROP CONSTRAINT spend_limits_scope_type_scope_id_period_key;
ALTER TABLE spend_limits ADD CONSTRAINT spend_limits_scope_period_model_key
    UNIQUE (scope_type, scope_id, period, model);

-- Per person, model family and period: that family's settled spend and what open
-- reservations of its requests hold (the rows of every model stay in `spend`). `total`
-- rows start at 0 and are never expired. A transaction locks a person's family rows only
-- after their `spend` rows (see gatehouse_reserve_meters and the settlement), so the lock
-- order of 0006 holds: person rows (every model's, then a family's), then pool rows.
CREATE TABLE family_spend (
    principal      TEXT   NOT NULL,
    family         TEXT   NOT NULL,
    period         TEXT   NOT NULL,
    period_start   BIGINT NOT NULL,
    spent_micro    BIGINT NOT NULL DEFAULT 0,
    reserved_micro BIGINT NOT NULL DEFAULT 0,
    updated_at     BIGINT NOT NULL,
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
    LEAST(SUM(spent), 9223372036854775807)::BIGINT,
    LEAST(SUM(held), 9223372036854775807)::BIGINT,
    MAX(at)
FROM (
    SELECT principal, spent_micro::NUMERIC AS spent, 0::NUMERIC AS held, updated_at AS at
    FROM spend WHERE period = 'monthly'
    UNION ALL
    SELECT principal, 0, amount_micro::NUMERIC, created_at FROM reservations WHERE state = 'open'
) seed
GROUP BY principal;

-- Each model family's spend so far, from the usage rows kept, for the people whose spend
-- is kept: a family's cap set right after the upgrade sees its period-to-date. A row's
-- family is its requested model's (`claude-<family>-…`, and the older `claude-3-…-sonnet`
-- and `-haiku` ids), as `models::family` reads the ids the gateway has served.
WITH u AS (
    SELECT substr(e.principal, 6) AS sub, lower(e.model) AS m, e.created_at AS at,
        e.cost_micro_usd AS cost
    FROM usage_events e
    WHERE e.principal LIKE 'user:%' AND e.cost_micro_usd > 0
      AND EXISTS (SELECT 1 FROM spend s WHERE s.principal = substr(e.principal, 6))
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
        (extract(epoch FROM date_trunc('month', to_timestamp(at / 1000) AT TIME ZONE 'UTC'))
            * 1000)::BIGINT AS month
    FROM u
)
INSERT INTO family_spend (principal, family, period, period_start, spent_micro, reserved_micro,
    updated_at)
SELECT sub, family, period, start, LEAST(SUM(cost::NUMERIC), 9223372036854775807)::BIGINT, 0,
    MAX(at)
FROM (
    SELECT sub, family, 'daily' AS period, day AS start, cost, at FROM f
    UNION ALL SELECT sub, family, 'weekly', week, cost, at FROM f
    UNION ALL SELECT sub, family, 'monthly', month, cost, at FROM f
    UNION ALL SELECT sub, family, 'total', 0::BIGINT, cost, at FROM f
) w
WHERE family IS NOT NULL
GROUP BY sub, family, period, start;

-- gatehouse_reserve_pooled (0006, saturating as of 0009) over four periods (daily, weekly,
-- monthly, total: `p_starts`, total's 0) of every model and, when `p_family` is set, the
-- same four of that family: it locks the person's `spend` rows, then their family rows
-- (created if missing, in that order), checks each against its cap (`p_caps_cents`: every
-- model's four, then the family's four; NULL unlimited), then the shared budgets as 0006
-- does, and writes the hold on every row, or nothing. Returns each row's totals before
-- this reservation (family NULL: every model's), whether it was made, the paying pool
-- and, when every pool was used up, the first pool's totals.
CREATE FUNCTION gatehouse_reserve_meters(
    p_principal       TEXT,
    p_family          TEXT,
    p_starts          BIGINT[],
    p_caps_cents      BIGINT[],
    p_amount          BIGINT,
    p_now             BIGINT,
    p_id              TEXT,
    p_request_id      TEXT,
    p_owner_key       INTEGER,
    p_pools           TEXT[],
    p_pool_caps_cents BIGINT[]
) RETURNS TABLE (period TEXT, family TEXT, spent_micro BIGINT, reserved_micro BIGINT,
                 reserved BOOLEAN, pool TEXT, pool_used_up BOOLEAN, pool_spent BIGINT,
                 pool_reserved BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    periods CONSTANT TEXT[] := ARRAY['daily', 'weekly', 'monthly', 'total'];
    n       INTEGER := CASE WHEN p_family IS NULL THEN 4 ELSE 8 END;
    spent   BIGINT[] := ARRAY[0, 0, 0, 0, 0, 0, 0, 0];
    held    BIGINT[] := ARRAY[0, 0, 0, 0, 0, 0, 0, 0];
    created BOOLEAN[] := ARRAY[false, false, false, false, false, false, false, false];
    fits    BOOLEAN := true;
    j       INTEGER;
    row_spent BIGINT;
    row_held  BIGINT;
    n_pools   INTEGER := coalesce(array_length(p_pools, 1), 0);
    payer     TEXT := NULL;
    used_up   BOOLEAN := false;
    first_spent BIGINT := 0;
    first_held  BIGINT := 0;
BEGIN
    FOR k IN 1..n LOOP
        j := ((k - 1) % 4) + 1;
        IF k <= 4 THEN
            SELECT s.spent_micro, s.reserved_micro INTO row_spent, row_held FROM spend s
             WHERE s.principal = p_principal AND s.period = periods[j] AND s.period_start = p_starts[j]
               FOR UPDATE;
            IF NOT FOUND THEN
                INSERT INTO spend AS s (principal, period, period_start, spent_micro, reserved_micro, updated_at)
                VALUES (p_principal, periods[j], p_starts[j], 0, 0, p_now)
                ON CONFLICT ON CONSTRAINT spend_pkey DO NOTHING;
                created[k] := FOUND;
                SELECT s.spent_micro, s.reserved_micro INTO row_spent, row_held FROM spend s
                 WHERE s.principal = p_principal AND s.period = periods[j] AND s.period_start = p_starts[j]
                   FOR UPDATE;
            END IF;
        ELSE
            SELECT f.spent_micro, f.reserved_micro INTO row_spent, row_held FROM family_spend f
             WHERE f.principal = p_principal AND f.family = p_family AND f.period = periods[j]
               AND f.period_start = p_starts[j]
               FOR UPDATE;
            IF NOT FOUND THEN
                INSERT INTO family_spend AS f (principal, family, period, period_start, spent_micro,
                    reserved_micro, updated_at)
                VALUES (p_principal, p_family, periods[j], p_starts[j], 0, 0, p_now)
                ON CONFLICT ON CONSTRAINT family_spend_pkey DO NOTHING;
                created[k] := FOUND;
                SELECT f.spent_micro, f.reserved_micro INTO row_spent, row_held FROM family_spend f
                 WHERE f.principal = p_principal AND f.family = p_family AND f.period = periods[j]
                   AND f.period_start = p_starts[j]
                   FOR UPDATE;
            END IF;
        END IF;
        spent[k] := row_spent;
        held[k] := row_held;
        IF p_caps_cents[k] IS NOT NULL
           AND spent[k]::NUMERIC + held[k] + p_amount > p_caps_cents[k]::NUMERIC * 10000 THEN
            fits := false;
        END IF;
    END LOOP;
    IF fits AND n_pools > 0 THEN
        INSERT INTO pool_spend AS ps (group_id, period_start, spent_micro, reserved_micro, updated_at)
        SELECT g, p_starts[3], 0, 0, p_now FROM unnest(p_pools) AS t(g) ORDER BY g
        ON CONFLICT ON CONSTRAINT pool_spend_pkey DO NOTHING;
        PERFORM 1 FROM pool_spend ps
         WHERE ps.group_id = ANY(p_pools) AND ps.period_start = p_starts[3]
         ORDER BY ps.group_id FOR UPDATE;
        FOR k IN 1..n_pools LOOP
            SELECT ps.spent_micro, ps.reserved_micro INTO row_spent, row_held FROM pool_spend ps
             WHERE ps.group_id = p_pools[k] AND ps.period_start = p_starts[3];
            IF k = 1 THEN
                first_spent := row_spent;
                first_held := row_held;
            END IF;
            IF row_spent::NUMERIC + row_held + p_amount <= greatest(p_pool_caps_cents[k], 0)::NUMERIC * 10000 THEN
                payer := p_pools[k];
                EXIT;
            END IF;
        END LOOP;
        IF payer IS NULL THEN
            fits := false;
            used_up := true;
        END IF;
    END IF;
    IF fits THEN
        UPDATE spend s SET reserved_micro = gatehouse_sat_add(s.reserved_micro, p_amount), updated_at = p_now
         WHERE s.principal = p_principal
           AND ((s.period = 'daily' AND s.period_start = p_starts[1])
             OR (s.period = 'weekly' AND s.period_start = p_starts[2])
             OR (s.period = 'monthly' AND s.period_start = p_starts[3])
             OR (s.period = 'total' AND s.period_start = p_starts[4]));
        IF p_family IS NOT NULL THEN
            UPDATE family_spend f SET reserved_micro = gatehouse_sat_add(f.reserved_micro, p_amount),
                   updated_at = p_now
             WHERE f.principal = p_principal AND f.family = p_family
               AND ((f.period = 'daily' AND f.period_start = p_starts[1])
                 OR (f.period = 'weekly' AND f.period_start = p_starts[2])
                 OR (f.period = 'monthly' AND f.period_start = p_starts[3])
                 OR (f.period = 'total' AND f.period_start = p_starts[4]));
        END IF;
        IF payer IS NOT NULL THEN
            UPDATE pool_spend ps SET reserved_micro = gatehouse_sat_add(ps.reserved_micro, p_amount), updated_at = p_now
             WHERE ps.group_id = payer AND ps.period_start = p_starts[3];
        END IF;
        INSERT INTO reservations (id, principal, request_id, created_at, amount_micro, daily_start,
            weekly_start, monthly_start, state, owner_key, pool_group, family)
        VALUES (p_id, p_principal, p_request_id, p_now, p_amount, p_starts[1], p_starts[2],
            p_starts[3], 'open', p_owner_key, payer, p_family);
    ELSE
        FOR k IN 1..n LOOP
            j := ((k - 1) % 4) + 1;
            IF created[k] AND k <= 4 THEN
                DELETE FROM spend s WHERE s.principal = p_principal AND s.period = periods[j]
                   AND s.period_start = p_starts[j];
            ELSIF created[k] THEN
                DELETE FROM family_spend f WHERE f.principal = p_principal AND f.family = p_family
                   AND f.period = periods[j] AND f.period_start = p_starts[j];
            END IF;
        END LOOP;
    END IF;
    RETURN QUERY SELECT periods[((k - 1) % 4) + 1], CASE WHEN k > 4 THEN p_family END,
        spent[k], held[k], fits, payer, used_up, first_spent, first_held
        FROM generate_series(1, n) AS k;
END
$$;
