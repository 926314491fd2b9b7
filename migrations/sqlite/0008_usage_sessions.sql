-- What a coding agent says about each request (issue 31): Claude Code's session, agent and
-- parent agent ids, the request class of its hint headers, and the client program. NULL
-- when the caller did not send them (and on every row from before).
ALTER TABLE usage_events ADD COLUMN session_id TEXT;
ALTER TABLE usage_events ADD COLUMN agent_id TEXT;
ALTER TABLE usage_events ADD COLUMN parent_agent_id TEXT;
ALTER TABLE usage_events ADD COLUMN request_class TEXT;
ALTER TABLE usage_events ADD COLUMN client TEXT;

-- Usage summed per hour (whole UTC hours since the epoch, so a view can sum the days of
-- the viewer's time zone), session ('' for requests without one), principal, model and
-- agent kind (0 main, 1 subagent), written in the same transaction as the usage rows it
-- sums and only for rows that transaction inserted (a replayed batch adds nothing). The
-- views of projects, sessions and spend over time read this instead of every row, so
-- they stay fast with millions of rows; one session's requests are read from the rows in
-- its time range (the usage table's time index).
CREATE TABLE usage_rollup (
    hour               INTEGER NOT NULL,
    session_id         TEXT    NOT NULL,
    principal          TEXT    NOT NULL,
    model              TEXT    NOT NULL,
    subagent           INTEGER NOT NULL,
    requests           INTEGER NOT NULL,
    errors             INTEGER NOT NULL,
    compactions        INTEGER NOT NULL,
    input_tokens       INTEGER NOT NULL,
    output_tokens      INTEGER NOT NULL,
    cache_read_tokens  INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    cost_micro_usd     INTEGER NOT NULL,
    first_at           INTEGER NOT NULL,
    last_at            INTEGER NOT NULL,
    PRIMARY KEY (hour, session_id, principal, model, subagent)
) WITHOUT ROWID;
CREATE INDEX usage_rollup_session ON usage_rollup (session_id, hour) WHERE session_id <> '';

-- The rows already stored, summed the same way (none of them has a session).
INSERT INTO usage_rollup
SELECT created_at / 3600000, '', principal, model, 0, COUNT(*),
       SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END), 0,
       SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens),
       SUM(cache_write_5m_tokens + cache_write_1h_tokens), SUM(cost_micro_usd),
       MIN(created_at), MAX(created_at)
FROM usage_events
GROUP BY created_at / 3600000, principal, model;
