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
-- sums and only for rows that transaction inserted (a replayed batch adds nothing); see
-- the SQLite migration of the same number.
CREATE TABLE usage_rollup (
    hour               BIGINT  NOT NULL,
    session_id         TEXT    NOT NULL,
    principal          TEXT    NOT NULL,
    model              TEXT    NOT NULL,
    subagent           SMALLINT NOT NULL,
    requests           BIGINT  NOT NULL,
    errors             BIGINT  NOT NULL,
    compactions        BIGINT  NOT NULL,
    input_tokens       BIGINT  NOT NULL,
    output_tokens      BIGINT  NOT NULL,
    cache_read_tokens  BIGINT  NOT NULL,
    cache_write_tokens BIGINT  NOT NULL,
    cost_micro_usd     BIGINT  NOT NULL,
    first_at           BIGINT  NOT NULL,
    last_at            BIGINT  NOT NULL,
    PRIMARY KEY (hour, session_id, principal, model, subagent)
);
CREATE INDEX usage_rollup_session ON usage_rollup (session_id, hour) WHERE session_id <> '';

INSERT INTO usage_rollup
SELECT created_at / 3600000, '', principal, model, 0, COUNT(*),
       SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END), 0,
       SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens),
       SUM(cache_write_5m_tokens + cache_write_1h_tokens), SUM(cost_micro_usd),
       MIN(created_at), MAX(created_at)
FROM usage_events
GROUP BY created_at / 3600000, principal, model;
