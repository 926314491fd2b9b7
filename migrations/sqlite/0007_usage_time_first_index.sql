-- Usage rows stay unique by (request id, time), so a replayed batch inserts nothing twice,
-- but the index now leads with the time. Request ids are often the caller's own
-- (`x-client-request-id`: Claude Code sends a random UUID per request), and an index led
-- by a random key puts each new row on a page of its own; led by the time, every new row
-- lands on the newest page. The same index serves the time range scans (reports,
-- retention), so the plain time index goes: one index fewer on every insert.
CREATE UNIQUE INDEX usage_events_time_request ON usage_events (created_at, request_id);
DROP INDEX IF EXISTS usage_events_request_id;
DROP INDEX IF EXISTS usage_events_created_at;
