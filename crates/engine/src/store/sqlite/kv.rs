//! SQLite keyed state: short-lived entries (device grants, user codes, rate counters,
//! revocations) that are invisible once expired, compare-and-swap, the fixed-window
//! counter, and the per-install local key hash. Synchronous: these run on the store's own
//! thread, so a read-then-write in one `BEGIN IMMEDIATE` transaction cannot interleave.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use crate::store::StoreError;
use crate::store::convert::{from_ms, ms};

/// The live-entry condition; `?2` is now.
const LIVE: &str = "(expires_at IS NULL OR expires_at > ?2)";

pub fn get(c: &Connection, key: &str, now: DateTime<Utc>) -> Result<Option<Vec<u8>>, StoreError> {
    Ok(c.query_row(
        &format!("SELECT value FROM kv WHERE key = ?1 AND {LIVE}"),
        params![key, ms(now)],
        |r| r.get::<_, Vec<u8>>(0),
    )
    .optional()?)
}

pub fn put(
    c: &Connection,
    key: &str,
    value: Vec<u8>,
    expires_at: Option<DateTime<Utc>>,
) -> Result<(), StoreError> {
    c.execute(
        "INSERT INTO kv (key, value, expires_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
        params![key, value, expires_at.map(ms)],
    )?;
    Ok(())
}

/// Writes `value` only if the key has no live entry (the upsert's condition runs under the
/// write lock, so of two racing inserts one wins).
pub fn insert(
    c: &Connection,
    key: &str,
    value: Vec<u8>,
    expires_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let n = c.execute(
        "INSERT INTO kv (key, value, expires_at) VALUES (?1, ?3, ?4)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
         WHERE kv.expires_at IS NOT NULL AND kv.expires_at <= ?2",
        params![key, ms(now), value, expires_at.map(ms)],
    )?;
    Ok(n == 1)
}

/// Writes `value` only if the live entry still equals `expected`.
pub fn replace(
    c: &Connection,
    key: &str,
    expected: Vec<u8>,
    value: Vec<u8>,
    expires_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let n = c.execute(
        &format!(
            "UPDATE kv SET value = ?3, expires_at = ?4 WHERE key = ?1 AND value = ?5 AND {LIVE}"
        ),
        params![key, ms(now), value, expires_at.map(ms), expected],
    )?;
    Ok(n == 1)
}

pub fn delete(c: &Connection, key: &str, expected: Option<Vec<u8>>) -> Result<bool, StoreError> {
    let n = match expected {
        Some(v) => c.execute(
            "DELETE FROM kv WHERE key = ?1 AND value = ?2",
            params![key, v],
        )?,
        None => c.execute("DELETE FROM kv WHERE key = ?1", params![key])?,
    };
    Ok(n == 1)
}

/// Fixed-window counter: the count in the current window after this increment.
pub fn incr(
    tx: &Connection,
    key: &str,
    window: std::time::Duration,
    now: DateTime<Utc>,
) -> Result<u64, StoreError> {
    let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
    let now_ms = ms(now);
    let current: Option<(Vec<u8>, Option<i64>)> = tx
        .query_row(
            "SELECT value, expires_at FROM kv WHERE key = ?1",
            params![key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
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
    tx.execute(
        "INSERT INTO kv (key, value, expires_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
        params![key, count.to_string().into_bytes(), expires],
    )?;
    Ok(count)
}

/// Live entries whose key starts with `prefix`, in key order.
pub fn scan(
    c: &Connection,
    prefix: &str,
    now: DateTime<Utc>,
) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
    let pattern = format!(
        "{}%",
        prefix
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_")
    );
    let mut stmt = c.prepare_cached(&format!(
        "SELECT key, value FROM kv WHERE key LIKE ?1 ESCAPE '\\' AND {LIVE} ORDER BY key"
    ))?;
    let rows = stmt
        .query_map(params![pattern, ms(now)], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn purge_expired(c: &Connection, now: DateTime<Utc>) -> Result<u64, StoreError> {
    let n = c.execute(
        "DELETE FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?1",
        params![ms(now)],
    )?;
    Ok(n as u64)
}

/// The per-install local key: its hash and when it was issued.
type LocalKey = ([u8; 32], DateTime<Utc>);

/// Hash of the per-install local key, if one was issued.
pub fn local_key_hash(c: &Connection) -> Result<Option<LocalKey>, StoreError> {
    let row = c
        .query_row(
            "SELECT key_hash, created_at FROM local_keys WHERE id = 'local'",
            [],
            |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?)),
        )
        .optional()?;
    Ok(row.and_then(|(h, at)| {
        let hash: [u8; 32] = h.try_into().ok()?;
        Some((hash, from_ms(at)))
    }))
}

/// Replaces the per-install local key.
pub fn set_local_key_hash(
    c: &Connection,
    hash: [u8; 32],
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    c.execute(
        "INSERT INTO local_keys (id, key_hash, created_at) VALUES ('local', ?1, ?2)
         ON CONFLICT (id) DO UPDATE SET key_hash = excluded.key_hash,
             created_at = excluded.created_at",
        params![hash.to_vec(), ms(at)],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use chrono::Utc;

    use crate::store::convert::from_ms;
    use crate::store::{SqliteStore, Store};

    #[tokio::test]
    async fn local_key_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("k.db"), Utc::now()).unwrap();
        assert!(store.local_key_hash().await.unwrap().is_none());
        store.set_local_key_hash([1; 32], from_ms(5)).await.unwrap();
        store.set_local_key_hash([2; 32], from_ms(6)).await.unwrap();
        assert_eq!(
            store.local_key_hash().await.unwrap(),
            Some(([2; 32], from_ms(6)))
        );
    }
}
