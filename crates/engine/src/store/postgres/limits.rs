//! The PostgreSQL rows of the inference limits: one admission is one call of
//! `gatehouse_limit_admit` (migration 0004), which locks the draws' rows in the sorted
//! order the gateway gives, checks them and the concurrency slots, and writes all or
//! nothing; settlement and release are single statements. Slots carry the gateway's
//! ownership-lock key, so a replica that died leaves slots the others remove.

use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;

use super::{OWNER_LOCK_NAMESPACE, PgError, PostgresStore, RETRIES, exec, retryable, row_opt};
use crate::limits::{Draw, Kind, SlotDraw, Verdict};
use crate::store::{LimitRows, StoreError};

/// Columns of the draws, as the function's array arguments.
struct Columns {
    keys: Vec<String>,
    kinds: Vec<&'static str>,
    capacity: Vec<f64>,
    rate: Vec<f64>,
    period: Vec<i64>,
    cost: Vec<f64>,
}

fn columns<'a>(draws: impl Iterator<Item = (&'a Draw, f64)>) -> Columns {
    let mut c = Columns {
        keys: Vec::new(),
        kinds: Vec::new(),
        capacity: Vec::new(),
        rate: Vec::new(),
        period: Vec::new(),
        cost: Vec::new(),
    };
    for (d, cost) in draws {
        c.keys.push(d.key.clone());
        let (kind, rate) = match d.kind {
            Kind::Bucket { per_ms, .. } => ("bucket", per_ms),
            Kind::Daily { .. } => ("daily", 0.0),
        };
        c.kinds.push(kind);
        c.capacity.push(d.kind.capacity());
        c.rate.push(rate);
        c.period.push(d.kind.period());
        c.cost.push(cost);
    }
    c
}

async fn admit(
    c: &impl GenericClient,
    cols: &Columns,
    slot: Option<&SlotDraw>,
    owner_key: i32,
    now_ms: i64,
) -> Result<Verdict, PgError> {
    let (slot_key, slot_max, slot_id) = match slot {
        Some(s) => (
            Some(s.key.as_str()),
            i32::try_from(s.limit).unwrap_or(i32::MAX),
            Some(s.id.as_str()),
        ),
        None => (None, 0, None),
    };
    let row = row_opt(
        c,
        "SELECT available, slots_in_use, admitted FROM gatehouse_limit_admit(
             $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        &[
            &cols.keys,
            &cols.kinds,
            &cols.capacity,
            &cols.rate,
            &cols.period,
            &cols.cost,
            &slot_key,
            &slot_max,
            &slot_id,
            &owner_key,
            &now_ms,
        ],
    )
    .await?;
    Ok(match row {
        Some(r) => Verdict {
            available: r.try_get::<_, Option<Vec<f64>>>(0)?.unwrap_or_default(),
            slots_in_use: u32::try_from(r.try_get::<_, i32>(1)?).unwrap_or(0),
            admitted: r.try_get(2)?,
        },
        None => Verdict::default(),
    })
}

async fn refund(c: &impl GenericClient, cols: &Columns) -> Result<(), PgError> {
    // Buckets get tokens back up to their size; a day's counter gives back only its own
    // day's tokens (and never goes below 0).
    exec(
        c,
        "UPDATE limit_buckets b SET tokens = CASE
                 WHEN d.kind = 'daily' THEN GREATEST(b.tokens - d.refund, 0)
                 ELSE LEAST(b.tokens + d.refund, d.capacity) END
         FROM unnest($1::text[], $2::text[], $3::float8[], $4::bigint[], $5::float8[])
              AS d(key, kind, capacity, period, refund)
         WHERE b.key = d.key AND (d.kind <> 'daily' OR b.period = d.period)",
        &[
            &cols.keys,
            &cols.kinds,
            &cols.capacity,
            &cols.period,
            &cols.cost,
        ],
    )
    .await?;
    Ok(())
}

async fn reap(c: &impl GenericClient, stale_before_ms: i64) -> Result<u64, PgError> {
    let slots = exec(
        c,
        "DELETE FROM limit_slots s WHERE NOT EXISTS (
             SELECT 1 FROM pg_locks l
             WHERE l.locktype = 'advisory' AND l.granted
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND l.classid = $1::integer::oid AND l.objid = s.owner_key::oid AND l.objsubid = 2)",
        &[&OWNER_LOCK_NAMESPACE],
    )
    .await?;
    let rows = exec(
        c,
        "DELETE FROM limit_buckets b WHERE b.updated_at < $1
           AND NOT EXISTS (SELECT 1 FROM limit_slots s WHERE s.key = b.key)",
        &[&stale_before_ms],
    )
    .await?;
    Ok(slots + rows)
}

#[async_trait]
impl LimitRows for PostgresStore {
    async fn limit_admit(
        &self,
        draws: Vec<Draw>,
        slot: Option<SlotDraw>,
        now_ms: i64,
    ) -> Result<Verdict, StoreError> {
        let cols = columns(draws.iter().map(|d| (d, d.cost)));
        let owner = self.owner_key;
        retrying!(self, |c| admit(&c, &cols, slot.as_ref(), owner, now_ms))
    }

    async fn limit_refund(&self, refunds: Vec<(Draw, f64)>) -> Result<(), StoreError> {
        let cols = columns(refunds.iter().map(|(d, r)| (d, *r)));
        retrying!(self, |c| refund(&c, &cols))
    }

    async fn limit_release(&self, slot_id: &str) -> Result<(), StoreError> {
        let c = self.client().await?;
        exec(&c, "DELETE FROM limit_slots WHERE id = $1", &[&slot_id]).await?;
        Ok(())
    }

    async fn limit_reap(&self, stale_before_ms: i64) -> Result<u64, StoreError> {
        let c = self.client().await?;
        Ok(reap(&c, stale_before_ms).await?)
    }
}
