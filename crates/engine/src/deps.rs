//! The outside world, passed in: clock, environment, credential store and event sink.
//!
//! The tray and `gatehouse serve` differ only in the [`Deps`] they hand to [`crate::start`];
//! tests pass fakes so that they run in-process and in parallel without touching process
//! state.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::events::{Event, EventSink, StderrEventSink};
use crate::secret::Secret;

/// Wall-clock time. Spend periods, expiries and usage rows read the time through this.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// Read-only view of environment variables and files, used by config expansion.
pub trait Environment: Send + Sync {
    fn var(&self, name: &str) -> Option<String>;
    fn read_file(&self, path: &Path) -> std::io::Result<String>;
}

/// The process environment and file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessEnvironment;

impl Environment for ProcessEnvironment {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
    fn read_file(&self, path: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }
}

/// A fixed map of variables and files, for tests.
#[derive(Debug, Default, Clone)]
pub struct MapEnvironment {
    pub vars: HashMap<String, String>,
    pub files: HashMap<String, String>,
}

impl MapEnvironment {
    pub fn with_var(mut self, name: &str, value: &str) -> Self {
        self.vars.insert(name.to_owned(), value.to_owned());
        self
    }
    pub fn with_file(mut self, path: &str, contents: &str) -> Self {
        self.files.insert(path.to_owned(), contents.to_owned());
        self
    }
}

impl Environment for MapEnvironment {
    fn var(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }
    fn read_file(&self, path: &Path) -> std::io::Result<String> {
        path.to_str()
            .and_then(|p| self.files.get(p).cloned())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }
}

/// Why a credential store could not answer.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("no credential store is available here ({0})")]
    Unavailable(String),
    #[error("credential store error: {0}")]
    Backend(String),
}

/// Where secrets live: the OS keychain on the desktop, nothing on a headless server.
pub trait CredentialStore: Send + Sync {
    fn get(&self, service: &str, account: &str) -> Result<Option<Secret>, CredentialError>;
    fn set(&self, service: &str, account: &str, secret: &Secret) -> Result<(), CredentialError>;
    fn delete(&self, service: &str, account: &str) -> Result<(), CredentialError>;
}

/// A bearer token that changes over time (the desktop's session with a central Gatehouse,
/// refreshed before it expires). `None` while nobody is signed in.
pub trait TokenSource: Send + Sync {
    fn current(&self) -> Option<Secret>;
}

/// A keychain in memory (tests and the benchmark, which start the desktop app in-process):
/// nothing leaves the process.
#[derive(Debug, Default)]
pub struct MemoryCredentials(std::sync::Mutex<Entries>);

/// `(service, account)` → value.
type Entries = HashMap<(String, String), String>;

impl MemoryCredentials {
    fn map(&self) -> Result<std::sync::MutexGuard<'_, Entries>, CredentialError> {
        self.0
            .lock()
            .map_err(|_| CredentialError::Backend("the in-memory keychain was poisoned".into()))
    }

    /// Every stored value (tests look for secrets that leaked elsewhere).
    pub fn values(&self) -> Vec<String> {
        self.map()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }
}

impl CredentialStore for MemoryCredentials {
    fn get(&self, service: &str, account: &str) -> Result<Option<Secret>, CredentialError> {
        Ok(self
            .map()?
            .get(&(service.into(), account.into()))
            .map(|v| Secret::new(v.clone())))
    }
    fn set(&self, service: &str, account: &str, value: &Secret) -> Result<(), CredentialError> {
        self.map()?
            .insert((service.into(), account.into()), value.expose().into());
        Ok(())
    }
    fn delete(&self, service: &str, account: &str) -> Result<(), CredentialError> {
        self.map()?.remove(&(service.into(), account.into()));
        Ok(())
    }
}

/// The headless server has no keychain: `${keyring:...}` references fail with a clear error.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCredentialStore;

impl CredentialStore for NoCredentialStore {
    fn get(&self, _: &str, _: &str) -> Result<Option<Secret>, CredentialError> {
        Err(CredentialError::Unavailable(
            "keyring references need the desktop app".into(),
        ))
    }
    fn set(&self, _: &str, _: &str, _: &Secret) -> Result<(), CredentialError> {
        Err(CredentialError::Unavailable(
            "keyring references need the desktop app".into(),
        ))
    }
    fn delete(&self, _: &str, _: &str) -> Result<(), CredentialError> {
        Err(CredentialError::Unavailable(
            "keyring references need the desktop app".into(),
        ))
    }
}

/// Everything the engine takes from outside.
#[derive(Clone)]
pub struct Deps {
    pub clock: Arc<dyn Clock>,
    pub env: Arc<dyn Environment>,
    pub credentials: Arc<dyn CredentialStore>,
    pub events: Arc<dyn EventSink>,
}

impl Deps {
    /// Real clock, process environment, no keychain, events on stderr: `gatehouse serve`.
    pub fn headless() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            env: Arc::new(ProcessEnvironment),
            credentials: Arc::new(NoCredentialStore),
            events: Arc::new(StderrEventSink),
        }
    }

    pub fn emit(&self, event: Event) {
        self.events.emit(&event);
    }
}
