//! Upstreams: the HTTP client, per-provider request building, header hygiene, ordered
//! failover and the health that real outcomes give each upstream.
//!
//! Each provider is a translation module ([`anthropic`] today); [`router`] tries the
//! upstreams that can serve a model in order, decides per answer whether to fail over and
//! reports every attempt to [`health`] (which the dashboard only reads).

pub mod anthropic;
pub mod headers;
pub mod health;
pub mod router;

use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, UpstreamConfig};
use crate::deps::Clock;
use crate::events::EventSink;

/// The configured upstreams and the one HTTP client they share.
pub struct Upstreams {
    pub list: Vec<UpstreamConfig>,
    pub client: reqwest::Client,
    pub ttfb: Duration,
    /// Per-upstream state from real outcomes, in `list` order.
    pub health: health::UpstreamHealth,
}

impl Upstreams {
    /// `events` receives `upstream.state` on every change of an upstream's state.
    pub fn new(
        config: &Config,
        clock: Arc<dyn Clock>,
        events: Arc<dyn EventSink>,
    ) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .connect_timeout(config.timeouts.upstream_connect)
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(256)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            list: config.upstreams.clone(),
            client,
            ttfb: config.timeouts.upstream_ttfb,
            health: health::UpstreamHealth::new(&config.upstreams, clock, events),
        })
    }
}
