-- Reservations saturate their holds at the BIGINT bounds, as the SQLite store and the
-- Rust cap arithmetic (`spend::caps`) do. The cap checks of `gatehouse_reserve` (0002) and
-- `gatehouse_reserve_pooled` (0006) already compare in NUMERIC, but the holds they then
-- add were plain BIGINT sums: a person (or shared budget) whose stored hold was near
-- 2^63 - 1 and whose caps still had room (or who had none) failed the reservation with
-- `bigint out of range` instead of being admitted with the hold saturated. Both functions
-- are redefined with the same signatures and results; only those additions change.

-- a + b, clamped to the BIGINT range instead of raising `bigint out of range`.
CREATE OR REPLACE FUNCTION gatehouse_sat_add(a BIGINT, b BIGINT) RETURNS BIGINT
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT LEAST(GREATEST(a::NUMERIC + b, -9223372036854775808), 9223372036854775807)::BIGINT
$$;

-- gatehouse_reserve as in 0002, its hold added with gatehouse_sat_add.
CREATE OR REPLACE FUNCTION gatehouse_reserve(
    p_principal  TEXT,
    p_starts     BIGINT[],
    p_caps_cents BIGINT[],
    p_amount     BIGINT,
    p_now        BIGINT,
    p_id         TEXT,
    p_request_id TEXT,
    p_owner_key  INTEGER
) RETURNS TABLE (period TEXT, spent_micro BIGINT, reserved_micro BIGINT, reserved BOOLEAN)
LANGUAGE plpgsql AS $$
DECLARE
    periods CONSTANT TEXT[] := ARRAY['daily', 'weekly', 'monthly'];
    spent   BIGINT[] := ARRAY[0, 0, 0];
    held    BIGINT[] := ARRAY[0, 0, 0];
    created BOOLEAN[] := ARRAY[false, false, false];
    fits    BOOLEAN := true;
    row_spent BIGINT;
    row_held  BIGINT;
BEGIN
    FOR k IN 1..3 LOOP
        SELECT s.spent_micro, s.reserved_micro INTO row_spent, row_held FROM spend s
         WHERE s.principal = p_principal AND s.period = periods[k] AND s.period_start = p_starts[k]
           FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO spend AS s (principal, period, period_start, spent_micro, reserved_micro, updated_at)
            VALUES (p_principal, periods[k], p_starts[k], 0, 0, p_now)
            ON CONFLICT ON CONSTRAINT spend_pkey DO NOTHING;
            created[k] := FOUND;
            SELECT s.spent_micro, s.reserved_micro INTO row_spent, row_held FROM spend s
             WHERE s.principal = p_principal AND s.period = periods[k] AND s.period_start = p_starts[k]
               FOR UPDATE;
        END IF;
        spent[k] := row_spent;
        held[k] := row_held;
        IF p_caps_cents[k] IS NOT NULL
           AND spent[k]::NUMERIC + held[k] + p_amount > p_caps_cents[k]::NUMERIC * 10000 THEN
            fits := false;
        END IF;
    END LOOP;
    IF fits THEN
        UPDATE spend s SET reserved_micro = gatehouse_sat_add(s.reserved_micro, p_amount), updated_at = p_now
         WHERE s.principal = p_principal
           AND ((s.period = 'daily' AND s.period_start = p_starts[1])
             OR (s.period = 'weekly' AND s.period_start = p_starts[2])
             OR (s.period = 'monthly' AND s.period_start = p_starts[3]));
        INSERT INTO reservations (id, principal, request_id, created_at, amount_micro, daily_start,
            weekly_start, monthly_start, state, owner_key)
        VALUES (p_id, p_principal, p_request_id, p_now, p_amount, p_starts[1], p_starts[2],
            p_starts[3], 'open', p_owner_key);
    ELSE
        FOR k IN 1..3 LOOP
            IF created[k] THEN
                DELETE FROM spend s WHERE s.principal = p_principal AND s.period = periods[k]
                   AND s.period_start = p_starts[k];
            END IF;
        END LOOP;
    END IF;
    RETURN QUERY SELECT periods[k], spent[k], held[k], fits FROM generate_series(1, 3) AS k;
END
$$;

-- gatehouse_reserve_pooled as in 0006, the person's and the paying budget's holds added
-- with gatehouse_sat_add.
CREATE OR REPLACE FUNCTION gatehouse_reserve_pooled(
    p_principal       TEXT,
    p_starts          BIGINT[],
    p_caps_cents      BIGINT[],
    p_amount          BIGINT,
    p_now             BIGINT,
    p_id              TEXT,
    p_request_id      TEXT,
    p_owner_key       INTEGER,
    p_pools           TEXT[],
    p_pool_caps_cents BIGINT[]
) RETURNS TABLE (period TEXT, spent_micro BIGINT, reserved_micro BIGINT, reserved BOOLEAN,
                 pool TEXT, pool_used_up BOOLEAN, pool_spent BIGINT, pool_reserved BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    periods CONSTANT TEXT[] := ARRAY['daily', 'weekly', 'monthly'];
    spent   BIGINT[] := ARRAY[0, 0, 0];
    held    BIGINT[] := ARRAY[0, 0, 0];
    created BOOLEAN[] := ARRAY[false, false, false];
    fits    BOOLEAN := true;
    row_spent BIGINT;
    row_held  BIGINT;
    n_pools   INTEGER := coalesce(array_length(p_pools, 1), 0);
    payer     TEXT := NULL;
    used_up   BOOLEAN := false;
    first_spent BIGINT := 0;
    first_held  BIGINT := 0;
BEGIN
    FOR k IN 1..3 LOOP
        SELECT s.spent_micro, s.reserved_micro INTO row_spent, row_held FROM spend s
         WHERE s.principal = p_principal AND s.period = periods[k] AND s.period_start = p_starts[k]
           FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO spend AS s (principal, period, period_start, spent_micro, reserved_micro, updated_at)
            VALUES (p_principal, periods[k], p_starts[k], 0, 0, p_now)
            ON CONFLICT ON CONSTRAINT spend_pkey DO NOTHING;
            created[k] := FOUND;
            SELECT s.spent_micro, s.reserved_micro INTO row_spent, row_held FROM spend s
             WHERE s.principal = p_principal AND s.period = periods[k] AND s.period_start = p_starts[k]
               FOR UPDATE;
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
             OR (s.period = 'monthly' AND s.period_start = p_starts[3]));
        IF payer IS NOT NULL THEN
            UPDATE pool_spend ps SET reserved_micro = gatehouse_sat_add(ps.reserved_micro, p_amount), updated_at = p_now
             WHERE ps.group_id = payer AND ps.period_start = p_starts[3];
        END IF;
        INSERT INTO reservations (id, principal, request_id, created_at, amount_micro, daily_start,
            weekly_start, monthly_start, state, owner_key, pool_group)
        VALUES (p_id, p_principal, p_request_id, p_now, p_amount, p_starts[1], p_starts[2],
            p_starts[3], 'open', p_owner_key, payer);
    ELSE
        FOR k IN 1..3 LOOP
            IF created[k] THEN
                DELETE FROM spend s WHERE s.principal = p_principal AND s.period = periods[k]
                   AND s.period_start = p_starts[k];
            END IF;
        END LOOP;
    END IF;
    RETURN QUERY SELECT periods[k], spent[k], held[k], fits, payer, used_up, first_spent, first_held
        FROM generate_series(1, 3) AS k;
END
$$;
