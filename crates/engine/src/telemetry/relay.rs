//! The fan-out: [`Relay::submit`] takes a payload, picks destinations by signal and
//! breaker state, and forwards it in a tracked background task.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue};
use tokio_util::task::TaskTracker;
use url::Url;

use super::{Signal, TelemetryConfig, endpoint};
use crate::breaker::{Admit, Breaker};
use crate::events::{Event, EventSink};
use crate::google::Tokens;
use crate::outbound::{SafeFetch, redact_url};

/// Payloads in flight at most (counted per incoming payload, not per destination).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 128;
/// Consecutive failures that open a destination's breaker.
pub const DEFAULT_BREAKER_FAILURES: u32 = 5;
/// How long an open breaker skips its destination before a probe.
pub const DEFAULT_BREAKER_OPEN: Duration = Duration::from_secs(30);
/// The timeout to give the relay's [`SafeFetch`] in production.
pub const DESTINATION_TIMEOUT: Duration = Duration::from_secs(10);
/// `otlp.dropped` is emitted at most this often (plus once on [`Relay::drain`]).
const DROP_REPORT_EVERY: Duration = Duration::from_secs(10);
/// Response bytes read (and discarded) from a collector so the connection can be reused.
const MAX_RESPONSE_READ: usize = 64 * 1024;
/// Bound on finding Google credentials and on fetching one access token.
const GOOGLE_TOKEN_TIMEOUT: Duration = Duration::from_secs(10);

/// What [`Relay::submit`] did with a payload. The client gets 200 in every case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// Handed to a background task for at least one destination.
    Queued,
    /// No destination forwards this signal; discarded.
    NoDestination,
    /// Too many payloads in flight (or no runtime to run on); discarded and counted.
    Dropped,
    /// Every destination for this signal has an open breaker; discarded.
    Skipped,
}

/// Counters since start.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RelayStats {
    /// Payloads being forwarded now.
    pub in_flight: usize,
    /// Payloads dropped because `max_in_flight` were in flight.
    pub dropped: u64,
    /// Destination sends skipped because the destination's breaker was open.
    pub skipped: u64,
    /// Destination sends answered with 2xx.
    pub forwarded_ok: u64,
    /// Destination sends that failed (non-2xx, timeout, network or refused address).
    pub forwarded_failed: u64,
    /// Redacted URLs of destinations whose breaker is open or half-open.
    pub open_breakers: Vec<String>,
}

#[derive(Debug, Clone, Copy)]
struct Limits {
    max_in_flight: usize,
    breaker_failures: u32,
    breaker_open: Duration,
}

/// The OTLP relay. Cheap to clone; clones share destinations, breakers and counters.
#[derive(Clone)]
pub struct Relay {
    shared: Arc<Shared>,
    limits: Limits,
}

struct Target {
    /// For logs and events: no user info, no query.
    redacted: String,
    /// Indexed by [`Signal::index`]; `None` when the destination does not take the signal.
    endpoints: [Option<Url>; 3],
    headers: HeaderMap,
    /// `auth.google`: where the access token comes from, and the token source once made
    /// (made again after a failure, as the reference does).
    google: Option<(
        crate::config::GoogleAuth,
        tokio::sync::Mutex<Option<Arc<Tokens>>>,
    )>,
    breaker: Mutex<Breaker>,
}

struct Shared {
    targets: Vec<Target>,
    fetch: SafeFetch,
    events: Arc<dyn EventSink>,
    tracker: TaskTracker,
    in_flight: AtomicUsize,
    dropped: AtomicU64,
    skipped: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    drops: Mutex<DropReport>,
}

#[derive(Default)]
struct DropReport {
    last: Option<Instant>,
    unreported: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
        let targets = config
            .destinations
            .iter()
            .map(|d| {
                let redacted = redact_url(&d.url);
                let mut headers = HeaderMap::with_capacity(d.headers.len());
                for (name, value) in &d.headers {
                    match HeaderValue::from_str(value.expose()) {
                        Ok(mut v) => {
                            v.set_sensitive(true);
                            headers.insert(name.clone(), v);
                        }
                        Err(_) => tracing::warn!(
                            destination = %redacted, header = %name,
                            "OTLP destination header value is not valid; not sent"
                        ),
                    }
                }
                let endpoints = Signal::ALL.map(|s| s.enabled_for(d).then(|| endpoint(&d.url, s)));
                Target {
                    redacted,
                    endpoints,
                    headers,
                    google: d.google.clone().map(|g| (g, tokio::sync::Mutex::new(None))),
                    breaker: Mutex::new(Breaker::new(limits.breaker_failures, limits.breaker_open)),
                }
            })
            .collect();
        Self {
            shared: Arc::new(Shared {
                targets,
                fetch,
                events,
                tracker: TaskTracker::new(),
                in_flight: AtomicUsize::new(0),
                dropped: AtomicU64::new(0),
                skipped: AtomicU64::new(0),
                ok: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                drops: Mutex::new(DropReport::default()),
            }),
            limits,
        }
    }

    /// Overrides the defaults (128 in flight, 5 failures, 30 s open). Call before the relay
    /// is cloned or used: breakers are reset to the new settings.
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
        for t in &self.shared.targets {
            *lock(&t.breaker) = Breaker::new(breaker_failures, breaker_open);
        }
        self
    }

    /// Whether any destination is configured at all.
    pub fn has_destinations(&self) -> bool {
        !self.shared.targets.is_empty()
    }

    /// Never waits on a destination: queues the payload for background fan-out and returns
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
        if !shared
            .targets
            .iter()
            .any(|t| t.endpoints[signal.index()].is_some())
        {
            return Submitted::NoDestination;
        }
        let max = self.limits.max_in_flight;
        let reserved = shared
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            });
        if reserved.is_err() {
            shared.record_drop();
            return Submitted::Dropped;
        }
        let slot = InFlight(self.shared.clone());
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            drop(slot);
            shared.record_drop();
            return Submitted::Dropped;
        };
        let now = Instant::now();
        let chosen: Vec<usize> = shared
            .targets
            .iter()
            .enumerate()
            .filter(|(_, t)| t.endpoints[signal.index()].is_some())
            .filter_map(|(i, t)| match lock(&t.breaker).admit(now) {
                Admit::Send | Admit::Probe => Some(i),
                Admit::Skip => {
                    shared.skipped.fetch_add(1, Ordering::Relaxed);
                    None
                }
            })
            .collect();
        if chosen.is_empty() {
            return Submitted::Skipped;
        }
        let mut headers = HeaderMap::new();
        if let Some(v) = content_type {
            headers.insert(CONTENT_TYPE, v);
        }
        if let Some(v) = content_encoding {
            headers.insert(CONTENT_ENCODING, v);
        }
        let task_shared = self.shared.clone();
        shared.tracker.spawn_on(
            async move {
                let _slot = slot;
                let sends = chosen
                    .into_iter()
                    .map(|i| task_shared.forward(i, signal, &headers, body.clone()));
                futures_util::future::join_all(sends).await;
            },
            &runtime,
        );
        Submitted::Queued
    }

    pub fn stats(&self) -> RelayStats {
        let s = &self.shared;
        RelayStats {
            in_flight: s.in_flight.load(Ordering::Acquire),
            dropped: s.dropped.load(Ordering::Relaxed),
            skipped: s.skipped.load(Ordering::Relaxed),
            forwarded_ok: s.ok.load(Ordering::Relaxed),
            forwarded_failed: s.failed.load(Ordering::Relaxed),
            open_breakers: s
                .targets
                .iter()
                .filter(|t| lock(&t.breaker).is_open())
                .map(|t| t.redacted.clone())
                .collect(),
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

/// One reserved in-flight slot, released when the fan-out ends (or is abandoned).
struct InFlight(Arc<Shared>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// `Authorization: Bearer <Google access token>` for a destination with `auth.google`.
async fn google_header(target: &Target) -> Result<Option<HeaderValue>, String> {
    let Some((auth, cell)) = &target.google else {
        return Ok(None);
    };
    let tokens = {
        let mut made = cell.lock().await;
        match made.as_ref() {
            Some(t) => t.clone(),
            None => {
                let t = Arc::new(
                    tokio::time::timeout(GOOGLE_TOKEN_TIMEOUT, Tokens::for_auth(auth))
                        .await
                        .map_err(|_| "no Google credentials within 10 s".to_owned())??,
                );
                *made = Some(t.clone());
                t
            }
        }
    };
    let token = match tokio::time::timeout(GOOGLE_TOKEN_TIMEOUT, tokens.current()).await {
        Ok(Ok(t)) => t,
        failed => {
            *cell.lock().await = None;
            return Err(match failed {
                Ok(Err(e)) => format!("no Google access token: {e}"),
                _ => "no Google access token within 10 s".to_owned(),
            });
        }
    };
    let mut v = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
        .map_err(|_| "the Google access token is not a valid header value".to_owned())?;
    v.set_sensitive(true);
    Ok(Some(v))
}

impl Shared {
    async fn forward(&self, index: usize, signal: Signal, base: &HeaderMap, body: Bytes) {
        let Some(target) = self.targets.get(index) else {
            return;
        };
        let Some(url) = &target.endpoints[signal.index()] else {
            return;
        };
        let mut headers = base.clone();
        headers.extend(target.headers.clone());
        let outcome = match google_header(target).await {
            Ok(Some(v)) => {
                headers.insert(http::header::AUTHORIZATION, v);
                self.fetch.post(url, headers, body).await
            }
            Ok(None) => self.fetch.post(url, headers, body).await,
            Err(e) => Err(crate::outbound::FetchError::Http(e)),
        };
        let outcome = match outcome {
            Ok(mut resp) if resp.status().is_success() => {
                let mut read = 0;
                while let Ok(Some(chunk)) = resp.chunk().await {
                    read += chunk.len();
                    if read > MAX_RESPONSE_READ {
                        break;
                    }
                }
                Ok(())
            }
            Ok(resp) => Err(format!("collector answered {}", resp.status())),
            Err(e) => Err(e.to_string()),
        };
        match outcome {
            Ok(()) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
                lock(&target.breaker).on_success();
            }
            Err(error) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    destination = %target.redacted, signal = signal.as_str(), %error,
                    "OTLP forward failed"
                );
                let (opened, failures) = {
                    let mut b = lock(&target.breaker);
                    (b.on_failure(Instant::now()), b.failures())
                };
                if opened {
                    self.breaker_opened(target, failures);
                }
            }
        }
    }

    fn breaker_opened(&self, target: &Target, failures: u32) {
        let open_for = lock(&target.breaker).open_for();
        tracing::warn!(
            destination = %target.redacted, failures, open_secs = open_for.as_secs_f64(),
            "OTLP destination breaker open; skipping it"
        );
        self.events.emit(
            &Event::new("otlp.breaker_open")
                .with("destination", target.redacted.as_str())
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
        tracing::warn!(count, "OTLP relay saturated; payloads dropped");
        self.events
            .emit(&Event::new("otlp.dropped").with("count", count));
    }
}
