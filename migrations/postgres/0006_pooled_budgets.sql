-- Shared group budgets (the reference's pooled_budget): a group's monthly limit may carry
-- one amount the whole group spends together, beside each member's own limit.
-- pooled_amount_cents NULL: no shared budget; pooled_enabled false: kept but paused.
ALTER TABLE spend_limits ADD COLUMN pooled_amount_cents BIGINT;
ALTER TABLE spend_limits ADD COLUMN pooled_enabled BOOLEAN NOT NULL DEFAULT false;

-- Per group and month: what the group's members spent against the shared budget, and
-- what open reservations paid by it hold. Reservations and settlements lock these rows
-- after the person's own spend rows, in group order; a usage batch locks them after every
-- person's rows. So no two transactions ever wait on each other in a cycle.
CREATE TABLE pool_spend (
    group_id       TEXT COLLATE "C" NOT NULL,
    period_start   BIGINT NOT NULL,
    spent_micro    BIGINT NOT NULL DEFAULT 0,
    reserved_micro BIGINT NOT NULL DEFAULT 0,
    updated_at     BIGINT NOT NULL,
    PRIMARY KEY (group_id, period_start)
);

-- The shared budget a reservation (or lease) is paid by, if any; its month is
-- monthly_start.
ALTER TABLE reservations ADD COLUMN pool_group TEXT;

-- gatehouse_reserve (migration 0002) with the person's shared budgets: after the person's
-- caps fit, their pools are locked (group order) and the first in paying order
-- (`p_pools`, resolved by the gateway, with each pool's cap in `p_pool_caps_cents`) that
-- has room pays: its hold grows with the person's, in the same statement. When none has
-- room nothing is written. Returns each period's totals before this reservation, whether
-- it was made, the paying pool, and, when every pool was used up, the first pool's totals.
CREATE FUNCTION gatehouse_reserve_pooled(
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
        UPDATE spend s SET reserved_micro = s.reserved_micro + p_amount, updated_at = p_now
         WHERE s.principal = p_principal
           AND ((s.period = 'daily' AND s.period_start = p_starts[1])
             OR (s.period = 'weekly' AND s.period_start = p_starts[2])
             OR (s.period = 'monthly' AND s.period_start = p_starts[3]));
        IF payer IS NOT NULL THEN
            UPDATE pool_spend ps SET reserved_micro = ps.reserved_micro + p_amount, updated_at = p_now
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
