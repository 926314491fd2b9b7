//! Building the embedded engine from the app's settings and (re)starting it.
//!
//! The engine listens on 127.0.0.1 only. Its config is the embedded default (SQLite in the
//! app data dir, the per-install local key) with the upstream chosen by the mode, and spend
//! enforcement on so personal budgets (standalone) bind the local key.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gatehouse_engine::auth::local_key;
use gatehouse_engine::config::{
    Config, CredentialRole, CredentialScheme, CredentialSource, SpendConfig, UpstreamConfig,
    UpstreamCredential, embedded_default,
};
use gatehouse_engine::deps::{Deps, TokenSource};
use gatehouse_engine::secret::Secret;

use super::{App, AppError};
use crate::keychain::{LOCAL_TOKEN_ACCOUNT, SERVICE, credentials};
use crate::settings::{Mode, provider_account};

pub fn db_path(data_dir: &Path) -> PathBuf {
    data_dir.join("gatehouse.db")
}

pub fn new_app_token() -> Secret {
    let mut bytes = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut bytes);
    Secret::new(hex::encode(bytes))
}

/// The local client token lives in the keychain and its hash in the store, so the engine
/// accepts it and `gatehouse token --local` can print it for Claude Code.
pub async fn ensure_local_token(app: &App) -> Result<(), AppError> {
    let inner = app.inner();
    let creds = credentials(&inner.deps.keychain);
    let token = match local_key::keep_in(creds.as_ref(), SERVICE, LOCAL_TOKEN_ACCOUNT) {
        Ok(t) => t,
        // No keychain: the engine issues a key it never shows; nothing can use it, which
        // the app state reports instead of writing the token somewhere else.
        Err(e) => {
            tracing::warn!(error = %e, "no keychain: the local token cannot be kept");
            return Ok(());
        }
    };
    local_key::adopt(inner.store.as_ref(), &token, inner.deps.clock.now()).await?;
    Ok(())
}

/// Provider keys as the engine reads them, one slot per upstream name: the keychain value
/// when the user stored one, else a key from the environment (`ANTHROPIC_API_KEY`).
#[derive(Default)]
pub struct KeySlots(std::sync::Mutex<std::collections::HashMap<String, Arc<KeySlot>>>);

#[derive(Default)]
pub struct KeySlot {
    stored: std::sync::RwLock<Option<Secret>>,
    fallback: std::sync::RwLock<Option<Secret>>,
}

impl KeySlots {
    pub fn slot(&self, name: &str) -> Arc<KeySlot> {
        match self.0.lock() {
            Ok(mut m) => m.entry(name.to_owned()).or_default().clone(),
            Err(_) => Arc::new(KeySlot::default()),
        }
    }
}

impl KeySlot {
    pub fn set(&self, key: Option<Secret>) {
        if let Ok(mut s) = self.stored.write() {
            *s = key;
        }
    }

    /// Whether the user stored a key (not counting one from the environment).
    pub fn has_stored(&self) -> bool {
        self.stored.read().is_ok_and(|s| s.is_some())
    }

    fn set_fallback(&self, key: Secret) {
        if let Ok(mut s) = self.fallback.write() {
            *s = Some(key);
        }
    }
}

impl TokenSource for KeySlot {
    fn current(&self) -> Option<Secret> {
        let stored = self.stored.read().ok().and_then(|s| s.clone());
        stored.or_else(|| self.fallback.read().ok().and_then(|s| s.clone()))
    }
}

/// Loads the stored provider keys from the keychain into their slots.
pub fn load_keys(app: &App) {
    let inner = app.inner();
    let creds = credentials(&inner.deps.keychain);
    for p in app.settings().providers {
        let key = creds
            .get(SERVICE, &provider_account(&p.name))
            .ok()
            .flatten();
        inner.keys.slot(&p.name).set(key);
    }
}

fn config(
    app: &App,
    port: u16,
    secrets: &std::collections::HashMap<String, Secret>,
) -> Result<Config, AppError> {
    let inner = app.inner();
    let settings = app.settings();
    let mut cfg = embedded_default(inner.deps.env.as_ref(), &inner.deps.data_dir, Some(port))
        .map_err(|e| AppError::Engine(e.to_string()))?;
    cfg.spend = Some(SpendConfig {
        write_keys: Vec::new(),
        read_keys: Vec::new(),
        admin_groups: Vec::new(),
        viewer_groups: Vec::new(),
        blocked_message: None,
        group_mode: Default::default(),
        pool_rule: Default::default(),
        // Personal budgets are the developer's own limit on their own machine: a broken
        // local store must not stop their work (a server's caps fail closed).
        fail_closed: false,
        retention: Default::default(),
    });
    match settings.mode {
        Mode::Standalone => {
            // Keys are read per request from the app's slots: adding one needs no restart.
            for up in cfg.upstreams.iter_mut() {
                let slot = inner.keys.slot(&up.name);
                if let Some(from_env) = up.credential.take().and_then(|c| c.current()) {
                    slot.set_fallback(from_env);
                }
                up.credential = Some(UpstreamCredential {
                    scheme: CredentialScheme::ApiKey,
                    source: CredentialSource::Dynamic(slot),
                    role: CredentialRole::Provider,
                    missing_hint: format!(
                        "no {} key: add one in Gatehouse → Settings → Providers",
                        up.name
                    ),
                });
            }
            // The user's cloud providers and presets. One that no longer validates (a key
            // removed from the keychain) is left out.
            for p in settings.providers.iter().filter(|p| p.name != "anthropic") {
                let index = cfg.upstreams.len();
                match super::providers::upstream(p, secrets.get(&p.name), index) {
                    Ok(up) => cfg.upstreams.push(up),
                    Err(e) => tracing::warn!(provider = %p.name, error = %e, "provider left out"),
                }
            }
            // The primary provider first; the others keep their order (stable sort).
            if let Some(primary) = &settings.primary {
                cfg.upstreams.sort_by_key(|u| &u.name != primary);
            }
        }
        Mode::Connected => {
            let url = settings.central_url.clone().ok_or_else(|| {
                AppError::BadInput("connected mode needs a central Gatehouse URL".into())
            })?;
            let origin =
                crate::central::origin(&url).map_err(|e| AppError::BadInput(e.to_string()))?;
            let base_url = url::Url::parse(&format!("{origin}/"))
                .map_err(|e| AppError::BadInput(e.to_string()))?;
            let source: Arc<dyn TokenSource> = inner.session.clone();
            let template =
                cfg.upstreams.first().cloned().ok_or_else(|| {
                    AppError::Internal("the embedded default has no upstream".into())
                })?;
            cfg.upstreams = vec![UpstreamConfig {
                name: "central".into(),
                base_url,
                credential: Some(UpstreamCredential {
                    scheme: CredentialScheme::Bearer,
                    source: CredentialSource::Dynamic(source),
                    role: CredentialRole::CentralSession,
                    missing_hint: format!(
                        "not signed in to {origin}: log in from the Gatehouse tray menu"
                    ),
                }),
                ..template
            }];
        }
    }
    Ok(cfg)
}

pub async fn restart(app: &App) -> Result<(), AppError> {
    let inner = app.inner();
    let mut slot = inner.engine.lock().await;
    if let Some(old) = slot.take() {
        old.shutdown().await;
    }
    let port = inner.port.load(std::sync::atomic::Ordering::Relaxed);
    let secrets = super::providers::cloud_secrets(app).await;
    let cfg = config(app, port, &secrets)?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| AppError::Engine(format!("cannot listen on 127.0.0.1:{port}: {e}")))?;
    let deps = Deps {
        clock: inner.deps.clock.clone(),
        env: inner.deps.env.clone(),
        credentials: credentials(&inner.deps.keychain),
        events: inner.deps.events.clone(),
    };
    // Two connection threads: the developer's requests each stay on one thread (no hops
    // between the runtime's workers), and a slow one does not hold the others up.
    let serving = gatehouse_engine::Serving {
        connection_threads: 2,
    };
    // Set before the engine accepts its first connection: a request served in between
    // would skip a pause or the central allowlist, and the app API would answer 404.
    let local = gatehouse_engine::local_control::LocalControls::default();
    local.set_paused(inner.paused.load(std::sync::atomic::Ordering::Relaxed));
    local.set_models(super::connected::cached_models(app).await);
    local.mount(Arc::new(super::api::AppApi::new(app)));
    let handle = gatehouse_engine::server::start_on_controlled(listener, cfg, deps, serving, local)
        .await
        .map_err(|e| AppError::Engine(e.to_string()))?;
    inner.port.store(
        handle.local_addr().port(),
        std::sync::atomic::Ordering::Relaxed,
    );
    // Usage and refusals drive notifications and meters (the engine's own event tap).
    app.spawn(super::connected::run_taps(
        app.clone(),
        handle.subscribe_events(),
    ));
    *slot = Some(handle);
    drop(slot);
    if let Err(e) = super::setup::write_status_file(app) {
        tracing::warn!(error = %e, "Claude Code's status line cannot find this gateway");
    }
    app.publish("app.state");
    Ok(())
}
