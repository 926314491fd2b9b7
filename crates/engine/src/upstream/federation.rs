//! Workload-identity federation with Anthropic (`provider: anthropic` with
//! `auth.federation_rule_id`): the identity token file (an OIDC JWT, re-read at each
//! exchange because platforms rotate it) is exchanged for a short-lived Anthropic access
//! token, as Anthropic's SDK does (`oidcFederationProvider`, `TokenCache`):
//!
//! - `POST <base_url>/v1/oauth/token`, JSON `{grant_type:
//!   "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion, federation_rule_id,
//!   organization_id, service_account_id?, workspace_id?}`, with `anthropic-beta:
//!   oauth-2025-04-20,oidc-federation-2026-04-01`; the answer is `{access_token,
//!   expires_in, token_type?}` (a `token_type` other than Bearer is refused).
//! - The token is cached and exchanged again once less than [`REFRESH_BEFORE`] of its
//!   life is left (concurrent callers wait for one exchange); a 401 from the API drops it
//!   ([`Federated::invalidate`]) and the caller retries once with a fresh one.
//! - Requests carry it as `Authorization: Bearer` with the `oauth-2025-04-20` beta; the
//!   workspace travels in the exchange, so no extra request header is added.
//!
//! Errors name the file or the exchange's status and its RFC 6749 error fields only: the
//! JWT and the tokens never reach logs or events.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use url::Url;

use crate::config::Federation;
use crate::deps::Clock;
use crate::secret::Secret;

pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// The betas the exchange carries (the OAuth API's and federation's).
pub const EXCHANGE_BETAS: &str = "oauth-2025-04-20,oidc-federation-2026-04-01";
/// The SDK's advisory refresh threshold: a token with less left is exchanged again.
pub const REFRESH_BEFORE: Duration = Duration::from_secs(120);
/// The token endpoint's assertion limit (16 KiB).
const MAX_ASSERTION: usize = 16 * 1024;
/// How long one exchange may take (the reference's 10 s).
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// A cached token and when it expires.
#[derive(Clone)]
struct Cached {
    token: Secret,
    expires_at: DateTime<Utc>,
}

/// One upstream's federation credential.
pub struct Federated {
    client: reqwest::Client,
    token_url: Url,
    config: Arc<Federation>,
    clock: Arc<dyn Clock>,
    /// Held across an exchange, so concurrent callers share it.
    cache: tokio::sync::Mutex<Option<Cached>>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: Option<String>,
    expires_in: Option<f64>,
    token_type: Option<String>,
}

#[derive(Deserialize, Default)]
struct ExchangeError {
    error: Option<String>,
    error_description: Option<String>,
}

impl Federated {
    /// `base` is the upstream's `base_url` (ending in `/`).
    pub fn new(
        client: reqwest::Client,
        base: &Url,
        config: Arc<Federation>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let mut token_url = base.clone();
        token_url.set_path(&format!("{}v1/oauth/token", base.path()));
        Self {
            client,
            token_url,
            config,
            clock,
            cache: tokio::sync::Mutex::new(None),
        }
    }

    /// A token to send now: the cached one while more than [`REFRESH_BEFORE`] of it is
    /// left, else a fresh exchange.
    pub async fn token(&self) -> Result<Secret, String> {
        let mut cache = self.cache.lock().await;
        let now = self.clock.now();
        if let Some(c) = cache.as_ref()
            && c.expires_at - now > chrono::Duration::from_std(REFRESH_BEFORE).unwrap_or_default()
        {
            return Ok(c.token.clone());
        }
        let fresh = self.exchange(now).await?;
        let token = fresh.token.clone();
        *cache = Some(fresh);
        Ok(token)
    }

    /// The API refused `used` (401): forget it, unless another caller already replaced it.
    pub async fn invalidate(&self, used: &Secret) {
        let mut cache = self.cache.lock().await;
        if cache
            .as_ref()
            .is_some_and(|c| c.token.expose() == used.expose())
        {
            *cache = None;
        }
    }

    /// The exchange's JSON body (the identity token read now).
    pub async fn request_body(&self) -> Result<serde_json::Value, String> {
        let path = &self.config.identity_token_file;
        let text = tokio::fs::read_to_string(path).await.map_err(|e| {
            format!(
                "cannot read the identity token file {}: {}",
                path.display(),
                e.kind()
            )
        })?;
        let jwt = text.trim();
        if jwt.is_empty() {
            return Err(format!(
                "the identity token file {} is empty",
                path.display()
            ));
        }
        if jwt.len() > MAX_ASSERTION {
            return Err(format!(
                "the identity token in {} is {} KiB, over the 16 KiB assertion limit",
                path.display(),
                jwt.len().div_ceil(1024)
            ));
        }
        let c = &self.config;
        let mut body = serde_json::json!({
            "grant_type": GRANT_TYPE,
            "assertion": jwt,
            "federation_rule_id": c.rule_id,
            "organization_id": c.organization_id,
        });
        if let Some(s) = &c.service_account_id {
            body["service_account_id"] = s.as_str().into();
        }
        if let Some(w) = &c.workspace_id {
            body["workspace_id"] = w.as_str().into();
        }
        Ok(body)
    }

    async fn exchange(&self, now: DateTime<Utc>) -> Result<Cached, String> {
        let body = self.request_body().await?;
        let sent = self
            .client
            .post(self.token_url.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header("anthropic-beta", EXCHANGE_BETAS)
            .header(
                http::header::USER_AGENT,
                concat!("gatehouse/", env!("CARGO_PKG_VERSION")),
            )
            .timeout(EXCHANGE_TIMEOUT)
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| format!("federation token exchange unreachable: {}", e.without_url()))?;
        let status = sent.status();
        let bytes = sent
            .bytes()
            .await
            .map_err(|e| format!("federation token exchange: {}", e.without_url()))?;
        if !status.is_success() {
            let why: ExchangeError = serde_json::from_slice(&bytes).unwrap_or_default();
            let detail = [why.error, why.error_description]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(": ");
            return Err(format!(
                "federation token exchange failed with status {}{}{detail}",
                status.as_u16(),
                if detail.is_empty() { "" } else { ": " }
            ));
        }
        let answer: TokenAnswer = serde_json::from_slice(&bytes)
            .map_err(|_| "federation token exchange answered with no JSON".to_owned())?;
        let token = answer
            .access_token
            .filter(|t| !t.is_empty())
            .ok_or("federation token exchange answered without access_token")?;
        if let Some(t) = answer.token_type
            && !t.eq_ignore_ascii_case("bearer")
        {
            return Err(format!(
                "federation token exchange answered token_type {t:?} (want Bearer)"
            ));
        }
        let secs = answer
            .expires_in
            .filter(|s| s.is_finite() && *s >= 0.0)
            .ok_or("federation token exchange answered without expires_in")?;
        let life = chrono::Duration::milliseconds((secs * 1000.0).min(1e12) as i64);
        Ok(Cached {
            token: Secret::new(token),
            expires_at: now + life,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::deps::SystemClock;

    fn federated(file: &std::path::Path, base: &str) -> Federated {
        let config = Federation {
            rule_id: "fdrl_1".into(),
            organization_id: "org-1".into(),
            identity_token_file: file.to_owned(),
            service_account_id: Some("svac_1".into()),
            workspace_id: Some("wrkspc_1".into()),
        };
        Federated::new(
            reqwest::Client::new(),
            &Url::parse(base).unwrap(),
            Arc::new(config),
            Arc::new(SystemClock),
        )
    }

    #[tokio::test]
    async fn the_exchange_is_the_sdks_and_rereads_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "  a.b.c\n").unwrap();
        let f = federated(&file, "https://proxy.example/anthropic/");
        assert_eq!(
            f.token_url.as_str(),
            "https://proxy.example/anthropic/v1/oauth/token"
        );
        assert_eq!(
            f.request_body().await.unwrap(),
            serde_json::json!({
                "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                "assertion": "a.b.c",
                "federation_rule_id": "fdrl_1",
                "organization_id": "org-1",
                "service_account_id": "svac_1",
                "workspace_id": "wrkspc_1",
            })
        );
        std::fs::write(&file, "d.e.f").unwrap();
        assert_eq!(f.request_body().await.unwrap()["assertion"], "d.e.f");
        std::fs::write(&file, "\n").unwrap();
        let e = f.request_body().await.unwrap_err();
        assert!(e.contains("is empty"), "{e}");
        std::fs::write(&file, "x".repeat(MAX_ASSERTION + 1)).unwrap();
        let e = f.request_body().await.unwrap_err();
        assert!(e.contains("16 KiB") && !e.contains("xxx"), "{e}");
        std::fs::remove_file(&file).unwrap();
        let e = f.request_body().await.unwrap_err();
        assert!(e.contains("cannot read the identity token file"), "{e}");
    }

    #[tokio::test]
    async fn an_unreachable_exchange_is_a_clean_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "a.b.c").unwrap();
        // Port 1 on loopback: nothing listens.
        let f = federated(&file, "http://127.0.0.1:1/");
        let e = f.token().await.unwrap_err();
        assert!(e.contains("unreachable") && !e.contains("a.b.c"), "{e}");
    }
}
