//! Upstream health as real requests found it: the router reports every attempt's outcome.
//!
//! `unknown` before any attempt; `healthy` after an answer that does not fail over;
//! `degraded` after a failure (a failover status, a network error or the TTFB timeout);
//! `down` after [`DOWN_AFTER`] failures in a row. A change of state is an `upstream.state`
//! event. Errors are kept as short kinds (`connect error`, `503`), never upstream text.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use crate::config::UpstreamConfig;
use crate::deps::Clock;
use crate::events::{Event, EventSink};

/// Consecutive failures after which an upstream is `down`.
pub const DOWN_AFTER: u32 = 3;

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

#[derive(Debug, Clone)]
struct Entry {
    state: State,
    failures_in_row: u32,
    last_status: Option<u16>,
    last_error: Option<String>,
    last_ok_at: Option<DateTime<Utc>>,
    last_error_at: Option<DateTime<Utc>>,
}

/// Health per configured upstream, in config order.
pub struct UpstreamHealth {
    /// `(name, provider, host)` per upstream.
    names: Vec<(String, &'static str, String)>,
    entries: Vec<Mutex<Entry>>,
    clock: Arc<dyn Clock>,
    events: Arc<dyn EventSink>,
}

impl UpstreamHealth {
    pub fn new(
        upstreams: &[UpstreamConfig],
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
            .map(|_| {
                Mutex::new(Entry {
                    state: State::Unknown,
                    failures_in_row: 0,
                    last_status: None,
                    last_error: None,
                    last_ok_at: None,
                    last_error_at: None,
                })
            })
            .collect();
        Self {
            names,
            entries,
            clock,
            events,
        }
    }

    /// The upstream answered with something that does not fail over.
    pub fn success(&self, upstream: usize, status: u16) {
        let now = self.clock.now();
        self.update(upstream, |e| {
            e.failures_in_row = 0;
            e.last_status = Some(status);
            e.last_ok_at = Some(now);
            State::Healthy
        });
    }

    /// The attempt failed: `status` when the upstream answered, `error` a short kind.
    pub fn failure(&self, upstream: usize, status: Option<u16>, error: &str) {
        let now = self.clock.now();
        self.update(upstream, |e| {
            e.failures_in_row = e.failures_in_row.saturating_add(1);
            e.last_status = status.or(e.last_status);
            e.last_error = Some(error.to_owned());
            e.last_error_at = Some(now);
            if e.failures_in_row >= DOWN_AFTER {
                State::Down
            } else {
                State::Degraded
            }
        });
    }

    fn update(&self, upstream: usize, f: impl FnOnce(&mut Entry) -> State) {
        let Some(slot) = self.entries.get(upstream) else {
            return;
        };
        let change = match slot.lock() {
            Ok(mut e) => {
                let next = f(&mut e);
                let previous = std::mem::replace(&mut e.state, next);
                (previous != next).then_some((previous, next))
            }
            Err(_) => None,
        };
        if let Some((previous, next)) = change {
            let name = self.names.get(upstream).map(|n| n.0.clone());
            self.events.emit(
                &Event::new("upstream.state")
                    .with("upstream", name)
                    .with("state", next.as_str())
                    .with("previous", previous.as_str()),
            );
        }
    }

    /// The state of one upstream.
    pub fn state(&self, upstream: usize) -> Option<State> {
        self.entries
            .get(upstream)
            .and_then(|e| e.lock().ok().map(|e| e.state))
    }

    /// Every upstream as the dashboard shows it; `with_hosts` adds where each one is.
    pub fn to_json(&self, with_hosts: bool) -> Vec<Value> {
        let iso =
            |t: Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true));
        self.names
            .iter()
            .zip(&self.entries)
            .filter_map(|((name, provider, host), e)| {
                let e = e.lock().ok()?.clone();
                let mut v = json!({
                    "name": name,
                    "provider": provider,
                    "state": e.state.as_str(),
                    "last_status": e.last_status,
                    "last_error": e.last_error,
                    "last_ok_at": iso(e.last_ok_at),
                    "last_error_at": iso(e.last_error_at),
                });
                if with_hosts {
                    v["host"] = json!(host);
                }
                Some(v)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
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
        };
        let h = UpstreamHealth::new(&[up], Arc::new(SystemClock), events.clone());
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
        h.success(0, 200);
        assert_eq!(h.state(0), Some(State::Healthy));
        let changes: Vec<String> = events
            .named("upstream.state")
            .iter()
            .map(|e| e["state"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(changes, ["degraded", "down", "healthy"]);
        h.success(7, 200); // an index that does not exist is ignored
    }
}
