//! What the desktop app controls in a running engine: pausing inference, the model
//! allowlist from the central policy it cached (so a refused request never leaves the
//! laptop), and the app's own API mounted at `/gatehouse/app/*`.
//!
//! A headless server never sets these: not paused, no local allowlist, and the app routes
//! answer 404.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use async_trait::async_trait;
use axum::body::Body;
use http::{Request, Response};

/// The prefix of the desktop app's API.
pub const APP_PREFIX: &str = "/gatehouse/app/";

/// The desktop app's API; it authenticates its own callers (a per-launch token).
#[async_trait]
pub trait AppRoutes: Send + Sync {
    async fn handle(&self, req: Request<Body>) -> Response<Body>;
    /// The app's part of `/gatehouse/api/status` (mode, sign-in state; no secrets).
    async fn status(&self) -> Option<serde_json::Value> {
        None
    }
}

#[derive(Default)]
pub struct LocalControls {
    paused: AtomicBool,
    models: RwLock<Option<Arc<Vec<String>>>>,
    app: OnceLock<Arc<dyn AppRoutes>>,
}

impl LocalControls {
    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }

    /// The allowlist from the cached central policy, when it has one.
    pub fn models(&self) -> Option<Arc<Vec<String>>> {
        self.models.read().map(|m| m.clone()).unwrap_or(None)
    }

    pub fn set_models(&self, models: Option<Vec<String>>) {
        if let Ok(mut slot) = self.models.write() {
            *slot = models.map(Arc::new);
        }
    }

    /// Mounts the app API; only the first call counts (one app per engine).
    pub fn mount(&self, app: Arc<dyn AppRoutes>) -> bool {
        self.app.set(app).is_ok()
    }

    pub fn app(&self) -> Option<&Arc<dyn AppRoutes>> {
        self.app.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_and_models_round_trip() {
        let c = LocalControls::default();
        assert!(!c.paused());
        c.set_paused(true);
        assert!(c.paused());
        assert!(c.models().is_none());
        c.set_models(Some(vec!["claude-sonnet-4-5".into()]));
        assert_eq!(
            c.models().as_deref(),
            Some(&vec!["claude-sonnet-4-5".to_owned()])
        );
        c.set_models(None);
        assert!(c.models().is_none());
    }
}
