//! Live events: every engine event also goes to a `tokio::sync::broadcast` channel.
//!
//! [`tap`] wraps the event sink at start, so whatever the engine emits reaches the log and
//! the channel. The desktop app reads the full events through `Handle::subscribe_events`
//! (for notifications) and adds its own (`app.state`) with `Handle::publish`; the
//! dashboard's event stream (`dashboard::stream`) holds a [`Subscription`] per browser.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::{Event, EventSink};
use crate::deps::Deps;

/// Events buffered per subscriber before it lags (a lagging reader just re-fetches).
const CHANNEL_CAPACITY: usize = 256;

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

/// A counted subscriber (an open dashboard stream); the count drops with it.
pub struct Subscription {
    pub rx: broadcast::Receiver<Event>,
    /// Cancelled when the gateway shuts down.
    pub closing: CancellationToken,
    _slot: Slot,
}

struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
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

    /// A counted subscription, or `None` when `max` are open already.
    pub fn open(&self, max: usize) -> Option<Subscription> {
        if self.streams.fetch_add(1, Ordering::Relaxed) >= max {
            self.streams.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Subscription {
            rx: self.tx.subscribe(),
            closing: self.closing.clone(),
            _slot: Slot(self.streams.clone()),
        })
    }

    /// Ends every counted subscription (graceful shutdown waits for open responses).
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
    fn subscriptions_are_counted_and_released() {
        let live = Live::default();
        let a = live.open(2).unwrap();
        let _b = live.open(2).unwrap();
        assert!(live.open(2).is_none());
        drop(a);
        assert!(live.open(2).is_some());
    }
}
