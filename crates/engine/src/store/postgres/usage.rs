//! PostgreSQL usage rows: the batch insert (which charges each row's lease in the
//! same transaction, person by person in a fixed order), the newest rows, totals overall
//! and per model, and one request's recorded cost.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;

use super::{Client, PgError, row_opt, rows};
use crate::store::convert::{from_ms, i, ms, u};
use crate::store::{UsageRecord, UsageTotals};

/// Every column a usage row is written and read with (a row from before row keys reads 0).
const USAGE_COLS: &str = "request_id, created_at, principal, endpoint, model, upstream,
    upstream_model, status, route_reason, stream, input_tokens, output_tokens,
    cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, web_search_requests,
    cost_micro_usd, usage_source, latency_ms, ttfb_ms, client_disconnected, row_key";

/// Inserts a batch and charges the leases its rows carry, in one transaction. A row already
/// stored (same time and row key: a replayed batch, say after a commit whose answer was
/// lost) is skipped, and so is its charge.
pub async fn insert(c: &mut Client, records: &[UsageRecord]) -> Result<(), PgError> {
    let tx = c.transaction().await?;
    let st = tx
        .prepare_cached(&format!(
            "INSERT INTO usage_events ({USAGE_COLS})
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                $17, $18, $19, $20, $21, $22)
             ON CONFLICT (created_at, row_key) DO NOTHING"
        ))
        .await?;
    let mut written = Vec::with_capacity(records.len());
    for r in records {
        let inserted = tx
            .execute(
                &st,
                &[
                    &r.request_id,
                    &ms(r.created_at),
                    &r.principal,
                    &r.endpoint,
                    &r.model,
                    &r.upstream,
                    &r.upstream_model,
                    &i32::from(r.status),
                    &r.route_reason,
                    &r.stream,
                    &i(r.input_tokens),
                    &i(r.output_tokens),
                    &i(r.cache_read_tokens),
                    &i(r.cache_write_5m_tokens),
                    &i(r.cache_write_1h_tokens),
                    &i(r.web_search_requests),
                    &i(r.cost_micro_usd),
                    &r.usage_source,
                    &i(r.latency_ms),
                    &r.ttfb_ms.map(i),
                    &r.client_disconnected,
                    &r.row_key,
                ],
            )
            .await?;
        if inserted > 0 {
            written.push(r);
        }
    }
    // The charges land with their usage rows, atomically, one per lease (summed), person by
    // person in a fixed order, so two batches never wait on each other's rows in a cycle.
    // Shared budgets' rows after every person's, in group order (see the module doc).
    let mut pools = Vec::new();
    let mut newest = None;
    for ((_, id), (cost, at)) in crate::store::charges_by_lease(written) {
        pools.extend(super::spend::charge_in(&tx, id, cost, at).await?);
        newest = newest.max(Some(at));
    }
    if let Some(at) = newest {
        super::spend::pool_charges(&tx, pools, at).await?;
    }
    tx.commit().await
}

/// Newest first.
pub async fn recent(c: &impl GenericClient, limit: usize) -> Result<Vec<UsageRecord>, PgError> {
    rows(
        c,
        &format!(
            "SELECT {USAGE_COLS} FROM usage_events ORDER BY created_at DESC, id DESC LIMIT $1"
        ),
        &[&i64::try_from(limit).unwrap_or(i64::MAX)],
    )
    .await?
    .iter()
    .map(|r| {
        Ok(UsageRecord {
            request_id: r.try_get(0)?,
            created_at: from_ms(r.try_get(1)?),
            principal: r.try_get(2)?,
            endpoint: r.try_get(3)?,
            model: r.try_get(4)?,
            upstream: r.try_get(5)?,
            upstream_model: r.try_get(6)?,
            status: u16::try_from(r.try_get::<_, i32>(7)?).unwrap_or(0),
            route_reason: r.try_get(8)?,
            stream: r.try_get(9)?,
            input_tokens: u(r.try_get(10)?),
            output_tokens: u(r.try_get(11)?),
            cache_read_tokens: u(r.try_get(12)?),
            cache_write_5m_tokens: u(r.try_get(13)?),
            cache_write_1h_tokens: u(r.try_get(14)?),
            web_search_requests: u(r.try_get(15)?),
            cost_micro_usd: u(r.try_get(16)?),
            usage_source: r.try_get(17)?,
            latency_ms: u(r.try_get(18)?),
            ttfb_ms: r.try_get::<_, Option<i64>>(19)?.map(u),
            client_disconnected: r.try_get(20)?,
            row_key: r.try_get::<_, Option<i64>>(21)?.unwrap_or(0),
            reservation_id: None,
        })
    })
    .collect()
}

pub async fn totals(c: &impl GenericClient, since: DateTime<Utc>) -> Result<UsageTotals, PgError> {
    let r = rows(
        c,
        "SELECT COUNT(*)::BIGINT, COALESCE(SUM(input_tokens), 0)::BIGINT,
                COALESCE(SUM(output_tokens), 0)::BIGINT, COALESCE(SUM(cost_micro_usd), 0)::BIGINT
         FROM usage_events WHERE created_at >= $1",
        &[&ms(since)],
    )
    .await?;
    let Some(r) = r.first() else {
        return Ok(UsageTotals::default());
    };
    Ok(UsageTotals {
        requests: u(r.try_get(0)?),
        input_tokens: u(r.try_get(1)?),
        output_tokens: u(r.try_get(2)?),
        cost_micro_usd: u(r.try_get(3)?),
    })
}

/// Totals per requested model, highest cost first (then model name), at most 100.
pub async fn by_model(
    c: &impl GenericClient,
    since: DateTime<Utc>,
) -> Result<Vec<(String, UsageTotals)>, PgError> {
    let found = rows(
        c,
        "SELECT model, COUNT(*)::BIGINT, COALESCE(SUM(input_tokens), 0)::BIGINT,
                COALESCE(SUM(output_tokens), 0)::BIGINT, COALESCE(SUM(cost_micro_usd), 0)::BIGINT
         FROM usage_events WHERE created_at >= $1
         GROUP BY model ORDER BY 5 DESC, model COLLATE \"C\" ASC LIMIT 100",
        &[&ms(since)],
    )
    .await?;
    let mut out = Vec::with_capacity(found.len());
    for r in &found {
        out.push((
            r.try_get(0)?,
            UsageTotals {
                requests: u(r.try_get(1)?),
                input_tokens: u(r.try_get(2)?),
                output_tokens: u(r.try_get(3)?),
                cost_micro_usd: u(r.try_get(4)?),
            },
        ));
    }
    Ok(out)
}

/// Cost of a recorded request, if its usage row exists.
pub async fn cost(c: &impl GenericClient, request_id: &str) -> Result<Option<u64>, PgError> {
    let row = row_opt(
        c,
        "SELECT SUM(cost_micro_usd)::BIGINT FROM usage_events WHERE request_id = $1",
        &[&request_id],
    )
    .await?;
    Ok(row
        .map(|r| r.try_get::<_, Option<i64>>(0))
        .transpose()?
        .flatten()
        .map(u))
}
