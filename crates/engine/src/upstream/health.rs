//! Upstream health as real requests found it: the router reports every attempt's outcome,
//! the metered relay every stream that broke after its first byte.
//!
//! Two views of one upstream. Its `state` for people: `unknown` before any attempt,
//! `healthy` after an answer that does not fail over, `degraded` after a failure (a
//! failover status, a network error, the TTFB timeout, a stream that broke or stalled),
//! `down` after [`DOWN_AFTER`] failures in a row. And what routing obeys
//! ([`UpstreamHealth::admit`]): a circuit breaker (`routing.health.breaker_failures`
//! failures within the window open it; after `breaker_open_s` one trial request goes,
//! half-open; its success closes it) and a cooldown after a 429 (its `retry-after`, capped,
//! or `cooldown_default_s`). Time is the injected [`Clock`]'s.
//!
//! Every change is an event: `upstream.state`, `upstream.breaker`, `upstream.cooldown`; the
//! last few are kept for the dashboard, with time-to-first-byte percentiles and the error
//! rate of recent attempts. Errors are kept as short kinds (`connect error`, `HTTP 503`),
//! never upstream text.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use crate::breaker::{Admit, Breaker, Moment, Phase};
use crate::config::UpstreamConfig;
use crate::config::routing::HealthConfig;
use crate::deps::Clock;
use crate::events::{Event, EventSink};

/// Consecutive failures after which an upstream is `down`.
pub const DOWN_AFTER: u32 = 3;
/// Time-to-first-byte samples kept per upstream (for p50/p95).
const TTFB_SAMPLES: usize = 200;
/// Recent attempts whose outcome gives the error rate.
const OUTCOMES: usize = 100;
/// Transitions kept per upstream for the dashboard.
const TRANSITIONS: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Unknown,
    Healthy,
    Degraded,
    Down,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Unknown => "unknown",
            State::Healthy => "healthy",
            State::Degraded => "degraded",
            State::Down => "down",
        }
    }
}

/// Whether routing may send to an upstream now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Closed and not cooling: send.
    Send,
    /// The breaker's open period has passed: this request is its one trial.
    Trial,
    /// Open or cooling: skip it; `why` goes into `route_reason`, `ready_at` says when it
    /// may be tried again.
    Skip {
        why: String,
        ready_at: DateTime<Utc>,
    },
}

#[derive(Debug, Clone)]
struct Entry {
    state: State,
    failures_in_row: u32,
    last_status: Option<u16>,
    last_error: Option<String>,
    last_ok_at: Option<DateTime<Utc>>,
    last_error_at: Option<DateTime<Utc>>,
    breaker: Breaker<DateTime<Utc>>,
    cooling_until: Option<DateTime<Utc>>,
    ttfb_ms: VecDeque<u64>,
    /// `true` for a failure.
    outcomes: VecDeque<bool>,
    transitions: VecDeque<(DateTime<Utc>, String)>,
}

impl Entry {
    fn new(c: &HealthConfig) -> Self {
        Self {
            state: State::Unknown,
            failures_in_row: 0,
            last_status: None,
            last_error: None,
            last_ok_at: None,
            last_error_at: None,
            breaker: Breaker::windowed(c.breaker_failures, c.breaker_window, c.breaker_open),
            cooling_until: None,
            ttfb_ms: VecDeque::new(),
            outcomes: VecDeque::new(),
            transitions: VecDeque::new(),
        }
    }

    fn outcome(&mut self, failed: bool) {
        push_bounded(&mut self.outcomes, failed, OUTCOMES);
    }

    fn cooling(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cooling_until.filter(|u| *u > now)
    }
}

fn push_bounded<T>(q: &mut VecDeque<T>, v: T, max: usize) {
    if q.len() >= max {
        q.pop_front();
    }
    q.push_back(v);
}

/// Health per configured upstream, in config order.
pub struct UpstreamHealth {
    /// `(name, provider, host)` per upstream.
    names: Vec<(String, &'static str, String)>,
    entries: Vec<Mutex<Entry>>,
    config: HealthConfig,
    clock: Arc<dyn Clock>,
    events: Arc<dyn EventSink>,
    /// Where breaker and cooldown changes go to be shared with other replicas
    /// ([`super::shared`]); unset on SQLite.
    outbox: OnceLock<tokio::sync::mpsc::UnboundedSender<Shared>>,
}

/// What replicas share of one upstream: until when its breaker is open and until when it
/// cools down (both `None`: closed and not cooling).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shared {
    pub upstream: String,
    pub open_until: Option<DateTime<Utc>>,
    pub cooling_until: Option<DateTime<Utc>>,
}

/// What one update changed, reported after the lock is released.
#[derive(Default)]
struct Changes(Vec<Event>, bool);

impl UpstreamHealth {
    pub fn new(
        upstreams: &[UpstreamConfig],
        config: HealthConfig,
        clock: Arc<dyn Clock>,
        events: Arc<dyn EventSink>,
    ) -> Self {
        let names = upstreams
            .iter()
            .map(|u| {
                let provider = u.provider.as_str();
                (
                    u.name.clone(),
                    provider,
                    u.base_url.host_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let entries = upstreams
            .iter()
            .map(|_| Mutex::new(Entry::new(&config)))
            .collect();
        Self {
            names,
            entries,
            config,
            clock,
            events,
            outbox: OnceLock::new(),
        }
    }

    /// From now on every breaker opening or closing and every cooldown is sent here (once).
    pub fn share(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<Shared>> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.outbox.set(tx).ok().map(|()| rx)
    }

    /// The index of the upstream named `name`.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n.0 == name)
    }

    /// Another replica's view: open the breaker and cool down until the times it saw,
    /// when they are later than this replica's own. Not shared again.
    pub fn adopt(
        &self,
        upstream: usize,
        open_until: Option<DateTime<Utc>>,
        cooling_until: Option<DateTime<Utc>>,
    ) {
        if !self.config.enabled {
            return;
        }
        let now = self.clock.now();
        self.update(upstream, (), |e, ch| {
            if let Some(until) = cooling_until.filter(|u| *u > now)
                && e.cooling_until.is_none_or(|mine| mine < until)
            {
                e.cooling_until = Some(until);
                let secs = (until - now).num_seconds();
                push_bounded(
                    &mut e.transitions,
                    (now, format!("cooling down {secs}s (replica)")),
                    TRANSITIONS,
                );
                ch.0.push(
                    Event::new("upstream.cooldown")
                        .with("seconds", secs)
                        .with("until", iso(Some(until)))
                        .with("source", "replica"),
                );
            }
            if let Some(until) = open_until.filter(|u| *u > now) {
                let before = e.breaker.phase();
                if e.breaker.open_until(until) && before != Phase::Open {
                    ch.breaker(e, before, now);
                    ch.1 = false;
                    if let Some(ev) = ch.0.pop() {
                        ch.0.push(ev.with("source", "replica"));
                    }
                }
            }
        });
    }

    pub fn config(&self) -> &HealthConfig {
        &self.config
    }

    /// The health's clock (cooldowns and breakers run on it).
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// May routing send to `upstream` now? A [`Admission::Trial`] claims the half-open
    /// breaker's one trial: report its outcome like any attempt.
    pub fn admit(&self, upstream: usize) -> Admission {
        if !self.config.enabled {
            return Admission::Send;
        }
        let now = self.clock.now();
        self.update(upstream, Admission::Send, |e, ch| {
            if let Some(skip) = cooling_skip(e, now) {
                return skip;
            }
            let before = e.breaker.phase();
            match e.breaker.admit(now) {
                Admit::Send => Admission::Send,
                Admit::Probe => {
                    ch.breaker(e, before, now);
                    Admission::Trial
                }
                Admit::Skip => Admission::Skip {
                    why: "breaker open".to_owned(),
                    ready_at: e.breaker.next_probe_at().unwrap_or(now),
                },
            }
        })
    }

    /// What [`UpstreamHealth::admit`] would answer now, without claiming a trial (the
    /// explain endpoint).
    pub fn peek(&self, upstream: usize) -> Admission {
        if !self.config.enabled {
            return Admission::Send;
        }
        let now = self.clock.now();
        let Some(Ok(e)) = self.entries.get(upstream).map(|e| e.lock()) else {
            return Admission::Send;
        };
        if let Some(skip) = cooling_skip(&e, now) {
            return skip;
        }
        let mut breaker = e.breaker.clone();
        match breaker.admit(now) {
            Admit::Send => Admission::Send,
            Admit::Probe => Admission::Trial,
            Admit::Skip => Admission::Skip {
                why: "breaker open".to_owned(),
                ready_at: breaker.next_probe_at().unwrap_or(now),
            },
        }
    }

    /// Every candidate was skipped: send to `upstream` anyway, as its breaker's trial
    /// (its cooldown is left to run; a success ends it).
    pub fn force(&self, upstream: usize) {
        let now = self.clock.now();
        self.update(upstream, (), |e, ch| {
            let before = e.breaker.phase();
            if e.breaker.force_probe(now) {
                ch.breaker(e, before, now);
            }
        });
    }

    /// The upstream answered with something that does not fail over, after `ttfb`.
    pub fn success(&self, upstream: usize, status: u16, ttfb: Option<Duration>) {
        let now = self.clock.now();
        self.update(upstream, (), |e, ch| {
            e.failures_in_row = 0;
            e.last_status = Some(status);
            e.last_ok_at = Some(now);
            e.outcome(false);
            if let Some(t) = ttfb {
                push_bounded(&mut e.ttfb_ms, t.as_millis() as u64, TTFB_SAMPLES);
            }
            e.cooling_until = None;
            let before = e.breaker.phase();
            e.breaker.on_success();
            ch.breaker(e, before, now);
            ch.state(e, State::Healthy, now);
        });
    }

    /// The attempt failed: `status` when the upstream answered, `error` a short kind.
    pub fn failure(&self, upstream: usize, status: Option<u16>, error: &str) {
        let now = self.clock.now();
        self.update(upstream, (), |e, ch| {
            e.failures_in_row = e.failures_in_row.saturating_add(1);
            e.last_status = status.or(e.last_status);
            e.last_error = Some(error.to_owned());
            e.last_error_at = Some(now);
            e.outcome(true);
            let before = e.breaker.phase();
            e.breaker.on_failure(now);
            ch.breaker(e, before, now);
            let next = if e.failures_in_row >= DOWN_AFTER {
                State::Down
            } else {
                State::Degraded
            };
            ch.state(e, next, now);
        });
    }

    /// A stream that broke (error event, reset) or stalled after its first byte: a
    /// failure, though the caller could not be failed over.
    pub fn stream_failed(&self, upstream: usize, kind: &str) {
        self.failure(upstream, None, kind);
    }

    /// A 429: skip the upstream for `retry_after` (capped at `cooldown_max_s`), or for
    /// `cooldown_default_s` without one. Returns the cooldown applied.
    pub fn cool_down(&self, upstream: usize, retry_after: Option<Duration>) -> Duration {
        let wanted = retry_after.unwrap_or(self.config.cooldown_default);
        let d = wanted.min(self.config.cooldown_max);
        if !self.config.enabled || d.is_zero() {
            return Duration::ZERO;
        }
        let now = self.clock.now();
        let until = now.after(d);
        self.update(upstream, (), |e, ch| {
            if e.cooling_until.is_some_and(|u| u >= until) {
                return;
            }
            e.cooling_until = Some(until);
            let text = format!("cooling down {}s", d.as_secs());
            push_bounded(&mut e.transitions, (now, text), TRANSITIONS);
            ch.0.push(
                Event::new("upstream.cooldown")
                    .with("seconds", d.as_secs())
                    .with("until", iso(Some(until))),
            );
            ch.1 = true;
        });
        d
    }

    /// When the upstream was last tried (success or failure).
    pub fn last_attempt(&self, upstream: usize) -> Option<DateTime<Utc>> {
        let e = self.entries.get(upstream)?.lock().ok()?;
        e.last_ok_at.max(e.last_error_at)
    }

    /// Observed time to first byte: how many recent successful attempts, and their p95.
    pub fn ttfb_stats(&self, upstream: usize) -> Option<(usize, Duration)> {
        let e = self.entries.get(upstream)?.lock().ok()?;
        let (_, p95, _) = percentiles(&e.ttfb_ms)?;
        Some((e.ttfb_ms.len(), Duration::from_millis(p95)))
    }

    fn update<R>(
        &self,
        upstream: usize,
        otherwise: R,
        f: impl FnOnce(&mut Entry, &mut Changes) -> R,
    ) -> R {
        let Some(slot) = self.entries.get(upstream) else {
            return otherwise;
        };
        let mut changes = Changes::default();
        let result = match slot.lock() {
            Ok(mut e) => f(&mut e, &mut changes),
            Err(_) => return otherwise,
        };
        let name = self.names.get(upstream).map(|n| n.0.clone());
        for event in changes.0 {
            self.events.emit(&event.with("upstream", name.clone()));
        }
        if changes.1
            && let (Some(tx), Some(name)) = (self.outbox.get(), name)
            && let Ok(e) = slot.lock()
        {
            let now = self.clock.now();
            let open_until = (e.breaker.phase() == Phase::Open)
                .then(|| e.breaker.next_probe_at())
                .flatten();
            let _ = tx.send(Shared {
                upstream: name,
                open_until,
                cooling_until: e.cooling(now),
            });
        }
        result
    }

    /// The state of one upstream.
    pub fn state(&self, upstream: usize) -> Option<State> {
        self.entries
            .get(upstream)
            .and_then(|e| e.lock().ok().map(|e| e.state))
    }

    /// Every upstream as the dashboard shows it; `with_hosts` adds where each one is.
    pub fn to_json(&self, with_hosts: bool) -> Vec<Value> {
        let now = self.clock.now();
        self.names
            .iter()
            .zip(&self.entries)
            .filter_map(|((name, provider, host), e)| {
                let e = e.lock().ok()?.clone();
                let p = percentiles(&e.ttfb_ms);
                let (p50, p95, p99) = (p.map(|p| p.0), p.map(|p| p.1), p.map(|p| p.2));
                let failed = e.outcomes.iter().filter(|f| **f).count();
                let error_rate =
                    (!e.outcomes.is_empty()).then(|| failed as f64 / e.outcomes.len() as f64);
                let transitions: Vec<Value> = e
                    .transitions
                    .iter()
                    .rev()
                    .map(|(at, what)| json!({"at": iso(Some(*at)), "change": what}))
                    .collect();
                let mut v = json!({
                    "name": name,
                    "provider": provider,
                    "state": e.state.as_str(),
                    "breaker": e.breaker.phase().as_str(),
                    "cooling_until": iso(e.cooling(now)),
                    "last_status": e.last_status,
                    "last_error": e.last_error,
                    "last_ok_at": iso(e.last_ok_at),
                    "last_error_at": iso(e.last_error_at),
                    "ttfb_p50_ms": p50,
                    "ttfb_p95_ms": p95,
                    "ttfb_p99_ms": p99,
                    "error_rate": error_rate,
                    "attempts": e.outcomes.len(),
                    "transitions": transitions,
                });
                if with_hosts {
                    v["host"] = json!(host);
                }
                Some(v)
            })
            .collect()
    }
}

impl Changes {
    /// Records a change of `state`.
    fn state(&mut self, e: &mut Entry, next: State, now: DateTime<Utc>) {
        let previous = std::mem::replace(&mut e.state, next);
        if previous == next {
            return;
        }
        push_bounded(
            &mut e.transitions,
            (now, next.as_str().to_owned()),
            TRANSITIONS,
        );
        self.0.push(
            Event::new("upstream.state")
                .with("state", next.as_str())
                .with("previous", previous.as_str()),
        );
    }

    /// Records a change of the breaker's phase since `before`.
    fn breaker(&mut self, e: &mut Entry, before: Phase, now: DateTime<Utc>) {
        let after = e.breaker.phase();
        if after == before {
            return;
        }
        let text = format!("breaker {}", after.as_str());
        push_bounded(&mut e.transitions, (now, text), TRANSITIONS);
        // Opening and closing are shared with other replicas; half-open is this one's trial.
        self.1 = after != Phase::HalfOpen;
        self.0.push(
            Event::new("upstream.breaker")
                .with("breaker", after.as_str())
                .with("previous", before.as_str())
                .with("failures", e.breaker.failures()),
        );
    }
}

/// A cooling upstream's skip, its seconds left rounded up.
fn cooling_skip(e: &Entry, now: DateTime<Utc>) -> Option<Admission> {
    let until = e.cooling(now)?;
    let secs = (until - now).num_milliseconds().saturating_add(999) / 1000;
    Some(Admission::Skip {
        why: format!("cooling down {secs}s"),
        ready_at: until,
    })
}

fn iso(t: Option<DateTime<Utc>>) -> Option<String> {
    t.map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

/// `(p50, p95)` by nearest rank.
fn percentiles(samples: &VecDeque<u64>) -> Option<(u64, u64, u64)> {
    if samples.is_empty() {
        return None;
    }
    let mut v: Vec<u64> = samples.iter().copied().collect();
    v.sort_unstable();
    let rank = |p: usize| {
        v[(v.len() * p)
            .div_ceil(100)
            .saturating_sub(1)
            .min(v.len() - 1)]
    };
    Some((rank(50), rank(95), rank(99)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use crate::deps::SystemClock;
    use crate::events::MemoryEventSink;

    #[test]
    fn states_follow_outcomes() {
        let events = Arc::new(MemoryEventSink::default());
        let up = UpstreamConfig {
            name: "primary".into(),
            provider: crate::config::Provider::Anthropic,
            base_url: url::Url::parse("https://api.example.com/").unwrap(),
            credential: None,
            headers: Vec::new(),
            groups: None,
            models: None,
            model_map: Default::default(),
            forward_user_identity: false,
        };
        let h = UpstreamHealth::new(
            &[up],
            HealthConfig::default_for_tests(),
            Arc::new(SystemClock),
            events.clone(),
        );
        assert_eq!(h.state(0), Some(State::Unknown));
        h.failure(0, Some(503), "503");
        assert_eq!(h.state(0), Some(State::Degraded));
        h.failure(0, None, "connect error");
        assert_eq!(h.state(0), Some(State::Degraded));
        h.failure(0, None, "ttfb timeout");
        assert_eq!(h.state(0), Some(State::Down));
        let j = &h.to_json(true)[0];
        assert_eq!(j["state"], "down");
        assert_eq!(
            j["last_status"], 503,
            "the last status the upstream answered with"
        );
        assert_eq!(j["last_error"], "ttfb timeout");
        assert_eq!(j["host"], "api.example.com");
        h.success(0, 200, None);
        assert_eq!(h.state(0), Some(State::Healthy));
        let changes: Vec<String> = events
            .named("upstream.state")
            .iter()
            .map(|e| e["state"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(changes, ["degraded", "down", "healthy"]);
        h.success(7, 200, None); // an index that does not exist is ignored
    }

    /// A clock the test moves.
    struct TestClock(Mutex<DateTime<Utc>>);
    impl Clock for TestClock {
        fn now(&self) -> DateTime<Utc> {
            *self.0.lock().unwrap()
        }
    }
    impl TestClock {
        fn advance(&self, d: Duration) {
            let mut t = self.0.lock().unwrap();
            *t = t.after(d);
        }
    }

    fn two(config: HealthConfig) -> (UpstreamHealth, Arc<TestClock>, Arc<MemoryEventSink>) {
        let up = |name: &str| UpstreamConfig {
            name: name.into(),
            provider: crate::config::Provider::Anthropic,
            base_url: url::Url::parse("https://api.example.com/").unwrap(),
            credential: None,
            headers: Vec::new(),
            groups: None,
            models: None,
            model_map: Default::default(),
            forward_user_identity: false,
        };
        let clock = Arc::new(TestClock(Mutex::new(Utc::now())));
        let events = Arc::new(MemoryEventSink::default());
        let h = UpstreamHealth::new(&[up("a"), up("b")], config, clock.clone(), events.clone());
        (h, clock, events)
    }

    #[test]
    fn cooldown_lasts_exactly_the_retry_after_and_is_capped() {
        let (h, clock, events) = two(HealthConfig::default_for_tests());
        assert_eq!(
            h.cool_down(0, Some(Duration::from_secs(30))),
            Duration::from_secs(30)
        );
        clock.advance(Duration::from_millis(29_999));
        assert!(matches!(h.admit(0), Admission::Skip { ref why, .. } if why == "cooling down 1s"));
        assert_eq!(h.admit(1), Admission::Send, "only that upstream");
        clock.advance(Duration::from_millis(1));
        assert_eq!(h.admit(0), Admission::Send);
        // Capped at cooldown_max (600 s); without retry-after the default (10 s).
        assert_eq!(
            h.cool_down(1, Some(Duration::from_secs(86_400))),
            Duration::from_secs(600)
        );
        assert_eq!(h.cool_down(0, None), Duration::from_secs(10));
        let e = events.named("upstream.cooldown");
        assert_eq!(e.len(), 3);
        assert_eq!(e[0]["upstream"], "a");
        assert_eq!(e[0]["seconds"], 30);
        assert!(h.to_json(false)[0]["cooling_until"].as_str().is_some());
    }

    #[test]
    fn breaker_opens_in_the_window_and_half_opens_for_one_trial() {
        let (h, clock, events) = two(HealthConfig::default_for_tests());
        for _ in 0..4 {
            h.failure(0, Some(500), "HTTP 500");
            h.success(0, 200, None); // successes in between do not forgive
        }
        assert_eq!(h.admit(0), Admission::Send);
        h.failure(0, Some(500), "HTTP 500");
        let Admission::Skip { why, ready_at } = h.admit(0) else {
            panic!("open")
        };
        assert_eq!(why, "breaker open");
        assert_eq!(ready_at, clock.now().after(Duration::from_secs(30)));
        clock.advance(Duration::from_secs(30));
        assert_eq!(h.admit(0), Admission::Trial);
        assert!(
            matches!(h.admit(0), Admission::Skip { .. }),
            "one trial at a time"
        );
        h.success(0, 200, Some(Duration::from_millis(40)));
        assert_eq!(h.admit(0), Admission::Send);
        let phases: Vec<String> = events
            .named("upstream.breaker")
            .iter()
            .map(|e| e["breaker"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(phases, ["open", "half_open", "closed"]);
        let j = &h.to_json(false)[0];
        assert_eq!(j["breaker"], "closed");
        assert_eq!(j["ttfb_p95_ms"], 40);
        // Newest first: the trial's success closed the breaker, then made it healthy.
        assert_eq!(j["transitions"][0]["change"], "healthy");
        assert_eq!(j["transitions"][1]["change"], "breaker closed");
    }

    #[test]
    fn disabled_health_admits_everything() {
        let config = HealthConfig {
            enabled: false,
            ..HealthConfig::default_for_tests()
        };
        let (h, _, _) = two(config);
        for _ in 0..10 {
            h.failure(0, Some(500), "HTTP 500");
        }
        assert_eq!(
            h.cool_down(0, Some(Duration::from_secs(30))),
            Duration::ZERO
        );
        assert_eq!(h.admit(0), Admission::Send);
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: VecDeque<u64> = (1..=100).collect();
        assert_eq!(percentiles(&v), Some((50, 95, 99)));
        assert_eq!(percentiles(&VecDeque::from([7])), Some((7, 7, 7)));
        assert_eq!(percentiles(&VecDeque::new()), None);
    }
}
