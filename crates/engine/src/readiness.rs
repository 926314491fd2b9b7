//! `/readyz`'s grace (`store.readiness_grace_seconds`, the reference's key): while the
//! store has been failing for less than the grace, the probe still answers ready, so a
//! short database blip does not take every replica out of the load balancer at once.
//! Only the answer is kept: spend leases are retired at the first failure either way, and
//! capped requests follow `enforcement` as without a grace.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};

/// What `/readyz` says after a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ready,
    /// The store is failing, within the grace: still ready.
    Grace,
    Unavailable,
}

/// When the store started failing, and the grace.
#[derive(Debug)]
pub struct Readiness {
    grace: Duration,
    failing_since: Mutex<Option<DateTime<Utc>>>,
    told: AtomicBool,
}

impl Readiness {
    pub fn new(grace: Duration) -> Self {
        Self {
            grace,
            failing_since: Mutex::new(None),
            told: AtomicBool::new(false),
        }
    }

    /// The answer for a probe that succeeded or not at `now`.
    pub fn judge(&self, store_ok: bool, now: DateTime<Utc>) -> Verdict {
        let mut since = self.failing_since.lock().unwrap_or_else(|e| e.into_inner());
        if store_ok {
            *since = None;
            return Verdict::Ready;
        }
        let first = *since.get_or_insert(now);
        let failing = (now - first).to_std().unwrap_or_default();
        if failing < self.grace {
            return Verdict::Grace;
        }
        if !self.told.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "the store has been unreachable for {} s, so /readyz answers 503; \
                 store.readiness_grace_seconds (now {} s) keeps replicas ready through \
                 shorter outages",
                failing.as_secs(),
                self.grace.as_secs()
            );
        }
        Verdict::Unavailable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_within_the_grace_stays_ready() {
        let t0 = DateTime::<Utc>::UNIX_EPOCH;
        let r = Readiness::new(Duration::from_secs(30));
        assert_eq!(r.judge(false, t0), Verdict::Grace);
        assert_eq!(
            r.judge(false, t0 + chrono::Duration::seconds(29)),
            Verdict::Grace
        );
        assert_eq!(
            r.judge(false, t0 + chrono::Duration::seconds(30)),
            Verdict::Unavailable
        );
        // Recovery resets the clock.
        assert_eq!(
            r.judge(true, t0 + chrono::Duration::seconds(31)),
            Verdict::Ready
        );
        assert_eq!(
            r.judge(false, t0 + chrono::Duration::seconds(40)),
            Verdict::Grace
        );
        let none = Readiness::new(Duration::ZERO);
        assert_eq!(none.judge(false, t0), Verdict::Unavailable);
    }
}
