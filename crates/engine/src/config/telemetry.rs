//! The `telemetry` block: where the OTLP relay forwards what Claude Code sends it.
//!
//! ```yaml
//! telemetry:
//!   forward_to:
//!     - url: https://otel.corp.example        # collector base; the relay appends /v1/<signal>
//!       headers: {authorization: "${OTEL_AUTH_HEADER}"}
//!       metrics: true                         # default true
//!       logs: true                            # default false
//!       traces: false                         # default false
//! ```
//!
//! Header values are secrets: they are kept as [`Secret`] and never echoed in errors.

use std::collections::BTreeMap;

use http::{HeaderName, HeaderValue};
use schemars::JsonSchema;
use serde::Deserialize;
use url::Url;

use super::ConfigError;
use crate::secret::Secret;

/// Headers the relay sets itself from the incoming payload or the transport.
/// Whether the relay sets `name` itself (a configured value is dropped).
pub fn is_relay_header(name: &HeaderName) -> bool {
    RESERVED_HEADERS.contains(&name.as_str())
}

const RESERVED_HEADERS: &[&str] = &[
    "content-type",
    "content-encoding",
    "content-length",
    "transfer-encoding",
    "host",
    "connection",
];

/// `telemetry` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTelemetry {
    /// OTLP/HTTP collectors the relay forwards to.
    #[serde(default)]
    pub forward_to: Vec<RawDestination>,
    /// Allow loopback collectors (tests and local sidecars; default false).
    pub allow_loopback: Option<bool>,
    /// Extra resource labels pushed to clients as `OTEL_RESOURCE_ATTRIBUTES` (with
    /// `forward_to` and `listen.public_url`), e.g. `{department: eng}`.
    pub resource_attributes: Option<BTreeMap<String, String>>,
}

/// One collector.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDestination {
    /// Collector base URL (`https://otel.corp.example` or `.../otlp`); `/v1/<signal>` is
    /// appended. User info (`user:password@`) is sent as basic auth and never logged.
    pub url: String,
    /// Extra request headers, e.g. `authorization` (values are treated as secrets).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Forward metrics (default true).
    pub metrics: Option<bool>,
    /// Forward logs (default false).
    pub logs: Option<bool>,
    /// Forward traces (default false).
    pub traces: Option<bool>,
    /// How the relay authenticates to the collector.
    pub auth: Option<RawCollectorAuth>,
}

/// `telemetry.forward_to[].auth`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCollectorAuth {
    /// A Google access token on each export (e.g. `https://telemetry.googleapis.com`): the
    /// url must be an https `*.googleapis.com` host and `headers` may not set Authorization.
    pub google: RawGoogleCollectorAuth,
}

/// `telemetry.forward_to[].auth.google`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawGoogleCollectorAuth {
    /// Path of a service-account key file; without it, Application Default Credentials.
    pub service_account_json: Option<String>,
}

/// Validated `telemetry`.
#[derive(Debug, Clone, Default)]
pub struct TelemetryConfig {
    pub destinations: Vec<Destination>,
    pub allow_loopback: bool,
    /// `resource_attributes`, checked, in name order.
    pub resource_attributes: Vec<(String, String)>,
}

/// A validated collector.
#[derive(Debug, Clone)]
pub struct Destination {
    /// The base URL as configured (may carry user info; log it only through
    /// [`crate::outbound::redact_url`]).
    pub url: Url,
    /// Lower-case names, values kept secret.
    pub headers: Vec<(HeaderName, Secret)>,
    pub metrics: bool,
    pub logs: bool,
    pub traces: bool,
    /// `auth.google`: a Google access token (cloud-platform scope) on each export.
    pub google: Option<super::GoogleAuth>,
}

/// `env_loopback`: `CLAUDE_GATEWAY_ALLOW_LOOPBACK` is set.
pub fn validate(raw: &RawTelemetry, env_loopback: bool) -> Result<TelemetryConfig, ConfigError> {
    let loopback_ok = env_loopback || raw.allow_loopback == Some(true);
    let destinations = raw
        .forward_to
        .iter()
        .enumerate()
        .map(|(i, d)| destination(d, &format!("telemetry.forward_to[{i}]"), loopback_ok))
        .collect::<Result<_, _>>()?;
    let mut resource_attributes = Vec::new();
    for (name, value) in raw.resource_attributes.iter().flatten() {
        super::telemetry_labels::check(name, value)
            .map_err(|m| ConfigError::at(&format!("telemetry.resource_attributes.{name}"), m))?;
        resource_attributes.push((name.clone(), value.clone()));
    }
    Ok(TelemetryConfig {
        destinations,
        allow_loopback: loopback_ok,
        resource_attributes,
    })
}

fn destination(
    raw: &RawDestination,
    path: &str,
    loopback_ok: bool,
) -> Result<Destination, ConfigError> {
    let url_path = format!("{path}.url");
    // Parse errors from `url` describe the problem without echoing the input, which may
    // hold a password.
    let url = Url::parse(raw.url.trim())
        .map_err(|e| ConfigError::at(&url_path, format!("not a valid URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ConfigError::at(&url_path, "must be an http or https URL"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ConfigError::at(&url_path, "must have a host"));
    }
    // As the reference: telemetry leaves in the clear only to a collector on this machine.
    if url.scheme() == "http" && !super::identity::is_loopback_url(&url) {
        return Err(ConfigError::at(
            &url_path,
            "must be https:// (http:// only to a loopback collector)",
        ));
    }
    if url.fragment().is_some() {
        return Err(ConfigError::at(&url_path, "must not have a #fragment"));
    }
    super::targets::check(&url, loopback_ok).map_err(|m| ConfigError::at(&url_path, m))?;

    let mut headers: Vec<(HeaderName, Secret)> = Vec::with_capacity(raw.headers.len());
    for (name, value) in &raw.headers {
        let at = format!("{path}.headers.{name}");
        let parsed = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ConfigError::at(&at, "not a valid header name"))?;
        // The relay sets these itself; the reference takes the key, so Gatehouse does
        // too, drops it, and says so at start (`warnings`).
        if is_relay_header(&parsed) {
            continue;
        }
        if headers.iter().any(|(n, _)| n == parsed) {
            return Err(ConfigError::at(
                &at,
                "duplicate header (names are case-insensitive)",
            ));
        }
        if HeaderValue::from_str(value).is_err() {
            return Err(ConfigError::at(
                &at,
                "not a valid header value (control characters or non-ASCII)",
            ));
        }
        headers.push((parsed, Secret::new(value.clone())));
    }

    let google = match &raw.auth {
        None => None,
        Some(auth) => Some(google_auth(&auth.google, &url, &raw.headers, path)?),
    };
    let d = Destination {
        url,
        headers,
        google,
        metrics: raw.metrics.unwrap_or(true),
        logs: raw.logs.unwrap_or(false),
        traces: raw.traces.unwrap_or(false),
    };
    // A destination with every signal off forwards nothing; accepted as the reference
    // accepts it, and named at start (`warnings`).
    Ok(d)
}

/// `auth.google`: the token goes only to Google over https, and it is the only
/// Authorization.
fn google_auth(
    raw: &RawGoogleCollectorAuth,
    url: &Url,
    headers: &BTreeMap<String, String>,
    path: &str,
) -> Result<super::GoogleAuth, ConfigError> {
    let at = format!("{path}.auth.google");
    if url.scheme() != "https" {
        return Err(ConfigError::at(
            &at,
            "needs an https:// url: over http:// the access token would cross the network unencrypted",
        ));
    }
    let host = url.host_str().unwrap_or_default().trim_end_matches('.');
    let google = host == "googleapis.com"
        || (host.ends_with(".googleapis.com") && !host.split('.').any(str::is_empty));
    if !google {
        return Err(ConfigError::at(
            &at,
            format!(
                "sends a Google access token, so url must be a googleapis.com host such as https://telemetry.googleapis.com (got {host})"
            ),
        ));
    }
    if headers
        .keys()
        .any(|k| k.eq_ignore_ascii_case("authorization"))
    {
        return Err(ConfigError::at(
            &at,
            "sets the Authorization header on each export: remove Authorization from headers, or remove auth",
        ));
    }
    Ok(match raw.service_account_json.as_deref().map(str::trim) {
        None => super::GoogleAuth::ApplicationDefault,
        Some("") => {
            return Err(ConfigError::at(
                &format!("{at}.service_account_json"),
                "must not be empty (leave it out for Application Default Credentials)",
            ));
        }
        Some(p) => super::GoogleAuth::ServiceAccountFile(std::path::PathBuf::from(p)),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn parse(yaml: &str) -> RawTelemetry {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn err(yaml: &str) -> ConfigError {
        validate(&parse(yaml), false).expect_err("should fail")
    }

    #[test]
    fn defaults_and_secret_headers() {
        let cfg = validate(
            &parse(
                "forward_to:\n  - url: https://otel.corp.example\n    headers: {Authorization: Bearer abc}\n  - {url: 'http://127.0.0.1:4318/otlp', logs: true, metrics: false, traces: true}\n",
            ),
            true,
        )
        .unwrap();
        let [a, b] = cfg.destinations.as_slice() else {
            panic!("two destinations")
        };
        assert_eq!(a.url.as_str(), "https://otel.corp.example/");
        assert!(a.metrics && !a.logs && !a.traces);
        assert_eq!(a.headers[0].0.as_str(), "authorization");
        assert_eq!(a.headers[0].1.expose(), "Bearer abc");
        assert!(!format!("{a:?}").contains("abc"));
        assert!(!b.metrics && b.logs && b.traces);
        assert!(b.headers.is_empty());
        assert!(
            validate(&parse("{}"), false)
                .unwrap()
                .destinations
                .is_empty()
        );
        // A loopback collector needs CLAUDE_GATEWAY_ALLOW_LOOPBACK (or allow_loopback).
        let e = err("forward_to: [{url: 'http://127.0.0.1:4318'}]");
        assert!(e.message.contains("CLAUDE_GATEWAY_ALLOW_LOOPBACK"), "{e}");
        let e = err("forward_to: [{url: 'https://169.254.169.254'}]");
        assert!(e.message.contains("metadata"), "{e}");
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(serde_yaml_ng::from_str::<RawTelemetry>("forward: []").is_err());
        assert!(
            serde_yaml_ng::from_str::<RawTelemetry>("forward_to: [{url: 'http://a', x: 1}]")
                .is_err()
        );
    }

    #[test]
    fn url_errors_name_the_path() {
        let e = err("forward_to: [{url: 'https://a'}, {url: 'ftp://b'}]");
        assert_eq!(e.path, "telemetry.forward_to[1].url");
        let e = err("forward_to: [{url: 'not a url'}]");
        assert_eq!(e.path, "telemetry.forward_to[0].url");
        let e = err("forward_to: [{url: 'https://a/x#frag'}]");
        assert!(e.message.contains("fragment"), "{e}");
        let e = err("forward_to: [{url: 'https://user:hunter2@/x'}]");
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn header_errors_name_the_header_and_hide_the_value() {
        let e = err("forward_to: [{url: 'https://a', headers: {'bad name': v}}]");
        assert_eq!(e.path, "telemetry.forward_to[0].headers.bad name");
        assert_eq!(e.message, "not a valid header name");
        let e = err("forward_to: [{url: 'https://a', headers: {x-key: \"sec\\nret\"}}]");
        assert_eq!(e.path, "telemetry.forward_to[0].headers.x-key");
        assert!(!e.to_string().contains("sec"), "{e}");
        // A header the relay sets is taken (as the reference takes it) and dropped.
        let ok = validate(
            &parse("forward_to: [{url: 'https://a', headers: {Content-Type: text/plain}}]"),
            false,
        )
        .unwrap();
        assert!(ok.destinations[0].headers.is_empty());
        let e = err("forward_to: [{url: 'https://a', headers: {X-A: '1', x-a: '2'}}]");
        assert!(e.message.contains("duplicate"), "{e}");
    }

    #[test]
    fn google_auth_only_to_google_over_https() {
        let ok = validate(
            &parse(
                "forward_to: [{url: 'https://telemetry.googleapis.com', auth: {google: {service_account_json: /k.json}}}, {url: 'https://telemetry.googleapis.com', auth: {google: {}}}]",
            ),
            false,
        )
        .unwrap();
        assert!(matches!(
            ok.destinations[0].google,
            Some(crate::config::GoogleAuth::ServiceAccountFile(_))
        ));
        assert!(matches!(
            ok.destinations[1].google,
            Some(crate::config::GoogleAuth::ApplicationDefault)
        ));
        // Plain http to a non-loopback host is refused at the URL before the auth rule.
        let e = err("forward_to: [{url: 'http://telemetry.googleapis.com', auth: {google: {}}}]");
        assert_eq!(e.path, "telemetry.forward_to[0].url");
        assert!(e.message.contains("https"), "{e}");
        for (yaml, says) in [
            (
                "forward_to: [{url: 'https://otel.corp.example', auth: {google: {}}}]",
                "googleapis.com host",
            ),
            (
                "forward_to: [{url: 'https://evilgoogleapis.com', auth: {google: {}}}]",
                "googleapis.com host",
            ),
            (
                "forward_to: [{url: 'https://telemetry.googleapis.com', headers: {Authorization: x}, auth: {google: {}}}]",
                "Authorization",
            ),
        ] {
            let e = err(yaml);
            assert_eq!(e.path, "telemetry.forward_to[0].auth.google", "{yaml}");
            assert!(e.message.contains(says), "{yaml}: {e}");
        }
        assert!(
            serde_yaml_ng::from_str::<RawTelemetry>(
                "forward_to: [{url: 'https://a', auth: {aws: {}}}]"
            )
            .is_err()
        );
    }

    #[test]
    fn a_destination_without_a_signal_is_taken_as_the_reference_takes_it() {
        let ok = validate(
            &parse("forward_to: [{url: 'https://a', metrics: false}]"),
            false,
        )
        .unwrap();
        let d = &ok.destinations[0];
        assert!(!(d.metrics || d.logs || d.traces));
    }
}
