//! The arithmetic of one limit, shared by the in-process limiter (SQLite) and mirrored by
//! `gatehouse_limit_admit` (PostgreSQL, migration 0004): token buckets for rpm and tpm and a
//! per-UTC-day counter for daily tokens.
//!
//! A draw is admitted when what is available covers its cost, capped at the bucket's size
//! (a request estimated above the whole bucket passes on a full bucket, and then leaves it
//! in debt, so the limit still holds on average). Settlement adds back what was charged
//! beyond the real tokens (or takes the shortfall).

use serde::{Deserialize, Serialize};

/// Milliseconds in a UTC day.
pub const DAY_MS: i64 = 86_400_000;

/// What a draw takes from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Kind {
    /// A token bucket of `capacity`, refilled at `per_ms` per millisecond.
    Bucket { capacity: f64, per_ms: f64 },
    /// A counter of `limit` per UTC day; `day` is the day's start (ms since the epoch).
    Daily { limit: f64, day: i64 },
}

/// The stored state of one bucket or counter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct State {
    /// A bucket's tokens; a daily counter's tokens used.
    pub tokens: f64,
    /// A daily counter's day start (0 for buckets).
    pub period: i64,
    /// When `tokens` was last written (ms).
    pub at_ms: i64,
}

impl Kind {
    /// The bucket's size or the day's limit.
    pub fn capacity(self) -> f64 {
        match self {
            Kind::Bucket { capacity, .. } => capacity,
            Kind::Daily { limit, .. } => limit,
        }
    }

    /// The stored `period` of this kind's rows.
    pub fn period(self) -> i64 {
        match self {
            Kind::Bucket { .. } => 0,
            Kind::Daily { day, .. } => day,
        }
    }

    /// What is available at `now_ms` (a missing row is a full bucket or an unused day).
    pub fn available(self, state: Option<State>, now_ms: i64) -> f64 {
        match (self, state) {
            (Kind::Bucket { capacity, .. }, None) => capacity,
            (Kind::Bucket { capacity, per_ms }, Some(s)) => {
                let elapsed = (now_ms - s.at_ms).max(0) as f64;
                (s.tokens + elapsed * per_ms).min(capacity)
            }
            (Kind::Daily { limit, day }, Some(s)) if s.period == day => limit - s.tokens,
            (Kind::Daily { limit, .. }, _) => limit,
        }
    }

    /// Whether `available` admits a draw of `cost`.
    pub fn fits(self, available: f64, cost: f64) -> bool {
        available >= cost.min(self.capacity())
    }

    /// The state after admitting a draw of `cost` from `available`.
    pub fn charged(self, available: f64, cost: f64, now_ms: i64) -> State {
        let tokens = match self {
            Kind::Bucket { .. } => available - cost,
            Kind::Daily { limit, .. } => limit - available + cost,
        };
        State {
            tokens,
            period: self.period(),
            at_ms: now_ms,
        }
    }

    /// `state` with `refund` tokens given back (negative: taken) at settlement; a daily
    /// counter of another day is left alone.
    pub fn refunded(self, state: State, refund: f64) -> State {
        let tokens = match self {
            Kind::Bucket { capacity, .. } => (state.tokens + refund).min(capacity),
            Kind::Daily { day, .. } if state.period == day => (state.tokens - refund).max(0.0),
            Kind::Daily { .. } => state.tokens,
        };
        State { tokens, ..state }
    }

    /// Whole seconds until a draw of `cost` would fit (at least 1).
    pub fn wait_secs(self, available: f64, cost: f64, now_ms: i64) -> u64 {
        let ms = match self {
            Kind::Bucket { per_ms, .. } if per_ms > 0.0 => {
                let missing = cost.min(self.capacity()) - available;
                (missing / per_ms).ceil()
            }
            Kind::Bucket { .. } => f64::from(u32::MAX),
            Kind::Daily { day, .. } => (day + DAY_MS - now_ms) as f64,
        };
        ((ms / 1000.0).ceil() as u64).max(1)
    }
}

/// The start of `now_ms`'s UTC day.
pub fn day_start(now_ms: i64) -> i64 {
    now_ms - now_ms.rem_euclid(DAY_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RPM10: Kind = Kind::Bucket {
        capacity: 10.0,
        per_ms: 10.0 / 60_000.0,
    };

    #[test]
    fn a_bucket_refills_at_its_rate_up_to_its_size() {
        let s = RPM10.charged(10.0, 10.0, 0);
        assert_eq!(RPM10.available(Some(s), 0), 0.0);
        assert!(!RPM10.fits(0.0, 1.0));
        assert_eq!(RPM10.wait_secs(0.0, 1.0, 0), 6);
        assert!((RPM10.available(Some(s), 6_000) - 1.0).abs() < 1e-9);
        assert_eq!(RPM10.available(Some(s), 3_600_000), 10.0);
        // A clock behind the row never drains it.
        assert_eq!(RPM10.available(Some(s), -5), 0.0);
    }

    #[test]
    fn a_draw_above_the_bucket_passes_on_a_full_one_and_leaves_debt() {
        let tpm = Kind::Bucket {
            capacity: 100.0,
            per_ms: 100.0 / 60_000.0,
        };
        assert!(tpm.fits(100.0, 250.0));
        let s = tpm.charged(100.0, 250.0, 0);
        assert_eq!(s.tokens, -150.0);
        assert!(!tpm.fits(tpm.available(Some(s), 60_000), 1.0));
        // Settlement: the request used 40 tokens, 210 come back (capped at the size).
        let s = tpm.refunded(s, 210.0);
        assert_eq!(s.tokens, 60.0);
        assert_eq!(tpm.refunded(s, 1000.0).tokens, 100.0);
    }

    #[test]
    fn a_daily_counter_resets_at_utc_midnight() {
        let day = day_start(3 * DAY_MS + 5);
        assert_eq!(day, 3 * DAY_MS);
        let k = Kind::Daily { limit: 1000.0, day };
        let s = k.charged(1000.0, 600.0, day + 10);
        assert_eq!(k.available(Some(s), day + 20), 400.0);
        assert!(!k.fits(400.0, 500.0));
        assert_eq!(k.wait_secs(400.0, 500.0, day + DAY_MS - 1500), 2);
        let next = Kind::Daily {
            limit: 1000.0,
            day: day + DAY_MS,
        };
        assert_eq!(next.available(Some(s), day + DAY_MS), 1000.0);
        assert_eq!(k.refunded(s, 100.0).tokens, 500.0);
        assert_eq!(next.refunded(s, 100.0).tokens, 600.0);
    }
}
