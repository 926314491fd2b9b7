//! Live updates: every engine event also goes to a `tokio::sync::broadcast` channel.
//!
//! [`tap`] wraps the event sink at start, so whatever the engine emits reaches the log and
//! the channel. The desktop app reads the full events through
//! [`Handle::subscribe_events`] (for notifications) and adds its own (`app.state`) with
//! [`Handle::publish`]. Browsers get `GET /gatehouse/api/events`: an SSE stream that only
//! carries event *names* (`event: dashboard`, `data: {"evt":"inference"}`), at most one
//! message per [`COALESCE`] window per stream, with a keep-alive comment every 15 s. Streams end
//! when the gateway shuts down; at most [`MAX_STREAMS`] are open at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::deps::Deps;
use crate::error::ApiError;
use crate::events::{Event, EventSink};
use crate::server::{Gateway, Handle};

/// Events buffered per subscriber before it lags (a lagging stream just re-fetches).
const CHANNEL_CAPACITY: usize = 256;
/// Open SSE streams at most (the route is public).
pub const MAX_STREAMS: usize = 64;
/// Events arriving within this time of the first go out as one message.
pub const COALESCE: Duration = Duration::from_millis(200);
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Events that change what the dashboard shows.
const DASHBOARD_EVENTS: &[&str] = &[
    "inference",
    "block.recorded",
    "upstream.state",
    "app.state",
    "admin.limit.upsert",
    "admin.limit.delete",
    "spend.reservation_settled",
    "spend.reservation_released",
];

/// The broadcast side of the engine's events.
pub struct Live {
    tx: broadcast::Sender<Event>,
    streams: Arc<AtomicUsize>,
    closing: CancellationToken,
}

impl Default for Live {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(CHANNEL_CAPACITY).0,
            streams: Arc::default(),
            closing: CancellationToken::new(),
        }
    }
}

impl Live {
    /// Sends `event` to live subscribers only (it is not written to the event log).
    pub fn publish(&self, event: Event) {
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(event);
        }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }

    /// Ends every open SSE stream (graceful shutdown waits for open responses).
    pub fn close(&self) {
        self.closing.cancel();
    }
}

/// Forwards to the wrapped sink, then to live subscribers (a clone only when someone listens).
struct Tap {
    inner: Arc<dyn EventSink>,
    tx: broadcast::Sender<Event>,
}

impl EventSink for Tap {
    fn emit(&self, event: &Event) {
        self.inner.emit(event);
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(event.clone());
        }
    }

    fn emit_batch(&self, events: &[Event]) {
        self.inner.emit_batch(events);
        if self.tx.receiver_count() > 0 {
            for e in events {
                let _ = self.tx.send(e.clone());
            }
        }
    }
}

/// Wraps `deps.events` so every event also reaches the returned [`Live`].
pub fn tap(mut deps: Deps) -> (Deps, Live) {
    let live = Live::default();
    deps.events = Arc::new(Tap {
        inner: deps.events.clone(),
        tx: live.tx.clone(),
    });
    (deps, live)
}

impl Handle {
    /// Every event the engine emits from now on (plus [`Handle::publish`]ed ones, and
    /// `block.recorded` for each refused request). A receiver that falls more than 256
    /// events behind gets `RecvError::Lagged` and continues with the newest.
    pub fn subscribe_events(&self) -> broadcast::Receiver<Event> {
        self.gateway().dashboard.live.subscribe()
    }

    /// Sends an event (e.g. `app.state`) to live subscribers and dashboards; not logged.
    pub fn publish(&self, event: Event) {
        self.gateway().dashboard.live.publish(event);
    }
}

/// Decrements the open-stream count when a stream ends, however it ends.
struct StreamSlot(Arc<AtomicUsize>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

struct StreamState {
    rx: broadcast::Receiver<Event>,
    closing: CancellationToken,
    _slot: StreamSlot,
    opened: bool,
}

impl StreamState {
    /// The next bytes to send; `None` ends the stream (shutdown).
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if !self.opened {
            // An opening comment, so the browser sees the stream open at once.
            self.opened = true;
            return Some(Bytes::from_static(b": live\n\n"));
        }
        let keep_alive_at = Instant::now() + KEEP_ALIVE;
        let mut pending: Option<(&'static str, Instant)> = None;
        loop {
            let wake = pending.map_or(keep_alive_at, |(_, at)| at);
            tokio::select! {
                () = self.closing.cancelled() => return None,
                () = tokio::time::sleep_until(wake) => {
                    return Some(match pending {
                        Some((evt, _)) => message(evt),
                        None => Bytes::from_static(b": keep-alive\n\n"),
                    });
                }
                got = self.rx.recv() => {
                    let evt = match got {
                        Ok(e) if DASHBOARD_EVENTS.contains(&e.evt) => e.evt,
                        Ok(_) => continue,
                        Err(broadcast::error::RecvError::Lagged(_)) => "lagged",
                        Err(broadcast::error::RecvError::Closed) => return None,
                    };
                    // Events within COALESCE of the first go out as one message (the last name).
                    let at = pending.map_or_else(|| Instant::now() + COALESCE, |(_, at)| at);
                    pending = Some((evt, at));
                }
            }
        }
    }
}

fn message(evt: &str) -> Bytes {
    let data = serde_json::json!({ "evt": evt });
    Bytes::from(format!("event: dashboard\ndata: {data}\n\n"))
}

/// `GET /gatehouse/api/events`.
pub fn sse(gw: &Gateway) -> Result<Response<Body>, ApiError> {
    let live = &gw.dashboard.live;
    if live.streams.fetch_add(1, Ordering::Relaxed) >= MAX_STREAMS {
        live.streams.fetch_sub(1, Ordering::Relaxed);
        return Err(ApiError::ServiceUnavailable(
            "too many open dashboard event streams".into(),
        ));
    }
    let state = StreamState {
        rx: live.subscribe(),
        closing: live.closing.clone(),
        _slot: StreamSlot(live.streams.clone()),
        opened: false,
    };
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        let chunk = st.next_chunk().await?;
        Some((Ok::<_, std::io::Error>(chunk), st))
    });
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(resp)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::events::MemoryEventSink;

    #[test]
    fn tap_forwards_to_the_log_and_subscribers() {
        let memory = Arc::new(MemoryEventSink::default());
        let (deps, live) = tap(Deps {
            events: memory.clone(),
            ..Deps::headless()
        });
        deps.emit(Event::new("before.subscribing"));
        let mut rx = live.subscribe();
        deps.emit(Event::new("inference").with("request_id", "r1"));
        live.publish(Event::new("app.state"));
        assert_eq!(memory.events().len(), 2, "published events are not logged");
        let e = rx.try_recv().unwrap();
        assert_eq!(
            (e.evt, e.fields["request_id"].as_str()),
            ("inference", Some("r1"))
        );
        assert_eq!(rx.try_recv().unwrap().evt, "app.state");
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn messages_carry_only_the_name() {
        assert_eq!(
            message("inference"),
            Bytes::from_static(b"event: dashboard\ndata: {\"evt\":\"inference\"}\n\n")
        );
    }
}
