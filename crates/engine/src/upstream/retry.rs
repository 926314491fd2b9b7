//! Same-upstream retry: when an upstream answers 529 (overloaded) or the connection fails
//! before any byte, the router may try the same upstream again after a jittered backoff,
//! before failing over. Retries come out of one budget for the whole gateway: at most
//! `routing.retry.budget_ratio` of the requests routed in the last
//! [`RETRY_BUDGET_WINDOW`] (but always `budget_min`), so during an outage of every upstream
//! retries add a bounded share of load, never a multiple of it.
//!
//! Counts are kept in one-second buckets of the injected clock's time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;

use crate::config::routing::{RETRY_BUDGET_WINDOW, RetryConfig};
use crate::deps::Clock;

const BUCKETS: usize = RETRY_BUDGET_WINDOW.as_secs() as usize;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    second: i64,
    requests: u64,
    retries: u64,
}

/// The gateway's retry budget.
pub struct RetryBudget {
    config: RetryConfig,
    clock: Arc<dyn Clock>,
    buckets: Mutex<[Bucket; BUCKETS]>,
}

impl RetryBudget {
    pub fn new(config: RetryConfig, clock: Arc<dyn Clock>) -> Self {
        Self {
            config,
            clock,
            buckets: Mutex::new([Bucket::default(); BUCKETS]),
        }
    }

    /// Retries allowed per leg of one request.
    pub fn max_retries(&self) -> u32 {
        self.config.max_retries
    }

    /// Counts one routed request (the base the ratio applies to).
    pub fn request(&self) {
        self.with_bucket(|b| b.requests = b.requests.saturating_add(1));
    }

    /// Takes one retry from the budget; `false` when it is spent.
    pub fn try_retry(&self) -> bool {
        if self.config.max_retries == 0 {
            return false;
        }
        let now = self.clock.now().timestamp();
        let Ok(mut buckets) = self.buckets.lock() else {
            return false;
        };
        let live = |b: &&Bucket| now - b.second < BUCKETS as i64 && b.second <= now;
        let requests: u64 = buckets.iter().filter(live).map(|b| b.requests).sum();
        let retries: u64 = buckets.iter().filter(live).map(|b| b.retries).sum();
        let by_ratio = (requests as f64 * self.config.budget_ratio).floor() as u64;
        if retries >= by_ratio.max(u64::from(self.config.budget_min)) {
            return false;
        }
        let b = bucket(&mut buckets, now);
        b.retries = b.retries.saturating_add(1);
        true
    }

    /// The wait before retry number `n` (0-based): `backoff_ms · 2^n`, times a random
    /// factor in [0.5, 1.5) so that callers retrying together spread out.
    pub fn backoff(&self, n: u32) -> Duration {
        let base = self.config.backoff.saturating_mul(1u32 << n.min(10));
        base.mul_f64(rand::rng().random_range(0.5..1.5))
    }

    fn with_bucket(&self, f: impl FnOnce(&mut Bucket)) {
        let now = self.clock.now().timestamp();
        if let Ok(mut buckets) = self.buckets.lock() {
            f(bucket(&mut buckets, now));
        }
    }
}

/// The bucket of second `now`, emptied if it last held an older second.
fn bucket(buckets: &mut [Bucket; BUCKETS], now: i64) -> &mut Bucket {
    let b = &mut buckets[now.rem_euclid(BUCKETS as i64) as usize];
    if b.second != now {
        *b = Bucket {
            second: now,
            ..Bucket::default()
        };
    }
    b
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use chrono::{DateTime, Utc};

    struct TestClock(Mutex<DateTime<Utc>>);
    impl Clock for TestClock {
        fn now(&self) -> DateTime<Utc> {
            *self.0.lock().unwrap()
        }
    }

    fn budget(ratio: f64, min: u32) -> (RetryBudget, Arc<TestClock>) {
        let clock = Arc::new(TestClock(Mutex::new(Utc::now())));
        let config = RetryConfig {
            max_retries: 1,
            backoff: Duration::from_millis(100),
            budget_ratio: ratio,
            budget_min: min,
        };
        (RetryBudget::new(config, clock.clone()), clock)
    }

    #[test]
    fn retries_are_a_share_of_recent_requests() {
        let (b, clock) = budget(0.1, 2);
        assert!(b.try_retry() && b.try_retry(), "the minimum");
        assert!(!b.try_retry());
        for _ in 0..40 {
            b.request();
        }
        // 10 % of 40 = 4, two already spent.
        assert!(b.try_retry() && b.try_retry());
        assert!(!b.try_retry());
        // Ten seconds later the window is empty again: only the minimum.
        *clock.0.lock().unwrap() += chrono::TimeDelta::seconds(10);
        assert!(b.try_retry() && b.try_retry());
        assert!(!b.try_retry());
    }

    #[test]
    fn no_retries_when_turned_off() {
        let (mut b, _) = budget(1.0, 100);
        b.config.max_retries = 0;
        assert!(!b.try_retry());
    }

    #[test]
    fn backoff_doubles_with_jitter() {
        let (b, _) = budget(0.1, 2);
        for _ in 0..50 {
            let d0 = b.backoff(0);
            let d2 = b.backoff(2);
            assert!(d0 >= Duration::from_millis(50) && d0 < Duration::from_millis(150));
            assert!(d2 >= Duration::from_millis(200) && d2 < Duration::from_millis(600));
        }
    }
}
