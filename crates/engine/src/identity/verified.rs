//! Session tokens this gateway has already verified, so a person's next request skips the
//! base64, JSON and HMAC work of [`super::session::decode`] (measured: about 8% of a capped
//! request's CPU).
//!
//! Entries are keyed by the SHA-256 of the token, so the cache holds no token, and an entry
//! exists only for a token whose signature, key, issuer and audience checked out: a caller
//! presenting anything else finds no entry and is verified in full, and failures are never
//! stored, so a flood of bad tokens cannot fill it. What can change between two requests
//! is checked every time by the caller: the time (`exp`, `nbf`, `iat`) and revocation. The
//! key ring is fixed for the life of an [`super::Identity`], which owns the cache. At
//! [`MAX_ENTRIES`] the cache is emptied and refills from the live sessions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use super::session::{SessionClaims, SessionError};

/// Distinct sessions held at once (about 300 bytes each).
pub const MAX_ENTRIES: usize = 4096;

#[derive(Default)]
pub struct Verified {
    claims: Mutex<HashMap<[u8; 32], Arc<SessionClaims>>>,
}

impl Verified {
    /// The claims of `token`: from an earlier verification, else from `verify` (kept only
    /// when it succeeds).
    pub fn get_or_verify(
        &self,
        token: &str,
        verify: impl FnOnce() -> Result<SessionClaims, SessionError>,
    ) -> Result<Arc<SessionClaims>, SessionError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let known = self.claims.lock().ok().and_then(|m| m.get(&key).cloned());
        if let Some(claims) = known {
            return Ok(claims);
        }
        let claims = Arc::new(verify()?);
        if let Ok(mut m) = self.claims.lock() {
            if m.len() >= MAX_ENTRIES {
                m.clear();
            }
            m.insert(key, claims.clone());
        }
        Ok(claims)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.claims.lock().map_or(0, |m| m.len())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn claims(sub: &str) -> SessionClaims {
        SessionClaims {
            iss: "https://gw.example".into(),
            aud: "gatehouse".into(),
            sub: sub.into(),
            email: None,
            name: None,
            groups: vec![],
            iat: 0,
            nbf: None,
            exp: 10,
            jti: format!("jti-{sub}"),
            billing_group_tag: None,
        }
    }

    #[test]
    fn a_verified_token_is_verified_once_and_a_refused_one_every_time() {
        let cache = Verified::default();
        let mut calls = 0;
        for _ in 0..3 {
            let c = cache
                .get_or_verify("token-a", || {
                    calls += 1;
                    Ok(claims("alice"))
                })
                .unwrap();
            assert_eq!(c.sub, "alice");
        }
        assert_eq!(calls, 1);
        // Another token is verified on its own, even for the same person.
        let c = cache
            .get_or_verify("token-b", || Ok(claims("bob")))
            .unwrap();
        assert_eq!(c.sub, "bob");
        let mut refused = 0;
        for _ in 0..3 {
            let r = cache.get_or_verify("forged", || {
                refused += 1;
                Err(SessionError::BadSignature)
            });
            assert_eq!(r.unwrap_err(), SessionError::BadSignature);
        }
        assert_eq!((refused, cache.len()), (3, 2));
    }

    #[test]
    fn it_never_holds_more_than_its_bound() {
        let cache = Verified::default();
        for i in 0..MAX_ENTRIES + 10 {
            cache
                .get_or_verify(&format!("token-{i}"), || Ok(claims("x")))
                .unwrap();
            assert!(cache.len() <= MAX_ENTRIES);
        }
        assert_eq!(cache.len(), 10);
    }
}
