//! Upstream health shared across replicas (PostgreSQL): breaker openings and cooldowns are
//! written to a short-lived keyed row per upstream (`upstream.health:<name>` in the store's
//! keyed state, expiring when the later of the two ends) as they happen, and every replica
//! reads the rows at most once a second and adopts what is later than its own view
//! ([`super::health::UpstreamHealth::adopt`]). A closed breaker deletes the row. A replica
//! that cannot reach the store keeps its local view (logged once per outage). On SQLite
//! there is one gateway per file: health stays in the process.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use super::health::{Shared, UpstreamHealth};
use crate::deps::Clock;
use crate::store::Store;

const PREFIX: &str = "upstream.health:";
/// How often the rows are read.
pub const READ_EVERY: Duration = Duration::from_secs(1);

/// Starts the writer and the reader for `health` on `store`.
pub fn spawn(
    store: Arc<dyn Store>,
    health: Arc<UpstreamHealth>,
    clock: Arc<dyn Clock>,
    stop: CancellationToken,
) {
    let Some(mut outbox) = health.share() else {
        return;
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(READ_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            let ok = tokio::select! {
                update = outbox.recv() => match update {
                    Some(u) => write(store.as_ref(), u, &mut outbox).await,
                    None => break,
                },
                _ = tick.tick() => read(store.as_ref(), &health, clock.now()).await,
                () = stop.cancelled() => break,
            };
            match (ok, failing) {
                (Err(e), false) => {
                    tracing::warn!(error = %e, "upstream health cannot be shared through the store; keeping this replica's view");
                    failing = true;
                }
                (Ok(()), true) => {
                    tracing::info!("upstream health is shared through the store again");
                    failing = false;
                }
                _ => {}
            }
        }
    });
}

/// Writes `first` and whatever else is waiting (the last word per upstream).
async fn write(
    store: &dyn Store,
    first: Shared,
    outbox: &mut UnboundedReceiver<Shared>,
) -> Result<(), crate::store::StoreError> {
    let mut batch = vec![first];
    while let Ok(u) = outbox.try_recv() {
        batch.retain(|b| b.upstream != u.upstream);
        batch.push(u);
    }
    for u in batch {
        let key = format!("{PREFIX}{}", u.upstream);
        let until = later(u.open_until, u.cooling_until);
        match until {
            None => {
                store.kv_delete(&key, None).await?;
            }
            Some(until) => {
                let value = serde_json::to_vec(&u).unwrap_or_default();
                store.kv_put(&key, value, Some(until)).await?;
            }
        }
    }
    Ok(())
}

async fn read(
    store: &dyn Store,
    health: &UpstreamHealth,
    now: DateTime<Utc>,
) -> Result<(), crate::store::StoreError> {
    for (_, value) in store.kv_scan(PREFIX, now).await? {
        let Ok(s) = serde_json::from_slice::<Shared>(&value) else {
            continue;
        };
        if let Some(i) = health.index(&s.upstream) {
            health.adopt(i, s.open_until, s.cooling_until);
        }
    }
    Ok(())
}

fn later(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}
