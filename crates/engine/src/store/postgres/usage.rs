//! PostgreSQL usage rows: the batch insert (which charges each row's lease in the
//! same transaction, person by person in a fixed order), the newest rows, totals overall
//! and per model, and one request's recorded cost.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;

use tokio_postgres::Row;

use super::{Client, PgError, row_opt, rows};
use crate::metering::tags;
use crate::store::convert::{from_ms, i, ms, u};
use crate::store::rollup::{self, RollupKey, RollupRow, RollupSums};
use crate::store::{ClientTags, RowQuery, UsageRecord, UsageTotals};

/// Every column a usage row is written and read with (a row from before row keys reads 0).
const USAGE_COLS: &str = "request_id, created_at, principal, endpoint, model, upstream,
    upstream_model, status, route_reason, stream, input_tokens, output_tokens,
    cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, web_search_requests,
    cost_micro_usd, usage_source, latency_ms, ttfb_ms, client_disconnected, row_key,
    session_id, agent_id, parent_agent_id, request_class, client";

/// Inserts a batch and charges the leases its rows carry, in one transaction. A row already
/// stored (same time and row key: a replayed batch, say after a commit whose answer was
/// lost) is skipped, and so is its charge.
pub async fn insert(c: &mut Client, records: &[UsageRecord]) -> Result<(), PgError> {
    let tx = c.transaction().await?;
    let written = insert_rows(&tx, records).await?;
    add_to_rollup(&tx, &written).await?;
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

/// Writes a batch's rows in one statement (one round trip, one plan: each column goes as
/// an array and `unnest` turns them back into rows) and returns the rows it wrote, in the
/// batch's order; a row whose `(created_at, row_key)` is already stored is left out.
async fn insert_rows<'r>(
    tx: &deadpool_postgres::Transaction<'_>,
    records: &'r [UsageRecord],
) -> Result<Vec<&'r UsageRecord>, PgError> {
    if records.is_empty() {
        return Ok(Vec::new());
    }
    let st = tx
        .prepare_cached(&format!(
            "INSERT INTO usage_events ({USAGE_COLS})
             SELECT * FROM unnest($1::TEXT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[],
                $5::TEXT[], $6::TEXT[], $7::TEXT[], $8::INTEGER[], $9::TEXT[], $10::BOOLEAN[],
                $11::BIGINT[], $12::BIGINT[], $13::BIGINT[], $14::BIGINT[], $15::BIGINT[],
                $16::BIGINT[], $17::BIGINT[], $18::TEXT[], $19::BIGINT[], $20::BIGINT[],
                $21::BOOLEAN[], $22::BIGINT[], $23::TEXT[], $24::TEXT[], $25::TEXT[],
                $26::TEXT[], $27::TEXT[])
             ON CONFLICT (created_at, row_key) DO NOTHING
             RETURNING created_at, row_key"
        ))
        .await?;
    let col = |f: fn(&UsageRecord) -> i64| records.iter().map(f).collect::<Vec<i64>>();
    let text = |f: fn(&UsageRecord) -> &str| records.iter().map(f).collect::<Vec<&str>>();
    let opt =
        |f: fn(&UsageRecord) -> Option<&str>| records.iter().map(f).collect::<Vec<Option<&str>>>();
    let flag = |f: fn(&UsageRecord) -> bool| records.iter().map(f).collect::<Vec<bool>>();
    let inserted = tx
        .query(
            &st,
            &[
                &text(|r| &r.request_id),
                &col(|r| ms(r.created_at)),
                &text(|r| &r.principal),
                &text(|r| &r.endpoint),
                &text(|r| &r.model),
                &opt(|r| r.upstream.as_deref()),
                &opt(|r| r.upstream_model.as_deref()),
                &records
                    .iter()
                    .map(|r| i32::from(r.status))
                    .collect::<Vec<i32>>(),
                &text(|r| &r.route_reason),
                &flag(|r| r.stream),
                &col(|r| i(r.input_tokens)),
                &col(|r| i(r.output_tokens)),
                &col(|r| i(r.cache_read_tokens)),
                &col(|r| i(r.cache_write_5m_tokens)),
                &col(|r| i(r.cache_write_1h_tokens)),
                &col(|r| i(r.web_search_requests)),
                &col(|r| i(r.cost_micro_usd)),
                &text(|r| &r.usage_source),
                &col(|r| i(r.latency_ms)),
                &records
                    .iter()
                    .map(|r| r.ttfb_ms.map(i))
                    .collect::<Vec<Option<i64>>>(),
                &flag(|r| r.client_disconnected),
                &col(|r| r.row_key),
                &opt(|r| r.tags.session_id.as_deref()),
                &opt(|r| r.tags.agent_id.as_deref()),
                &opt(|r| r.tags.parent_agent_id.as_deref()),
                &opt(|r| r.tags.request_class),
                &opt(|r| r.tags.client.as_deref()),
            ],
        )
        .await?;
    // Match each returned key to one row of the batch (a key repeated within the batch is
    // written once, for its first row).
    let mut keys = std::collections::HashMap::<(i64, i64), usize>::new();
    for row in &inserted {
        *keys.entry((row.try_get(0)?, row.try_get(1)?)).or_default() += 1;
    }
    let mut written = Vec::with_capacity(inserted.len());
    for r in records {
        if let Some(n) = keys.get_mut(&(ms(r.created_at), r.row_key))
            && *n > 0
        {
            *n -= 1;
            written.push(r);
        }
    }
    Ok(written)
}

/// A usage row from [`USAGE_COLS`].
fn read_row(r: &Row) -> Result<UsageRecord, PgError> {
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
        tags: ClientTags {
            session_id: r.try_get(22)?,
            agent_id: r.try_get(23)?,
            parent_agent_id: r.try_get(24)?,
            request_class: r
                .try_get::<_, Option<String>>(25)?
                .as_deref()
                .and_then(tags::request_class),
            client: r.try_get(26)?,
        },
    })
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
    .map(read_row)
    .collect()
}

/// Rows with `from <= created_at < to` (of one session when named), at most `limit`,
/// newest or oldest first; through the time index.
pub async fn between(c: &impl GenericClient, q: &RowQuery) -> Result<Vec<UsageRecord>, PgError> {
    let order = if q.newest_first { "DESC" } else { "ASC" };
    rows(
        c,
        &format!(
            "SELECT {USAGE_COLS} FROM usage_events
             WHERE created_at >= $1 AND created_at < $2
               AND ($3::TEXT IS NULL OR session_id = $3::TEXT)
             ORDER BY created_at {order}, id {order} LIMIT $4"
        ),
        &[
            &ms(q.from),
            &ms(q.to),
            &q.session_id,
            &i64::try_from(q.limit).unwrap_or(i64::MAX),
        ],
    )
    .await?
    .iter()
    .map(read_row)
    .collect()
}

/// Adds the inserted rows' sums to `usage_rollup`, key by key in order (so two replicas'
/// transactions take the rollup rows' locks in the same order).
async fn add_to_rollup(
    tx: &deadpool_postgres::Transaction<'_>,
    written: &[&UsageRecord],
) -> Result<(), PgError> {
    if written.is_empty() {
        return Ok(());
    }
    let st = tx
        .prepare_cached(&format!(
            "INSERT INTO usage_rollup (hour, session_id, principal, model, subagent, requests,
                errors, compactions, input_tokens, output_tokens, cache_read_tokens,
                cache_write_tokens, cost_micro_usd, first_at, last_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
             ON CONFLICT (hour, session_id, principal, model, subagent) DO UPDATE SET {}",
            rollup::upsert_set("usage_rollup")
        ))
        .await?;
    for (k, s) in rollup::sums_of(written.iter().copied()) {
        tx.execute(
            &st,
            &[
                &k.hour,
                &k.session_id,
                &k.principal,
                &k.model,
                &i16::from(k.subagent),
                &i(s.requests),
                &i(s.errors),
                &i(s.compactions),
                &i(s.input_tokens),
                &i(s.output_tokens),
                &i(s.cache_read_tokens),
                &i(s.cache_write_tokens),
                &i(s.cost_micro_usd),
                &s.first_at_ms,
                &s.last_at_ms,
            ],
        )
        .await?;
    }
    Ok(())
}

/// Rollup rows of hours `from_hour..=to_hour` (of one session when named).
pub async fn rollup_rows(
    c: &impl GenericClient,
    from_hour: i64,
    to_hour: i64,
    session_id: Option<&str>,
    principal: Option<&str>,
) -> Result<Vec<RollupRow>, PgError> {
    let found = rows(
        c,
        "SELECT hour, session_id, principal, model, subagent, requests, errors, compactions,
            input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
            cost_micro_usd, first_at, last_at
         FROM usage_rollup
         WHERE hour >= $1 AND hour <= $2 AND ($3::TEXT IS NULL OR session_id = $3::TEXT)
           AND ($4::TEXT IS NULL OR principal = $4::TEXT)",
        &[&from_hour, &to_hour, &session_id, &principal],
    )
    .await?;
    found
        .iter()
        .map(|r| {
            Ok(RollupRow {
                key: RollupKey {
                    hour: r.try_get(0)?,
                    session_id: r.try_get(1)?,
                    principal: r.try_get(2)?,
                    model: r.try_get(3)?,
                    subagent: r.try_get::<_, i16>(4)? != 0,
                },
                sums: RollupSums {
                    requests: u(r.try_get(5)?),
                    errors: u(r.try_get(6)?),
                    compactions: u(r.try_get(7)?),
                    input_tokens: u(r.try_get(8)?),
                    output_tokens: u(r.try_get(9)?),
                    cache_read_tokens: u(r.try_get(10)?),
                    cache_write_tokens: u(r.try_get(11)?),
                    cost_micro_usd: u(r.try_get(12)?),
                    first_at_ms: r.try_get(13)?,
                    last_at_ms: r.try_get(14)?,
                },
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
