//! The fan-out: [`Relay::submit`] takes a payload, picks the collectors that take its
//! signal and whose breaker for that signal lets it through, and forwards it to each in its
//! own tracked background task, within that collector's bound of exports in flight
//! ([`super::dest`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue};
use tokio_util::task::TaskTracker;

use super::dest::{Dest, Failure, Outcome, Reserve, Slot, lock};
use super::{Signal, TelemetryConfig};
use crate::events::{Event, EventSink};
use crate::outbound::SafeFetch;

/// Exports in flight at most, per collector (the reference's bound since 2.1.334).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 128;
/// Consecutive failures that open a collector's breaker for one signal.
pub const DEFAULT_BREAKER_FAILURES: u32 = 5;
/// How long an open breaker skips its collector's signal before a probe.
pub const DEFAULT_BREAKER_OPEN: Duration = Duration::from_secs(30);
/// The timeout to give the relay's [`SafeFetch`] in production.
pub const DESTINATION_TIMEOUT: Duration = Duration::from_secs(10);
/// `otlp.dropped` is emitted at most this often (plus once on [`Relay::drain`]).
const DROP_REPORT_EVERY: Duration = Duration::from_secs(10);

/// What [`Relay::submit`] did with a payload. The client gets 200 in every case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// Handed to a background task for at least one collector.
    Queued,
    /// No collector forwards this signal; discarded.
    NoDestination,
    /// Sent nowhere, and at least one collector had `max_in_flight` exports in flight (or
    /// there was no runtime to run on); counted.
    Dropped,
    /// Every collector for this signal has that signal's breaker open; discarded.
    Skipped,
}

/// Counters since start.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RelayStats {
    /// Exports being forwarded now, over all collectors.
    pub in_flight: usize,
    /// Exports dropped because their collector had `max_in_flight` in flight.
    pub dropped: u64,
    /// Exports skipped because the collector's breaker for the signal was open.
    pub skipped: u64,
    /// Exports answered with 2xx.
    pub forwarded_ok: u64,
    /// Exports that failed (non-2xx but a payload refusal, timeout, network or refused
    /// address).
    pub forwarded_failed: u64,
    /// Exports whose payload the collector refused (400, 413, 415, 422, 431); not failures.
    pub refused: u64,
    /// Redacted endpoints (`<url>/v1/<signal>`) whose breaker is open or half-open.
    pub open_breakers: Vec<String>,
}

#[derive(Debug, Clone, Copy)]
struct Limits {
    max_in_flight: usize,
    breaker_failures: u32,
    breaker_open: Duration,
}

/// The OTLP relay. Cheap to clone; clones share collectors, breakers and counters.
#[derive(Clone)]
pub struct Relay {
    shared: Arc<Shared>,
    limits: Limits,
}

struct Shared {
    dests: Vec<Arc<Dest>>,
    fetch: SafeFetch,
    events: Arc<dyn EventSink>,
    tracker: TaskTracker,
    dropped: AtomicU64,
    skipped: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    refused: AtomicU64,
    drops: Mutex<DropReport>,
}

#[derive(Default)]
struct DropReport {
    last: Option<Instant>,
    unreported: u64,
}

impl Relay {
    /// A relay for `config`'s destinations, sending through `fetch` (give it
    /// [`DESTINATION_TIMEOUT`] in production) and reporting to `events`.
    pub fn new(config: TelemetryConfig, fetch: SafeFetch, events: Arc<dyn EventSink>) -> Self {
        let limits = Limits {
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            breaker_failures: DEFAULT_BREAKER_FAILURES,
            breaker_open: DEFAULT_BREAKER_OPEN,
        };
        let dests = config
            .destinations
            .iter()
            .map(|d| Arc::new(Dest::new(d, limits.breaker_failures, limits.breaker_open)))
            .collect();
        Self {
            shared: Arc::new(Shared {
                dests,
                fetch,
                events,
                tracker: TaskTracker::new(),
                dropped: AtomicU64::new(0),
                skipped: AtomicU64::new(0),
                ok: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                drops: Mutex::new(DropReport::default()),
            }),
            limits,
        }
    }

    /// Overrides the defaults (128 in flight per collector, 5 failures, 30 s open). Call
    /// before the relay is cloned or used: breakers are reset to the new settings.
    pub fn with_limits(
        mut self,
        max_in_flight: usize,
        breaker_failures: u32,
        breaker_open: Duration,
    ) -> Self {
        self.limits = Limits {
            max_in_flight,
            breaker_failures,
            breaker_open,
        };
        for d in &self.shared.dests {
            d.reset_breakers(breaker_failures, breaker_open);
        }
        self
    }

    /// Whether any destination is configured at all.
    pub fn has_destinations(&self) -> bool {
        !self.shared.dests.is_empty()
    }

    /// Never waits on a collector: queues the payload for background fan-out and returns
    /// at once. `content_type` and `content_encoding` are forwarded as received (a gzip
    /// body passes through untouched). Must be called inside a Tokio runtime (outside one
    /// the payload is dropped).
    pub fn submit(
        &self,
        signal: Signal,
        content_type: Option<HeaderValue>,
        content_encoding: Option<HeaderValue>,
        body: Bytes,
    ) -> Submitted {
        let shared = &self.shared;
        let takers: Vec<&Arc<Dest>> = shared.dests.iter().filter(|d| d.takes(signal)).collect();
        if takers.is_empty() {
            return Submitted::NoDestination;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            shared.record_drop();
            return Submitted::Dropped;
        };
        let now = Instant::now();
        let (mut going, mut dropped) = (Vec::new(), false);
        for dest in takers {
            match dest.reserve(signal, self.limits.max_in_flight, now) {
                Reserve::Go(slot) => going.push((dest.clone(), slot)),
                Reserve::Skip => {
                    shared.skipped.fetch_add(1, Ordering::Relaxed);
                }
                Reserve::Full(in_flight) => {
                    dest.note_drop(in_flight);
                    shared.record_drop();
                    dropped = true;
                }
            }
        }
        if going.is_empty() {
            return if dropped {
                Submitted::Dropped
            } else {
                Submitted::Skipped
            };
        }
        let mut headers = HeaderMap::new();
        if let Some(v) = content_type {
            headers.insert(CONTENT_TYPE, v);
        }
        if let Some(v) = content_encoding {
            headers.insert(CONTENT_ENCODING, v);
        }
        for (dest, slot) in going {
            let (shared, headers, body) = (self.shared.clone(), headers.clone(), body.clone());
            self.shared.tracker.spawn_on(
                async move { shared.forward(&dest, slot, signal, &headers, body).await },
                &runtime,
            );
        }
        Submitted::Queued
    }

    pub fn stats(&self) -> RelayStats {
        let s = &self.shared;
        RelayStats {
            in_flight: s.dests.iter().map(|d| d.in_flight()).sum(),
            dropped: s.dropped.load(Ordering::Relaxed),
            skipped: s.skipped.load(Ordering::Relaxed),
            forwarded_ok: s.ok.load(Ordering::Relaxed),
            forwarded_failed: s.failed.load(Ordering::Relaxed),
            refused: s.refused.load(Ordering::Relaxed),
            open_breakers: s.dests.iter().flat_map(|d| d.open_endpoints()).collect(),
        }
    }

    /// Waits (up to `timeout`) for the fan-outs in flight, then reports drops not yet
    /// reported. For shutdown and tests; submitting keeps working during and after it.
    pub async fn drain(&self, timeout: Duration) {
        let tracker = &self.shared.tracker;
        tracker.close();
        let _ = tokio::time::timeout(timeout, tracker.wait()).await;
        tracker.reopen();
        self.shared.report_drops(true);
    }
}

impl Shared {
    /// One export to one collector; `slot` is released when it ends.
    async fn forward(
        &self,
        dest: &Dest,
        slot: Slot,
        signal: Signal,
        base: &HeaderMap,
        body: Bytes,
    ) {
        let outcome = dest.send(&self.fetch, signal, base, body).await;
        drop(slot);
        let counter = match outcome {
            Outcome::Delivered => &self.ok,
            Outcome::Refused(_) => &self.refused,
            Outcome::Failed(_) => &self.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Some(Failure::Tripped { failures, open_for }) = dest.settle(signal, &outcome) {
            self.breaker_opened(dest, signal, failures, open_for);
        }
    }

    fn breaker_opened(&self, dest: &Dest, signal: Signal, failures: u32, open_for: Duration) {
        self.events.emit(
            &Event::new("otlp.breaker_open")
                .with("destination", dest.redacted.as_str())
                .with("signal", signal.as_str())
                .with("failures", failures)
                .with(
                    "open_ms",
                    u64::try_from(open_for.as_millis()).unwrap_or(u64::MAX),
                ),
        );
    }

    fn record_drop(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        lock(&self.drops).unreported += 1;
        self.report_drops(false);
    }

    /// Emits `otlp.dropped` with the count since the last report, at most once per
    /// [`DROP_REPORT_EVERY`] unless `force`.
    fn report_drops(&self, force: bool) {
        let count = {
            let mut r = lock(&self.drops);
            let due = force || r.last.is_none_or(|t| t.elapsed() >= DROP_REPORT_EVERY);
            if !due || r.unreported == 0 {
                return;
            }
            r.last = Some(Instant::now());
            std::mem::take(&mut r.unreported)
        };
        self.events
            .emit(&Event::new("otlp.dropped").with("count", count));
    }
}
