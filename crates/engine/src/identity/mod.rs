//! People sign in: OIDC against the company IdP, the RFC 8628 device flow for CLIs
//! (Claude Code's `/login`, `gatehouse login`), Gatehouse session tokens, refresh and
//! revocation.
//!
//! Endpoints live in [`device`] (device authorization, token, revocation, discovery) and
//! [`browser`] (the `/device` page and the IdP callback). State between the steps is kept
//! in the store's kv space, sealed ([`keys`]), keyed by hashes of the secrets.

pub mod browser;
pub mod claims;
pub mod console;
pub mod device;
pub mod directory;
pub mod google_groups;
pub mod idp_client;
pub mod keys;
pub mod oidc;
mod pages;
pub mod proxy;
pub mod session;
pub mod user;
mod verified;

use std::collections::HashMap;
use std::sync::RwLock;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::IdentityConfig;
use crate::store::{Store, StoreError};
use keys::KeyRing;
use session::{SessionClaims, SessionError};
pub use user::{LOCAL_SUBJECT, UserIdentity};

/// Lifetime of a device grant and its user code.
pub const DEVICE_GRANT_SECS: i64 = 600;
/// Poll interval handed to clients.
pub const POLL_INTERVAL_SECS: i64 = 5;
/// Lifetime of the sealed OAuth state between `/device` and the callback.
pub const STATE_SECS: i64 = 300;
/// How long a revoked refresh token is remembered.
const REFRESH_REVOCATION_SECS: i64 = 90 * 24 * 3600;

/// A device grant as stored (sealed) under `device:dc:<sha256(device_code)>`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Grant {
    pub state: GrantState,
    pub user_code: String,
    pub expires_at: i64,
    pub interval: i64,
    pub last_poll_ms: i64,
    #[serde(default)]
    pub surface: Option<String>,
    #[serde(default)]
    pub issued: Option<IssuedTokens>,
    #[serde(default)]
    pub denial: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantState {
    Pending,
    Approved,
    Denied,
    /// Tokens were handed out; any further poll is a replay.
    Redeemed,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IssuedTokens {
    pub access_token: String,
    pub refresh_token: String,
    pub expires_in: i64,
    pub email: Option<String>,
}

/// What a sealed refresh token holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefreshPayload {
    pub sub: String,
    pub idp_refresh_token: Option<String>,
    pub iat: i64,
    pub id: String,
}

/// The longest a refresh token may wait to be redeemed. Each redemption issues a new one,
/// so only a person away longer signs in again; a sealed payload with an older or a
/// future `iat` (a leaked key, a forged time) is refused.
pub const REFRESH_MAX_AGE_SECS: i64 = 30 * 24 * 3600;

/// Whether a refresh token issued at `iat` may still be redeemed at `now`.
pub fn refresh_in_time(iat: i64, now: DateTime<Utc>) -> bool {
    let t = now.timestamp();
    let leeway = session::LEEWAY_SECS;
    iat.saturating_sub(leeway) <= t && t < iat.saturating_add(REFRESH_MAX_AGE_SECS)
}

/// Why a sign-in (or refresh) was refused.
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    #[error(transparent)]
    Gate(claims::GateError),
    /// `oidc.google_groups` could not tell the person's groups.
    #[error("{0}")]
    Groups(String),
}

impl AdmitError {
    /// Stable strings for events and pages.
    pub fn reason(&self) -> &'static str {
        match self {
            AdmitError::Gate(g) => g.reason(),
            AdmitError::Groups(_) => "google_groups_unavailable",
        }
    }
}

/// The running sign-in service.
pub struct Identity {
    pub cfg: IdentityConfig,
    pub keys: KeyRing,
    pub oidc: oidc::Oidc,
    /// `oidc.google_groups`: groups from Google Workspace's directory.
    google_groups: Option<google_groups::GoogleGroups>,
    /// Revoked session ids -> their expiry (Unix seconds); mirrored in the store.
    revoked: RwLock<HashMap<String, i64>>,
    /// People whose sessions and refresh tokens issued at or before a time (Unix seconds)
    /// were revoked at once (the console's "revoke sessions"); mirrored in the store.
    revoked_subs: RwLock<HashMap<String, i64>>,
    /// Session tokens whose signature already checked out.
    verified: verified::Verified,
}

pub fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// Where a refresh token's redemption or revocation is recorded.
fn refresh_key(token: &str) -> String {
    format!("revoked:rt:{}", sha256_hex(token))
}

/// Where a person's revocation of every session issued until then is kept.
const REVOKED_SUB: &str = "revoked:sub:";

/// Keys under `prefix` (revoked session ids, or people) with their number (Unix seconds:
/// a session's expiry, or the time a person's sessions were revoked), from the store.
async fn load_revoked(
    store: &dyn Store,
    prefix: &str,
    now: DateTime<Utc>,
) -> Result<HashMap<String, i64>, crate::store::StoreError> {
    let rows = store.kv_scan(prefix, now).await?;
    Ok(rows
        .into_iter()
        .map(|(key, value)| {
            let at = std::str::from_utf8(&value)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            (key.trim_start_matches(prefix).to_owned(), at)
        })
        .collect())
}

impl Identity {
    pub async fn start(
        cfg: IdentityConfig,
        store: &dyn Store,
        deps: &crate::deps::Deps,
        http: crate::outbound::SafeFetch,
    ) -> Result<Self, oidc::OidcError> {
        let now = deps.clock.now();
        let google_groups = match &cfg.oidc.extras.google_groups {
            Some(g) => Some(
                google_groups::GoogleGroups::load(
                    g,
                    deps.env.as_ref(),
                    http.clone(),
                    deps.clock.clone(),
                )
                .map_err(oidc::OidcError::GoogleGroups)?,
            ),
            None => None,
        };
        let redirect = format!(
            "{}/oauth/callback",
            cfg.public_url.as_str().trim_end_matches('/')
        );
        let oidc = oidc::Oidc::discover(&cfg.oidc, redirect, http).await?;
        let load = |prefix: &'static str| async move {
            load_revoked(store, prefix, now).await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "could not load revoked sessions");
                HashMap::new()
            })
        };
        let revoked = load("revoked:jti:").await;
        let revoked_subs = load(REVOKED_SUB).await;
        Ok(Self {
            keys: KeyRing::new(&cfg.session_secrets),
            cfg,
            oidc,
            google_groups,
            revoked: RwLock::new(revoked),
            revoked_subs: RwLock::new(revoked_subs),
            verified: verified::Verified::default(),
        })
    }

    /// The person the IdP's claims describe, through the sign-in gates; with
    /// `oidc.google_groups` their groups are the directory's (a failed lookup refuses).
    pub async fn admit(
        &self,
        claims: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<UserIdentity, AdmitError> {
        let Some(directory) = &self.google_groups else {
            return claims::admit(claims, &self.cfg.oidc).map_err(AdmitError::Gate);
        };
        let Some(email) = claims::email(claims, &self.cfg.oidc) else {
            return Err(AdmitError::Groups(
                "oidc.google_groups is configured but the ID token has no email: check oidc.email_claim and that the email scope is requested".into(),
            ));
        };
        let groups = directory.groups(&email).await.map_err(|e| {
            tracing::warn!(error = %e, "google_groups lookup failed");
            AdmitError::Groups(format!("google_groups lookup failed: {e}"))
        })?;
        claims::admit_with(claims, &self.cfg.oidc, Some(groups)).map_err(AdmitError::Gate)
    }

    /// Picks up sessions other replicas revoked (a shared store); every few seconds.
    pub async fn sync_revoked(&self, store: &dyn Store, now: DateTime<Utc>) {
        for (prefix, map) in [
            ("revoked:jti:", &self.revoked),
            (REVOKED_SUB, &self.revoked_subs),
        ] {
            match load_revoked(store, prefix, now).await {
                Ok(fresh) => {
                    if let Ok(mut r) = map.write() {
                        for (k, v) in fresh {
                            let e = r.entry(k).or_insert(v);
                            *e = (*e).max(v);
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not refresh revoked sessions"),
            }
        }
    }

    /// When `sub`'s sessions were last revoked all at once (Unix seconds), if ever.
    pub fn revoked_before(&self, sub: &str) -> Option<i64> {
        self.revoked_subs
            .read()
            .map(|r| r.get(sub).copied())
            .unwrap_or(Some(i64::MAX))
    }

    /// Whether something issued to `sub` at `iat` was revoked with all their sessions.
    pub fn issued_before_revocation(&self, sub: &str, iat: i64) -> bool {
        self.revoked_before(sub).is_some_and(|before| iat <= before)
    }

    /// Revokes every session and refresh token issued to `sub` until `now`, here and in the
    /// store (kept as long as a refresh token can live), returning the time recorded.
    pub async fn revoke_person(
        &self,
        store: &dyn Store,
        sub: &str,
        now: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        let at = now.timestamp();
        let keep = chrono::Duration::seconds(REFRESH_MAX_AGE_SECS + session::LEEWAY_SECS)
            + chrono::Duration::from_std(self.cfg.session_ttl).unwrap_or_default();
        store
            .kv_put(
                &format!("{REVOKED_SUB}{sub}"),
                at.to_string().into_bytes(),
                Some(now + keep),
            )
            .await?;
        if let Ok(mut r) = self.revoked_subs.write() {
            r.insert(sub.to_owned(), at);
        }
        Ok(at)
    }

    /// The public origin, e.g. `https://gw.corp.example` (no trailing slash): what a
    /// browser's `Origin` header carries.
    pub fn origin(&self) -> String {
        self.cfg.public_url.origin().ascii_serialization()
    }

    /// The public URL with its path, without a trailing slash (`https://gw.corp.example`,
    /// or `https://corp.example/gateway` behind a proxy that mounts the gateway there):
    /// the base of every URL handed out, and the sessions' issuer.
    pub fn base(&self) -> String {
        self.cfg
            .public_url
            .as_str()
            .trim_end_matches('/')
            .to_owned()
    }

    pub fn secure_cookies(&self) -> bool {
        self.cfg.public_url.scheme() == "https"
    }

    /// Verifies a session token and checks it was not revoked.
    pub fn verify_session(
        &self,
        token: &str,
        now: DateTime<Utc>,
    ) -> Result<std::sync::Arc<SessionClaims>, SessionError> {
        let claims = self
            .verified
            .get_or_verify(token, || session::decode(&self.keys, &self.base(), token))?;
        let lifetime = i64::try_from(self.cfg.session_ttl.as_secs()).unwrap_or(i64::MAX);
        session::check_time(&claims, now, lifetime)?;
        let revoked = self
            .revoked
            .read()
            .map(|r| r.contains_key(&claims.jti))
            .unwrap_or(true);
        if revoked || self.issued_before_revocation(&claims.sub, claims.iat) {
            return Err(SessionError::Revoked);
        }
        Ok(claims)
    }

    /// Marks a session revoked, here and in the store (until it would have expired).
    pub async fn revoke_session(
        &self,
        store: &dyn Store,
        jti: &str,
        exp: i64,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let expires = DateTime::from_timestamp(exp + session::LEEWAY_SECS, 0).unwrap_or(now);
        store
            .kv_put(
                &format!("revoked:jti:{jti}"),
                exp.to_string().into_bytes(),
                Some(expires),
            )
            .await?;
        if let Ok(mut r) = self.revoked.write() {
            let t = now.timestamp();
            r.retain(|_, e| *e + session::LEEWAY_SECS > t);
            r.insert(jti.to_owned(), exp);
        }
        Ok(())
    }

    pub async fn revoke_refresh(
        &self,
        store: &dyn Store,
        token: &str,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let until = now + chrono::Duration::seconds(REFRESH_REVOCATION_SECS);
        store
            .kv_put(&refresh_key(token), b"1".to_vec(), Some(until))
            .await
    }

    /// Claims a refresh token for one redemption: `Some(claim)` for the one caller (on any
    /// replica) that wins, `None` when it was redeemed, claimed or revoked before. The
    /// claim stands in for the revocation, so a redeemed token stays spent.
    pub async fn claim_refresh(
        &self,
        store: &dyn Store,
        token: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let mut nonce = [0u8; 16];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut nonce);
        let claim = format!("claimed:{}", hex::encode(nonce)).into_bytes();
        let until = now + chrono::Duration::seconds(REFRESH_REVOCATION_SECS);
        let won = store
            .kv_insert(&refresh_key(token), claim.clone(), Some(until), now)
            .await?;
        Ok(won.then_some(claim))
    }

    /// Gives a claim back when the redemption spent nothing (the IdP was unreachable); a
    /// revocation recorded meanwhile stays.
    pub async fn release_refresh(&self, store: &dyn Store, token: &str, claim: Vec<u8>) {
        if let Err(e) = store.kv_delete(&refresh_key(token), Some(claim)).await {
            tracing::warn!(error = %e, "could not release a refresh token claim");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refresh_token_is_redeemable_from_its_issue_for_thirty_days_only() {
        let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        let t = now.timestamp();
        assert!(refresh_in_time(t, now));
        assert!(refresh_in_time(t - REFRESH_MAX_AGE_SECS + 1, now));
        assert!(!refresh_in_time(t - REFRESH_MAX_AGE_SECS, now));
        assert!(refresh_in_time(t + session::LEEWAY_SECS, now), "clock skew");
        assert!(!refresh_in_time(t + 3600, now), "issued in the future");
        assert!(!refresh_in_time(i64::MAX, now) && !refresh_in_time(i64::MIN, now));
    }
}
