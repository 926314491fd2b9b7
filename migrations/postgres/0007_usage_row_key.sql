-- Usage rows get a key of the gateway's own: a random 64-bit number made once per request,
-- carried by every retry of the batch that writes the row. Rows are unique by
-- (time, key), so a replayed batch inserts nothing twice and charges nothing twice (a
-- charge is applied only for a row that was inserted), while two requests that happen to
-- share a request id (a caller's own `x-client-request-id`, reused within a millisecond)
-- are still two rows and two charges. Rows from before have no key (NULL): they never
-- conflict.
--
-- The index leads with the time: every new row lands on its newest page, whatever its
-- key, and the same index serves the time range scans (reports, retention), so the
-- plain time index and the (request id, time) index go: one index on every insert.
ALTER TABLE usage_events ADD COLUMN row_key BIGINT;
CREATE UNIQUE INDEX usage_events_time_key ON usage_events (created_at, row_key);
DROP INDEX IF EXISTS usage_events_request_id;
DROP INDEX IF EXISTS usage_events_created_at;
