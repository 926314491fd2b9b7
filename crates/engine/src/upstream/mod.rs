//! Upstreams: the HTTP client, per-provider request building, header hygiene and ordered
//! failover.
//!
//! Each provider is a translation module ([`anthropic`] today); [`router`] tries the
//! upstreams that can serve a model in order and decides, per answer, whether to fail over.

pub mod anthropic;
pub mod headers;
pub mod router;

use std::time::Duration;

use crate::config::{Config, UpstreamConfig};

/// The configured upstreams and the one HTTP client they share.
pub struct Upstreams {
    pub list: Vec<UpstreamConfig>,
    pub client: reqwest::Client,
    pub ttfb: Duration,
}

impl Upstreams {
    pub fn new(config: &Config) -> Result<Self, reqwest::Error> {
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
        })
    }
}
