//! The tray's own settings and the central data it caches, kept in the engine's SQLite
//! store (keyed entries without expiry under `desktop:`), never in a plaintext file.
//! Secrets are not settings: provider keys and the session live in the keychain.

use std::sync::Arc;

use chrono::Utc;
use gatehouse_engine::store::{Store, StoreError};
use serde::{Deserialize, Serialize};

pub const SETTINGS_KEY: &str = "desktop:settings";
pub const POLICY_KEY: &str = "desktop:cache:policy";
pub const SPEND_KEY: &str = "desktop:cache:spend";
pub const BOOTSTRAP_KEY: &str = "desktop:cache:desktop_bootstrap";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    #[default]
    Standalone,
    Connected,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    pub daily_cents: Option<u64>,
    pub weekly_cents: Option<u64>,
    pub monthly_cents: Option<u64>,
}

/// A provider the user added; its key is in the keychain under `provider:<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderEntry {
    pub name: String,
    pub kind: String,
    /// Bedrock or Vertex region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Vertex project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// Foundry resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Bedrock through this AWS profile instead of stored keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws_profile: Option<String>,
    /// An endpoint other than the provider's default (VPC endpoint, proxy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// `kind: preset`: which preset (`app::presets`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// `kind: preset`: Claude family (or `*`) -> the provider's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_map: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    pub mode: Mode,
    pub central_url: Option<String>,
    pub budgets: Budgets,
    pub start_at_login: bool,
    pub port: u16,
    pub providers: Vec<ProviderEntry>,
    /// The provider tried first (`None`: Anthropic, then the others as added).
    pub primary: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            mode: Mode::Standalone,
            central_url: None,
            budgets: Budgets::default(),
            start_at_login: false,
            port: gatehouse_engine::config::DEFAULT_LOCAL_PORT,
            providers: Vec::new(),
            primary: None,
        }
    }
}

/// The keychain account of a provider's key.
pub fn provider_account(name: &str) -> String {
    format!("provider:{name}")
}

/// Reads and writes JSON documents under fixed keys.
#[derive(Clone)]
pub struct StateStore {
    store: Arc<dyn Store>,
}

impl StateStore {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    pub async fn get<T: for<'de> Deserialize<'de>>(
        &self,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        // Entries under `desktop:` never expire, so the wall clock is fine here.
        match self.store.kv_get(key, Utc::now()).await? {
            None => Ok(None),
            // A document this version cannot read counts as absent (defaults apply).
            Some(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
        }
    }

    pub async fn put<T: Serialize>(&self, key: &str, value: &T) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(value).map_err(|e| StoreError::Database(e.to_string()))?;
        self.store.kv_put(key, bytes, None).await
    }
}
