//! The `routing` block: how upstream health steers routing (breaker, cooldown, stalled
//! streams) and when the same upstream is tried again (retry with backoff, within a budget).
//! Everything here is on by default; the block only changes the numbers.
//!
//! ```yaml
//! routing:
//!   health:
//!     enabled: true             # default true; false: no breaker, no cooldown
//!     breaker_failures: 5       # failures within the window that open an upstream's breaker
//!     breaker_window_s: 60
//!     breaker_open_s: 30        # open this long, then one trial request (half-open)
//!     cooldown_default_s: 10    # a 429 without retry-after cools the upstream this long
//!     cooldown_max_s: 600       # a longer retry-after is cut to this
//!     stream_stall_ms: 120000   # a stream silent (pings aside) this long counts as failed
//!   retry:
//!     max_retries: 1            # same-upstream retries per request (0: off)
//!     backoff_ms: 250           # first backoff; doubles, with ±50 % jitter
//!     budget_ratio: 0.1         # retries at most this share of the last 10 s of requests
//!     budget_min: 2             # ... but always allow this many per 10 s
//! ```

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::ConfigError;

/// `routing` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRouting {
    /// Upstream health: circuit breaker, cooldown after 429, stalled streams.
    pub health: Option<RawHealth>,
    /// Same-upstream retry of overloaded answers (529) and connection errors.
    pub retry: Option<RawRetry>,
}

/// `routing.health` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHealth {
    /// Skip upstreams whose breaker is open or that are cooling down (default true).
    pub enabled: Option<bool>,
    /// Failures within `breaker_window_s` that open an upstream's breaker (default 5).
    pub breaker_failures: Option<u32>,
    /// The failure-counting window in seconds (default 60).
    pub breaker_window_s: Option<u64>,
    /// Seconds an open breaker skips the upstream before one trial request (default 30).
    pub breaker_open_s: Option<u64>,
    /// Cooldown after a 429 that carries no `retry-after`, in seconds (default 10).
    pub cooldown_default_s: Option<u64>,
    /// The longest cooldown a `retry-after` can ask for, in seconds (default 600).
    pub cooldown_max_s: Option<u64>,
    /// A stream with no byte but pings for this long counts as a failure of its upstream
    /// (default 120000; the stream itself is not cut).
    pub stream_stall_ms: Option<u64>,
}

/// `routing.retry` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRetry {
    /// Same-upstream retries per request after a 529 or a connection error before any
    /// byte (default 1; 0 turns retries off).
    pub max_retries: Option<u32>,
    /// The first backoff in milliseconds; it doubles per retry, with ±50 % jitter (default 250).
    pub backoff_ms: Option<u64>,
    /// Retries may be at most this share of the requests of the last 10 s (default 0.1).
    pub budget_ratio: Option<f64>,
    /// Retries always allowed per 10 s, whatever the ratio (default 2).
    pub budget_min: Option<u32>,
}

/// Validated `routing`.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutingConfig {
    pub health: HealthConfig,
    pub retry: RetryConfig,
}

/// Validated `routing.health`.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthConfig {
    pub enabled: bool,
    pub breaker_failures: u32,
    pub breaker_window: Duration,
    pub breaker_open: Duration,
    pub cooldown_default: Duration,
    pub cooldown_max: Duration,
    pub stream_stall: Duration,
}

/// Validated `routing.retry`.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryConfig {
    pub max_retries: u32,
    pub backoff: Duration,
    pub budget_ratio: f64,
    pub budget_min: u32,
}

/// The window the retry budget counts requests and retries in.
pub const RETRY_BUDGET_WINDOW: Duration = Duration::from_secs(10);

impl Default for RoutingConfig {
    /// What [`validate`] gives for an empty block (a test keeps them equal).
    fn default() -> Self {
        RoutingConfig {
            health: HealthConfig {
                enabled: true,
                breaker_failures: 5,
                breaker_window: Duration::from_secs(60),
                breaker_open: Duration::from_secs(30),
                cooldown_default: Duration::from_secs(10),
                cooldown_max: Duration::from_secs(600),
                stream_stall: Duration::from_millis(120_000),
            },
            retry: RetryConfig {
                max_retries: 1,
                backoff: Duration::from_millis(250),
                budget_ratio: 0.1,
                budget_min: 2,
            },
        }
    }
}

pub fn validate(raw: &RawRouting) -> Result<RoutingConfig, ConfigError> {
    let d = RoutingConfig::default();
    let no_health = RawHealth::default();
    let h = raw.health.as_ref().unwrap_or(&no_health);
    let secs = |v: Option<u64>, default: Duration, max: u64, path: &str| {
        range(v, default.as_secs(), 1, max, path).map(Duration::from_secs)
    };
    let health = HealthConfig {
        enabled: h.enabled.unwrap_or(d.health.enabled),
        breaker_failures: range(
            h.breaker_failures.map(u64::from),
            u64::from(d.health.breaker_failures),
            1,
            1000,
            "routing.health.breaker_failures",
        )? as u32,
        breaker_window: secs(
            h.breaker_window_s,
            d.health.breaker_window,
            86_400,
            "routing.health.breaker_window_s",
        )?,
        breaker_open: secs(
            h.breaker_open_s,
            d.health.breaker_open,
            86_400,
            "routing.health.breaker_open_s",
        )?,
        cooldown_default: range(
            h.cooldown_default_s,
            d.health.cooldown_default.as_secs(),
            0,
            86_400,
            "routing.health.cooldown_default_s",
        )
        .map(Duration::from_secs)?,
        cooldown_max: secs(
            h.cooldown_max_s,
            d.health.cooldown_max,
            86_400,
            "routing.health.cooldown_max_s",
        )?,
        stream_stall: range(
            h.stream_stall_ms,
            d.health.stream_stall.as_millis() as u64,
            100,
            3_600_000,
            "routing.health.stream_stall_ms",
        )
        .map(Duration::from_millis)?,
    };
    let r = raw.retry.as_ref();
    let ratio = r
        .and_then(|r| r.budget_ratio)
        .unwrap_or(d.retry.budget_ratio);
    if !(0.0..=1.0).contains(&ratio) {
        return Err(ConfigError::at(
            "routing.retry.budget_ratio",
            "must be between 0 and 1",
        ));
    }
    let retry = RetryConfig {
        max_retries: range(
            r.and_then(|r| r.max_retries).map(u64::from),
            u64::from(d.retry.max_retries),
            0,
            5,
            "routing.retry.max_retries",
        )? as u32,
        backoff: range(
            r.and_then(|r| r.backoff_ms),
            d.retry.backoff.as_millis() as u64,
            1,
            60_000,
            "routing.retry.backoff_ms",
        )
        .map(Duration::from_millis)?,
        budget_ratio: ratio,
        budget_min: range(
            r.and_then(|r| r.budget_min).map(u64::from),
            u64::from(d.retry.budget_min),
            0,
            10_000,
            "routing.retry.budget_min",
        )? as u32,
    };
    Ok(RoutingConfig { health, retry })
}

fn range(v: Option<u64>, default: u64, min: u64, max: u64, path: &str) -> Result<u64, ConfigError> {
    let v = v.unwrap_or(default);
    if v < min || v > max {
        return Err(ConfigError::at(
            path,
            format!("must be between {min} and {max}"),
        ));
    }
    Ok(v)
}

impl HealthConfig {
    /// The defaults, for tests elsewhere in the crate.
    #[cfg(test)]
    pub(crate) fn default_for_tests() -> Self {
        RoutingConfig::default().health
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn empty_block_gives_the_defaults() {
        assert_eq!(
            validate(&RawRouting::default()).unwrap(),
            RoutingConfig::default()
        );
    }

    #[test]
    fn errors_name_the_field() {
        let raw: RawRouting =
            serde_json::from_value(serde_json::json!({"retry": {"budget_ratio": 2.0}})).unwrap();
        let e = validate(&raw).unwrap_err().to_string();
        assert!(e.contains("routing.retry.budget_ratio"), "{e}");
        let raw: RawRouting =
            serde_json::from_value(serde_json::json!({"health": {"breaker_failures": 0}})).unwrap();
        let e = validate(&raw).unwrap_err().to_string();
        assert!(e.contains("routing.health.breaker_failures"), "{e}");
        assert!(
            serde_json::from_value::<RawRouting>(serde_json::json!({"health": {"nope": 1}}))
                .is_err()
        );
    }
}
