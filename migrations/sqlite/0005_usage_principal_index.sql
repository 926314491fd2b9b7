-- No query reads usage rows by principal (reports scan by time; spend has its own
-- table), and every usage row paid for this index on the hot write path.
DROP INDEX IF EXISTS usage_events_principal;
