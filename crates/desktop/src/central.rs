//! The desktop's client of a central Gatehouse: the device flow (start, poll), refresh,
//! revocation, and the pulls connected mode caches — managed settings (with ETag), the
//! Desktop bootstrap and the user's caps and spend (`/v1/me/spend`).
//!
//! Tokens travel as [`Secret`]s and never reach an error message. Endpoints come from the
//! server's discovery document only when they sit on the same origin (as Claude Code
//! does), otherwise the documented defaults.
//!
//! What the server says is not trusted further than it must be: the central URL is https
//! (plain http only on a loopback host, where tokens never cross a network), a verification
//! page is opened only under the same rule ([`check_browser_url`]), and a lifetime in
//! seconds, however large, negative or fractional, is clamped ([`MAX_TOKEN_SECS`]).

use std::time::Duration;

use base64::Engine;
use chrono::{DateTime, Utc};
use gatehouse_engine::deps::Clock;
use gatehouse_engine::secret::Secret;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum CentralError {
    #[error("the central Gatehouse URL must be an http(s) URL without credentials, got `{0}`")]
    BadUrl(String),
    #[error(
        "the central Gatehouse URL must use https: plain http is allowed only for a loopback host (localhost, 127.0.0.1, [::1]), got `{0}`"
    )]
    Insecure(String),
    #[error("cannot reach {origin}: {reason}")]
    Unreachable { origin: String, reason: String },
    #[error("{what} failed ({status}): {message}")]
    Refused {
        what: &'static str,
        status: u16,
        message: String,
    },
    #[error("the session ended (invalid_grant); sign in again")]
    InvalidGrant,
    #[error("unexpected answer from {what}: {reason}")]
    Malformed { what: &'static str, reason: String },
}

/// A device authorization in progress.
#[derive(Debug, Clone)]
pub struct DeviceStart {
    pub device_code: Secret,
    pub user_code: String,
    pub verification_uri: String,
    pub verification_uri_complete: Option<String>,
    pub expires_at: DateTime<Utc>,
    pub interval: Duration,
    pub login_notice: Option<String>,
}

/// Tokens from a finished device flow or a refresh.
#[derive(Debug, Clone)]
pub struct Tokens {
    pub access_token: Secret,
    pub refresh_token: Option<Secret>,
    pub expires_at: DateTime<Utc>,
    pub email: Option<String>,
}

pub enum Poll {
    Pending,
    SlowDown,
    Done(Tokens),
    Denied(String),
    Expired,
}

/// A pull with `If-None-Match`.
pub enum Pulled {
    NotModified,
    Fresh { etag: Option<String>, body: Value },
}

/// What the session token says about its holder (read for display, not trusted for auth).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub sub: Option<String>,
    pub email: Option<String>,
    pub name: Option<String>,
    pub groups: Vec<String>,
}

impl Holder {
    /// The claims of a JWT's payload, without verifying it: the central server verifies.
    pub fn from_token(token: &Secret) -> Self {
        let claims = token
            .expose()
            .split('.')
            .nth(1)
            .and_then(|p| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(p)
                    .ok()
            })
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .unwrap_or(Value::Null);
        let text = |k: &str| claims.get(k).and_then(Value::as_str).map(str::to_owned);
        Self {
            sub: text("sub"),
            email: text("email"),
            name: text("name"),
            groups: claims
                .get("groups")
                .and_then(Value::as_array)
                .map(|g| {
                    g.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

#[derive(Deserialize)]
struct Metadata {
    device_authorization_endpoint: Option<String>,
    token_endpoint: Option<String>,
    revocation_endpoint: Option<String>,
}

#[derive(Deserialize)]
struct DeviceAuthorization {
    device_code: String,
    user_code: String,
    verification_uri: String,
    verification_uri_complete: Option<String>,
    expires_in: serde_json::Number,
    interval: Option<serde_json::Number>,
    login_notice: Option<String>,
}

#[derive(Deserialize)]
struct TokenOk {
    access_token: String,
    expires_in: serde_json::Number,
    refresh_token: Option<String>,
    email: Option<String>,
}

#[derive(Deserialize)]
struct TokenErr {
    error: String,
    error_description: Option<String>,
}

/// The longest lifetime taken from the server: a year. Longer ones (up to `u64::MAX`, or
/// `1e300`) are read as a year, negative ones as zero.
pub const MAX_TOKEN_SECS: i64 = 365 * 24 * 3600;

/// A lifetime in seconds as the server sent it, clamped to `0..=max`.
pub fn clamp_secs(n: &serde_json::Number, max: i64) -> i64 {
    match (n.as_i64(), n.as_f64()) {
        (Some(i), _) => i.clamp(0, max),
        (None, Some(f)) if f > 0.0 => max.min(f as i64),
        _ => 0,
    }
}

/// Whether `url` may carry tokens or be opened for the person: https, or http to a
/// loopback host (`localhost`, `127.0.0.0/8`, `[::1]`).
pub fn secure_enough(url: &url::Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => match url.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        },
        _ => false,
    }
}

/// A verification page the central server named, checked before anyone opens it.
pub fn check_browser_url(url: &str) -> Result<(), CentralError> {
    match url::Url::parse(url) {
        Ok(u) if secure_enough(&u) && u.username().is_empty() && u.password().is_none() => Ok(()),
        _ => Err(CentralError::Malformed {
            what: "device authorization",
            reason: format!(
                "the verification page must be an https URL (http only on a loopback host); refusing to open `{}`",
                url.chars().take(200).collect::<String>()
            ),
        }),
    }
}

/// Normalises a central URL to its origin (`https://gw.example`), refusing anything else
/// (plain http to a host that is not loopback included: tokens would cross in cleartext).
pub fn origin(url: &str) -> Result<String, CentralError> {
    let parsed = url::Url::parse(url.trim()).map_err(|_| CentralError::BadUrl(url.into()))?;
    if !matches!(parsed.scheme(), "http" | "https")
        || parsed.host_str().is_none()
        || !parsed.username().is_empty()
        || parsed.password().is_some()
    {
        return Err(CentralError::BadUrl(url.into()));
    }
    if !secure_enough(&parsed) {
        return Err(CentralError::Insecure(url.into()));
    }
    Ok(parsed.origin().ascii_serialization())
}

#[derive(Clone)]
pub struct CentralClient {
    origin: String,
    http: reqwest::Client,
    clock: std::sync::Arc<dyn Clock>,
}

impl CentralClient {
    pub fn new(
        url: &str,
        http: reqwest::Client,
        clock: std::sync::Arc<dyn Clock>,
    ) -> Result<Self, CentralError> {
        Ok(Self {
            origin: origin(url)?,
            http,
            clock,
        })
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The default HTTP client: no redirects (a token never follows one), bounded waits.
    pub fn default_http() -> Result<reqwest::Client, CentralError> {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .user_agent(concat!("gatehouse-desktop/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CentralError::Malformed {
                what: "HTTP client",
                reason: e.to_string(),
            })
    }

    fn unreachable(&self, e: reqwest::Error) -> CentralError {
        CentralError::Unreachable {
            origin: self.origin.clone(),
            reason: e.without_url().to_string(),
        }
    }

    async fn endpoint(&self, pick: fn(Metadata) -> Option<String>, default: &str) -> String {
        let meta = match self
            .http
            .get(format!(
                "{}/.well-known/oauth-authorization-server",
                self.origin
            ))
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => r.json::<Metadata>().await.ok(),
            _ => None,
        };
        meta.and_then(pick)
            .filter(|u| u.starts_with(&format!("{}/", self.origin)))
            .unwrap_or_else(|| format!("{}{default}", self.origin))
    }

    pub async fn start_device(&self) -> Result<DeviceStart, CentralError> {
        let url = self
            .endpoint(
                |m| m.device_authorization_endpoint,
                "/oauth/device_authorization",
            )
            .await;
        let resp = self
            .http
            .post(url)
            .form(&[("surface", "gatehouse_desktop")])
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        if !resp.status().is_success() {
            return Err(refused("device authorization", resp).await);
        }
        let da: DeviceAuthorization = resp.json().await.map_err(|e| CentralError::Malformed {
            what: "device authorization",
            reason: e.to_string(),
        })?;
        check_browser_url(&da.verification_uri)?;
        if let Some(u) = &da.verification_uri_complete {
            check_browser_url(u)?;
        }
        let interval = da.interval.as_ref().map_or(5, |n| clamp_secs(n, 60).max(1));
        Ok(DeviceStart {
            device_code: Secret::new(da.device_code),
            user_code: da.user_code,
            verification_uri: da.verification_uri,
            verification_uri_complete: da.verification_uri_complete,
            expires_at: self.clock.now()
                + chrono::Duration::seconds(clamp_secs(&da.expires_in, 3600)),
            interval: Duration::from_secs(interval.unsigned_abs()),
            login_notice: da.login_notice,
        })
    }

    async fn token_request(
        &self,
        form: &[(&str, &str)],
    ) -> Result<reqwest::Response, CentralError> {
        let url = self.endpoint(|m| m.token_endpoint, "/oauth/token").await;
        self.http
            .post(url)
            .form(form)
            .send()
            .await
            .map_err(|e| self.unreachable(e))
    }

    pub async fn poll(&self, device_code: &Secret) -> Result<Poll, CentralError> {
        let resp = self
            .token_request(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", device_code.expose()),
            ])
            .await?;
        if resp.status().is_success() {
            return Ok(Poll::Done(tokens(resp, None, self.clock.now()).await?));
        }
        let status = resp.status().as_u16();
        let err: TokenErr = resp.json().await.map_err(|e| CentralError::Malformed {
            what: "token endpoint",
            reason: format!("{status}: {e}"),
        })?;
        Ok(match err.error.as_str() {
            "authorization_pending" => Poll::Pending,
            "slow_down" => Poll::SlowDown,
            "expired_token" => Poll::Expired,
            "access_denied" => Poll::Denied(err.error_description.unwrap_or(err.error)),
            other => Poll::Denied(format!(
                "{other}: {}",
                err.error_description.unwrap_or_default()
            )),
        })
    }

    pub async fn refresh(&self, refresh_token: &Secret) -> Result<Tokens, CentralError> {
        let resp = self
            .token_request(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh_token.expose()),
            ])
            .await?;
        if resp.status().is_success() {
            return tokens(resp, Some(refresh_token), self.clock.now()).await;
        }
        let status = resp.status().as_u16();
        let err: Option<TokenErr> = resp.json().await.ok();
        if status == 401 || err.as_ref().is_some_and(|e| e.error == "invalid_grant") {
            return Err(CentralError::InvalidGrant);
        }
        Err(CentralError::Refused {
            what: "refresh",
            status,
            message: err
                .map(|e| e.error_description.unwrap_or(e.error))
                .unwrap_or_default(),
        })
    }

    /// Best effort: the session is forgotten locally whatever the server says.
    pub async fn revoke(&self, token: &Secret, hint: &str) {
        let url = self
            .endpoint(|m| m.revocation_endpoint, "/oauth/revoke")
            .await;
        let _ = self
            .http
            .post(url)
            .form(&[("token", token.expose()), ("token_type_hint", hint)])
            .send()
            .await;
    }

    async fn get(
        &self,
        what: &'static str,
        path: &str,
        token: &Secret,
        etag: Option<&str>,
    ) -> Result<Pulled, CentralError> {
        let mut req = self
            .http
            .get(format!("{}{path}", self.origin))
            .bearer_auth(token.expose());
        if let Some(tag) = etag {
            req = req.header(reqwest::header::IF_NONE_MATCH, tag);
        }
        let resp = req.send().await.map_err(|e| self.unreachable(e))?;
        match resp.status().as_u16() {
            304 => Ok(Pulled::NotModified),
            401 => Err(CentralError::InvalidGrant),
            // Nothing applies to this user (no policy, no bootstrap): an empty document.
            404 if what != "spend" => Ok(Pulled::Fresh {
                etag: None,
                body: Value::Null,
            }),
            s if (200..300).contains(&s) => {
                let etag = resp
                    .headers()
                    .get(reqwest::header::ETAG)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let body = resp.json().await.map_err(|e| CentralError::Malformed {
                    what,
                    reason: e.to_string(),
                })?;
                Ok(Pulled::Fresh { etag, body })
            }
            _ => Err(refused(what, resp).await),
        }
    }

    pub async fn managed_settings(
        &self,
        token: &Secret,
        etag: Option<&str>,
    ) -> Result<Pulled, CentralError> {
        self.get("managed settings", "/managed/settings", token, etag)
            .await
    }

    pub async fn desktop_bootstrap(&self, token: &Secret) -> Result<Pulled, CentralError> {
        self.get("desktop bootstrap", "/user/bootstrap", token, None)
            .await
    }

    pub async fn my_spend(&self, token: &Secret) -> Result<Pulled, CentralError> {
        self.get("spend", "/v1/me/spend", token, None).await
    }
}

async fn tokens(
    resp: reqwest::Response,
    previous: Option<&Secret>,
    now: DateTime<Utc>,
) -> Result<Tokens, CentralError> {
    let ok: TokenOk = resp.json().await.map_err(|e| CentralError::Malformed {
        what: "token endpoint",
        reason: e.to_string(),
    })?;
    Ok(Tokens {
        access_token: Secret::new(ok.access_token),
        refresh_token: ok.refresh_token.map(Secret::new).or(previous.cloned()),
        expires_at: now + chrono::Duration::seconds(clamp_secs(&ok.expires_in, MAX_TOKEN_SECS)),
        email: ok.email,
    })
}

async fn refused(what: &'static str, resp: reqwest::Response) -> CentralError {
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    let message = body
        .pointer("/error/message")
        .or_else(|| body.get("error_description"))
        .or_else(|| body.get("error"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .chars()
        .take(300)
        .collect();
    CentralError::Refused {
        what,
        status,
        message,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn origin_is_normalised_and_checked() {
        assert_eq!(
            origin("https://gw.example.com/some/path").ok().as_deref(),
            Some("https://gw.example.com")
        );
        assert_eq!(
            origin("http://127.0.0.1:9000/").ok().as_deref(),
            Some("http://127.0.0.1:9000")
        );
        for bad in ["ftp://x", "gw.example.com", "https://u:p@gw.example", ""] {
            assert!(origin(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn plain_http_only_to_a_loopback_host() {
        for ok in [
            "http://127.0.0.1:9000",
            "http://127.8.9.10",
            "http://localhost:8080/x",
            "http://[::1]:8080",
            "https://gw.example.com",
        ] {
            assert!(origin(ok).is_ok(), "{ok}");
            assert!(check_browser_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://gw.example.com",
            "http://10.0.0.5:8080",
            "http://localhost.evil.example",
            "http://[::ffff:10.0.0.1]",
        ] {
            let e = origin(bad).unwrap_err();
            assert!(matches!(e, CentralError::Insecure(_)), "{bad}");
            assert!(e.to_string().contains("loopback host"), "{e}");
            assert!(check_browser_url(bad).is_err(), "{bad}");
        }
        for bad in ["javascript:alert(1)", "file:///etc/passwd", "smb://host/x"] {
            assert!(check_browser_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn any_lifetime_is_clamped_never_a_panic() {
        let n = |s: &str| serde_json::from_str::<serde_json::Number>(s).unwrap();
        assert_eq!(clamp_secs(&n("3600"), MAX_TOKEN_SECS), 3600);
        assert_eq!(clamp_secs(&n("-5"), MAX_TOKEN_SECS), 0);
        assert_eq!(
            clamp_secs(&n("18446744073709551615"), MAX_TOKEN_SECS),
            MAX_TOKEN_SECS
        );
        assert_eq!(
            clamp_secs(&n("9223372036854775807"), MAX_TOKEN_SECS),
            MAX_TOKEN_SECS
        );
        assert_eq!(clamp_secs(&n("1e300"), MAX_TOKEN_SECS), MAX_TOKEN_SECS);
        assert_eq!(clamp_secs(&n("-1e300"), MAX_TOKEN_SECS), 0);
        assert_eq!(clamp_secs(&n("2.5"), MAX_TOKEN_SECS), 2);
        let now = Utc::now();
        let _ = now + chrono::Duration::seconds(clamp_secs(&n("1e300"), MAX_TOKEN_SECS));
    }

    #[test]
    fn holder_reads_display_claims_only() {
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"sub":"u1","email":"a@b.c","name":"Ada","groups":["eng","ops"]}"#);
        let h = Holder::from_token(&Secret::new(format!("x.{payload}.sig")));
        assert_eq!(h.email.as_deref(), Some("a@b.c"));
        assert_eq!(h.groups, vec!["eng", "ops"]);
        assert_eq!(
            Holder::from_token(&Secret::new("garbage")),
            Holder::default()
        );
    }
}
