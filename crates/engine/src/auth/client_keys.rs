//! Static client keys, kept only as SHA-256 hashes and compared in constant time.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

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

    /// The id of the key matching `token` (see [`find_hashed`]).
    pub fn find(&self, token: &str) -> Option<String> {
        find_hashed(self.entries.iter().map(|(id, h)| (id.as_str(), h)), token).map(str::to_owned)
    }
}

/// The one constant-time key lookup: the id of the `(id, SHA-256)` entry matching `token`.
/// Every entry is compared, so the time taken does not depend on which entry (if any)
/// matched. Client keys, admin keys and the dashboard's detail check all use it.
pub fn find_hashed<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a [u8; 32])>,
    token: &str,
) -> Option<&'a str> {
    let presented = ClientKeys::hash(token);
    let mut found = None;
    for (id, hash) in entries {
        if bool::from(hash.ct_eq(&presented)) && found.is_none() {
            found = Some(id);
        }
    }
    found
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
