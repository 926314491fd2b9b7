//! Static client keys, kept only as SHA-256 hashes and compared in constant time.

use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::secret::Secret;

/// The id of the per-install local key (the embedded default and the desktop app).
pub const LOCAL_KEY_ID: &str = "local";

/// A new per-install local key: `gth_` and 256 random bits, base64url.
pub fn generate_local_key() -> Secret {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    Secret::new(format!(
        "gth_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

#[derive(Debug, Default, Clone)]
pub struct ClientKeys {
    entries: Vec<(String, [u8; 32])>,
}

impl ClientKeys {
    pub fn new(entries: impl IntoIterator<Item = (String, [u8; 32])>) -> Self {
        Self {
            entries: entries.into_iter().collect(),
        }
    }

    pub fn hash(key: &str) -> [u8; 32] {
        Sha256::digest(key.as_bytes()).into()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The id of the key matching `token`. Every entry is compared, so the time taken does
    /// not depend on which entry (if any) matched.
    pub fn find(&self, token: &str) -> Option<String> {
        let presented = Self::hash(token);
        let mut found = None;
        for (id, hash) in &self.entries {
            if bool::from(hash.ct_eq(&presented)) && found.is_none() {
                found = Some(id.clone());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_by_hash_only() {
        let keys = ClientKeys::new([
            ("ci".to_owned(), ClientKeys::hash("k1")),
            ("local".to_owned(), ClientKeys::hash("k2")),
        ]);
        assert_eq!(keys.find("k2").as_deref(), Some("local"));
        assert_eq!(keys.find("k3"), None);
        assert_eq!(keys.find(""), None);
    }
}
