//! Bearer admission: turns a request's credential into a [`Principal`] or a refusal.
//!
//! Today one kind of credential exists: static client keys (`client_keys` in config, and
//! the per-install local key). Session JWTs and workload tokens join here.

pub mod client_keys;
pub mod local_key;

use http::HeaderMap;

use crate::error::ApiError;

pub use client_keys::ClientKeys;

/// Parsed once: a lookup by `&str` parses the name every time.
const X_API_KEY: http::HeaderName = http::HeaderName::from_static("x-api-key");

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// A static client key, by its configured id (`local` for the per-install key).
    ClientKey { id: String },
    /// A person signed in through OIDC, holding a Gatehouse session token.
    Session {
        user: crate::identity::UserIdentity,
        jti: String,
        /// The token's `billing_group_tag` claim (`admin.billing_group_tag` at sign-in).
        billing_group_tag: Option<String>,
    },
    /// A machine caller with a workload token (inference only).
    Workload(crate::workload::Workload),
}

impl Principal {
    /// Stable label for usage rows and events (never a secret).
    pub fn label(&self) -> String {
        match self {
            Principal::ClientKey { id } => format!("key:{id}"),
            Principal::Session { user, .. } => format!("user:{}", user.sub),
            Principal::Workload(w) => format!("workload:{}/{}", w.org, w.sub),
        }
    }
}

/// The credentials a request presents: `Authorization: Bearer` and/or `x-api-key`.
pub fn presented(headers: &HeaderMap) -> Vec<&str> {
    let mut out = Vec::with_capacity(2);
    if let Some(v) = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let mut parts = v.splitn(2, ' ');
        if let (Some(scheme), Some(token)) = (parts.next(), parts.next())
            && scheme.eq_ignore_ascii_case("bearer")
        {
            let token = token.trim();
            if !token.is_empty() {
                out.push(token);
            }
        }
    }
    if let Some(v) = headers.get(&X_API_KEY).and_then(|v| v.to_str().ok()) {
        let v = v.trim();
        if !v.is_empty() && !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// Whether a presented credential has the shape of a JWT (three base64url parts).
fn looks_like_jwt(token: &str) -> bool {
    token.starts_with("eyJ") && token.split('.').count() == 3
}

/// What admission needs to know.
pub struct Admission<'a> {
    pub keys: &'a ClientKeys,
    pub identity: Option<&'a crate::identity::Identity>,
    pub workload: Option<&'a std::sync::Arc<crate::workload::WorkloadVerifier>>,
    pub now: chrono::DateTime<chrono::Utc>,
    /// Workload tokens are admitted to inference paths only.
    pub inference: bool,
}

/// Admits a caller or says exactly why not: a static client key, a workload token (on
/// inference, when configured) or a session token (when sign-in is configured).
pub async fn admit(a: &Admission<'_>, headers: &HeaderMap) -> Result<Principal, ApiError> {
    let (keys, identity, now) = (a.keys, a.identity, a.now);
    let candidates = presented(headers);
    if candidates.is_empty() {
        return Err(ApiError::Unauthenticated {
            message: "missing credential: send `Authorization: Bearer <key>` or `x-api-key`",
            reason: "missing_credential",
        });
    }
    let mut session_error = None;
    let mut workload_error = None;
    for token in candidates {
        if let Some(id) = keys.find(token) {
            return Ok(Principal::ClientKey { id });
        }
        if let Some(verifier) = a
            .workload
            .filter(|_| crate::workload::is_workload_token(token))
        {
            if !a.inference {
                workload_error = Some("workload_not_inference");
                continue;
            }
            match verifier.verify(token).await {
                Ok(w) => return Ok(Principal::Workload(w)),
                Err(crate::workload::WorkloadError::Unavailable) => {
                    return Err(ApiError::RetryLater {
                        message: "workload token keys are unavailable; retry shortly",
                        retry_after_secs: crate::workload::RETRY_AFTER_SECS,
                    });
                }
                Err(crate::workload::WorkloadError::Invalid(reason)) => {
                    workload_error = Some(reason);
                    continue;
                }
            }
        }
        if let Some(identity) = identity.filter(|_| looks_like_jwt(token)) {
            match identity.verify_session(token, now) {
                Ok(claims) => {
                    return Ok(Principal::Session {
                        user: claims.identity(),
                        jti: claims.jti.clone(),
                        billing_group_tag: claims.billing_group_tag.clone(),
                    });
                }
                Err(e) => session_error = Some(e),
            }
        }
    }
    if let Some(reason) = workload_error {
        return Err(ApiError::Unauthenticated {
            message: "invalid workload token",
            reason,
        });
    }
    Err(match session_error {
        Some(e) => ApiError::Unauthenticated {
            message: match e {
                crate::identity::session::SessionError::Expired => "session expired: sign in again",
                crate::identity::session::SessionError::Revoked => "session revoked: sign in again",
                _ => "invalid session token: sign in again",
            },
            reason: e.reason(),
        },
        None => ApiError::Unauthenticated {
            message: "invalid credential for this gateway",
            reason: "unknown_key",
        },
    })
}
