//! The PostgreSQL side of the short-lived keyed state (device grants, user codes, rate
//! counters, revocations) and of the per-install local key hash. Expired entries are
//! invisible at once; compare-and-swap is one conditional statement, which PostgreSQL
//! re-checks against the newest row version when it had to wait for a concurrent writer,
//! so of two racing swaps exactly one wins.

use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;

use super::{Client, PgError, exec, row_opt, rows};
use crate::store::convert::{from_ms, ms};

/// The live-entry condition; `$2` is now.
const LIVE: &str = "(expires_at IS NULL OR expires_at > $2)";

pub async fn get(
    c: &impl GenericClient,
    key: &str,
    now: DateTime<Utc>,
) -> Result<Option<Vec<u8>>, PgError> {
    let row = row_opt(
        c,
        &format!("SELECT value FROM kv WHERE key = $1 AND {LIVE}"),
        &[&key, &ms(now)],
    )
    .await?;
    row.map(|r| r.try_get(0)).transpose()
}

pub async fn put(
    c: &impl GenericClient,
    key: &str,
    value: &[u8],
    expires_at: Option<DateTime<Utc>>,
) -> Result<(), PgError> {
    exec(
        c,
        "INSERT INTO kv (key, value, expires_at) VALUES ($1, $2, $3)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
        &[&key, &value, &expires_at.map(ms)],
    )
    .await?;
    Ok(())
}

/// Writes `value` only if the key has no live entry. `ON CONFLICT` waits for a concurrent
/// insert of the same key and then re-checks the condition, so of two racing inserts one wins.
pub async fn insert(
    c: &impl GenericClient,
    key: &str,
    value: &[u8],
    expires_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<bool, PgError> {
    let n = exec(
        c,
        "INSERT INTO kv (key, value, expires_at) VALUES ($1, $3, $4)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
         WHERE kv.expires_at IS NOT NULL AND kv.expires_at <= $2",
        &[&key, &ms(now), &value, &expires_at.map(ms)],
    )
    .await?;
    Ok(n == 1)
}

pub async fn replace(
    c: &impl GenericClient,
    key: &str,
    expected: &[u8],
    value: &[u8],
    expires_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<bool, PgError> {
    let n = exec(
        c,
        &format!(
            "UPDATE kv SET value = $3, expires_at = $4 WHERE key = $1 AND value = $5 AND {LIVE}"
        ),
        &[&key, &ms(now), &value, &expires_at.map(ms), &expected],
    )
    .await?;
    Ok(n == 1)
}

pub async fn delete(
    c: &impl GenericClient,
    key: &str,
    expected: Option<&[u8]>,
) -> Result<bool, PgError> {
    let n = match expected {
        Some(v) => {
            exec(
                c,
                "DELETE FROM kv WHERE key = $1 AND value = $2",
                &[&key, &v],
            )
            .await?
        }
        None => exec(c, "DELETE FROM kv WHERE key = $1", &[&key]).await?,
    };
    Ok(n == 1)
}

/// Fixed-window counter. The upsert locks the row (or creates an already expired
/// placeholder), so concurrent increments on any replica queue up and each sees the last.
pub async fn incr(
    c: &mut Client,
    key: &str,
    window: Duration,
    now: DateTime<Utc>,
) -> Result<u64, PgError> {
    let now_ms = ms(now);
    let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
    let tx = c.transaction().await?;
    let row = rows(
        &tx,
        "INSERT INTO kv (key, value, expires_at) VALUES ($1, ''::bytea, $2)
         ON CONFLICT (key) DO UPDATE SET value = kv.value
         RETURNING value, expires_at",
        &[&key, &now_ms],
    )
    .await?;
    let current = row
        .first()
        .map(|r| Ok::<_, PgError>((r.try_get::<_, Vec<u8>>(0)?, r.try_get::<_, Option<i64>>(1)?)))
        .transpose()?;
    let (count, expires) = match current {
        Some((v, Some(exp))) if exp > now_ms => {
            let n = std::str::from_utf8(&v)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0);
            (n + 1, exp)
        }
        _ => (1, now_ms.saturating_add(window_ms)),
    };
    exec(
        &tx,
        "UPDATE kv SET value = $2, expires_at = $3 WHERE key = $1",
        &[&key, &count.to_string().into_bytes(), &expires],
    )
    .await?;
    tx.commit().await?;
    Ok(count)
}

pub async fn scan(
    c: &impl GenericClient,
    prefix: &str,
    now: DateTime<Utc>,
) -> Result<Vec<(String, Vec<u8>)>, PgError> {
    let pattern = format!(
        "{}%",
        prefix
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_")
    );
    rows(
        c,
        &format!("SELECT key, value FROM kv WHERE key LIKE $1 ESCAPE '\\' AND {LIVE} ORDER BY key"),
        &[&pattern, &ms(now)],
    )
    .await?
    .iter()
    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
    .collect()
}

pub async fn purge_expired(c: &impl GenericClient, now: DateTime<Utc>) -> Result<u64, PgError> {
    exec(
        c,
        "DELETE FROM kv WHERE expires_at IS NOT NULL AND expires_at <= $1",
        &[&ms(now)],
    )
    .await
}

/// The per-install local key: its hash and when it was issued.
type LocalKey = ([u8; 32], DateTime<Utc>);

/// Hash of the per-install local key, if one was issued.
pub async fn local_key_hash(c: &impl GenericClient) -> Result<Option<LocalKey>, PgError> {
    let row = row_opt(
        c,
        "SELECT key_hash, created_at FROM local_keys WHERE id = 'local'",
        &[],
    )
    .await?;
    let Some(row) = row else { return Ok(None) };
    let hash: Vec<u8> = row.try_get(0)?;
    let at: i64 = row.try_get(1)?;
    Ok(<[u8; 32]>::try_from(hash).ok().map(|h| (h, from_ms(at))))
}

/// Replaces the per-install local key.
pub async fn set_local_key_hash(
    c: &impl GenericClient,
    hash: [u8; 32],
    at: DateTime<Utc>,
) -> Result<(), PgError> {
    exec(
        c,
        "INSERT INTO local_keys (id, key_hash, created_at) VALUES ('local', $1, $2)
         ON CONFLICT (id) DO UPDATE SET key_hash = excluded.key_hash,
             created_at = excluded.created_at",
        &[&hash.as_slice(), &ms(at)],
    )
    .await?;
    Ok(())
}
