//! Workload tokens ("customer-routed inference" in the reference): machine callers present
//! ES256, ES384 or ES512 JWTs (`typ: cri+jwt`; the algorithm must match the key's curve,
//! [`keys`]) from one fixed issuer. They are admitted to inference only.
//!
//! The issuer's key set is cached: fresh until its refresh time (`Cache-Control: max-age`,
//! at most 3 h, default 10 min), then served stale while one background refresh runs, and
//! refused (503, `Retry-After: 30`) once older than 6 h or never fetched. An unknown `kid`
//! triggers one refresh per minute at most. A response without usable keys never replaces
//! the keys held. An upstream's error reaches them as a `capability_rejected` class
//! ([`capability`]).

mod capability;
pub mod keys;

pub use capability::capability_reason;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use crate::config::WorkloadConfig;
use crate::deps::Clock;
use WorkloadError::Invalid;
use keys::{Alg, VerifyKey};

pub const TOKEN_TYPE: &str = "cri+jwt";
const DEFAULT_REFRESH: Duration = Duration::from_secs(600);
const MAX_REFRESH: Duration = Duration::from_secs(3 * 3600);
const HARD_MAX_AGE: Duration = Duration::from_secs(6 * 3600);
const UNKNOWN_KID_COOLDOWN: Duration = Duration::from_secs(60);
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
const LEEWAY_SECS: i64 = 60;
/// Seconds a client should wait when keys are unavailable.
pub const RETRY_AFTER_SECS: u64 = 30;

/// A workload caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    pub sub: String,
    pub org: String,
    /// `act.sub`, the acting principal, when present.
    pub act: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    #[error("invalid workload token ({0})")]
    Invalid(&'static str),
    #[error("workload token keys are unavailable; retry shortly")]
    Unavailable,
}

struct KeySet {
    keys: HashMap<String, VerifyKey>,
    fetched_at: DateTime<Utc>,
    refresh_after: Duration,
}

pub struct WorkloadVerifier {
    cfg: WorkloadConfig,
    fetch: crate::outbound::SafeFetch,
    clock: Arc<dyn Clock>,
    keys: RwLock<Option<Arc<KeySet>>>,
    fetching: tokio::sync::Mutex<()>,
    last_unknown_kid_refresh: Mutex<Option<DateTime<Utc>>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct Act {
    sub: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct Claims {
    iss: String,
    sub: String,
    aud: Audience,
    org: String,
    scope: String,
    exp: i64,
    iat: i64,
    nbf: Option<i64>,
    act: Option<Act>,
}

/// The JOSE header fields a workload token is checked by.
#[derive(Deserialize)]
struct Header {
    typ: Option<String>,
    alg: Option<String>,
    kid: Option<String>,
}

/// The token's header, payload and signature parts, and the header parsed.
fn split(token: &str) -> Option<(Header, &str, &str, &str)> {
    let mut parts = token.split('.');
    let (h, p, sig) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let header: Header = serde_json::from_slice(&B64.decode(h).ok()?).ok()?;
    Some((header, h, p, sig))
}

/// Whether a bearer token says it is a workload token (unverified header peek).
pub fn is_workload_token(token: &str) -> bool {
    split(token).is_some_and(|(h, ..)| h.typ.as_deref() == Some(TOKEN_TYPE))
}

impl WorkloadVerifier {
    pub fn new(
        cfg: WorkloadConfig,
        fetch: crate::outbound::SafeFetch,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            cfg,
            fetch,
            clock,
            keys: RwLock::new(None),
            fetching: tokio::sync::Mutex::new(()),
            last_unknown_kid_refresh: Mutex::new(None),
        }
    }

    /// Fetches the key set once at start; failure is logged, and workload requests answer
    /// 503 until a fetch succeeds.
    pub async fn prime(&self) {
        if let Err(e) = self.refresh().await {
            tracing::warn!(error = %e, url = %self.cfg.jwks_url, "workload key set not available at start");
        }
    }

    fn current(&self) -> Option<Arc<KeySet>> {
        self.keys.read().ok().and_then(|k| k.clone())
    }

    fn age(&self, set: &KeySet) -> Duration {
        (self.clock.now() - set.fetched_at)
            .to_std()
            .unwrap_or_default()
    }

    async fn refresh(&self) -> Result<(), String> {
        let _one_at_a_time = self.fetching.lock().await;
        let resp = tokio::time::timeout(
            FETCH_TIMEOUT,
            self.fetch.get(&self.cfg.jwks_url, http::HeaderMap::new()),
        )
        .await
        .map_err(|_| "timed out".to_owned())?
        .map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            return Err(format!("status {}", resp.status()));
        }
        let max_age = resp
            .headers()
            .get(http::header::CACHE_CONTROL)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.split(',')
                    .filter_map(|p| p.trim().strip_prefix("max-age="))
                    .find_map(|n| n.parse::<u64>().ok())
            });
        let body = resp.bytes().await.map_err(|e| e.to_string())?;
        let set: Value =
            serde_json::from_slice(&body).map_err(|e| format!("not a JWK set: {e}"))?;
        let keys: HashMap<String, VerifyKey> = set["keys"]
            .as_array()
            .map(|list| list.iter().filter_map(VerifyKey::from_jwk).collect())
            .unwrap_or_default();
        if keys.is_empty() {
            return Err(
                "the key set holds no usable EC signing keys (P-256, P-384, P-521 with a kid); keeping the previous keys"
                    .into(),
            );
        }
        let refresh_after = max_age
            .map(Duration::from_secs)
            .map_or(DEFAULT_REFRESH, |d| d.min(MAX_REFRESH));
        let set = Arc::new(KeySet {
            keys,
            fetched_at: self.clock.now(),
            refresh_after,
        });
        if let Ok(mut k) = self.keys.write() {
            *k = Some(set);
        }
        Ok(())
    }

    /// Keys to verify with, refreshing per the cache rules.
    async fn key_set(self: &Arc<Self>) -> Result<Arc<KeySet>, WorkloadError> {
        if let Some(set) = self.current() {
            let age = self.age(&set);
            if age < set.refresh_after {
                return Ok(set);
            }
            if age < HARD_MAX_AGE {
                let me = self.clone();
                tokio::spawn(async move {
                    if let Err(e) = me.refresh().await {
                        tracing::warn!(error = %e, "workload key set refresh failed; serving cached keys");
                    }
                });
                return Ok(set);
            }
        }
        if let Err(e) = self.refresh().await {
            tracing::warn!(error = %e, "workload key set unavailable");
        }
        match self.current() {
            Some(set) if self.age(&set) < HARD_MAX_AGE => Ok(set),
            _ => Err(WorkloadError::Unavailable),
        }
    }

    pub async fn verify(self: &Arc<Self>, token: &str) -> Result<Workload, WorkloadError> {
        let kid = check_header(token)?;
        let set = self.keys_for(&kid).await?;
        let key = set.keys.get(&kid).ok_or(Invalid("unknown_kid"))?;
        check_token(token, key, &self.cfg, self.clock.now().timestamp())
    }

    /// The key set to look `kid` up in: refreshed once (at most once a minute) when it
    /// does not hold `kid`.
    async fn keys_for(self: &Arc<Self>, kid: &str) -> Result<Arc<KeySet>, WorkloadError> {
        let set = self.key_set().await?;
        if set.keys.contains_key(kid) {
            return Ok(set);
        }
        let now = self.clock.now();
        let may_refresh = self
            .last_unknown_kid_refresh
            .lock()
            .map(|mut last| {
                let ok = last
                    .is_none_or(|t| (now - t).to_std().unwrap_or_default() >= UNKNOWN_KID_COOLDOWN);
                if ok {
                    *last = Some(now);
                }
                ok
            })
            .unwrap_or(false);
        if !may_refresh {
            return Ok(set);
        }
        if let Err(e) = self.refresh().await {
            tracing::warn!(error = %e, "workload key set refresh for an unknown kid failed");
        }
        self.current().ok_or(WorkloadError::Unavailable)
    }
}

/// The unverified header's checks: `typ`, a known `alg` and a `kid` to look the key up by.
pub(crate) fn check_header(token: &str) -> Result<String, WorkloadError> {
    let (header, ..) = split(token).ok_or(Invalid("malformed"))?;
    if header.typ.as_deref() != Some(TOKEN_TYPE) {
        return Err(Invalid("wrong_type"));
    }
    if header.alg.as_deref().and_then(Alg::parse).is_none() {
        return Err(Invalid("bad_algorithm"));
    }
    header
        .kid
        .filter(|k| !k.is_empty())
        .ok_or(Invalid("missing_kid"))
}

/// Signature (the header's `alg` must be the key's), issuer and audience with `key`, then
/// the claims at `now` (Unix seconds).
pub(crate) fn check_token(
    token: &str,
    key: &VerifyKey,
    cfg: &WorkloadConfig,
    now: i64,
) -> Result<Workload, WorkloadError> {
    let (header, h, p, sig) = split(token).ok_or(Invalid("malformed"))?;
    if header.alg.as_deref().and_then(Alg::parse) != Some(key.alg) {
        return Err(Invalid("bad_algorithm"));
    }
    let signature = B64.decode(sig).map_err(|_| Invalid("malformed"))?;
    let signed = &token.as_bytes()[..h.len() + 1 + p.len()];
    if !key.verify(signed, &signature) {
        return Err(Invalid("bad_signature"));
    }
    let payload = B64.decode(p).map_err(|_| Invalid("malformed"))?;
    let claims: Claims = serde_json::from_slice(&payload).map_err(|_| Invalid("missing_claim"))?;
    let audiences = match &claims.aud {
        Audience::One(a) => std::slice::from_ref(a),
        Audience::Many(v) => v.as_slice(),
    };
    if !audiences.iter().any(|a| cfg.audience.contains(a)) {
        return Err(Invalid("wrong_audience"));
    }
    check_claims(claims, cfg, now)
}

/// The claims of a token whose signature held: time (with leeway), issuer, scope, org.
pub(crate) fn check_claims(
    c: Claims,
    cfg: &WorkloadConfig,
    now: i64,
) -> Result<Workload, WorkloadError> {
    // Saturating: claims at the ends of the i64 range must not wrap around.
    if c.exp.saturating_add(LEEWAY_SECS) <= now {
        return Err(Invalid("expired"));
    }
    if c.nbf.is_some_and(|n| n.saturating_sub(LEEWAY_SECS) > now)
        || c.iat.saturating_sub(LEEWAY_SECS) > now
    {
        return Err(Invalid("not_yet_valid"));
    }
    if c.iss != cfg.issuer {
        return Err(Invalid("wrong_issuer"));
    }
    if c.scope != "inference" {
        return Err(Invalid("wrong_scope"));
    }
    let org = c.org.to_ascii_lowercase();
    if !cfg.org_allowlist.contains(&org) {
        return Err(Invalid("org_not_allowed"));
    }
    if c.sub.trim().is_empty() {
        return Err(Invalid("missing_claim"));
    }
    Ok(Workload {
        sub: c.sub,
        org,
        act: c.act.and_then(|a| a.sub),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Times at the ends of the i64 range overflowed the leeway arithmetic (seed
    /// fuzz/corpus/tokens/workload-claims-iat-i64-min.json).
    #[test]
    fn extreme_times_do_not_overflow() {
        let cfg = WorkloadConfig {
            issuer: "https://issuer.example".into(),
            jwks_url: url::Url::parse("https://issuer.example/jwks").unwrap(),
            audience: vec!["gatehouse".into()],
            org_allowlist: vec!["org".into()],
        };
        let claims = |exp: i64, iat: i64| -> Claims {
            serde_json::from_value(serde_json::json!({
                "iss": "https://issuer.example", "sub": "svc", "aud": "gatehouse",
                "org": "ORG", "scope": "inference", "exp": exp, "iat": iat, "nbf": i64::MIN,
            }))
            .unwrap()
        };
        let now = 1_760_000_000;
        assert!(check_claims(claims(i64::MAX, i64::MIN), &cfg, now).is_ok());
        let expired = check_claims(claims(i64::MIN, 0), &cfg, now);
        assert_eq!(expired.unwrap_err(), Invalid("expired"));
        let future = check_claims(claims(i64::MAX, i64::MAX), &cfg, now);
        assert_eq!(future.unwrap_err(), Invalid("not_yet_valid"));
    }
}
