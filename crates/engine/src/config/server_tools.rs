//! `server_tools` (Gatehouse addition): Anthropic's server tools run by the gateway itself
//! for upstreams that cannot run them (an OpenAI-compatible model, Bedrock).
//!
//! ```yaml
//! server_tools:
//!   web_search:
//!     searxng_url: https://search.internal.example/   # SearXNG base; GET /search?q=..&format=json
//!     max_results: 5            # results per search (default 5, 1..20)
//!     price_per_1000_usd: 10    # what each search is charged (default 10, Anthropic's price)
//!     timeout_ms: 10000         # per search (default 10000)
//!   web_fetch:
//!     enabled: true             # fetch pages with the gateway's outbound address rules
//!     max_bytes: 100000         # text kept per page (default 100 KB)
//!     timeout_ms: 10000         # per page (default 10000)
//!     allow_private_networks: false  # default false: the model picks the URLs
//!   allow_loopback: false       # loopback search backends and pages (tests only)
//! ```
//!
//! Unconfigured, a request asking for a tool that no candidate upstream runs is refused
//! with a 400 naming the tool, the upstreams and this block's key.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use url::Url;

use super::ConfigError;
use super::shaping::ServerTool;

/// `server_tools` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawServerTools {
    /// `web_search` answered from a SearXNG instance's JSON API.
    pub web_search: Option<RawWebSearch>,
    /// `web_fetch` answered by fetching the page from the gateway.
    pub web_fetch: Option<RawWebFetch>,
    /// Allow a loopback search backend and loopback pages (tests and local development;
    /// default false). Only this key does: `CLAUDE_GATEWAY_ALLOW_LOOPBACK` opens the
    /// targets an operator configures, and a fetched page's URL comes from the model.
    pub allow_loopback: Option<bool>,
}

/// `server_tools.web_search` as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWebSearch {
    /// The SearXNG instance's base URL (its JSON format enabled); the gateway asks
    /// `GET <base>/search?q=<query>&format=json`. https, or http to a loopback address.
    pub searxng_url: String,
    /// Results kept per search (default 5, 1 to 20).
    pub max_results: Option<u64>,
    /// USD per 1,000 searches charged on the usage row (default 10, Anthropic's price).
    pub price_per_1000_usd: Option<f64>,
    /// How long one search may take, in milliseconds (default 10000, at most 60000).
    pub timeout_ms: Option<u64>,
}

/// `server_tools.web_fetch` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWebFetch {
    /// Run `web_fetch` in the gateway (default true when the block is present).
    pub enabled: Option<bool>,
    /// Bytes of page text kept per fetch (default 100000, 1000 to 10000000).
    pub max_bytes: Option<u64>,
    /// How long one fetch may take, in milliseconds (default 10000, at most 60000).
    pub timeout_ms: Option<u64>,
    /// Also fetch pages on private networks (10/8, 172.16/12, 192.168/16, 100.64/10,
    /// fc00::/7; default false: the model chooses these URLs).
    pub allow_private_networks: Option<bool>,
}

/// Validated `server_tools` (the default runs nothing).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerToolsConfig {
    pub web_search: Option<WebSearchConfig>,
    pub web_fetch: Option<WebFetchConfig>,
    /// Loopback backends and pages allowed (the block's key or the environment's switch).
    pub allow_loopback: bool,
}

impl ServerToolsConfig {
    /// Whether the gateway runs `tool` itself.
    pub fn runs(&self, tool: ServerTool) -> bool {
        match tool {
            ServerTool::WebSearch => self.web_search.is_some(),
            ServerTool::WebFetch => self.web_fetch.is_some(),
        }
    }
}

/// Validated `server_tools.web_search`.
#[derive(Debug, Clone, PartialEq)]
pub struct WebSearchConfig {
    /// The SearXNG base URL (no query, no fragment).
    pub searxng_url: Url,
    pub max_results: usize,
    /// Nano-USD per search (the unit of [`super::Prices::web_search`]).
    pub price_per_search_nano: u64,
    pub timeout: Duration,
}

/// Validated `server_tools.web_fetch`.
#[derive(Debug, Clone, PartialEq)]
pub struct WebFetchConfig {
    pub max_bytes: usize,
    pub timeout: Duration,
    pub allow_private_networks: bool,
}

pub const DEFAULT_MAX_RESULTS: u64 = 5;
pub const DEFAULT_PRICE_PER_1000_USD: f64 = 10.0;
pub const DEFAULT_MAX_BYTES: u64 = 100_000;
const DEFAULT_TIMEOUT_MS: u64 = 10_000;

/// The `server_tools` block. Loopback search backends and pages need the block's own
/// `allow_loopback`: the reference's `CLAUDE_GATEWAY_ALLOW_LOOPBACK` opens loopback for
/// the targets an operator writes down (upstreams, IdP, collectors, webhook), while a
/// fetched page's URL comes from the model, so a sidecar setting must not open it.
pub fn validate(raw: Option<&RawServerTools>) -> Result<ServerToolsConfig, ConfigError> {
    let Some(raw) = raw else {
        return Ok(ServerToolsConfig::default());
    };
    let allow_loopback = raw.allow_loopback.unwrap_or(false);
    let web_search = raw
        .web_search
        .as_ref()
        .map(|s| web_search(s, allow_loopback))
        .transpose()?;
    let web_fetch = match &raw.web_fetch {
        None => None,
        Some(f) => web_fetch(f)?,
    };
    Ok(ServerToolsConfig {
        web_search,
        web_fetch,
        allow_loopback,
    })
}

fn web_search(raw: &RawWebSearch, allow_loopback: bool) -> Result<WebSearchConfig, ConfigError> {
    const AT: &str = "server_tools.web_search";
    let url_at = format!("{AT}.searxng_url");
    let url = super::check::http_url(raw.searxng_url.trim(), &url_at)?;
    let loopback = super::identity::is_loopback_url(&url);
    if url.scheme() == "http" && !loopback {
        return Err(ConfigError::at(
            &url_at,
            "must be https:// (http:// only to a loopback address)",
        ));
    }
    if loopback && !allow_loopback {
        return Err(ConfigError::at(
            &url_at,
            "is a loopback address: set server_tools.allow_loopback (tests and local development)",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(ConfigError::at(
            &url_at,
            "must be the instance's base URL, without a query or #fragment",
        ));
    }
    let max_results = raw.max_results.unwrap_or(DEFAULT_MAX_RESULTS);
    if !(1..=20).contains(&max_results) {
        return Err(ConfigError::at(
            &format!("{AT}.max_results"),
            "must be a whole number from 1 to 20",
        ));
    }
    let price = raw.price_per_1000_usd.unwrap_or(DEFAULT_PRICE_PER_1000_USD);
    if !price.is_finite() || !(0.0..=100_000.0).contains(&price) {
        return Err(ConfigError::at(
            &format!("{AT}.price_per_1000_usd"),
            "must be a price in USD per 1000 searches, from 0 to 100000",
        ));
    }
    Ok(WebSearchConfig {
        searxng_url: url,
        max_results: max_results as usize,
        // USD per 1000 searches x 10^9 nano-USD / 1000 searches.
        price_per_search_nano: (price * 1_000_000.0).round() as u64,
        timeout: timeout(raw.timeout_ms, &format!("{AT}.timeout_ms"))?,
    })
}

fn web_fetch(raw: &RawWebFetch) -> Result<Option<WebFetchConfig>, ConfigError> {
    const AT: &str = "server_tools.web_fetch";
    let max_bytes = raw.max_bytes.unwrap_or(DEFAULT_MAX_BYTES);
    if !(1000..=10_000_000).contains(&max_bytes) {
        return Err(ConfigError::at(
            &format!("{AT}.max_bytes"),
            "must be a whole number of bytes from 1000 to 10000000",
        ));
    }
    let timeout = timeout(raw.timeout_ms, &format!("{AT}.timeout_ms"))?;
    Ok(raw.enabled.unwrap_or(true).then(|| WebFetchConfig {
        max_bytes: max_bytes as usize,
        timeout,
        allow_private_networks: raw.allow_private_networks.unwrap_or(false),
    }))
}

fn timeout(ms: Option<u64>, at: &str) -> Result<Duration, ConfigError> {
    match ms.unwrap_or(DEFAULT_TIMEOUT_MS) {
        ms @ 1..=60_000 => Ok(Duration::from_millis(ms)),
        _ => Err(ConfigError::at(at, "must be between 1 and 60000")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn search(url: &str) -> RawServerTools {
        RawServerTools {
            web_search: Some(RawWebSearch {
                searxng_url: url.into(),
                max_results: None,
                price_per_1000_usd: None,
                timeout_ms: None,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn absent_runs_nothing() {
        let c = validate(None).unwrap();
        assert!(!c.runs(ServerTool::WebSearch) && !c.runs(ServerTool::WebFetch));
    }

    #[test]
    fn defaults_are_anthropics_price_and_five_results() {
        let c = validate(Some(&search("https://search.example/"))).unwrap();
        let s = c.web_search.unwrap();
        assert_eq!(s.max_results, 5);
        // $10 per 1000 searches: one cent, 10^7 nano-USD, each.
        assert_eq!(s.price_per_search_nano, 10_000_000);
        assert_eq!(s.timeout, Duration::from_secs(10));
        assert!(c.web_fetch.is_none());
    }

    #[test]
    fn urls_are_https_off_loopback_and_loopback_only_when_allowed() {
        let e = validate(Some(&search("http://search.example/"))).unwrap_err();
        assert_eq!(e.path, "server_tools.web_search.searxng_url");
        let e = validate(Some(&search("http://127.0.0.1:8888/"))).unwrap_err();
        assert!(e.message.contains("allow_loopback"), "{e}");
        // The reference's loopback switch is not this block's: only its own key opens loopback.
        let mut raw = search("http://[::1]:8888/");
        raw.allow_loopback = Some(true);
        assert!(validate(Some(&raw)).unwrap().allow_loopback);
        let e = validate(Some(&search("https://s.example/?q=x"))).unwrap_err();
        assert_eq!(e.path, "server_tools.web_search.searxng_url");
        let e = validate(Some(&search("https://user:pw@s.example/"))).unwrap_err();
        assert!(!e.message.contains("pw"));
    }

    #[test]
    fn bounds_name_their_key() {
        let mut raw = search("https://s.example/");
        if let Some(s) = raw.web_search.as_mut() {
            s.max_results = Some(21);
        }
        let e = validate(Some(&raw)).unwrap_err();
        assert_eq!(e.path, "server_tools.web_search.max_results");
        let mut raw = search("https://s.example/");
        if let Some(s) = raw.web_search.as_mut() {
            s.price_per_1000_usd = Some(-1.0);
        }
        let e = validate(Some(&raw)).unwrap_err();
        assert_eq!(e.path, "server_tools.web_search.price_per_1000_usd");
        let raw = RawServerTools {
            web_fetch: Some(RawWebFetch {
                max_bytes: Some(10),
                ..Default::default()
            }),
            ..Default::default()
        };
        let e = validate(Some(&raw)).unwrap_err();
        assert_eq!(e.path, "server_tools.web_fetch.max_bytes");
        let raw = RawServerTools {
            web_fetch: Some(RawWebFetch {
                timeout_ms: Some(0),
                ..Default::default()
            }),
            ..Default::default()
        };
        let e = validate(Some(&raw)).unwrap_err();
        assert_eq!(e.path, "server_tools.web_fetch.timeout_ms");
    }

    #[test]
    fn web_fetch_is_on_with_its_block_unless_disabled() {
        let raw = RawServerTools {
            web_fetch: Some(RawWebFetch::default()),
            ..Default::default()
        };
        let c = validate(Some(&raw)).unwrap();
        assert!(c.runs(ServerTool::WebFetch));
        let f = c.web_fetch.unwrap();
        assert_eq!(f.max_bytes, 100_000);
        assert!(!f.allow_private_networks);
        let raw = RawServerTools {
            web_fetch: Some(RawWebFetch {
                enabled: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(!validate(Some(&raw)).unwrap().runs(ServerTool::WebFetch));
    }
}
