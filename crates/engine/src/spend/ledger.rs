//! The spend ledger: admission out of *leases*, so a capped request usually pays no store
//! round trip on its way to the upstream.
//!
//! A lease is an ordinary reservation (one store transaction that checks every binding cap,
//! on PostgreSQL across replicas) of several requests' worst case for one person and one
//! model family (requests of another family, or of none, take leases of their own: a
//! lease's hold sits on its family's spend rows and its family's caps admitted it). Requests
//! are then admitted in memory while the lease has room for their own worst case:
//! `room = amount − charged − outstanding`, where `outstanding` sums the worst cases of the
//! requests admitted and not yet metered and `charged` their metered costs. A request's
//! usage row charges the lease in the store, in the row's transaction (the lease's stored
//! amount shrinks by the charge, the person's spend grows by it); only then does the request
//! give its worst case back. A lease that has run out of room, is older than [`MAX_AGE`],
//! sat idle for [`IDLE`], belongs to an earlier day or predates a cap change on this gateway
//! is retired, and released in the store once nothing admitted under it is still in flight.
//! Near a cap the lease shrinks to a quarter of the headroom, and to exactly the request's
//! worst case when less fits: then admission is today's per-request reservation.
//!
//! **Crash argument.** At every moment the stored open amount of a lease is at least the sum
//! of the worst cases of the requests admitted under it and not yet charged: admission never
//! lets `outstanding` pass `amount − charged`, and a charge lowers the stored amount by no
//! more than the cost it adds to spend. So a gateway that dies leaves open leases whose
//! amounts cover everything that may have been served; they are charged as `estimated` at
//! the next start (or by another replica once this one's ownership lock is free), exactly
//! like any open reservation. A cap is never exceeded because the store admitted each lease
//! against it, and everything spent under a lease is bounded by the lease. A usage row that
//! could not be written leaves its lease open on purpose (charged as estimated later).
//!
//! A lease paid by a shared group budget holds its amount on the budget's row as well, and
//! every charge, release or estimate moves the budget's row exactly as the person's (see
//! the stores), so the same argument bounds what a group spends together.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio_util::task::TaskTracker;

use super::{
    Family, GroupMode, PoolRule, PoolStanding, ReserveOutcome, ReserveRequest, Standing, new_id,
    windows,
};
use crate::store::{SettleAs, Store, StoreError};

/// A new lease covers this many worst cases of the request that opens it (less near a cap).
pub const LEASE_REQUESTS: u64 = 8;
/// A lease is reserved only while every binding cap has room for this many more of it
/// beside it.
pub const LEASE_FREE: u64 = 3;
/// A lease older than this takes no new requests (bounds how long another replica's cap
/// change goes unseen here).
pub const MAX_AGE: Duration = Duration::from_secs(10);
/// A lease nobody used for this long is released.
pub const IDLE: Duration = Duration::from_secs(1);

/// Whose leases an account holds: a person's, for one model family (`None`: none).
type AccountKey = (String, Option<Family>);

/// Every person's leases on this gateway, by person and model family.
pub struct Ledger {
    accounts: Mutex<HashMap<AccountKey, Arc<Account>>>,
    store: Arc<dyn Store>,
    tracker: TaskTracker,
    /// Bumped when a cap changes through this gateway: older leases take no new requests.
    generation: AtomicU64,
    /// Releases the store refused (it was down); retried by the sweep.
    unreleased: Arc<Mutex<Vec<String>>>,
}

#[derive(Default)]
struct Account {
    /// One lease reservation at a time per person; the others wait and use its room.
    gate: tokio::sync::Mutex<()>,
    /// Leases not yet released; the last one is the one admitting.
    leases: Mutex<Vec<Arc<Lease>>>,
    /// The standings the store last answered with: how big the next lease may be.
    last: Mutex<Vec<Standing>>,
}

struct Lease {
    id: String,
    sub: String,
    family: Option<Family>,
    amount: u64,
    day_start: DateTime<Utc>,
    generation: u64,
    born: Instant,
    standings: Vec<Standing>,
    state: Mutex<LeaseState>,
}

struct LeaseState {
    outstanding: u64,
    /// Requests admitted under it and not yet metered.
    tickets: u64,
    charged: u64,
    last_used: Instant,
    retired: bool,
    /// A usage row under it was lost: never released, charged as estimated later.
    tainted: bool,
    released: bool,
}

/// What admission asks of the ledger.
pub struct Want<'a> {
    pub sub: &'a str,
    pub groups: &'a [String],
    /// The requested model's family: its own leases and caps.
    pub family: Option<Family>,
    pub request_id: &'a str,
    pub worst_micro: u64,
    pub mode: GroupMode,
    pub pool_rule: &'a PoolRule,
    pub now: DateTime<Utc>,
}

pub enum Take {
    /// Admitted: the ticket and the person's standings as of the lease.
    Held(Ticket, Vec<Standing>),
    Refused {
        standings: Vec<Standing>,
        exceeded: Vec<super::Meter>,
        /// Every shared budget of the person's was used up (the first is described).
        pool: Option<PoolStanding>,
    },
}

/// One admitted request's claim on a lease: its worst case, given back when its usage row
/// is durable ([`crate::metering::Charge::landed`]) or, for a request that never reached metering, on drop.
pub struct Ticket {
    ledger: Arc<Ledger>,
    lease: Arc<Lease>,
    worst: u64,
    done: AtomicBool,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("lease", &self.lease.id)
            .field("worst", &self.worst)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Ledger {
    pub fn new(store: Arc<dyn Store>, tracker: TaskTracker) -> Arc<Self> {
        Arc::new(Self {
            accounts: Mutex::default(),
            store,
            tracker,
            generation: AtomicU64::new(0),
            unreleased: Arc::default(),
        })
    }

    /// Admits `want` out of the person's lease, reserving a new lease when it has no room.
    /// Leases retired on the way are released first, so their remainder is free again
    /// before the new lease is checked against the caps.
    pub async fn take(self: &Arc<Self>, want: &Want<'_>) -> Result<Take, StoreError> {
        let account = self.account(want.sub, want.family);
        let (held, done) = self.try_take(&account, want);
        if let Some(held) = held {
            // Admitted out of the lease: releasing what retired waits for no request.
            done.into_iter()
                .for_each(|id| self.release_in_background(id));
            return Ok(held);
        }
        self.release_now(done).await;
        let _gate = account.gate.lock().await;
        // Someone else may have reserved a lease while this request waited.
        let (held, done) = self.try_take(&account, want);
        if let Some(held) = held {
            done.into_iter()
                .for_each(|id| self.release_in_background(id));
            return Ok(held);
        }
        self.release_now(done).await;
        let in_flight: u64 = lock(&account.leases)
            .iter()
            .map(|l| lock(&l.state).tickets)
            .sum();
        let size = lease_size(want.worst_micro, in_flight, headroom(&lock(&account.last)));
        // A lease only where the caps leave room for [`LEASE_FREE`] more of it; nearer a cap,
        // exactly this request's worst case (so a burst across replicas is admitted exactly).
        let refused = |outcome: &ReserveOutcome| matches!(outcome, ReserveOutcome::Refused { .. });
        // Read before the store checks the caps: a cap changed meanwhile retires this lease.
        let generation = self.generation.load(Ordering::Acquire);
        let mut outcome = if size > want.worst_micro {
            self.reserve(want, size, size.saturating_mul(LEASE_FREE))
                .await?
        } else {
            self.reserve(want, want.worst_micro, 0).await?
        };
        if size > want.worst_micro && refused(&outcome.1) {
            outcome = self.reserve(want, want.worst_micro, 0).await?;
        }
        let (_, ReserveOutcome::Reserved(s) | ReserveOutcome::Refused { standings: s, .. }, _) =
            &outcome;
        lock(&account.last).clone_from(s);
        Ok(match outcome {
            (id, ReserveOutcome::Reserved(standings), amount) => {
                let lease = Arc::new(Lease {
                    id,
                    sub: want.sub.to_owned(),
                    family: want.family,
                    amount,
                    day_start: windows(want.now)[0].start,
                    generation,
                    born: Instant::now(),
                    standings: standings.clone(),
                    state: Mutex::new(LeaseState {
                        outstanding: want.worst_micro,
                        tickets: 1,
                        charged: 0,
                        last_used: Instant::now(),
                        retired: false,
                        tainted: false,
                        released: false,
                    }),
                });
                // Into the person's account as it is now: the sweep may have forgotten the
                // one this request started with while the store answered.
                lock(&self.account(want.sub, want.family).leases).push(lease.clone());
                Take::Held(self.ticket(lease, want.worst_micro), standings)
            }
            (
                _,
                ReserveOutcome::Refused {
                    standings,
                    exceeded,
                    pool,
                },
                _,
            ) => Take::Refused {
                standings,
                exceeded,
                pool,
            },
        })
    }

    async fn reserve(
        &self,
        want: &Want<'_>,
        amount: u64,
        keep_free: u64,
    ) -> Result<(String, ReserveOutcome, u64), StoreError> {
        let id = new_id("rsv");
        let outcome = self
            .store
            .reserve(ReserveRequest {
                reservation_id: id.clone(),
                request_id: want.request_id.to_owned(),
                sub: want.sub.to_owned(),
                groups: want.groups.to_vec(),
                amount_micro: amount,
                family: want.family,
                keep_free_micro: keep_free,
                windows: windows(want.now),
                mode: want.mode,
                pool_rule: want.pool_rule.clone(),
                now: want.now,
            })
            .await?;
        Ok((id, outcome, amount))
    }

    fn ticket(self: &Arc<Self>, lease: Arc<Lease>, worst: u64) -> Ticket {
        Ticket {
            ledger: self.clone(),
            lease,
            worst,
            done: AtomicBool::new(false),
        }
    }

    fn account(&self, sub: &str, family: Option<Family>) -> Arc<Account> {
        lock(&self.accounts)
            .entry((sub.to_owned(), family))
            .or_default()
            .clone()
    }

    /// Admits out of the admitting lease when it has room, retiring what may no longer
    /// admit; also the leases now finished, for the caller to release.
    fn try_take(
        self: &Arc<Self>,
        account: &Account,
        want: &Want<'_>,
    ) -> (Option<Take>, Vec<String>) {
        let day = windows(want.now)[0].start;
        let generation = self.generation.load(Ordering::Acquire);
        let mut leases = lock(&account.leases);
        let mut taken = None;
        if let Some(lease) = leases.last() {
            let mut st = lock(&lease.state);
            let fresh = !st.retired
                && lease.day_start == day
                && lease.generation == generation
                && lease.born.elapsed() < MAX_AGE;
            let room = lease
                .amount
                .saturating_sub(st.charged)
                .saturating_sub(st.outstanding);
            if fresh && room >= want.worst_micro {
                st.outstanding += want.worst_micro;
                st.tickets += 1;
                st.last_used = Instant::now();
                taken = Some(lease.clone());
            } else {
                st.retired = true;
            }
        }
        let done = finished(&mut leases);
        drop(leases);
        let held = taken.map(|lease| {
            let standings = lease.standings.clone();
            Take::Held(self.ticket(lease, want.worst_micro), standings)
        });
        (held, done)
    }

    /// Releases `ids` and waits for the store. The releases run in a task of their own:
    /// `finished` has already forgotten these leases, so a caller that stops waiting
    /// (admission's timeout while the store hangs) must not cancel a release half-way, or
    /// the lease would stay open for as long as this gateway lives (the issue 35 drill).
    async fn release_now(&self, ids: Vec<String>) {
        if ids.is_empty() {
            return;
        }
        let (store, unreleased) = (self.store.clone(), self.unreleased.clone());
        let releases = self.tracker.spawn(async move {
            for id in ids {
                release(store.as_ref(), id, &unreleased).await;
            }
        });
        let _ = releases.await;
    }

    /// Releases the finished leases in the background. Without a runtime (a ticket dropped
    /// at exit) nothing is released: the lease is charged as estimated at the next start.
    fn release_later(&self, leases: &mut Vec<Arc<Lease>>) {
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        for id in finished(leases) {
            self.release_in_background(id);
        }
    }

    fn release_in_background(&self, id: String) {
        let (store, unreleased) = (self.store.clone(), self.unreleased.clone());
        self.tracker
            .spawn(async move { release(store.as_ref(), id, &unreleased).await });
    }

    /// Retires leases that sat idle or aged, releases the finished ones (again, those the
    /// store refused before) and forgets people with no lease left. Runs every few hundred
    /// milliseconds.
    pub fn sweep(&self) {
        let retry = std::mem::take(&mut *lock(&self.unreleased));
        for id in retry {
            self.release_in_background(id);
        }
        let mut accounts = lock(&self.accounts);
        accounts.retain(|_, account| {
            let mut leases = lock(&account.leases);
            for lease in leases.iter() {
                let mut st = lock(&lease.state);
                if st.last_used.elapsed() >= IDLE || lease.born.elapsed() >= MAX_AGE {
                    st.retired = true;
                }
            }
            self.release_later(&mut leases);
            // An account whose lease is being reserved stays.
            !leases.is_empty() || account.gate.try_lock().is_err()
        });
    }

    /// A cap changed through this gateway, or the store failed: no lease reserved before
    /// admits again (the next request goes to the store, which applies the new cap or
    /// `fail_closed_on_error`).
    pub fn retire_all(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// At shutdown, after the recorder has written every usage row: releases every lease
    /// with nothing in flight and waits for the store. What is left (a request cut off
    /// mid-way, a lost usage row) stays open and is charged as estimated at the next start.
    pub async fn close(&self) {
        let ids: Vec<String> = {
            let mut accounts = lock(&self.accounts);
            let mut ids = Vec::new();
            for account in accounts.values() {
                for lease in lock(&account.leases).iter() {
                    let mut st = lock(&lease.state);
                    st.retired = true;
                    if st.outstanding == 0 && !st.tainted && !st.released {
                        st.released = true;
                        ids.push(lease.id.clone());
                    }
                }
            }
            accounts.clear();
            ids
        };
        self.tracker.wait().await;
        let retry = std::mem::take(&mut *lock(&self.unreleased));
        self.release_now(ids.into_iter().chain(retry).collect())
            .await;
    }

    /// Open leases on this gateway (for tests and the metrics gauge).
    pub fn open_leases(&self) -> usize {
        lock(&self.accounts)
            .values()
            .map(|a| lock(&a.leases).len())
            .sum()
    }
}

/// Marks every retired lease with nothing in flight as released and returns their ids;
/// forgets those and the tainted ones that are idle (left open on purpose).
fn finished(leases: &mut Vec<Arc<Lease>>) -> Vec<String> {
    let mut ids = Vec::new();
    leases.retain(|lease| {
        let mut st = lock(&lease.state);
        if st.retired && st.outstanding == 0 && !st.tainted && !st.released {
            st.released = true;
            ids.push(lease.id.clone());
        }
        !(st.released || st.tainted && st.outstanding == 0)
    });
    ids
}

/// Releases a lease's remainder; when the store cannot, the lease is kept for a retry.
async fn release(store: &dyn Store, id: String, unreleased: &Mutex<Vec<String>>) {
    if let Err(e) = store.settle(&id, 0, SettleAs::Released, Utc::now()).await {
        tracing::warn!(error = %e, "could not release a spend lease; retrying");
        lock(unreleased).push(id);
    }
}

/// What the person's binding caps still allow, as the store last saw it.
fn headroom(standings: &[Standing]) -> Option<u64> {
    standings
        .iter()
        .filter_map(|s| {
            let cap = u64::try_from(s.cap_cents?)
                .unwrap_or(0)
                .saturating_mul(10_000);
            Some(
                cap.saturating_sub(s.spent_micro)
                    .saturating_sub(s.reserved_micro),
            )
        })
        .min()
}

/// The worst case times [`LEASE_REQUESTS`] or twice the person's requests in flight, at
/// most a quarter of the known headroom; exactly the worst case when that leaves less than
/// two of it (near a cap every request is reserved on its own, so admission stays exact).
fn lease_size(worst: u64, in_flight: u64, headroom: Option<u64>) -> u64 {
    let wanted = worst.saturating_mul(LEASE_REQUESTS.max(in_flight.saturating_add(1) * 2));
    let wanted = headroom.map_or(wanted, |h| wanted.min(h / 4));
    if wanted < worst.saturating_mul(2) {
        return worst;
    }
    wanted.min(crate::metering::pricing::MAX_MICRO_USD.max(worst))
}

impl crate::metering::Charge for Ticket {
    fn reservation_id(&self) -> &str {
        &self.lease.id
    }

    /// The request's usage row, and with it the charge against the lease, is durable.
    fn landed(&self, cost_micro: u64) {
        self.finish(|st| st.charged = st.charged.saturating_add(cost_micro));
    }

    /// The usage row could not be written: the lease stays open until the next start
    /// charges it as estimated.
    fn lost(&self) {
        self.finish(|st| {
            st.tainted = true;
            st.retired = true;
        });
        self.ledger.retire_all();
    }

    /// No request is admitted out of a lease while the store fails: the next one asks the
    /// store, which applies `fail_closed_on_error`.
    fn store_failed(&self) {
        self.ledger.retire_all();
    }
}

impl Ticket {
    fn finish(&self, f: impl FnOnce(&mut LeaseState)) {
        if self.done.swap(true, Ordering::AcqRel) {
            return;
        }
        {
            let mut st = lock(&self.lease.state);
            st.outstanding = st.outstanding.saturating_sub(self.worst);
            st.tickets = st.tickets.saturating_sub(1);
            f(&mut st);
        }
        let finished = {
            let st = lock(&self.lease.state);
            st.retired && st.outstanding == 0
        };
        if finished {
            let key = (self.lease.sub.clone(), self.lease.family);
            let account = lock(&self.ledger.accounts).get(&key).cloned();
            if let Some(account) = account {
                self.ledger.release_later(&mut lock(&account.leases));
            }
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // Never metered (the request ended before routing): nothing to charge.
        self.finish(|_| {});
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_shrink_near_a_cap_and_become_exact() {
        let w = 1_000;
        assert_eq!(lease_size(w, 0, None), 8 * w);
        assert_eq!(lease_size(w, 15, None), 32 * w, "twice what is in flight");
        assert_eq!(lease_size(w, 0, Some(100 * w)), 8 * w);
        assert_eq!(
            lease_size(w, 0, Some(12 * w)),
            3 * w,
            "a quarter of the headroom"
        );
        assert_eq!(
            lease_size(w, 0, Some(7 * w)),
            w,
            "under two worst cases: exact"
        );
        assert_eq!(lease_size(w, 0, Some(0)), w);
    }
}
