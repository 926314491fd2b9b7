//! Bearer admission: turns a request's credential into a [`Principal`] or a refusal.
//!
//! Today one kind of credential exists: static client keys (`client_keys` in config, and
//! the per-install local key). Session JWTs and workload tokens join here.

pub mod client_keys;

use http::HeaderMap;

use crate::error::ApiError;
pub use client_keys::ClientKeys;

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// A static client key, by its configured id (`local` for the per-install key).
    ClientKey { id: String },
}

impl Principal {
    /// Stable label for usage rows and events (never a secret).
    pub fn label(&self) -> String {
        match self {
            Principal::ClientKey { id } => format!("key:{id}"),
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
    if let Some(v) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        let v = v.trim();
        if !v.is_empty() && !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// Admits a caller or says exactly why not.
pub fn admit(keys: &ClientKeys, headers: &HeaderMap) -> Result<Principal, ApiError> {
    let candidates = presented(headers);
    if candidates.is_empty() {
        return Err(ApiError::Unauthenticated {
            message: "missing credential: send `Authorization: Bearer <key>` or `x-api-key`",
            reason: "missing_credential",
        });
    }
    for token in candidates {
        if let Some(id) = keys.find(token) {
            return Ok(Principal::ClientKey { id });
        }
    }
    Err(ApiError::Unauthenticated {
        message: "invalid credential for this gateway",
        reason: "unknown_key",
    })
}
