-- Inference traffic limits shared by every replica (rate_limits.inference).
-- Token buckets (rpm, tpm) and per-UTC-day counters (daily_tokens), one row per rule,
-- dimension and principal: tokens is a bucket's tokens or a day's tokens used, period the
-- counter's day start (ms; 0 for buckets), updated_at when tokens was written (ms, the
-- gateway's clock). The arithmetic mirrors crates/engine/src/limits/bucket.rs.
CREATE TABLE limit_buckets (
    key        TEXT COLLATE "C" PRIMARY KEY,
    tokens     DOUBLE PRECISION NOT NULL,
    period     BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX limit_buckets_updated_at ON limit_buckets (updated_at);

-- Concurrency slots: one row per request in flight, held until its answer ends. owner_key
-- is the advisory lock key of the gateway that holds it; slots whose gateway is gone are
-- removed by the others (as reservations are reconciled).
CREATE TABLE limit_slots (
    id         TEXT COLLATE "C" PRIMARY KEY,
    key        TEXT COLLATE "C" NOT NULL,
    owner_key  INTEGER NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX limit_slots_key ON limit_slots (key);

-- One admission in one statement: locks each draw's row (created full if missing) in the
-- order given (the gateway sorts the keys, so two admissions cannot deadlock) and the
-- slot key's lock row, checks every draw and the slot count, and writes all or nothing.
-- p_kind[k] is 'bucket' (p_capacity, p_rate per ms) or 'daily' (p_capacity, p_period day
-- start). Returns each draw's tokens available before this admission, the slots in use
-- and whether it was admitted.
CREATE FUNCTION gatehouse_limit_admit(
    p_keys      TEXT[],
    p_kinds     TEXT[],
    p_capacity  DOUBLE PRECISION[],
    p_rate      DOUBLE PRECISION[],
    p_period    BIGINT[],
    p_cost      DOUBLE PRECISION[],
    p_slot_key  TEXT,
    p_slot_max  INTEGER,
    p_slot_id   TEXT,
    p_owner_key INTEGER,
    p_now       BIGINT
) RETURNS TABLE (available DOUBLE PRECISION[], slots_in_use INTEGER, admitted BOOLEAN)
LANGUAGE plpgsql AS $$
DECLARE
    n      INTEGER := COALESCE(array_length(p_keys, 1), 0);
    avail  DOUBLE PRECISION[] := '{}';
    fits   BOOLEAN := true;
    used   INTEGER := 0;
    r_tokens DOUBLE PRECISION;
    r_period BIGINT;
    r_at     BIGINT;
    a        DOUBLE PRECISION;
BEGIN
    FOR k IN 1..n LOOP
        INSERT INTO limit_buckets (key, tokens, period, updated_at)
        VALUES (p_keys[k], CASE WHEN p_kinds[k] = 'daily' THEN 0 ELSE p_capacity[k] END,
                p_period[k], p_now)
        ON CONFLICT (key) DO NOTHING;
        SELECT b.tokens, b.period, b.updated_at INTO r_tokens, r_period, r_at
          FROM limit_buckets b WHERE b.key = p_keys[k] FOR UPDATE;
        IF p_kinds[k] = 'daily' THEN
            a := CASE WHEN r_period = p_period[k] THEN p_capacity[k] - r_tokens ELSE p_capacity[k] END;
        ELSE
            a := LEAST(p_capacity[k], r_tokens + GREATEST(p_now - r_at, 0)::DOUBLE PRECISION * p_rate[k]);
        END IF;
        avail := avail || a;
        IF a < LEAST(p_cost[k], p_capacity[k]) THEN
            fits := false;
        END IF;
    END LOOP;
    IF p_slot_key IS NOT NULL THEN
        INSERT INTO limit_buckets (key, tokens, period, updated_at)
        VALUES (p_slot_key, 0, 0, p_now) ON CONFLICT (key) DO NOTHING;
        PERFORM 1 FROM limit_buckets b WHERE b.key = p_slot_key FOR UPDATE;
        SELECT count(*) INTO used FROM limit_slots s WHERE s.key = p_slot_key;
        IF used >= p_slot_max THEN
            fits := false;
        END IF;
    END IF;
    IF fits THEN
        FOR k IN 1..n LOOP
            UPDATE limit_buckets b
               SET tokens = CASE WHEN p_kinds[k] = 'daily'
                                 THEN p_capacity[k] - avail[k] + p_cost[k]
                                 ELSE avail[k] - p_cost[k] END,
                   period = p_period[k], updated_at = p_now
             WHERE b.key = p_keys[k];
        END LOOP;
        IF p_slot_key IS NOT NULL THEN
            INSERT INTO limit_slots (id, key, owner_key, created_at)
            VALUES (p_slot_id, p_slot_key, p_owner_key, p_now);
            UPDATE limit_buckets b SET updated_at = p_now WHERE b.key = p_slot_key;
        END IF;
    END IF;
    RETURN QUERY SELECT avail, used, fits;
END;
$$;
