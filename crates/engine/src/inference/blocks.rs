//! The ring of the last [`CAPACITY`] refusals: the layer that refused and the message the
//! caller saw, for the dashboard's Policy blocks view. Each kept block is also published to
//! live subscribers as a `block.recorded` event (not written to the event log, which
//! already holds the refusal's own event). Filled through `refusal::refuse`.

use std::collections::VecDeque;
use std::sync::Mutex;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use crate::events::Event;
use crate::events::live::Live;

/// Refusals kept in memory.
pub const CAPACITY: usize = 100;

/// Which check refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// A managed policy's (or the desktop's cached central) `availableModels`.
    Policy,
    /// The operator's model catalog.
    Catalog,
    /// The policy webhook (a block, or failing closed).
    Webhook,
    /// A spend cap (or caps unreadable, failing closed).
    Spend,
    /// The desktop paused the gateway.
    Paused,
    /// A routing override the caller may not use, or does not exist.
    Routing,
    /// An inference traffic limit (`rate_limits.inference`, the per-key concurrency).
    RateLimit,
    /// What the request holds no candidate upstream can take (images without vision, an
    /// input over the context window, server tools nobody runs).
    Capability,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Policy => "policy",
            Layer::Catalog => "catalog",
            Layer::Webhook => "webhook",
            Layer::Spend => "spend",
            Layer::Paused => "paused",
            Layer::Routing => "routing",
            Layer::RateLimit => "rate_limit",
            Layer::Capability => "capability",
        }
    }
}

/// One refused request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub at: DateTime<Utc>,
    pub request_id: String,
    pub layer: Layer,
    pub model: Option<String>,
    pub status: u16,
    /// What the caller was told (never a credential).
    pub message: String,
    /// Who was refused (`user:<sub>`, `key:<id>`), when the refusal's event named them:
    /// for the admin API's person page only, never in [`Block::to_json`] (the dashboard
    /// shows no principal ids).
    pub principal: Option<String>,
}

impl Block {
    pub fn to_json(&self) -> Value {
        json!({
            "at": self.at.to_rfc3339_opts(SecondsFormat::Millis, true),
            "request_id": self.request_id,
            "layer": self.layer.as_str(),
            "model": self.model,
            "status": self.status,
            "message": self.message,
        })
    }
}

/// The ring of recent refusals.
#[derive(Debug, Default)]
pub struct Refusals {
    ring: Mutex<VecDeque<Block>>,
}

impl Refusals {
    /// Keeps `block` (dropping the oldest past [`CAPACITY`]) and tells live subscribers.
    pub fn record(&self, block: Block, live: &Live) {
        let event = Event::new("block.recorded")
            .with("request_id", block.request_id.clone())
            .with("layer", block.layer.as_str())
            .with("model", block.model.clone())
            .with("status", block.status)
            .with("message", block.message.clone());
        if let Ok(mut ring) = self.ring.lock() {
            if ring.len() == CAPACITY {
                ring.pop_front();
            }
            ring.push_back(block);
        }
        live.publish(event);
    }

    /// At most `limit` refusals, newest first.
    pub fn recent(&self, limit: usize) -> Vec<Block> {
        self.ring
            .lock()
            .map(|r| r.iter().rev().take(limit).cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn block(i: usize) -> Block {
        Block {
            at: Utc::now(),
            request_id: format!("req_{i}"),
            layer: Layer::Catalog,
            model: Some("m".into()),
            status: 400,
            message: "no".into(),
            principal: None,
        }
    }

    #[test]
    fn ring_keeps_the_newest_and_tells_subscribers() {
        let live = Live::default();
        let mut rx = live.subscribe();
        let log = Refusals::default();
        for i in 0..CAPACITY + 5 {
            log.record(block(i), &live);
        }
        let recent = log.recent(50);
        assert_eq!(recent.len(), 50);
        assert_eq!(recent[0].request_id, format!("req_{}", CAPACITY + 4));
        assert_eq!(log.recent(1000).len(), CAPACITY);
        assert_eq!(log.recent(1000).last().unwrap().request_id, "req_5");
        let e = rx.try_recv().unwrap();
        assert_eq!(e.evt, "block.recorded");
        assert_eq!(e.fields["layer"], "catalog");
    }
}
