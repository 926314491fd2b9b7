//! Inference traffic limits (`rate_limits.inference`): requests and tokens per minute as
//! token buckets, tokens per UTC day, and concurrency as a slot held for the whole answer.
//!
//! The first entry whose `match` fits the caller applies ([`rules`]); a client key that no
//! entry limits in concurrency gets `rate_limits.client_key_concurrency` (50) per replica.
//! Admission ([`Limiter::admit`]) takes every draw of the rule and its slot at once or
//! refuses with 429 `rate_limit_error` ([`refusal`]); on PostgreSQL an operator's rules are
//! one statement shared by every replica ([`crate::store::LimitRows`]), on SQLite the
//! process's own memory ([`memory`]). The per-key default slot is always counted in the
//! replica's memory: it guards a replica against one runaway key, and a request no rule
//! limits never waits on the database for it.
//! Tokens are charged from the estimate (a quarter of the body's bytes plus `max_tokens`)
//! and corrected to the usage row's tokens at settlement ([`Charge`]); the slot is freed
//! when the answer's body is dropped — completed, failed or the client gone ([`Slot`]).
//! The arithmetic is in [`bucket`]; the store only reads and writes rows. A store that
//! cannot answer lets the request through (logged, `limits.unavailable`): traffic limits
//! protect capacity, and the spend caps still fail closed.

pub mod bucket;
pub mod memory;
pub mod refusal;
pub mod rules;
mod ticket;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Utc};
use tokio_util::task::TaskTracker;

pub use bucket::Kind;
pub use ticket::{Charge, Slot, Ticket, hold};

use crate::auth::Principal;
use crate::config::limits::InferenceLimits;
use crate::error::ApiError;
use crate::events::Event;
use crate::store::Store;

/// Which limit a draw counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    Rpm,
    Tpm,
    DailyTokens,
    Concurrent,
}

impl Dim {
    pub fn as_str(self) -> &'static str {
        match self {
            Dim::Rpm => "rpm",
            Dim::Tpm => "tpm",
            Dim::DailyTokens => "daily_tokens",
            Dim::Concurrent => "concurrent",
        }
    }
}

/// One bucket or day counter an admission takes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Draw {
    /// Rule, dimension and principal (see [`rules::draws`]).
    pub key: String,
    pub dim: Dim,
    pub kind: Kind,
    pub cost: f64,
}

/// A concurrency slot an admission takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotDraw {
    pub key: String,
    pub limit: u32,
    /// This slot's id (a row on PostgreSQL; empty while counted in memory).
    pub id: String,
    /// The per-key default: counted in this replica's memory, never in the store.
    pub per_replica: bool,
}

/// The answer to one admission.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// Each draw's tokens available before it (in the order given).
    pub available: Vec<f64>,
    /// The slot key's slots in use before it.
    pub slots_in_use: u32,
    pub admitted: bool,
}

/// How an admission ended.
pub enum Admission {
    /// Through, holding what must be settled and released.
    Admitted(Ticket),
    /// Refused: the event to log and the 429 to answer.
    Refused { event: Event, error: ApiError },
}

/// How long an admission waits for the shared rows (PostgreSQL) before it is treated as
/// a store failure (`rate_limits.fail_closed` decides): a store that hangs holds no
/// request for longer.
pub const SHARED_ADMIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The gateway's limiter.
pub struct Limiter {
    limits: InferenceLimits,
    /// Every draw and slot of a SQLite gateway; per-replica slots on PostgreSQL.
    memory: memory::Memory,
    /// The store shared by replicas, when it keeps limit rows (PostgreSQL).
    shared: Option<Arc<dyn Store>>,
    tracker: TaskTracker,
    /// Slots this gateway holds now (the `concurrency_slots_in_use` gauge).
    in_use: AtomicI64,
}

impl Limiter {
    /// Shares the limits through `store` when it offers limit rows, else keeps them here.
    pub fn new(limits: InferenceLimits, store: Arc<dyn Store>, tracker: TaskTracker) -> Self {
        let shared = store.limit_rows().is_some().then_some(store);
        Self {
            limits,
            memory: memory::Memory::default(),
            shared,
            tracker,
            in_use: AtomicI64::new(0),
        }
    }

    /// Concurrency slots this gateway holds.
    pub fn slots_in_use(&self) -> i64 {
        self.in_use.load(Ordering::Relaxed)
    }

    /// Admits `who` for a request estimated at `estimate` tokens, or refuses.
    pub async fn admit(
        self: &Arc<Self>,
        who: &Principal,
        estimate: u64,
        now: DateTime<Utc>,
    ) -> Result<Admission, crate::store::StoreError> {
        let now_ms = now.timestamp_millis();
        let (rule, draws, mut slot) = rules::draws(&self.limits, who, estimate, now_ms);
        if draws.is_empty() && slot.is_none() {
            return Ok(Admission::Admitted(Ticket::default()));
        }
        let verdict = match &self.shared {
            None => self.memory.admit(&draws, slot.as_ref(), now_ms),
            Some(store) => {
                self.admit_shared(store, &draws, slot.as_mut(), now_ms)
                    .await?
            }
        };
        if !verdict.admitted {
            let (event, error) = refusal::refused(rule, &draws, slot.as_ref(), &verdict, now);
            return Ok(Admission::Refused { event, error });
        }
        let slot = slot.map(|s| {
            self.in_use.fetch_add(1, Ordering::Relaxed);
            Slot::new(self.clone(), s)
        });
        let charged: Vec<Draw> = draws.into_iter().filter(|d| d.dim != Dim::Rpm).collect();
        let charge = (!charged.is_empty()).then(|| Charge::new(self.clone(), charged, estimate));
        Ok(Admission::Admitted(Ticket { slot, charge }))
    }

    /// Admission on PostgreSQL: a per-replica slot in memory first, then the operator's
    /// draws and slot in one shared statement (the memory slot is given back if that
    /// refuses or fails).
    async fn admit_shared(
        &self,
        store: &Arc<dyn Store>,
        draws: &[Draw],
        slot: Option<&mut SlotDraw>,
        now_ms: i64,
    ) -> Result<Verdict, crate::store::StoreError> {
        let (local, shared) = match slot {
            Some(s) if s.per_replica => (Some(&*s), None),
            Some(s) => {
                s.id = uuid::Uuid::new_v4().simple().to_string();
                (None, Some(s.clone()))
            }
            None => (None, None),
        };
        if let Some(s) = local {
            let verdict = self.memory.admit(&[], Some(s), now_ms);
            if !verdict.admitted || draws.is_empty() {
                return Ok(verdict);
            }
        }
        let slot_id = shared.as_ref().map(|s| s.id.clone());
        let verdict = match store.limit_rows() {
            Some(rows) => {
                let admit = rows.limit_admit(draws.to_vec(), shared, now_ms);
                match tokio::time::timeout(SHARED_ADMIT_TIMEOUT, admit).await {
                    Ok(v) => v,
                    Err(_) => {
                        // The statement may still commit: its slot is given back once the
                        // store answers again (a delete of a slot never written is a no-op).
                        if let Some(id) = slot_id {
                            self.release_shared(store.clone(), id);
                        }
                        Err(crate::store::StoreError::Database(
                            "traffic-limit admission timed out".into(),
                        ))
                    }
                }
            }
            None => Err(crate::store::StoreError::Database(
                "the store keeps no limit rows".into(),
            )),
        };
        if let Some(s) = local
            && !verdict.as_ref().is_ok_and(|v| v.admitted)
        {
            self.memory.release(&s.key);
        }
        verdict
    }

    /// Gives tokens back (settlement); on PostgreSQL in the background.
    fn refund(&self, refunds: Vec<(Draw, f64)>) {
        match &self.shared {
            None => self.memory.refund(&refunds),
            Some(store) => {
                let store = store.clone();
                self.spawn(async move {
                    if let Some(rows) = store.limit_rows()
                        && let Err(e) = rows.limit_refund(refunds).await
                    {
                        tracing::warn!(error = %e, "correcting a token limit at settlement failed");
                    }
                });
            }
        }
    }

    /// Frees a slot; a shared one in the background (a slot whose delete fails is
    /// removed when its gateway stops).
    fn release(&self, slot: &SlotDraw) {
        self.in_use.fetch_sub(1, Ordering::Relaxed);
        match &self.shared {
            Some(store) if !slot.per_replica => self.release_shared(store.clone(), slot.id.clone()),
            _ => self.memory.release(&slot.key),
        }
    }

    fn release_shared(&self, store: Arc<dyn Store>, id: String) {
        self.spawn(async move {
            if let Some(rows) = store.limit_rows()
                && let Err(e) = rows.limit_release(&id).await
            {
                tracing::warn!(error = %e, "freeing a concurrency slot failed");
            }
        });
    }

    fn spawn(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        if tokio::runtime::Handle::try_current().is_ok() {
            self.tracker.spawn(work);
        }
    }

    /// Removes slots of gateways that are gone and rows idle for two days (PostgreSQL).
    pub async fn reap(&self, now: DateTime<Utc>) {
        let Some(store) = &self.shared else {
            return;
        };
        let Some(rows) = store.limit_rows() else {
            return;
        };
        let stale = now.timestamp_millis() - 2 * bucket::DAY_MS;
        match rows.limit_reap(stale).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(rows = n, "removed stale limit rows and orphaned slots"),
            Err(e) => tracing::warn!(error = %e, "limit cleanup failed"),
        }
    }
}

/// Tokens a request is charged at admission: a quarter of its body's bytes (the prompt,
/// roughly) plus what it may write.
pub fn estimate(body_bytes: usize, max_tokens: Option<u64>) -> u64 {
    (body_bytes as u64 / 4).saturating_add(max_tokens.unwrap_or(4096))
}

/// Tokens a finished request counts for tpm and daily limits: input, cache writes and
/// output (cache reads are not counted, as Anthropic's own input-token limits).
pub fn counted(u: &crate::metering::usage::Usage) -> u64 {
    u.input_tokens
        .saturating_add(u.cache_write_5m_tokens)
        .saturating_add(u.cache_write_1h_tokens)
        .saturating_add(u.output_tokens)
}
