//! The OS keychain behind the engine's [`CredentialStore`]: Secret Service on Linux and
//! the BSDs, Keychain on macOS, Credential Manager on Windows.
//!
//! Built on keyring v4's split crates: `keyring-core` (entries, errors, the mock store used
//! by the tests) and the one native store per platform that the `keyring` 4.2 crate itself
//! picks. The store object is held by [`KeyringStore`] rather than installed as
//! keyring-core's process-wide default, so tests pass a mock store and a keychain that
//! comes up later (a desktop session unlocking) is found by simply opening a new store.
//!
//! Items are addressed by (service, account) as the engine's `${keyring:service/account}`
//! references are. Gatehouse's own secrets live under the service [`SERVICE`] with the
//! accounts named here (the local client token, provider keys, session tokens).
//!
//! There is no plaintext fallback: when [`KeyringStore::native`] or [`KeyringStore::probe`]
//! fail, callers refuse to store secrets and show the [`KeychainError`]. No error built
//! here contains a secret; values read from the store are never formatted.
//!
//! Calls block (D-Bus round trips on Linux); async callers run them on a blocking thread.

use std::sync::Arc;

use gatehouse_engine::deps::{CredentialError, CredentialStore};
use gatehouse_engine::secret::Secret;
use keyring_core::{Entry, Error as KeyringError};

/// The keychain service under which Gatehouse keeps its own secrets.
pub const SERVICE: &str = "gatehouse";

/// The account of the local client token (the one Claude Code presents on loopback).
pub const LOCAL_TOKEN_ACCOUNT: &str = "local-token";

/// The account used by [`KeyringStore::probe`] for its write-read-delete round trip.
const PROBE_ACCOUNT: &str = "gatehouse-keychain-probe";

/// Why the keychain cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeychainError {
    /// No keychain could be reached, or it refused a write: secrets must not be stored.
    #[error("no keychain reachable: {0}")]
    Unreachable(String),
}

/// The OS keychain (or, in tests, any keyring-core store).
#[derive(Clone)]
pub struct KeyringStore {
    store: Arc<keyring_core::CredentialStore>,
}

impl std::fmt::Debug for KeyringStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyringStore")
            .field("vendor", &self.store.vendor())
            .finish()
    }
}

impl KeyringStore {
    /// Opens this platform's native keychain. Fails when none is reachable (no D-Bus
    /// session, no Secret Service provider, unsupported platform).
    pub fn native() -> Result<Self, KeychainError> {
        native_store()
            .map(|store| Self { store })
            .map_err(|e| KeychainError::Unreachable(describe(&e)))
    }

    /// Wraps a given keyring-core store (the mock store in tests).
    pub fn with_store(store: Arc<keyring_core::CredentialStore>) -> Self {
        Self { store }
    }

    /// Which store this is (for logs and the settings page).
    pub fn vendor(&self) -> String {
        self.store.vendor()
    }

    /// Proves the keychain is reachable and writable: writes a random value under
    /// [`SERVICE`], reads it back, deletes it. A locked keychain that refuses the write, or
    /// one that reads back something else, fails.
    pub fn probe(&self) -> Result<(), KeychainError> {
        let unreachable = |e: CredentialError| KeychainError::Unreachable(reason(&e));
        let value = Secret::new(format!("probe-{:016x}", rand::random::<u64>()));
        self.set(SERVICE, PROBE_ACCOUNT, &value)
            .map_err(unreachable)?;
        let read = self.get(SERVICE, PROBE_ACCOUNT).map_err(unreachable);
        let removed = self.remove(SERVICE, PROBE_ACCOUNT).map_err(unreachable);
        match read? {
            Some(v) if v == value => {}
            Some(_) => {
                return Err(KeychainError::Unreachable(
                    "the keychain returned a different value than was written".into(),
                ));
            }
            None => {
                return Err(KeychainError::Unreachable(
                    "the keychain did not keep a value that was written".into(),
                ));
            }
        }
        removed.map(|_| ())
    }

    /// Deletes an item; `Ok(false)` when there was none.
    pub fn remove(&self, service: &str, account: &str) -> Result<bool, CredentialError> {
        match self.entry(service, account)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(KeyringError::NoEntry) => Ok(false),
            Err(e) => Err(map_error(e)),
        }
    }

    fn entry(&self, service: &str, account: &str) -> Result<Entry, CredentialError> {
        if service.is_empty() || account.is_empty() {
            return Err(CredentialError::Backend(
                "keychain service and account must not be empty".into(),
            ));
        }
        self.store.build(service, account, None).map_err(map_error)
    }
}

impl CredentialStore for KeyringStore {
    fn get(&self, service: &str, account: &str) -> Result<Option<Secret>, CredentialError> {
        match self.entry(service, account)?.get_password() {
            Ok(v) => Ok(Some(Secret::new(v))),
            Err(KeyringError::NoEntry) => Ok(None),
            Err(e) => Err(map_error(e)),
        }
    }

    fn set(&self, service: &str, account: &str, secret: &Secret) -> Result<(), CredentialError> {
        if secret.is_empty() {
            return Err(CredentialError::Backend(
                "refusing to store an empty secret".into(),
            ));
        }
        self.entry(service, account)?
            .set_password(secret.expose())
            .map_err(map_error)
    }

    /// Idempotent: deleting a missing item succeeds.
    fn delete(&self, service: &str, account: &str) -> Result<(), CredentialError> {
        self.remove(service, account).map(|_| ())
    }
}

#[cfg(all(
    unix,
    not(any(target_os = "macos", target_os = "ios", target_os = "android"))
))]
fn native_store() -> keyring_core::Result<Arc<keyring_core::CredentialStore>> {
    Ok(zbus_secret_service_keyring_store::Store::new()?)
}

#[cfg(target_os = "macos")]
fn native_store() -> keyring_core::Result<Arc<keyring_core::CredentialStore>> {
    Ok(apple_native_keyring_store::keychain::Store::new()?)
}

#[cfg(target_os = "windows")]
fn native_store() -> keyring_core::Result<Arc<keyring_core::CredentialStore>> {
    Ok(windows_native_keyring_store::Store::new()?)
}

#[cfg(not(any(
    all(
        unix,
        not(any(target_os = "macos", target_os = "ios", target_os = "android"))
    ),
    target_os = "macos",
    target_os = "windows"
)))]
fn native_store() -> keyring_core::Result<Arc<keyring_core::CredentialStore>> {
    Err(KeyringError::NotSupportedByStore(
        "this platform has no supported keychain".into(),
    ))
}

/// Maps a keyring error to the engine's error, keeping out any stored bytes (the
/// `BadEncoding` and `BadDataFormat` variants carry them).
fn map_error(e: KeyringError) -> CredentialError {
    match e {
        KeyringError::NoStorageAccess(_) | KeyringError::NoDefaultStore => {
            CredentialError::Unavailable(describe(&e))
        }
        _ => CredentialError::Backend(describe(&e)),
    }
}

/// A description of a keyring error that never includes a stored value.
fn describe(e: &KeyringError) -> String {
    match e {
        KeyringError::PlatformFailure(inner) => format!("keychain failure: {inner}"),
        KeyringError::NoStorageAccess(inner) => {
            format!("the keychain refused access (is it locked?): {inner}")
        }
        KeyringError::NoEntry => "no such keychain item".into(),
        KeyringError::BadEncoding(_) => "the stored value is not UTF-8 text".into(),
        KeyringError::BadDataFormat(..) => "the stored value is malformed".into(),
        KeyringError::BadStoreFormat(why) => format!("the keychain is malformed: {why}"),
        KeyringError::TooLong(what, max) => {
            format!("{what} is longer than the keychain allows ({max})")
        }
        KeyringError::Invalid(what, why) => format!("invalid {what}: {why}"),
        KeyringError::Ambiguous(items) => {
            format!(
                "{} keychain items match; remove the duplicates",
                items.len()
            )
        }
        KeyringError::NoDefaultStore => "no keychain store is configured".into(),
        KeyringError::NotSupportedByStore(why) => format!("not supported by the keychain: {why}"),
        other => format!("keychain error: {other}"),
    }
}

fn reason(e: &CredentialError) -> String {
    match e {
        CredentialError::Unavailable(r) | CredentialError::Backend(r) => r.clone(),
    }
}

/// The keychain, or a store that refuses every write with the reason none is reachable.
pub fn credentials(
    keychain: &Result<Arc<dyn CredentialStore>, String>,
) -> Arc<dyn CredentialStore> {
    match keychain {
        Ok(k) => k.clone(),
        Err(reason) => Arc::new(NoKeychain(reason.clone())),
    }
}

struct NoKeychain(String);

impl CredentialStore for NoKeychain {
    fn get(&self, _: &str, _: &str) -> Result<Option<Secret>, CredentialError> {
        Err(CredentialError::Unavailable(self.0.clone()))
    }
    fn set(&self, _: &str, _: &str, _: &Secret) -> Result<(), CredentialError> {
        Err(CredentialError::Unavailable(format!(
            "no keychain reachable ({}); Gatehouse does not store secrets elsewhere",
            self.0
        )))
    }
    fn delete(&self, _: &str, _: &str) -> Result<(), CredentialError> {
        Err(CredentialError::Unavailable(self.0.clone()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use keyring_core::mock;

    fn mock_store() -> (KeyringStore, Arc<mock::Store>) {
        let m = mock::Store::new().unwrap();
        (KeyringStore::with_store(m.clone()), m)
    }

    /// Makes the next call on (service, account) fail with `err`.
    fn fail_next(m: &Arc<mock::Store>, service: &str, account: &str, err: KeyringError) {
        let entry =
            keyring_core::api::CredentialStoreApi::build(m.as_ref(), service, account, None)
                .unwrap();
        let cred: &mock::Cred = entry.as_any().downcast_ref().unwrap();
        cred.set_error(err);
    }

    #[test]
    fn set_get_delete_round_trip() {
        let (ks, _) = mock_store();
        assert!(ks.get(SERVICE, "anthropic").unwrap().is_none());
        ks.set(SERVICE, "anthropic", &Secret::new("sk-ant-api03-xyz"))
            .unwrap();
        assert_eq!(
            ks.get(SERVICE, "anthropic").unwrap().unwrap().expose(),
            "sk-ant-api03-xyz"
        );
        // Another account and another service are other items.
        assert!(ks.get(SERVICE, "openai").unwrap().is_none());
        assert!(ks.get("other", "anthropic").unwrap().is_none());
        ks.set(SERVICE, "anthropic", &Secret::new("sk-ant-api03-new"))
            .unwrap();
        assert_eq!(
            ks.get(SERVICE, "anthropic").unwrap().unwrap().expose(),
            "sk-ant-api03-new"
        );
        assert!(ks.remove(SERVICE, "anthropic").unwrap());
        assert!(ks.get(SERVICE, "anthropic").unwrap().is_none());
        assert!(!ks.remove(SERVICE, "anthropic").unwrap());
        ks.delete(SERVICE, "anthropic").unwrap();
    }

    #[test]
    fn empty_names_and_values_are_refused() {
        let (ks, _) = mock_store();
        assert!(ks.get("", "a").is_err());
        assert!(ks.get(SERVICE, "").is_err());
        let err = ks.set(SERVICE, "a", &Secret::new("")).unwrap_err();
        assert!(err.to_string().contains("empty secret"), "{err}");
    }

    #[test]
    fn probe_writes_reads_and_cleans_up() {
        let (ks, _) = mock_store();
        ks.probe().unwrap();
        assert!(ks.get(SERVICE, PROBE_ACCOUNT).unwrap().is_none());
    }

    #[test]
    fn probe_fails_clearly_when_the_keychain_refuses() {
        let (ks, m) = mock_store();
        fail_next(
            &m,
            SERVICE,
            PROBE_ACCOUNT,
            KeyringError::NoStorageAccess("collection is locked".into()),
        );
        let err = ks.probe().unwrap_err().to_string();
        assert!(err.starts_with("no keychain reachable: "), "{err}");
        assert!(err.contains("collection is locked"), "{err}");
    }

    #[test]
    fn locked_keychain_is_unavailable_and_failures_are_backend_errors() {
        let (ks, m) = mock_store();
        fail_next(
            &m,
            SERVICE,
            "a",
            KeyringError::NoStorageAccess("locked".into()),
        );
        assert!(matches!(
            ks.get(SERVICE, "a"),
            Err(CredentialError::Unavailable(_))
        ));
        fail_next(
            &m,
            SERVICE,
            "a",
            KeyringError::PlatformFailure("dbus gone".into()),
        );
        let err = ks.set(SERVICE, "a", &Secret::new("v")).unwrap_err();
        assert!(matches!(err, CredentialError::Backend(ref r) if r.contains("dbus gone")));
        // The failed set stored nothing.
        assert!(ks.get(SERVICE, "a").unwrap().is_none());
    }

    #[test]
    fn errors_never_carry_the_stored_bytes() {
        let (ks, m) = mock_store();
        let secret = "sk-ant-api03-do-not-print";
        ks.set(SERVICE, "a", &Secret::new(secret)).unwrap();
        fail_next(
            &m,
            SERVICE,
            "a",
            KeyringError::BadEncoding(secret.as_bytes().to_vec()),
        );
        let err = ks.get(SERVICE, "a").unwrap_err();
        fail_next(
            &m,
            SERVICE,
            "a",
            KeyringError::BadDataFormat(secret.as_bytes().to_vec(), "bad".into()),
        );
        let err2 = ks.get(SERVICE, "a").unwrap_err();
        for text in [
            err.to_string(),
            format!("{err:?}"),
            err2.to_string(),
            format!("{err2:?}"),
        ] {
            assert!(!text.contains(secret), "{text}");
            assert!(!text.contains("do-not-print"), "{text}");
        }
        // Reading the secret itself prints only the redaction.
        let got = ks.get(SERVICE, "a").unwrap().unwrap();
        assert_eq!(format!("{got:?}"), "[redacted]");
    }

    #[test]
    fn keyring_references_in_config_resolve_through_it() {
        use gatehouse_engine::config::{Config, CredentialScheme, LoadContext};
        let (ks, _) = mock_store();
        ks.set(SERVICE, "anthropic", &Secret::new("sk-ant-from-keychain"))
            .unwrap();
        let yaml = "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, \
                    auth: {api_key: '${keyring:gatehouse/anthropic}'}}]\n";
        let ctx = LoadContext {
            env: &gatehouse_engine::deps::MapEnvironment::default(),
            credentials: &ks,
            default_data_dir: "/data".into(),
        };
        let config = Config::from_yaml(yaml, &ctx).unwrap();
        let credential = config.upstreams[0].credential.as_ref().unwrap();
        assert_eq!(credential.scheme, CredentialScheme::ApiKey);
        assert_eq!(
            credential.current().unwrap().expose(),
            "sk-ant-from-keychain"
        );
        // A missing item is a config error that names the reference, not a value.
        ks.remove(SERVICE, "anthropic").unwrap();
        let err = Config::from_yaml(yaml, &ctx).unwrap_err().to_string();
        assert!(err.contains("gatehouse/anthropic"), "{err}");
        assert!(format!("{ks:?}").contains("Mock store"));
    }
}
