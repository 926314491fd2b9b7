//! The OTLP relay: Claude Code posts OTLP/HTTP payloads (`/v1/metrics`, `/v1/logs`,
//! `/v1/traces`, protobuf or JSON) to the gateway, which answers at once and forwards them
//! in the background to the collectors configured under `telemetry.forward_to`.
//!
//! Forwarding is best effort by design (SPEC 1.8), as the reference does it since 2.1.334:
//! at most 128 exports in flight per collector (more are dropped and counted, so one slow
//! collector never starves the others), a circuit breaker per collector and signal (5
//! consecutive failures open it for 30 s, then one probe; a collector refusing the payload
//! itself with 400/413/415/422/431 is not failing), a 10 s timeout per POST through
//! [`crate::outbound::SafeFetch`], and collector URLs logged only in redacted form (no user
//! info, no query). The client's answer never depends on a collector.

mod dest;
pub mod ingest;
mod relay;

#[cfg(test)]
mod tests;

pub use crate::config::telemetry::{Destination, TelemetryConfig};
pub use relay::{
    DEFAULT_BREAKER_FAILURES, DEFAULT_BREAKER_OPEN, DEFAULT_MAX_IN_FLIGHT, DESTINATION_TIMEOUT,
    Relay, RelayStats, Submitted,
};

/// An OTLP signal, i.e. which of the three OTLP/HTTP endpoints a payload came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    Metrics,
    Logs,
    Traces,
}

impl Signal {
    pub const ALL: [Signal; 3] = [Signal::Metrics, Signal::Logs, Signal::Traces];

    /// The signal of an OTLP/HTTP request path (`/v1/metrics`, `/v1/logs`, `/v1/traces`).
    pub fn from_path(path: &str) -> Option<Self> {
        match path {
            "/v1/metrics" => Some(Self::Metrics),
            "/v1/logs" => Some(Self::Logs),
            "/v1/traces" => Some(Self::Traces),
            _ => None,
        }
    }

    /// `metrics`, `logs` or `traces`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Metrics => "metrics",
            Self::Logs => "logs",
            Self::Traces => "traces",
        }
    }

    /// The OTLP/HTTP path: `/v1/metrics`, `/v1/logs` or `/v1/traces`.
    pub fn path(self) -> &'static str {
        match self {
            Self::Metrics => "/v1/metrics",
            Self::Logs => "/v1/logs",
            Self::Traces => "/v1/traces",
        }
    }

    /// Whether `destination` forwards this signal.
    pub fn enabled_for(self, destination: &Destination) -> bool {
        match self {
            Self::Metrics => destination.metrics,
            Self::Logs => destination.logs,
            Self::Traces => destination.traces,
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Metrics => 0,
            Self::Logs => 1,
            Self::Traces => 2,
        }
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `<base>/v1/<signal>`: the collector endpoint for `signal` under a configured base URL
/// (a trailing `/` on the base is ignored; user info and query are kept).
pub fn endpoint(base: &url::Url, signal: Signal) -> url::Url {
    let mut url = base.clone();
    let path = format!("{}{}", base.path().trim_end_matches('/'), signal.path());
    url.set_path(&path);
    url
}
