//! One collector of the fan-out (`telemetry.forward_to[]`), as the reference keeps it since
//! 2.1.334: its own count of exports in flight (so one slow collector never starves the
//! others) and a breaker per signal (a collector refusing `/v1/logs` still gets metrics).
//! Sending one export, reading its outcome and the log lines that go with it are here;
//! choosing collectors and counting drops is [`super::relay`]'s.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use url::Url;

use super::{Destination, Signal, endpoint};
use crate::breaker::{Admit, Breaker};
use crate::google::Tokens;
use crate::outbound::{FetchError, SafeFetch, redact_url};

/// Response bytes read (and discarded) from a collector so the connection can be reused.
const MAX_RESPONSE_READ: usize = 64 * 1024;
/// Bound on finding Google credentials and on fetching one access token.
const GOOGLE_TOKEN_TIMEOUT: Duration = Duration::from_secs(10);
/// Saturation and refusal lines are logged for the 1st, 101st, ... occurrence per collector.
const LOG_EVERY: u64 = 100;

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a collector lets a new export do.
pub(super) enum Reserve {
    /// Send it; the slot is held until the send ends.
    Go(Slot),
    /// The signal's breaker is open (or its probe is out).
    Skip,
    /// `max_in_flight` exports are in flight to this collector (the count given).
    Full(usize),
}

/// How one send ended.
pub(super) enum Outcome {
    Delivered,
    /// The collector answered but refused the payload itself (400, 413, 415, 422, 431):
    /// not a failure of the collector.
    Refused(StatusCode),
    Failed(String),
}

/// What a failure did to the signal's breaker.
pub(super) enum Failure {
    /// Still counting: `otel forward to … failed`.
    Counted,
    /// This failure opened (or reopened) the breaker: `otel dest … tripped`.
    Tripped { failures: u32, open_for: Duration },
    /// A late failure of an export sent before the breaker opened: nothing to say.
    Quiet,
}

pub(super) struct Dest {
    /// The configured URL without user info or query, for logs, events and stats.
    pub redacted: String,
    /// Indexed by [`Signal::index`]; `None` when the collector does not take the signal.
    endpoints: [Option<Url>; 3],
    /// The endpoints in redacted form (empty where there is none).
    pub redacted_endpoints: [String; 3],
    headers: HeaderMap,
    /// `auth.google`: where the access token comes from, and the token source once made
    /// (made again after a failure, as the reference does).
    google: Option<(
        crate::config::GoogleAuth,
        tokio::sync::Mutex<Option<Arc<Tokens>>>,
    )>,
    /// One per signal, indexed by [`Signal::index`].
    breakers: [Mutex<Breaker>; 3],
    in_flight: AtomicUsize,
    dropped: AtomicU64,
    refused: AtomicU64,
}

impl Dest {
    pub fn new(d: &Destination, failures: u32, open_for: Duration) -> Self {
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
        let redacted_endpoints = Signal::ALL.map(|s| redact_url(&endpoint(&d.url, s)));
        Self {
            redacted,
            endpoints,
            redacted_endpoints,
            headers,
            google: d.google.clone().map(|g| (g, tokio::sync::Mutex::new(None))),
            breakers: Signal::ALL.map(|_| Mutex::new(Breaker::new(failures, open_for))),
            in_flight: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    pub fn takes(&self, signal: Signal) -> bool {
        self.endpoints[signal.index()].is_some()
    }

    pub fn reset_breakers(&self, failures: u32, open_for: Duration) {
        for b in &self.breakers {
            *lock(b) = Breaker::new(failures, open_for);
        }
    }

    /// The signal's breaker first (an open one skips silently), then this collector's
    /// in-flight bound; only an export that goes takes the breaker's probe.
    pub fn reserve(self: &Arc<Self>, signal: Signal, max: usize, now: Instant) -> Reserve {
        let mut breaker = lock(&self.breakers[signal.index()]);
        if !breaker.would_admit(now) {
            return Reserve::Skip;
        }
        let reserved = self
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            });
        if let Err(n) = reserved {
            return Reserve::Full(n);
        }
        let slot = Slot(self.clone());
        match breaker.admit(now) {
            Admit::Send | Admit::Probe => Reserve::Go(slot),
            Admit::Skip => Reserve::Skip,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// The redacted endpoints whose breaker is open or half-open.
    pub fn open_endpoints(&self) -> impl Iterator<Item = String> + '_ {
        Signal::ALL
            .into_iter()
            .filter(|s| lock(&self.breakers[s.index()]).is_open())
            .map(|s| self.redacted_endpoints[s.index()].clone())
    }

    /// A drop for saturation: `otel fanout saturated (N in flight to <url>); dropping`, for
    /// the first drop and every hundredth after it.
    pub fn note_drop(&self, in_flight: usize) {
        if self
            .dropped
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(LOG_EVERY)
        {
            tracing::warn!(
                destination = %self.redacted,
                "otel fanout saturated ({in_flight} in flight to {}); dropping",
                self.redacted
            );
        }
    }

    /// POSTs `body` to the signal's endpoint and reads how it went.
    pub async fn send(
        &self,
        fetch: &SafeFetch,
        signal: Signal,
        base: &HeaderMap,
        body: Bytes,
    ) -> Outcome {
        let Some(url) = &self.endpoints[signal.index()] else {
            return Outcome::Failed("the collector does not take this signal".into());
        };
        let mut headers = base.clone();
        headers.extend(self.headers.clone());
        let sent = match self.google_header().await {
            Ok(Some(v)) => {
                headers.insert(http::header::AUTHORIZATION, v);
                fetch.post(url, headers, body).await
            }
            Ok(None) => fetch.post(url, headers, body).await,
            Err(e) => Err(FetchError::Http(e)),
        };
        match sent {
            Ok(mut resp) if resp.status().is_success() => {
                let mut read = 0;
                while let Ok(Some(chunk)) = resp.chunk().await {
                    read += chunk.len();
                    if read > MAX_RESPONSE_READ {
                        break;
                    }
                }
                Outcome::Delivered
            }
            Ok(resp) if refuses_payload(resp.status()) => Outcome::Refused(resp.status()),
            Ok(resp) => Outcome::Failed(resp.status().to_string()),
            Err(e) => Outcome::Failed(e.to_string()),
        }
    }

    /// Applies a send's outcome to the signal's breaker and logs it as the reference does;
    /// a failure's effect is returned for the caller's counters and events.
    pub fn settle(&self, signal: Signal, outcome: &Outcome) -> Option<Failure> {
        let at = &self.redacted_endpoints[signal.index()];
        let mut breaker = lock(&self.breakers[signal.index()]);
        match outcome {
            Outcome::Delivered => {
                breaker.on_success();
                None
            }
            Outcome::Refused(status) => {
                breaker.probe_inconclusive(Instant::now());
                if self
                    .refused
                    .fetch_add(1, Ordering::Relaxed)
                    .is_multiple_of(LOG_EVERY)
                {
                    tracing::warn!(
                        destination = %self.redacted, signal = signal.as_str(),
                        "otel dest {at} refused an export's payload: {status} (not counted as a dest failure)"
                    );
                }
                None
            }
            Outcome::Failed(error) => {
                let failure = if breaker.on_failure(Instant::now()) {
                    Failure::Tripped {
                        failures: breaker.failures(),
                        open_for: breaker.open_for(),
                    }
                } else if breaker.is_open() {
                    Failure::Quiet
                } else {
                    Failure::Counted
                };
                drop(breaker);
                match &failure {
                    Failure::Counted => tracing::warn!(
                        destination = %self.redacted, signal = signal.as_str(),
                        "otel forward to {at} failed: {error}"
                    ),
                    Failure::Tripped { open_for, .. } => tracing::warn!(
                        destination = %self.redacted, signal = signal.as_str(),
                        "otel dest {at} tripped; skipping {} (last failure: {error})",
                        span(*open_for)
                    ),
                    Failure::Quiet => {}
                }
                Some(failure)
            }
        }
    }

    /// `Authorization: Bearer <Google access token>` for a collector with `auth.google`.
    async fn google_header(&self) -> Result<Option<HeaderValue>, String> {
        let Some((auth, cell)) = &self.google else {
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
}

/// The statuses with which a collector refuses an export's payload rather than failing.
fn refuses_payload(status: StatusCode) -> bool {
    matches!(status.as_u16(), 400 | 413 | 415 | 422 | 431)
}

/// `30s`, or `300ms` for an open period that is not whole seconds (tests).
pub(super) fn span(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// One export in flight to one collector, released when its send ends (or is abandoned).
pub(super) struct Slot(Arc<Dest>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
