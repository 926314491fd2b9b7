-- Shared group budgets (the reference's pooled_budget): a group's monthly limit may carry
-- one amount the whole group spends together, beside each member's own limit.
-- pooled_amount_cents NULL: no shared budget; pooled_enabled 0: kept but paused.
ALTER TABLE spend_limits ADD COLUMN pooled_amount_cents INTEGER;
ALTER TABLE spend_limits ADD COLUMN pooled_enabled INTEGER NOT NULL DEFAULT 0;

-- Per group and month: what the group's members spent against the shared budget, and
-- what open reservations paid by it hold.
CREATE TABLE pool_spend (
    group_id       TEXT    NOT NULL,
    period_start   INTEGER NOT NULL,
    spent_micro    INTEGER NOT NULL DEFAULT 0,
    reserved_micro INTEGER NOT NULL DEFAULT 0,
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (group_id, period_start)
);

-- The shared budget a reservation (or lease) is paid by, if any; its month is
-- monthly_start. Settlement moves the pool's hold and spend with the person's.
ALTER TABLE reservations ADD COLUMN pool_group TEXT;
