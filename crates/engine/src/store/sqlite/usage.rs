//! SQLite usage rows: the batch insert (which settles each row's reservation and adds to
//! the rollup in the same transaction), the newest rows, rows of a time range, rollup
//! rows, and totals overall and per model. Synchronous: these run
//! on the store's own thread (see [`super::SqliteStore`]).

use chrono::{DateTime, Utc};
use rusqlite::{Connection, params};

use crate::metering::tags;
use crate::store::convert::{from_ms, i, ms, u};
use crate::store::rollup::{self, RollupKey, RollupRow, RollupSums};
use crate::store::{ClientTags, RowQuery, StoreError, UsageRecord, UsageTotals};

/// Every column a usage row is read with, in [`read_row`]'s order.
const USAGE_COLS: &str = "request_id, created_at, principal, endpoint, model, upstream,
    upstream_model, status, route_reason, stream, input_tokens, output_tokens,
    cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, web_search_requests,
    cost_micro_usd, usage_source, latency_ms, ttfb_ms, client_disconnected,
    COALESCE(row_key, 0), session_id, agent_id, parent_agent_id, request_class, client";

/// Inserts a batch and settles the reservations its rows carry, inside the writer's
/// transaction, so a charge lands with its usage row. A row already stored (same time and
/// row key: a replayed batch) is skipped, and so are its charge and its rollup sums.
pub fn insert(tx: &Connection, rows: &[UsageRecord]) -> Result<(), StoreError> {
    let mut written = Vec::with_capacity(rows.len());
    {
        let mut stmt = tx.prepare_cached(
            "INSERT OR IGNORE INTO usage_events (request_id, row_key, created_at, principal,
                endpoint, model, upstream, upstream_model, status, route_reason, stream,
                input_tokens, output_tokens, cache_read_tokens, cache_write_5m_tokens,
                cache_write_1h_tokens, web_search_requests, cost_micro_usd, usage_source,
                latency_ms, ttfb_ms, client_disconnected, session_id, agent_id,
                parent_agent_id, request_class, client)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27)",
        )?;
        for r in rows {
            let inserted = stmt.execute(params![
                r.request_id,
                r.row_key,
                ms(r.created_at),
                r.principal,
                r.endpoint,
                r.model,
                r.upstream,
                r.upstream_model,
                r.status,
                r.route_reason,
                r.stream,
                i(r.input_tokens),
                i(r.output_tokens),
                i(r.cache_read_tokens),
                i(r.cache_write_5m_tokens),
                i(r.cache_write_1h_tokens),
                i(r.web_search_requests),
                i(r.cost_micro_usd),
                r.usage_source,
                i(r.latency_ms),
                r.ttfb_ms.map(i),
                r.client_disconnected,
                r.tags.session_id,
                r.tags.agent_id,
                r.tags.parent_agent_id,
                r.tags.request_class,
                r.tags.client,
            ])?;
            if inserted > 0 {
                written.push(r);
            }
        }
    }
    add_to_rollup(tx, &written)?;
    // The charges land with their usage rows, atomically, one per lease (summed); the
    // leases stay open.
    for ((_, id), (cost, at)) in crate::store::charges_by_lease(written) {
        super::spend::charge(tx, id, cost, at)?;
    }
    Ok(())
}

/// Adds the inserted rows' sums to `usage_rollup`, key by key in order.
fn add_to_rollup(tx: &Connection, written: &[&UsageRecord]) -> Result<(), StoreError> {
    if written.is_empty() {
        return Ok(());
    }
    let mut stmt = tx.prepare_cached(&format!(
        "INSERT INTO usage_rollup (hour, session_id, principal, model, subagent, requests,
            errors, compactions, input_tokens, output_tokens, cache_read_tokens,
            cache_write_tokens, cost_micro_usd, first_at, last_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
         ON CONFLICT (hour, session_id, principal, model, subagent) DO UPDATE SET {}",
        rollup::upsert_set("")
    ))?;
    for (k, s) in rollup::sums_of(written.iter().copied()) {
        stmt.execute(params![
            k.hour,
            k.session_id,
            k.principal,
            k.model,
            k.subagent,
            i(s.requests),
            i(s.errors),
            i(s.compactions),
            i(s.input_tokens),
            i(s.output_tokens),
            i(s.cache_read_tokens),
            i(s.cache_write_tokens),
            i(s.cost_micro_usd),
            s.first_at_ms,
            s.last_at_ms,
        ])?;
    }
    Ok(())
}

/// A usage row from [`USAGE_COLS`].
fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<UsageRecord> {
    Ok(UsageRecord {
        request_id: r.get(0)?,
        row_key: r.get(21)?,
        created_at: from_ms(r.get(1)?),
        principal: r.get(2)?,
        endpoint: r.get(3)?,
        model: r.get(4)?,
        upstream: r.get(5)?,
        upstream_model: r.get(6)?,
        status: r.get(7)?,
        route_reason: r.get(8)?,
        stream: r.get(9)?,
        input_tokens: u(r.get(10)?),
        output_tokens: u(r.get(11)?),
        cache_read_tokens: u(r.get(12)?),
        cache_write_5m_tokens: u(r.get(13)?),
        cache_write_1h_tokens: u(r.get(14)?),
        web_search_requests: u(r.get(15)?),
        cost_micro_usd: u(r.get(16)?),
        usage_source: r.get(17)?,
        latency_ms: u(r.get(18)?),
        ttfb_ms: r.get::<_, Option<i64>>(19)?.map(u),
        client_disconnected: r.get(20)?,
        reservation_id: None,
        tags: ClientTags {
            session_id: r.get(22)?,
            agent_id: r.get(23)?,
            parent_agent_id: r.get(24)?,
            request_class: r
                .get::<_, Option<String>>(25)?
                .as_deref()
                .and_then(tags::request_class),
            client: r.get(26)?,
        },
    })
}

/// Newest first.
pub fn recent(c: &Connection, limit: usize) -> Result<Vec<UsageRecord>, StoreError> {
    let mut stmt = c.prepare_cached(&format!(
        "SELECT {USAGE_COLS} FROM usage_events ORDER BY created_at DESC, id DESC LIMIT ?1"
    ))?;
    let rows = stmt
        .query_map(params![i64::try_from(limit).unwrap_or(i64::MAX)], read_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Rows with `from <= created_at < to` (of one session when named), at most `limit`,
/// newest or oldest first; through the time index.
pub fn between(c: &Connection, q: &RowQuery) -> Result<Vec<UsageRecord>, StoreError> {
    let order = if q.newest_first { "DESC" } else { "ASC" };
    let mut stmt = c.prepare_cached(&format!(
        "SELECT {USAGE_COLS} FROM usage_events
         WHERE created_at >= ?1 AND created_at < ?2 AND (?3 IS NULL OR session_id = ?3)
         ORDER BY created_at {order}, id {order} LIMIT ?4"
    ))?;
    let rows = stmt
        .query_map(
            params![
                ms(q.from),
                ms(q.to),
                q.session_id,
                i64::try_from(q.limit).unwrap_or(i64::MAX)
            ],
            read_row,
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Rollup rows of hours `from_hour..=to_hour` (of one session, or one principal, when
/// named).
pub fn rollup_rows(
    c: &Connection,
    from_hour: i64,
    to_hour: i64,
    session_id: Option<&str>,
    principal: Option<&str>,
) -> Result<Vec<RollupRow>, StoreError> {
    let sql = "SELECT hour, session_id, principal, model, subagent, requests, errors,
            compactions, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
            cost_micro_usd, first_at, last_at FROM usage_rollup";
    let map = |r: &rusqlite::Row<'_>| -> rusqlite::Result<RollupRow> {
        Ok(RollupRow {
            key: RollupKey {
                hour: r.get(0)?,
                session_id: r.get(1)?,
                principal: r.get(2)?,
                model: r.get(3)?,
                subagent: r.get(4)?,
            },
            sums: RollupSums {
                requests: u(r.get(5)?),
                errors: u(r.get(6)?),
                compactions: u(r.get(7)?),
                input_tokens: u(r.get(8)?),
                output_tokens: u(r.get(9)?),
                cache_read_tokens: u(r.get(10)?),
                cache_write_tokens: u(r.get(11)?),
                cost_micro_usd: u(r.get(12)?),
                first_at_ms: r.get(13)?,
                last_at_ms: r.get(14)?,
            },
        })
    };
    let rows = match (session_id, principal) {
        (Some(s), _) => c
            .prepare_cached(&format!(
                "{sql} WHERE session_id = ?1 AND hour >= ?2 AND hour <= ?3"
            ))?
            .query_map(params![s, from_hour, to_hour], map)?
            .collect::<Result<Vec<_>, _>>()?,
        (None, Some(p)) => c
            .prepare_cached(&format!(
                "{sql} WHERE hour >= ?1 AND hour <= ?2 AND principal = ?3"
            ))?
            .query_map(params![from_hour, to_hour, p], map)?
            .collect::<Result<Vec<_>, _>>()?,
        (None, None) => c
            .prepare_cached(&format!("{sql} WHERE hour >= ?1 AND hour <= ?2"))?
            .query_map(params![from_hour, to_hour], map)?
            .collect::<Result<Vec<_>, _>>()?,
    };
    Ok(rows)
}

pub fn totals(c: &Connection, since: DateTime<Utc>) -> Result<UsageTotals, StoreError> {
    let totals = c.query_row(
        "SELECT COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
                COALESCE(SUM(cost_micro_usd), 0)
         FROM usage_events WHERE created_at >= ?1",
        params![ms(since)],
        |r| {
            Ok(UsageTotals {
                requests: u(r.get(0)?),
                input_tokens: u(r.get(1)?),
                output_tokens: u(r.get(2)?),
                cost_micro_usd: u(r.get(3)?),
            })
        },
    )?;
    Ok(totals)
}

/// Totals per requested model, highest cost first (then model name), at most 100.
pub fn by_model(
    c: &Connection,
    since: DateTime<Utc>,
) -> Result<Vec<(String, UsageTotals)>, StoreError> {
    let mut stmt = c.prepare_cached(
        "SELECT model, COUNT(*), COALESCE(SUM(input_tokens), 0),
                COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cost_micro_usd), 0)
         FROM usage_events WHERE created_at >= ?1
         GROUP BY model ORDER BY 5 DESC, model ASC LIMIT 100",
    )?;
    let rows = stmt
        .query_map(params![ms(since)], |r| {
            Ok((
                r.get::<_, String>(0)?,
                UsageTotals {
                    requests: u(r.get(1)?),
                    input_tokens: u(r.get(2)?),
                    output_tokens: u(r.get(3)?),
                    cost_micro_usd: u(r.get(4)?),
                },
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Cost of a recorded request, if its usage row exists.
pub fn cost(conn: &Connection, request_id: &str) -> Result<Option<u64>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT SUM(cost_micro_usd) FROM usage_events WHERE request_id = ?1",
            params![request_id],
            |r| r.get::<_, Option<i64>>(0),
        )?
        .map(u))
}

#[cfg(test)]
pub(super) mod tests {
    #![allow(clippy::unwrap_used)]
    use chrono::Utc;

    use crate::store::convert::from_ms;
    use crate::store::{SqliteStore, Store, UsageRecord};

    pub(in crate::store::sqlite) fn record(id: &str, at_ms: i64, cost: u64) -> UsageRecord {
        UsageRecord {
            request_id: id.into(),
            row_key: UsageRecord::new_row_key(),
            created_at: from_ms(at_ms),
            principal: "key:ci".into(),
            endpoint: "messages".into(),
            model: "claude-sonnet-4-6".into(),
            upstream: Some("primary".into()),
            upstream_model: Some("claude-sonnet-4-6".into()),
            status: 200,
            route_reason: "primary: first healthy".into(),
            stream: true,
            input_tokens: 10,
            output_tokens: 20,
            cache_read_tokens: 1,
            cache_write_5m_tokens: 2,
            cache_write_1h_tokens: 3,
            web_search_requests: 0,
            cost_micro_usd: cost,
            usage_source: "reported".into(),
            latency_ms: 12,
            ttfb_ms: Some(3),
            client_disconnected: false,
            reservation_id: None,
            tags: Default::default(),
        }
    }

    #[tokio::test]
    async fn usage_round_trip_and_totals() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("a/b.db"), Utc::now()).unwrap();
        store.ready().await.unwrap();
        let (r1, r2) = (record("r1", 1_000, 5), record("r2", 2_000, 7));
        store
            .insert_usage(vec![r1, r2.clone()].into())
            .await
            .unwrap();
        let rows = store.recent_usage(10).await.unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0], r2);
        let totals = store.usage_totals(from_ms(1_500)).await.unwrap();
        assert_eq!(totals.requests, 1);
        assert_eq!(totals.cost_micro_usd, 7);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "database must be private: {mode:o}");
        }
    }

    #[tokio::test]
    async fn usage_rows_are_unique_by_time_and_row_key_indexed_time_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("u.db");
        let store = SqliteStore::open(&path, Utc::now()).unwrap();
        // A replayed row (same key) is dropped; another request that reuses the caller's
        // id in the same millisecond, or at another time, is a row of its own.
        let first = record("r1", 1_000, 5);
        let batch = vec![
            first.clone(),
            first,
            record("r1", 1_000, 7),
            record("r1", 2_000, 11),
        ];
        store.insert_usage(batch.clone().into()).await.unwrap();
        assert_eq!(store.recent_usage(10).await.unwrap().len(), 3);
        assert_eq!(store.usage_cost("r1").await.unwrap(), Some(23));
        // The whole batch again (a retry after an answer was lost) adds nothing.
        store.insert_usage(batch.into()).await.unwrap();
        assert_eq!(store.usage_cost("r1").await.unwrap(), Some(23));

        let conn = rusqlite::Connection::open(&path).unwrap();
        let mut names: Vec<String> = conn
            .prepare("SELECT name FROM pragma_index_list('usage_events')")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        names.sort();
        assert_eq!(names, ["usage_events_time_key"], "one index per insert");
        let plan: String = conn
            .query_row(
                "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM usage_events WHERE created_at >= 1",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("usage_events_time_key"), "{plan}");
    }
}
