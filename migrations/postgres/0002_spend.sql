-- Spend caps, reservations, per-period spend and the admin audit trail.
-- Money is integer: caps in USD cents, spend and reservations in micro-USD.

-- One cap per scope and period. scope_id is '' for the organization.
CREATE TABLE spend_limits (
    id           TEXT COLLATE "C" PRIMARY KEY,
    scope_type   TEXT   NOT NULL,
    scope_id     TEXT   NOT NULL,
    period       TEXT   NOT NULL,
    amount_cents BIGINT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    UNIQUE (scope_type, scope_id, period)
);

-- Every mutation of spend_limits, written in the same transaction.
CREATE TABLE admin_audit (
    id         TEXT COLLATE "C" PRIMARY KEY,
    at         BIGINT NOT NULL,
    actor      TEXT   NOT NULL,
    action     TEXT   NOT NULL,
    limit_id   TEXT,
    before     TEXT,
    after      TEXT
);
CREATE INDEX admin_audit_at ON admin_audit (at);

-- Per person and period: settled spend and what open reservations hold. Reservations
-- lock these rows (one per person and period), which serialises one person's admissions
-- across every replica.
CREATE TABLE spend (
    principal      TEXT   NOT NULL,
    period         TEXT   NOT NULL,
    period_start   BIGINT NOT NULL,
    spent_micro    BIGINT NOT NULL DEFAULT 0,
    reserved_micro BIGINT NOT NULL DEFAULT 0,
    updated_at     BIGINT NOT NULL,
    PRIMARY KEY (principal, period, period_start)
);

-- Worst-case cost held at admission; settled to the real cost when the response ends.
-- owner_key: the advisory lock key of the gateway that made it; while that gateway's
-- session holds the lock, no other replica reconciles the reservation.
CREATE TABLE reservations (
    id            TEXT PRIMARY KEY,
    principal     TEXT    NOT NULL,
    request_id    TEXT    NOT NULL,
    created_at    BIGINT  NOT NULL,
    amount_micro  BIGINT  NOT NULL,
    daily_start   BIGINT  NOT NULL,
    weekly_start  BIGINT  NOT NULL,
    monthly_start BIGINT  NOT NULL,
    state         TEXT    NOT NULL,
    settled_micro BIGINT,
    owner_key     INTEGER NOT NULL
);
CREATE INDEX reservations_state ON reservations (state);

-- Checks a person's caps and reserves in one statement, so the person's spend rows are
-- locked only while the server runs it (no client round trip inside the lock). The rows
-- are locked daily, weekly, monthly: the order settlement uses too. `p_caps_cents` holds
-- the binding cap per period (NULL: unlimited), resolved by the gateway. Returns each
-- period's totals before this reservation and whether it was made; a refusal writes
-- nothing (rows it had to create are removed again).
CREATE FUNCTION gatehouse_reserve(
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
        UPDATE spend s SET reserved_micro = s.reserved_micro + p_amount, updated_at = p_now
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
