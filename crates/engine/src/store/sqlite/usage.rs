//! SQLite usage rows: the batch insert (which settles each row's reservation in the same
//! transaction), the newest rows, and totals overall and per model. Synchronous: these run
//! on the store's own thread (see [`super::SqliteStore`]).

use chrono::{DateTime, Utc};
use rusqlite::{Connection, params};

use crate::store::convert::{from_ms, i, ms, u};
use crate::store::{StoreError, UsageRecord, UsageTotals};

/// Inserts a batch and settles the reservations its rows carry, inside the writer's
/// transaction, so a charge lands with its usage row. A row already stored (same time and
/// row key: a replayed batch) is skipped, and so is its charge.
pub fn insert(tx: &Connection, rows: &[UsageRecord]) -> Result<(), StoreError> {
    let mut written = Vec::with_capacity(rows.len());
    {
        let mut stmt = tx.prepare_cached(
            "INSERT OR IGNORE INTO usage_events (request_id, row_key, created_at, principal,
                endpoint, model, upstream, upstream_model, status, route_reason, stream,
                input_tokens, output_tokens, cache_read_tokens, cache_write_5m_tokens,
                cache_write_1h_tokens, web_search_requests, cost_micro_usd, usage_source,
                latency_ms, ttfb_ms, client_disconnected)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                ?17, ?18, ?19, ?20, ?21, ?22)",
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
            ])?;
            if inserted > 0 {
                written.push(r);
            }
        }
    }
    // The charges land with their usage rows, atomically, one per lease (summed); the
    // leases stay open.
    for ((_, id), (cost, at)) in crate::store::charges_by_lease(written) {
        super::spend::charge(tx, id, cost, at)?;
    }
    Ok(())
}

/// Newest first.
pub fn recent(c: &Connection, limit: usize) -> Result<Vec<UsageRecord>, StoreError> {
    let mut stmt = c.prepare_cached(
        "SELECT request_id, created_at, principal, endpoint, model, upstream,
            upstream_model, status, route_reason, stream, input_tokens, output_tokens,
            cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens,
            web_search_requests, cost_micro_usd, usage_source, latency_ms, ttfb_ms,
            client_disconnected, COALESCE(row_key, 0)
         FROM usage_events ORDER BY created_at DESC, id DESC LIMIT ?1",
    )?;
    let rows = stmt
        .query_map(params![i64::try_from(limit).unwrap_or(i64::MAX)], |r| {
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
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
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
