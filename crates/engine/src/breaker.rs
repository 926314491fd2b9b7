//! A circuit breaker: closed, open for a while after consecutive failures, then half-open
//! with a single probe. Pure state; the caller supplies the time. Used per OTLP
//! destination (`telemetry::relay`) and for the policy webhook, so a dead or hung
//! dependency costs its timeout a few times, not on every request.

use std::time::{Duration, Instant};

/// What the breaker lets a new payload do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Closed: send.
    Send,
    /// The open period has passed: send this one as the probe.
    Probe,
    /// Open (or a probe is out): skip the destination.
    Skip,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed,
    Open {
        until: Instant,
    },
    /// A probe is out; another one is allowed if it has not reported by `until`.
    Probing {
        until: Instant,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Breaker {
    state: State,
    failures: u32,
    threshold: u32,
    open_for: Duration,
}

impl Breaker {
    /// `threshold` consecutive failures open the breaker for `open_for` (threshold 0 acts as 1).
    pub(crate) fn new(threshold: u32, open_for: Duration) -> Self {
        Self {
            state: State::Closed,
            failures: 0,
            threshold: threshold.max(1),
            open_for,
        }
    }

    pub(crate) fn admit(&mut self, now: Instant) -> Admit {
        match self.state {
            State::Closed => Admit::Send,
            State::Open { until } | State::Probing { until } if now >= until => {
                self.state = State::Probing {
                    until: now + self.open_for,
                };
                Admit::Probe
            }
            State::Open { .. } | State::Probing { .. } => Admit::Skip,
        }
    }

    /// A 2xx: close and forget the failures.
    pub(crate) fn on_success(&mut self) {
        self.state = State::Closed;
        self.failures = 0;
    }

    /// A failure; `true` when this failure opened (or reopened) the breaker.
    pub(crate) fn on_failure(&mut self, now: Instant) -> bool {
        self.failures = self.failures.saturating_add(1);
        let open = State::Open {
            until: now + self.open_for,
        };
        match self.state {
            State::Closed if self.failures >= self.threshold => {
                self.state = open;
                true
            }
            State::Probing { .. } => {
                self.state = open;
                true
            }
            // Still counting, or a payload sent before the breaker opened.
            State::Closed | State::Open { .. } => false,
        }
    }

    /// Open or half-open (until a probe succeeds).
    pub(crate) fn is_open(&self) -> bool {
        !matches!(self.state, State::Closed)
    }

    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    pub(crate) fn open_for(&self) -> Duration {
        self.open_for
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPEN: Duration = Duration::from_secs(30);

    #[test]
    fn opens_after_threshold_consecutive_failures() {
        let t0 = Instant::now();
        let mut b = Breaker::new(5, OPEN);
        for _ in 0..4 {
            assert_eq!(b.admit(t0), Admit::Send);
            assert!(!b.on_failure(t0));
        }
        assert!(!b.is_open());
        assert!(b.on_failure(t0));
        assert!(b.is_open());
        assert_eq!(b.admit(t0 + Duration::from_secs(29)), Admit::Skip);
        // A late failure from a payload sent before opening does not reopen or extend.
        assert!(!b.on_failure(t0));
    }

    #[test]
    fn success_resets_the_count() {
        let t0 = Instant::now();
        let mut b = Breaker::new(5, OPEN);
        for _ in 0..4 {
            b.on_failure(t0);
        }
        b.on_success();
        assert_eq!(b.failures(), 0);
        for _ in 0..4 {
            assert!(!b.on_failure(t0));
        }
        assert!(!b.is_open());
    }

    #[test]
    fn one_probe_after_the_open_period() {
        let t0 = Instant::now();
        let mut b = Breaker::new(1, OPEN);
        assert!(b.on_failure(t0));
        let t1 = t0 + OPEN;
        assert_eq!(b.admit(t1), Admit::Probe);
        assert_eq!(b.admit(t1), Admit::Skip, "only one probe at a time");
        // Probe fails: open again for a full period.
        assert!(b.on_failure(t1));
        assert_eq!(b.admit(t1 + Duration::from_secs(1)), Admit::Skip);
        let t2 = t1 + OPEN;
        assert_eq!(b.admit(t2), Admit::Probe);
        b.on_success();
        assert!(!b.is_open());
        assert_eq!(b.admit(t2), Admit::Send);
    }

    #[test]
    fn a_lost_probe_is_replaced_after_the_open_period() {
        let t0 = Instant::now();
        let mut b = Breaker::new(1, OPEN);
        b.on_failure(t0);
        assert_eq!(b.admit(t0 + OPEN), Admit::Probe);
        assert_eq!(b.admit(t0 + OPEN + OPEN), Admit::Probe);
    }
}
