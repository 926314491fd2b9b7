//! Usage metering: read usage from a response as it passes, price it, persist one row per
//! request and emit one `inference` event.
//!
//! The response body is wrapped in a [`MeteredStream`] that hands every chunk to the
//! client unchanged and lets the [`Meter`] look at it on the side. Pricing, the store write
//! and the event happen on the [`recorder`] task, never on the byte path. If the client
//! goes away mid-stream, the rest of the upstream stream is drained in the background (for
//! at most `timeouts.disconnect_drain_ms`) so the row holds the usage the upstream reported.
//!
//! A relayed answer can carry a [`StreamWatch`]: a stream that ends in an error event or a
//! broken connection, or stays silent (pings aside) past `routing.health.stream_stall_ms`,
//! is reported to its upstream's health as a failure, once. The stream itself is never cut
//! or delayed for it.

pub mod price_warnings;
pub mod pricing;
pub mod recorder;
pub mod tags;
pub mod usage;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures_util::{Stream, StreamExt};
use tokio_util::task::TaskTracker;

use crate::upstream::health::UpstreamHealth;
pub use recorder::Recorder;
use usage::{SseUsageScanner, Usage, UsageSource};

/// What the response's bytes are, for usage extraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    Sse,
    Json,
    Other,
}

impl BodyFormat {
    pub fn from_content_type(ct: Option<&str>) -> Self {
        match ct.map(|c| c.split(';').next().unwrap_or_default().trim()) {
            Some("text/event-stream") => BodyFormat::Sse,
            Some("application/json") => BodyFormat::Json,
            _ => BodyFormat::Other,
        }
    }
}

/// Facts about a request known before its response body flows.
/// What a request's cost is charged against: the reservation (a spend lease) its usage
/// row charges in the row's transaction, told once that row is durable or lost.
pub trait Charge: Send + Sync + std::fmt::Debug {
    fn reservation_id(&self) -> &str;
    /// The usage row, and with it the charge, is durable.
    fn landed(&self, cost_micro: u64);
    /// The usage row could not be written.
    fn lost(&self);
    /// Writing the usage row failed once (it is retried): the store is in trouble.
    fn store_failed(&self);
}

#[derive(Debug, Clone)]
pub struct RequestFacts {
    pub request_id: String,
    pub created_at: DateTime<Utc>,
    pub started: Instant,
    pub principal: String,
    /// `messages` or `count_tokens`.
    pub endpoint: &'static str,
    pub model: String,
    pub stream: bool,
    /// The spend claim charged with this request's cost (the ledger's ticket).
    pub charge: Option<std::sync::Arc<dyn Charge>>,
    /// Worst case of attempts given up at the first-byte timeout (the upstream may have
    /// served them): added to the cost, which is then flagged `estimated`.
    pub abandoned_micro: u64,
    /// What the request's `tags` said under `admin.billing_group_tag` (Messages only).
    pub billing_group: Option<BillingGroup>,
    /// What the caller said about the request (Claude Code's session and agent ids,
    /// request class, client); `None` when it said nothing.
    pub tags: Option<Box<tags::ClientTags>>,
    /// The conversation this turn belongs to (Messages and the OpenAI front door).
    pub conversation: Option<crate::conversation::Turn>,
}

/// The billing group a signed-in person's request named under `admin.billing_group_tag`,
/// recorded on the `inference` event as the reference records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BillingGroup {
    /// The person is in this group (`billing_group`).
    Group(String),
    /// The tag named a group the person is not in, or was not a string
    /// (`billing_group_ignored: true`).
    Ignored,
}

/// Facts about the upstream leg that answered.
#[derive(Debug, Clone, Default)]
pub struct RouteFacts {
    pub upstream: Option<String>,
    pub upstream_model: Option<String>,
    pub status: u16,
    pub route_reason: String,
    pub ttfb: Option<Duration>,
    pub attempts: usize,
    /// The answer was the gateway's own estimate (a local `count_tokens`): the row's
    /// `usage_source` is `estimated`.
    pub estimated: bool,
    /// The searches were run by the gateway (`server_tools`): each costs this, in nano-USD,
    /// instead of the served model's web search price.
    pub search_price: Option<u64>,
}

/// A finished request, before pricing.
#[derive(Debug, Clone)]
pub struct Finished {
    pub request: RequestFacts,
    pub route: RouteFacts,
    pub usage: Usage,
    pub source: UsageSource,
    pub latency: Duration,
    pub client_disconnected: bool,
    /// The upstream stream ended in an error event or a broken connection.
    pub upstream_error: bool,
}

enum Extract {
    Sse(Box<SseUsageScanner>),
    /// The body while it fits in [`usage::MAX_BUFFER`]; past that only its last
    /// [`usage::JSON_TAIL`] bytes, where the top-level `usage` is (`true`).
    Json(Vec<u8>, bool),
    Nothing,
}

/// Where a relayed answer reports that it broke or stalled after its headers.
pub struct StreamWatch {
    pub health: Arc<UpstreamHealth>,
    /// The upstream's index in the health.
    pub upstream: usize,
    /// Silence (pings aside) after which the stream counts as stalled.
    pub stall: Duration,
}

/// Watches one response's bytes.
pub struct Meter {
    request: RequestFacts,
    route: RouteFacts,
    extract: Extract,
    recorder: Recorder,
    watch: Option<StreamWatch>,
    /// The stream's failure was reported already (a stall).
    reported: bool,
    /// Told the usage when the request ends (the traffic limits' token correction).
    on_usage: Option<OnUsage>,
}

/// What [`Meter::on_usage`] calls with the finished request's usage.
pub type OnUsage = Box<dyn FnOnce(&Usage) + Send>;

impl Meter {
    pub fn new(
        request: RequestFacts,
        route: RouteFacts,
        format: BodyFormat,
        recorder: Recorder,
    ) -> Self {
        let extract = match format {
            BodyFormat::Sse => Extract::Sse(Box::default()),
            BodyFormat::Json => Extract::Json(Vec::new(), false),
            BodyFormat::Other => Extract::Nothing,
        };
        Self {
            request,
            route,
            extract,
            recorder,
            watch: None,
            reported: false,
            on_usage: None,
        }
    }

    /// Calls `f` with the usage when the request ends.
    pub fn on_usage(self, f: Option<OnUsage>) -> Self {
        Self {
            on_usage: f,
            ..self
        }
    }

    /// Report the stream's failure (broken, error event, stall) to its upstream's health.
    pub fn watch(self, watch: StreamWatch) -> Self {
        Self {
            watch: Some(watch),
            ..self
        }
    }

    /// The upstream's stream failed after its first byte (`kind`: a short reason).
    fn stream_failed(&mut self, kind: &str) {
        if self.reported {
            return;
        }
        if let Some(w) = &self.watch {
            self.reported = true;
            w.health.stream_failed(w.upstream, kind);
        }
    }

    pub fn observe(&mut self, chunk: &[u8]) {
        match &mut self.extract {
            Extract::Sse(s) => s.feed(chunk),
            Extract::Json(buf, tail_only) => {
                buf.extend_from_slice(chunk);
                if *tail_only || buf.len() > usage::MAX_BUFFER {
                    *tail_only = true;
                    let cut = buf.len().saturating_sub(usage::JSON_TAIL);
                    buf.drain(..cut);
                }
            }
            Extract::Nothing => {}
        }
    }

    pub fn finish(mut self, client_disconnected: bool, broken: bool) {
        let (usage, source, error_event) = match &self.extract {
            Extract::Sse(s) => {
                let (u, src) = s.result();
                (u, src, s.saw_error())
            }
            Extract::Json(buf, true) => match usage::from_json_tail(buf) {
                Some(u) => (u, UsageSource::Reported, false),
                None => (Usage::default(), UsageSource::None, false),
            },
            Extract::Json(buf, false) => match usage::from_json_body(buf) {
                Some(u) => (u, UsageSource::Reported, false),
                None => (Usage::default(), UsageSource::None, false),
            },
            Extract::Nothing => (Usage::default(), UsageSource::None, false),
        };
        // A client that went away says nothing about the upstream.
        if !client_disconnected && (broken || error_event) {
            self.stream_failed(if error_event {
                "stream error event"
            } else {
                "stream broken"
            });
        }
        if let Some(f) = self.on_usage.take() {
            f(&usage);
        }
        let finished = Finished {
            latency: self.request.started.elapsed(),
            request: self.request,
            route: self.route,
            usage,
            source,
            client_disconnected,
            upstream_error: broken || error_event,
        };
        self.recorder.record(finished);
    }
}

type Inner = crate::upstream::BodyStream;

/// The response body handed to the client: the upstream's chunks, unchanged, one by one.
pub struct MeteredStream {
    inner: Option<Inner>,
    meter: Option<Meter>,
    drain: Duration,
    tracker: TaskTracker,
    /// Fires when the watched stream stays silent too long (once).
    stall: Option<Stall>,
    /// The answer's `Content-Length`, and the bytes passed so far: a server writing a
    /// body of known length stops polling once it has them all, so the body's end is the
    /// last byte, not a final poll (without this every whole JSON answer would read as a
    /// client that left).
    length: Option<u64>,
    passed: u64,
}

/// The stall clock, reset lazily: a chunk only notes when it came; the timer is moved
/// only when it fires early, so a fast stream never touches the timer wheel per chunk.
struct Stall {
    sleep: Pin<Box<tokio::time::Sleep>>,
    after: Duration,
    last: tokio::time::Instant,
}

impl MeteredStream {
    pub fn new(inner: Inner, meter: Meter, drain: Duration, tracker: TaskTracker) -> Self {
        let stall = meter.watch.as_ref().map(|w| Stall {
            sleep: Box::pin(tokio::time::sleep(w.stall)),
            after: w.stall,
            last: tokio::time::Instant::now(),
        });
        Self {
            inner: Some(inner),
            meter: Some(meter),
            drain,
            tracker,
            stall,
            length: None,
            passed: 0,
        }
    }

    /// The answer's `Content-Length`: its last byte ends the body.
    pub fn with_length(mut self, length: Option<u64>) -> Self {
        self.length = length;
        self
    }

    /// Progress: the stall clock starts again (a ping is no progress).
    fn progressed(&mut self, chunk: &[u8]) {
        if chunk == crate::upstream::sse::PING {
            return;
        }
        if let Some(stall) = self.stall.as_mut() {
            stall.last = tokio::time::Instant::now();
        }
    }

    /// While the upstream is silent: has the stall clock run out since the last progress?
    fn check_stall(&mut self, cx: &mut Context<'_>) {
        let Some(stall) = self.stall.as_mut() else {
            return;
        };
        loop {
            if stall.sleep.as_mut().poll(cx).is_pending() {
                return;
            }
            let due = stall.last + stall.after;
            if tokio::time::Instant::now() < due {
                // Progress came since the timer was set: wait for the rest.
                stall.sleep.as_mut().reset(due);
                continue;
            }
            self.stall = None;
            if let Some(m) = self.meter.as_mut() {
                m.stream_failed("stream stalled");
            }
            return;
        }
    }
}

impl Stream for MeteredStream {
    type Item = Result<Bytes, crate::upstream::BodyError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match inner.as_mut().poll_next(cx) {
            Poll::Pending => {
                self.check_stall(cx);
                Poll::Pending
            }
            Poll::Ready(Some(Ok(chunk))) => {
                if let Some(m) = self.meter.as_mut() {
                    m.observe(&chunk);
                }
                self.progressed(&chunk);
                self.passed = self.passed.saturating_add(chunk.len() as u64);
                if self.length.is_some_and(|n| self.passed >= n) {
                    // The whole body passed: the server may never poll again.
                    self.inner = None;
                    if let Some(m) = self.meter.take() {
                        m.finish(false, false);
                    }
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => {
                self.inner = None;
                if let Some(m) = self.meter.take() {
                    m.finish(false, true);
                }
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                self.inner = None;
                if let Some(m) = self.meter.take() {
                    m.finish(false, false);
                }
                Poll::Ready(None)
            }
        }
    }
}

impl Drop for MeteredStream {
    fn drop(&mut self) {
        // Dropped before the end: the client went away. Keep reading the upstream on the
        // side so the usage it reports is recorded.
        let (Some(mut inner), Some(mut meter)) = (self.inner.take(), self.meter.take()) else {
            return;
        };
        let drain = self.drain;
        if drain.is_zero() || tokio::runtime::Handle::try_current().is_err() {
            meter.finish(true, false);
            return;
        }
        self.tracker.spawn(async move {
            let deadline = tokio::time::Instant::now() + drain;
            let mut broken = false;
            loop {
                match tokio::time::timeout_at(deadline, inner.next()).await {
                    Ok(Some(Ok(chunk))) => meter.observe(&chunk),
                    Ok(None) => break,
                    Ok(Some(Err(_))) | Err(_) => {
                        broken = true;
                        break;
                    }
                }
            }
            meter.finish(true, broken);
        });
    }
}
