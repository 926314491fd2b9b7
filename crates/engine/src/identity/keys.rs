//! Key material derived from `session.jwt_secret` (a string or a list: the first signs and
//! seals, all verify and open, so a secret can be rotated in).
//!
//! - Session tokens: HS256 JWS over the secret's raw bytes; `kid` is the hex of the first 8
//!   bytes of SHA-256(secret).
//! - Sealed payloads (OAuth state, device grants, refresh tokens): AES-256-GCM under
//!   SHA-256(secret), as `base64url(kid || nonce || ciphertext)`. The payload's kind is the
//!   associated data, so a sealed OAuth state can never be opened as a device grant.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use crate::secret::Secret;

/// What a sealed payload is; part of the AEAD associated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealKind {
    OAuthState,
    DeviceGrant,
    RefreshToken,
    /// The team console's OAuth state between `/console/login` and the callback.
    ConsoleState,
    /// A team console session, as stored.
    ConsoleSession,
}

impl SealKind {
    fn aad(self) -> &'static [u8] {
        match self {
            SealKind::OAuthState => b"gatehouse:oauth_state:v1",
            SealKind::DeviceGrant => b"gatehouse:device_grant:v1",
            SealKind::RefreshToken => b"gatehouse:refresh_token:v1",
            SealKind::ConsoleState => b"gatehouse:console_state:v1",
            SealKind::ConsoleSession => b"gatehouse:console_session:v1",
        }
    }
}

struct KeyEntry {
    kid: String,
    kid_bytes: [u8; 8],
    signing: jsonwebtoken::EncodingKey,
    verifying: jsonwebtoken::DecodingKey,
    sealing: Aes256Gcm,
}

/// The ordered key ring: entry 0 is current.
pub struct KeyRing {
    entries: Vec<KeyEntry>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRing")
            .field(
                "kids",
                &self.entries.iter().map(|e| &e.kid).collect::<Vec<_>>(),
            )
            .finish()
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error("sealed value is malformed")]
    Malformed,
    #[error("sealed value was made with a key that is no longer configured")]
    UnknownKey,
    #[error("sealed value does not open (tampered, or another kind)")]
    Rejected,
}

impl KeyRing {
    pub fn new(secrets: &[Secret]) -> Self {
        let entries = secrets
            .iter()
            .map(|s| {
                let digest: [u8; 32] = Sha256::digest(s.expose().as_bytes()).into();
                let mut kid_bytes = [0u8; 8];
                kid_bytes.copy_from_slice(&digest[..8]);
                KeyEntry {
                    kid: hex::encode(kid_bytes),
                    kid_bytes,
                    signing: jsonwebtoken::EncodingKey::from_secret(s.expose().as_bytes()),
                    verifying: jsonwebtoken::DecodingKey::from_secret(s.expose().as_bytes()),
                    sealing: Aes256Gcm::new(&digest.into()),
                }
            })
            .collect();
        Self { entries }
    }

    /// Current signing key and its kid.
    pub fn signing(&self) -> Option<(&str, &jsonwebtoken::EncodingKey)> {
        self.entries.first().map(|e| (e.kid.as_str(), &e.signing))
    }

    /// The verifying key for a kid, if that secret is still configured.
    pub fn verifying(&self, kid: &str) -> Option<&jsonwebtoken::DecodingKey> {
        self.entries
            .iter()
            .find(|e| e.kid == kid)
            .map(|e| &e.verifying)
    }

    pub fn seal<T: Serialize>(&self, kind: SealKind, value: &T) -> Option<String> {
        let entry = self.entries.first()?;
        let plain = serde_json::to_vec(value).ok()?;
        let mut nonce = [0u8; 12];
        rand::rng().fill_bytes(&mut nonce);
        let ct = entry
            .sealing
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &plain,
                    aad: kind.aad(),
                },
            )
            .ok()?;
        let mut out = Vec::with_capacity(8 + 12 + ct.len());
        out.extend_from_slice(&entry.kid_bytes);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        Some(URL_SAFE_NO_PAD.encode(out))
    }

    pub fn open<T: DeserializeOwned>(&self, kind: SealKind, sealed: &str) -> Result<T, SealError> {
        let raw = URL_SAFE_NO_PAD
            .decode(sealed.as_bytes())
            .map_err(|_| SealError::Malformed)?;
        if raw.len() < 8 + 12 + 16 {
            return Err(SealError::Malformed);
        }
        let (kid, rest) = raw.split_at(8);
        let (nonce, ct) = rest.split_at(12);
        let entry = self
            .entries
            .iter()
            .find(|e| e.kid_bytes == kid)
            .ok_or(SealError::UnknownKey)?;
        let plain = entry
            .sealing
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ct,
                    aad: kind.aad(),
                },
            )
            .map_err(|_| SealError::Rejected)?;
        serde_json::from_slice(&plain).map_err(|_| SealError::Rejected)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ring(secrets: &[&str]) -> KeyRing {
        KeyRing::new(&secrets.iter().map(|s| Secret::new(*s)).collect::<Vec<_>>())
    }

    #[test]
    fn seal_round_trip_rotation_and_kind_binding() {
        let old = ring(&["old-secret-old-secret-old-secret-1"]);
        let rotated = ring(&[
            "new-secret-new-secret-new-secret-2",
            "old-secret-old-secret-old-secret-1",
        ]);
        let sealed = old.seal(SealKind::DeviceGrant, &"payload").unwrap();
        assert_eq!(
            rotated
                .open::<String>(SealKind::DeviceGrant, &sealed)
                .unwrap(),
            "payload"
        );
        assert_eq!(
            rotated.open::<String>(SealKind::OAuthState, &sealed),
            Err(SealError::Rejected),
            "a device grant must not open as an OAuth state"
        );
        let removed = ring(&["new-secret-new-secret-new-secret-2"]);
        assert_eq!(
            removed.open::<String>(SealKind::DeviceGrant, &sealed),
            Err(SealError::UnknownKey)
        );
        let mut tampered = sealed.into_bytes();
        let last = tampered.len() - 3;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        assert!(
            old.open::<String>(
                SealKind::DeviceGrant,
                std::str::from_utf8(&tampered).unwrap()
            )
            .is_err()
        );
        assert_eq!(
            old.open::<String>(SealKind::DeviceGrant, "!!"),
            Err(SealError::Malformed)
        );
    }
}
