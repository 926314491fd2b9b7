//! The signed-in session with the central Gatehouse, kept in the OS keychain and in memory.
//!
//! [`SessionKeeper`] is the engine's [`TokenSource`] in connected mode: every inference
//! request reads the current access token from memory. The keychain holds the session as
//! one entry (service `gatehouse`, account `session`), so nothing about it reaches the
//! SQLite file or the logs. `needs_refresh` tells the app's sync loop to refresh five
//! minutes before expiry.

use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};
use gatehouse_engine::deps::{Clock, CredentialError, CredentialStore, TokenSource};
use gatehouse_engine::secret::Secret;
use serde::{Deserialize, Serialize};

use crate::central::{Holder, Tokens};

pub const SERVICE: &str = "gatehouse";
pub const ACCOUNT: &str = "session";
/// Refresh this long before the access token expires.
pub const REFRESH_AHEAD: chrono::Duration = chrono::Duration::minutes(5);

/// A session in memory.
#[derive(Debug, Clone)]
pub struct Session {
    pub central: String,
    pub tokens: Tokens,
    pub holder: Holder,
}

/// The keychain form (serialised into one secret).
#[derive(Serialize, Deserialize)]
struct Stored {
    central: String,
    access_token: String,
    refresh_token: Option<String>,
    expires_at: DateTime<Utc>,
    email: Option<String>,
}

pub struct SessionKeeper {
    creds: Arc<dyn CredentialStore>,
    clock: Arc<dyn Clock>,
    current: RwLock<Option<Session>>,
}

impl SessionKeeper {
    /// Loads the stored session for `central` (a session for another server is ignored).
    pub fn load(
        creds: Arc<dyn CredentialStore>,
        clock: Arc<dyn Clock>,
        central: Option<&str>,
    ) -> Self {
        let keeper = Self {
            creds,
            clock,
            current: RwLock::new(None),
        };
        if let Some(central) = central
            && let Ok(Some(secret)) = keeper.creds.get(SERVICE, ACCOUNT)
            && let Ok(stored) = serde_json::from_str::<Stored>(secret.expose())
            && stored.central == central
        {
            let tokens = Tokens {
                access_token: Secret::new(stored.access_token),
                refresh_token: stored.refresh_token.map(Secret::new),
                expires_at: stored.expires_at,
                email: stored.email,
            };
            keeper.set_memory(Some(Session {
                central: stored.central,
                holder: holder(&tokens),
                tokens,
            }));
        }
        keeper
    }

    fn set_memory(&self, s: Option<Session>) {
        if let Ok(mut slot) = self.current.write() {
            *slot = s;
        }
    }

    pub fn current(&self) -> Option<Session> {
        self.current.read().ok().and_then(|s| s.clone())
    }

    /// Stores a new session in the keychain first; memory follows only if that worked.
    pub fn store(&self, central: &str, tokens: Tokens) -> Result<Session, CredentialError> {
        let stored = Stored {
            central: central.to_owned(),
            access_token: tokens.access_token.expose().to_owned(),
            refresh_token: tokens.refresh_token.as_ref().map(|t| t.expose().to_owned()),
            expires_at: tokens.expires_at,
            email: tokens.email.clone(),
        };
        let text = serde_json::to_string(&stored)
            .map_err(|e| CredentialError::Backend(format!("cannot encode the session: {e}")))?;
        self.creds.set(SERVICE, ACCOUNT, &Secret::new(text))?;
        let session = Session {
            central: central.to_owned(),
            holder: holder(&tokens),
            tokens,
        };
        self.set_memory(Some(session.clone()));
        Ok(session)
    }

    /// Forgets the session here and in the keychain.
    pub fn clear(&self) -> Result<Option<Session>, CredentialError> {
        let old = self.current();
        self.set_memory(None);
        self.creds.delete(SERVICE, ACCOUNT)?;
        Ok(old)
    }

    pub fn needs_refresh(&self) -> bool {
        let now = self.clock.now();
        self.current()
            .is_some_and(|s| s.tokens.expires_at - now <= REFRESH_AHEAD)
    }
}

/// Who the token names; the token endpoint's `email` when the claims carry none.
fn holder(tokens: &Tokens) -> Holder {
    let mut h = Holder::from_token(&tokens.access_token);
    if h.email.is_none() {
        h.email = tokens.email.clone();
    }
    h
}

impl TokenSource for SessionKeeper {
    fn current(&self) -> Option<Secret> {
        let now = self.clock.now();
        self.current
            .read()
            .ok()?
            .as_ref()
            .filter(|s| s.tokens.expires_at > now)
            .map(|s| s.tokens.access_token.clone())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Memory(Mutex<HashMap<(String, String), String>>);

    impl CredentialStore for Memory {
        fn get(&self, s: &str, a: &str) -> Result<Option<Secret>, CredentialError> {
            Ok(self
                .0
                .lock()
                .map_err(|_| CredentialError::Backend("poisoned".into()))?
                .get(&(s.into(), a.into()))
                .map(|v| Secret::new(v.clone())))
        }
        fn set(&self, s: &str, a: &str, v: &Secret) -> Result<(), CredentialError> {
            self.0
                .lock()
                .map_err(|_| CredentialError::Backend("poisoned".into()))?
                .insert((s.into(), a.into()), v.expose().into());
            Ok(())
        }
        fn delete(&self, s: &str, a: &str) -> Result<(), CredentialError> {
            self.0
                .lock()
                .map_err(|_| CredentialError::Backend("poisoned".into()))?
                .remove(&(s.into(), a.into()));
            Ok(())
        }
    }

    fn tokens(expires_in_min: i64) -> Tokens {
        Tokens {
            access_token: Secret::new("a.b.c"),
            refresh_token: Some(Secret::new("rt")),
            expires_at: Utc::now() + chrono::Duration::minutes(expires_in_min),
            email: Some("dev@example.com".into()),
        }
    }

    #[test]
    fn survives_a_restart_for_the_same_server_only() {
        let creds: Arc<dyn CredentialStore> = Arc::new(Memory::default());
        let clock: Arc<dyn Clock> = Arc::new(gatehouse_engine::deps::SystemClock);
        let k = SessionKeeper::load(creds.clone(), clock.clone(), Some("https://gw"));
        assert!(TokenSource::current(&k).is_none());
        k.store("https://gw", tokens(60)).ok();
        assert_eq!(
            TokenSource::current(&k).map(|t| t.expose().to_owned()),
            Some("a.b.c".to_owned())
        );
        let again = SessionKeeper::load(creds.clone(), clock.clone(), Some("https://gw"));
        assert_eq!(
            again.current().and_then(|s| s.holder.email),
            Some("dev@example.com".to_owned())
        );
        let other = SessionKeeper::load(creds.clone(), clock.clone(), Some("https://other"));
        assert!(other.current().is_none());
        again.clear().ok();
        assert!(
            SessionKeeper::load(creds, clock, Some("https://gw"))
                .current()
                .is_none()
        );
    }

    #[test]
    fn refresh_is_due_five_minutes_ahead_and_expired_tokens_are_not_sent() {
        let creds: Arc<dyn CredentialStore> = Arc::new(Memory::default());
        let k = SessionKeeper::load(creds, Arc::new(gatehouse_engine::deps::SystemClock), None);
        k.store("https://gw", tokens(60)).ok();
        assert!(!k.needs_refresh());
        k.store("https://gw", tokens(4)).ok();
        assert!(k.needs_refresh());
        k.store("https://gw", tokens(-1)).ok();
        assert!(TokenSource::current(&k).is_none());
    }
}
