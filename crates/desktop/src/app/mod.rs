//! The tray's application service: everything the desktop app does, without a window.
//!
//! [`App::start`] reads the IT bootstrap file and the saved settings, makes sure the local
//! client token exists in the keychain, and starts the engine on 127.0.0.1 through the
//! same `start_on` as `gatehouse serve`, with the app's API mounted at `/gatehouse/app/*`
//! (see [`api`]). The Tauri shell and the tests drive it through the same methods; the
//! shell adds only a tray, a window and the OS glue.
//!
//! ```text
//! settings + bootstrap + keychain -> engine config -> engine (loopback)
//!     standalone: the user's providers (keys from the keychain), personal budgets as caps
//!     connected:  one upstream, the central Gatehouse, with the session from the keychain
//! engine events -> notifications (rate-limited), meters;  connected: pulls (see `connected`)
//! ```

pub mod api;
mod connected;
mod engine;
pub mod export;
pub mod insight;
pub mod presets;
mod providers;
mod setup;
mod state;
pub mod tray_state;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use gatehouse_engine::deps::{Clock, CredentialError, CredentialStore, Environment};
use gatehouse_engine::events::{Event, EventSink};
use gatehouse_engine::secret::Secret;
use gatehouse_engine::server::Handle;
use gatehouse_engine::store::Store;
use serde_json::Value;

use crate::bootstrap::{self, Bootstrap};
use crate::notifier::{Gate, Notifier};
use crate::session::SessionKeeper;
use crate::settings::{Mode, Settings, StateStore};

pub use connected::LoginState;

/// Opens a URL in the user's browser.
pub trait Opener: Send + Sync {
    fn open(&self, url: &str) -> Result<(), String>;
}

/// `xdg-open` / `open` / `start`.
pub struct SystemOpener;

impl Opener for SystemOpener {
    fn open(&self, url: &str) -> Result<(), String> {
        let mut cmd = if cfg!(target_os = "macos") {
            std::process::Command::new("open")
        } else if cfg!(windows) {
            let mut c = std::process::Command::new("cmd");
            c.args(["/C", "start", ""]);
            c
        } else {
            std::process::Command::new("xdg-open")
        };
        cmd.arg(url)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map(|_| ())
            .map_err(|e| format!("cannot open a browser: {e}"))
    }
}

/// Everything the app takes from outside (tests pass their own).
pub struct AppDeps {
    pub clock: Arc<dyn Clock>,
    pub data_dir: PathBuf,
    pub env: Arc<dyn Environment>,
    /// The OS keychain, or why none is reachable (then no secret is stored anywhere).
    pub keychain: Result<Arc<dyn CredentialStore>, String>,
    /// Where engine and app events go (log lines).
    pub events: Arc<dyn EventSink>,
    pub notifier: Arc<dyn Notifier>,
    pub opener: Arc<dyn Opener>,
    /// The user's home, for Claude Code's settings.
    pub home: PathBuf,
    /// The `gatehouse` binary, for Claude Code's `apiKeyHelper`.
    pub gatehouse_exe: PathBuf,
    /// Port override (tests pass 0); otherwise the saved setting.
    pub port: Option<u16>,
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    BadInput(String),
    #[error("locked by your IT bootstrap file: {0}")]
    Locked(String),
    #[error("{0}")]
    Keychain(String),
    #[error("{0}")]
    Central(String),
    #[error("{0}")]
    Engine(String),
    #[error("{0}")]
    Internal(String),
}

impl From<CredentialError> for AppError {
    fn from(e: CredentialError) -> Self {
        AppError::Keychain(e.to_string())
    }
}

impl From<gatehouse_engine::store::StoreError> for AppError {
    fn from(e: gatehouse_engine::store::StoreError) -> Self {
        AppError::Internal(e.to_string())
    }
}

/// Runs a keychain call off the async workers: it is a blocking D-Bus (or OS) call that
/// may wait for the user to unlock the keychain.
pub(crate) async fn keychain<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, CredentialError> + Send + 'static,
) -> Result<T, CredentialError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CredentialError::Backend(format!("keychain call failed: {e}")))?
}

/// The IT bootstrap file as read at start.
pub struct BootstrapState {
    pub path: PathBuf,
    pub result: Result<Option<Bootstrap>, String>,
}

impl BootstrapState {
    pub fn get(&self) -> Option<&Bootstrap> {
        self.result.as_ref().ok().and_then(Option::as_ref)
    }
}

pub(crate) struct Inner {
    deps: AppDeps,
    app_token: Secret,
    /// Opens only `GET /gatehouse/app/statusline` (kept in the data dir's
    /// `statusline.json` for Claude Code's status line command); new each launch.
    status_token: Secret,
    bootstrap: BootstrapState,
    state: StateStore,
    store: Arc<dyn Store>,
    settings: Mutex<Settings>,
    engine: tokio::sync::Mutex<Option<Handle>>,
    /// One central sync at a time: two refreshes racing with the same refresh token would
    /// look like a replay to the central server, which ends the session.
    pub(crate) sync_gate: tokio::sync::Mutex<()>,
    port: std::sync::atomic::AtomicU16,
    session: Arc<SessionKeeper>,
    keys: engine::KeySlots,
    paused: std::sync::atomic::AtomicBool,
    login: Mutex<LoginState>,
    central: Mutex<connected::CentralState>,
    notes: Gate,
    /// The last "Test" result per provider, for the UI.
    tests: Mutex<std::collections::HashMap<String, serde_json::Value>>,
    /// Claude Code's transcript index (session -> project), rescanned when it changed.
    pub(crate) transcripts: crate::transcripts::Cached,
    /// The runtime the app started on. Requests to the app's API run on the engine's
    /// connection threads, which end with that engine: work that must outlive a restart
    /// is spawned here ([`App::spawn`]).
    runtime: tokio::runtime::Handle,
}

/// The running desktop app. Cheap to clone.
#[derive(Clone)]
pub struct App {
    inner: Arc<Inner>,
}

impl App {
    pub async fn start(deps: AppDeps) -> Result<App, AppError> {
        let bootstrap = BootstrapState {
            path: bootstrap::path(deps.env.as_ref()),
            result: bootstrap::load(deps.env.as_ref()).map_err(|e| e.to_string()),
        };
        if let Err(e) = &bootstrap.result {
            tracing::error!(error = %e, "the IT bootstrap file cannot be used");
            deps.events
                .emit(&Event::new("desktop.bootstrap_invalid").with("error", e.clone()));
        }
        std::fs::create_dir_all(&deps.data_dir).map_err(|e| {
            AppError::Internal(format!("cannot create {}: {e}", deps.data_dir.display()))
        })?;
        let store: Arc<dyn Store> = Arc::new(
            gatehouse_engine::store::SqliteStore::open(
                &engine::db_path(&deps.data_dir),
                deps.clock.now(),
            )
            .map_err(|e| AppError::Internal(e.to_string()))?,
        );
        let state = StateStore::new(store.clone());
        let mut settings: Settings = state
            .get(crate::settings::SETTINGS_KEY)
            .await?
            .unwrap_or_default();
        if let Some(b) = bootstrap.get() {
            // The bootstrap names the server; forcing connected mode overrides the saved choice.
            settings.central_url = Some(b.central_url.as_str().trim_end_matches('/').to_owned());
            if b.force_connected_mode {
                settings.mode = Mode::Connected;
            }
        }
        let creds = crate::keychain::credentials(&deps.keychain);
        let central_origin = settings
            .central_url
            .as_deref()
            .and_then(|u| crate::central::origin(u).ok());
        let session = Arc::new(SessionKeeper::load(
            creds,
            deps.clock.clone(),
            central_origin.as_deref(),
        ));
        let notes = Gate::new(deps.notifier.clone(), deps.events.clone());
        let port = deps.port.unwrap_or(settings.port);
        let signed_in = session.current().is_some();
        let inner = Arc::new(Inner {
            app_token: engine::new_app_token(),
            status_token: Secret::new(format!("gst_{}", engine::new_app_token().expose())),
            bootstrap,
            state,
            store,
            settings: Mutex::new(settings),
            engine: tokio::sync::Mutex::new(None),
            sync_gate: tokio::sync::Mutex::new(()),
            port: std::sync::atomic::AtomicU16::new(port),
            session,
            keys: Default::default(),
            tests: Default::default(),
            paused: Default::default(),
            login: Mutex::new(if signed_in {
                LoginState::SignedIn
            } else {
                LoginState::SignedOut { error: None }
            }),
            central: Mutex::new(connected::CentralState::default()),
            notes,
            deps,
            transcripts: crate::transcripts::Cached::new(
                crate::transcripts::Limits::default(),
                std::time::Duration::from_secs(30),
                std::time::Duration::from_secs(2),
            ),
            runtime: tokio::runtime::Handle::current(),
        });
        let app = App { inner };
        engine::ensure_local_token(&app).await?;
        engine::load_keys(&app);
        app.restart_engine().await?;
        if let Some(b) = app.inner.bootstrap.get()
            && b.auto_configure_claude_code
            && let Err(e) = app.configure_claude_code(false, false).await
        {
            tracing::warn!(error = %e, "could not configure Claude Code as the bootstrap asks");
        }
        app.spawn(connected::run_sync(app.clone()));
        // IT named the server: a fresh install goes straight to the login prompt.
        if app.bootstrap().get().is_some()
            && app.settings().mode == Mode::Connected
            && app.inner.session.current().is_none()
            && let Err(e) = app.login().await
        {
            tracing::warn!(error = %e, "could not start signing in to the central Gatehouse");
            if let AppError::Central(msg) = &e {
                app.inner.notes.notify(
                    crate::notifier::Kind::CentralUnreachable,
                    "Central Gatehouse unreachable",
                    msg,
                );
                connected::record_failure(&app, msg);
            }
        }
        Ok(app)
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    pub fn settings(&self) -> Settings {
        self.inner
            .settings
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    pub fn bootstrap(&self) -> &BootstrapState {
        &self.inner.bootstrap
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!(
            "http://127.0.0.1:{}",
            self.inner.port.load(std::sync::atomic::Ordering::Relaxed)
        )
    }

    /// The dashboard with this launch's app token in the fragment (never sent to a server).
    pub fn dashboard_url(&self) -> String {
        format!(
            "{}/#token={}",
            self.base_url(),
            self.inner.app_token.expose()
        )
    }

    pub(crate) fn app_token(&self) -> &Secret {
        &self.inner.app_token
    }

    pub(crate) fn status_token(&self) -> &Secret {
        &self.inner.status_token
    }

    /// The app state the UI shows (see the UI contract).
    pub async fn state(&self) -> Value {
        state::build(self).await
    }

    /// The tray icon's state (badge and tooltip).
    pub async fn tray_state(&self) -> tray_state::TrayState {
        tray_state::current(self).await
    }

    /// The tray's status line: mode and today's spend.
    pub async fn status_line(&self) -> String {
        state::status_line(self).await
    }

    pub async fn paused(&self) -> bool {
        self.inner.paused.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub async fn set_paused(&self, paused: bool) {
        self.inner
            .paused
            .store(paused, std::sync::atomic::Ordering::Relaxed);
        // During a restart the new engine picks the flag up when it starts.
        if let Ok(engine) = self.inner.engine.try_lock()
            && let Some(h) = engine.as_ref()
        {
            h.local().set_paused(paused);
        }
        self.publish("app.state");
    }

    pub async fn login(&self) -> Result<(), AppError> {
        connected::login(self).await
    }

    pub async fn logout(&self) -> Result<(), AppError> {
        connected::logout(self).await
    }

    pub fn login_state(&self) -> LoginState {
        self.inner
            .login
            .lock()
            .map(|l| l.clone())
            .unwrap_or(LoginState::SignedOut { error: None })
    }

    /// Opens the pending sign-in page (only that URL: the API cannot open arbitrary ones).
    pub fn open_verification(&self, url: &str) -> Result<(), AppError> {
        match self.login_state() {
            LoginState::Pending(p)
                if url == p.verification_uri
                    || p.verification_uri_complete.as_deref() == Some(url) =>
            {
                crate::central::check_browser_url(url)
                    .map_err(|e| AppError::BadInput(e.to_string()))?;
                self.inner.deps.opener.open(url).map_err(AppError::Internal)
            }
            _ => Err(AppError::BadInput(
                "only the pending sign-in page can be opened".into(),
            )),
        }
    }

    /// Points Claude Code here (`statusline`: also Gatehouse's status line), or undoes it.
    pub async fn configure_claude_code(
        &self,
        undo: bool,
        statusline: bool,
    ) -> Result<(), AppError> {
        state::configure_claude_code(self, undo, statusline).await
    }

    /// What configuring Claude Code would change, before it does.
    pub fn preview_claude_code(&self, statusline: bool) -> Result<Value, AppError> {
        state::preview_claude_code(self, statusline)
    }

    pub async fn update_settings(&self, patch: &Value) -> Result<(), AppError> {
        state::update_settings(self, patch).await
    }

    /// Adds (or replaces) a provider from the UI's form: `kind` and its fields.
    pub async fn add_provider(&self, body: &serde_json::Value) -> Result<(), AppError> {
        state::add_provider(self, body).await
    }

    /// Sends one minimal real request to a provider; the result shows in the app state.
    pub async fn test_provider(&self, name: &str) -> Result<(), AppError> {
        providers::test(self, name).await
    }

    /// Makes a provider the first one tried.
    pub async fn make_primary(&self, name: &str) -> Result<(), AppError> {
        state::make_primary(self, name).await
    }

    pub async fn remove_provider(&self, name: &str) -> Result<(), AppError> {
        state::remove_provider(self, name).await
    }

    /// Pulls from the central server now (connected mode).
    pub async fn sync_now(&self) {
        connected::sync(self).await;
    }

    /// The engine's store (usage, caps, cached state).
    pub fn store(&self) -> Arc<dyn Store> {
        self.inner.store.clone()
    }

    /// Stops the engine, draining open streams.
    pub async fn shutdown(&self) {
        if let Some(h) = self.inner.engine.lock().await.take() {
            h.shutdown().await;
        }
    }

    /// Runs `work` on the app's runtime, where it outlives the engine (see `Inner::runtime`).
    pub(crate) fn spawn(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        self.inner.runtime.spawn(work);
    }

    /// (Re)starts the engine from the current settings on the same port.
    pub async fn restart_engine(&self) -> Result<(), AppError> {
        engine::restart(self).await
    }

    /// Tells live views something changed (an `app.state` event).
    /// Reaches the window's live event stream through the engine; dropped while the engine
    /// restarts (the restart publishes once it is up).
    pub(crate) fn publish(&self, what: &'static str) {
        if let Ok(engine) = self.inner.engine.try_lock()
            && let Some(h) = engine.as_ref()
        {
            h.publish(Event::new(what));
        }
    }
}
