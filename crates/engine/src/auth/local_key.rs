//! The per-install local client key (the embedded default and the desktop app): one owner
//! for issuing, rotating and adopting it. Only its SHA-256 is kept in the store; the key
//! itself is shown once (`gatehouse serve`, `reset-local-key`) or kept in the keychain
//! (the tray, `gatehouse token --local`).

use base64::Engine;
use chrono::{DateTime, Utc};
use rand::RngCore;

use super::ClientKeys;
use crate::deps::{CredentialError, CredentialStore};
use crate::secret::Secret;
use crate::store::{Store, StoreError};

/// The local key's id in usage rows and events.
pub const LOCAL_KEY_ID: &str = "local";

/// A new local key: `gth_` and 256 random bits, base64url.
pub fn generate() -> Secret {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    Secret::new(format!(
        "gth_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

/// The hash the gateway accepts, issuing a key when the store has none: the new key comes
/// back once, to be shown to the user.
pub async fn ensure(
    store: &dyn Store,
    now: DateTime<Utc>,
) -> Result<([u8; 32], Option<Secret>), StoreError> {
    if let Some((hash, _)) = store.local_key_hash().await? {
        return Ok((hash, None));
    }
    let key = rotate(store, now).await?;
    Ok((ClientKeys::hash(key.expose()), Some(key)))
}

/// A new key whose hash replaces the stored one (a running gateway keeps the old hash
/// until it restarts).
pub async fn rotate(store: &dyn Store, now: DateTime<Utc>) -> Result<Secret, StoreError> {
    let key = generate();
    store
        .set_local_key_hash(ClientKeys::hash(key.expose()), now)
        .await?;
    Ok(key)
}

/// What [`adopt`] changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adopted {
    /// The store already held this key's hash.
    Unchanged,
    /// The store had no local key.
    Set,
    /// Another key was replaced (it stops working).
    Replaced,
}

/// Makes `token` (kept in the keychain) the local key.
pub async fn adopt(
    store: &dyn Store,
    token: &Secret,
    now: DateTime<Utc>,
) -> Result<Adopted, StoreError> {
    let hash = ClientKeys::hash(token.expose());
    let outcome = match store.local_key_hash().await? {
        Some((stored, _)) if stored == hash => return Ok(Adopted::Unchanged),
        Some(_) => Adopted::Replaced,
        None => Adopted::Set,
    };
    store.set_local_key_hash(hash, now).await?;
    Ok(outcome)
}

/// The local token kept in a credential store under `service`/`account`, generated and
/// stored there when missing.
pub fn keep_in(
    creds: &dyn CredentialStore,
    service: &str,
    account: &str,
) -> Result<Secret, CredentialError> {
    if let Some(t) = creds.get(service, account)? {
        return Ok(t);
    }
    let t = generate();
    creds.set(service, account, &t)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::store::SqliteStore;

    #[tokio::test]
    async fn ensure_issues_once_then_adopt_and_rotate_replace() {
        let dir = tempfile::tempdir().unwrap();
        let now = Utc::now();
        let store = SqliteStore::open(&dir.path().join("t.db"), now).unwrap();
        let (hash, issued) = ensure(&store, now).await.unwrap();
        let key = issued.unwrap();
        assert!(key.expose().starts_with("gth_"));
        assert_eq!(hash, ClientKeys::hash(key.expose()));
        let (again, none) = ensure(&store, now).await.unwrap();
        assert_eq!((again, none.is_none()), (hash, true), "issued only once");
        assert_eq!(adopt(&store, &key, now).await.unwrap(), Adopted::Unchanged);
        let other = generate();
        assert_eq!(adopt(&store, &other, now).await.unwrap(), Adopted::Replaced);
        let rotated = rotate(&store, now).await.unwrap();
        let stored = store.local_key_hash().await.unwrap().unwrap().0;
        assert_eq!(stored, ClientKeys::hash(rotated.expose()));
    }
}
