//! A circuit breaker: closed, open for a while after failures, then half-open with a
//! single probe. Pure state; the caller supplies the time, as an [`Instant`] (the OTLP
//! relay's destinations, the policy webhook: a dead or hung dependency costs its timeout a
//! few times, not on every request) or as the injected clock's wall time (upstreams, whose
//! cooldowns tests move forward).
//!
//! Two ways to count: consecutive failures (a success forgets them), or failures within a
//! sliding window (successes in between do not forgive: an upstream that fails every other
//! stream after its headers still opens).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

/// A point in time a breaker can count from.
pub(crate) trait Moment: Copy + Ord {
    /// `self + d`, saturating.
    fn after(self, d: Duration) -> Self;
}

impl Moment for Instant {
    fn after(self, d: Duration) -> Self {
        self.checked_add(d).unwrap_or(self)
    }
}

impl Moment for DateTime<Utc> {
    fn after(self, d: Duration) -> Self {
        chrono::TimeDelta::from_std(d)
            .ok()
            .and_then(|d| self.checked_add_signed(d))
            .unwrap_or(self)
    }
}

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

/// The breaker's phase, as events and the dashboard name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Closed,
    Open,
    HalfOpen,
}

impl Phase {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Phase::Closed => "closed",
            Phase::Open => "open",
            Phase::HalfOpen => "half_open",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State<T> {
    Closed,
    Open {
        until: T,
    },
    /// A probe is out; another one is allowed if it has not reported by `until`.
    Probing {
        until: T,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Breaker<T: Moment = Instant> {
    state: State<T>,
    failures: u32,
    threshold: u32,
    open_for: Duration,
    /// `Some`: count failures within this window (their times are kept, at most
    /// `threshold` of them); `None`: count consecutive failures.
    window: Option<(Duration, VecDeque<T>)>,
}

impl<T: Moment> Breaker<T> {
    /// `threshold` consecutive failures open the breaker for `open_for` (threshold 0 acts as 1).
    pub(crate) fn new(threshold: u32, open_for: Duration) -> Self {
        Self {
            state: State::Closed,
            failures: 0,
            threshold: threshold.max(1),
            open_for,
            window: None,
        }
    }

    /// `threshold` failures within `window` (successes in between or not) open the breaker.
    pub(crate) fn windowed(threshold: u32, window: Duration, open_for: Duration) -> Self {
        Self {
            window: Some((window, VecDeque::new())),
            ..Self::new(threshold, open_for)
        }
    }

    pub(crate) fn admit(&mut self, now: T) -> Admit {
        match self.state {
            State::Closed => Admit::Send,
            State::Open { until } | State::Probing { until } if now >= until => {
                self.state = State::Probing {
                    until: now.after(self.open_for),
                };
                Admit::Probe
            }
            State::Open { .. } | State::Probing { .. } => Admit::Skip,
        }
    }

    /// Whether [`Breaker::admit`] at `now` would let a payload through (send or probe),
    /// without taking the probe: for callers that may still drop the payload.
    pub(crate) fn would_admit(&self, now: T) -> bool {
        match self.state {
            State::Closed => true,
            State::Open { until } | State::Probing { until } => now >= until,
        }
    }

    /// A probe that said nothing about health (the destination answered but refused the
    /// payload itself): the next payload may probe at once.
    pub(crate) fn probe_inconclusive(&mut self, now: T) {
        if let State::Probing { .. } = self.state {
            self.state = State::Open { until: now };
        }
    }

    /// Let one probe through now even though the open period has not passed (every other
    /// way is closed too). `false` when the breaker is closed (nothing to force).
    pub(crate) fn force_probe(&mut self, now: T) -> bool {
        if matches!(self.state, State::Closed) {
            return false;
        }
        self.state = State::Probing {
            until: now.after(self.open_for),
        };
        true
    }

    /// Open until `until` because someone else (another replica) saw it fail; `true` when
    /// this opened a closed breaker or extended an open one. A probe out is left alone.
    pub(crate) fn open_until(&mut self, until: T) -> bool {
        match self.state {
            State::Closed => {
                self.state = State::Open { until };
                true
            }
            State::Open { until: u } if u < until => {
                self.state = State::Open { until };
                true
            }
            State::Open { .. } | State::Probing { .. } => false,
        }
    }

    /// A success: close; in consecutive mode also forget the failures.
    pub(crate) fn on_success(&mut self) {
        self.state = State::Closed;
        match &mut self.window {
            None => self.failures = 0,
            // A probe that succeeded starts a fresh count.
            Some((_, times)) if self.failures >= self.threshold => {
                times.clear();
                self.failures = 0;
            }
            Some(_) => {}
        }
    }

    /// A failure; `true` when this failure opened (or reopened) the breaker.
    pub(crate) fn on_failure(&mut self, now: T) -> bool {
        self.count(now);
        let open = State::Open {
            until: now.after(self.open_for),
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

    fn count(&mut self, now: T) {
        let Some((window, times)) = &mut self.window else {
            self.failures = self.failures.saturating_add(1);
            return;
        };
        times.push_back(now);
        while times.len() > self.threshold as usize {
            times.pop_front();
        }
        while times.front().is_some_and(|t| t.after(*window) <= now) {
            times.pop_front();
        }
        self.failures = u32::try_from(times.len()).unwrap_or(u32::MAX);
    }

    /// Open or half-open (until a probe succeeds).
    pub(crate) fn is_open(&self) -> bool {
        !matches!(self.state, State::Closed)
    }

    pub(crate) fn phase(&self) -> Phase {
        match self.state {
            State::Closed => Phase::Closed,
            State::Open { .. } => Phase::Open,
            State::Probing { .. } => Phase::HalfOpen,
        }
    }

    /// When the next probe may go (open), or when a lost probe is replaced (half-open).
    pub(crate) fn next_probe_at(&self) -> Option<T> {
        match self.state {
            State::Closed => None,
            State::Open { until } | State::Probing { until } => Some(until),
        }
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
        let mut b: Breaker = Breaker::new(5, OPEN);
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
        let mut b: Breaker = Breaker::new(5, OPEN);
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
        let mut b: Breaker = Breaker::new(1, OPEN);
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
        let mut b: Breaker = Breaker::new(1, OPEN);
        b.on_failure(t0);
        assert_eq!(b.admit(t0 + OPEN), Admit::Probe);
        assert_eq!(b.admit(t0 + OPEN + OPEN), Admit::Probe);
    }

    #[test]
    fn windowed_counts_failures_despite_successes_and_forgets_old_ones() {
        let t0 = Instant::now();
        let w = Duration::from_secs(60);
        let mut b: Breaker = Breaker::windowed(3, w, OPEN);
        assert!(!b.on_failure(t0));
        b.on_success();
        assert!(!b.on_failure(t0 + Duration::from_secs(10)));
        b.on_success();
        // The first failure left the window: still two.
        assert!(!b.on_failure(t0 + Duration::from_secs(61)));
        assert_eq!(b.failures(), 2);
        assert!(b.on_failure(t0 + Duration::from_secs(62)));
        assert_eq!(b.phase(), Phase::Open);
        let t1 = t0 + Duration::from_secs(62) + OPEN;
        assert_eq!(b.next_probe_at(), Some(t1));
        assert_eq!(b.admit(t1), Admit::Probe);
        assert_eq!(b.phase(), Phase::HalfOpen);
        b.on_success();
        assert_eq!(b.phase(), Phase::Closed);
        assert_eq!(b.failures(), 0, "a successful probe starts a fresh count");
        assert!(!b.on_failure(t1));
    }

    #[test]
    fn a_probe_can_be_forced_before_the_open_period_ends() {
        let t0 = Instant::now();
        let mut b: Breaker = Breaker::new(1, OPEN);
        assert!(!b.force_probe(t0), "closed: nothing to force");
        b.on_failure(t0);
        assert_eq!(b.admit(t0), Admit::Skip);
        assert!(b.force_probe(t0));
        assert_eq!(b.admit(t0), Admit::Skip, "the forced probe is the one out");
        b.on_success();
        assert_eq!(b.admit(t0), Admit::Send);
    }

    #[test]
    fn wall_clock_moments() {
        let t0 = chrono::Utc::now();
        let mut b: Breaker<DateTime<Utc>> = Breaker::new(1, OPEN);
        b.on_failure(t0);
        assert_eq!(b.admit(t0 + chrono::TimeDelta::seconds(29)), Admit::Skip);
        assert_eq!(b.admit(t0 + chrono::TimeDelta::seconds(30)), Admit::Probe);
    }
}
