//! Connected mode: signing in to the central Gatehouse with the device flow, keeping the
//! session fresh, and pulling what the tray caches and shows — managed settings (ETag),
//! the Desktop bootstrap and the user's caps and spend. Also the tap on engine events that
//! turns usage and refusals into meters and notifications, in either mode.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use gatehouse_engine::events::Event;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::broadcast;

use super::{App, AppError};
use crate::central::{CentralClient, CentralError, Poll, Pulled};
use crate::notifier::Kind;
use crate::settings::{BOOTSTRAP_KEY, Mode, POLICY_KEY, SPEND_KEY};

/// How often connected mode pulls and refreshes.
const SYNC_EVERY: Duration = Duration::from_secs(60);
/// Spend is re-read at most this often after usage.
const SPEND_DEBOUNCE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingLogin {
    pub user_code: String,
    pub verification_uri: String,
    pub verification_uri_complete: Option<String>,
    pub expires_at: DateTime<Utc>,
    pub login_notice: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginState {
    SignedOut {
        error: Option<String>,
    },
    Pending(PendingLogin),
    SignedIn,
    /// The session ended (invalid_grant): sign in again.
    Expired {
        error: String,
    },
}

#[derive(Debug, Default)]
pub struct CentralState {
    pub reachable: Option<bool>,
    pub last_sync_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    /// Highest warning already shown per (period, reset): 75 or 95.
    warned: HashMap<(String, DateTime<Utc>), u8>,
}

/// Cached documents, with when they were fetched.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cached {
    pub fetched_at: DateTime<Utc>,
    pub etag: Option<String>,
    pub body: Value,
}

fn set_login(app: &App, state: LoginState) {
    if let Ok(mut l) = app.inner().login.lock() {
        *l = state;
    }
    app.publish("app.state");
}

fn client(app: &App) -> Result<CentralClient, AppError> {
    let settings = app.settings();
    if settings.mode != Mode::Connected {
        return Err(AppError::BadInput(
            "switch to connected mode to sign in to a central Gatehouse".into(),
        ));
    }
    let url = settings
        .central_url
        .ok_or_else(|| AppError::BadInput("set the central Gatehouse URL first".into()))?;
    let http = CentralClient::default_http().map_err(|e| AppError::Internal(e.to_string()))?;
    CentralClient::new(&url, http, app.inner().deps.clock.clone())
        .map_err(|e| AppError::BadInput(e.to_string()))
}

pub async fn login(app: &App) -> Result<(), AppError> {
    let central = client(app)?;
    if let Err(e) = &app.inner().deps.keychain {
        return Err(AppError::Keychain(format!(
            "no keychain reachable ({e}); Gatehouse does not store a session elsewhere"
        )));
    }
    let start = central
        .start_device()
        .await
        .map_err(|e| AppError::Central(e.to_string()))?;
    let pending = PendingLogin {
        user_code: start.user_code.clone(),
        verification_uri: start.verification_uri.clone(),
        verification_uri_complete: start.verification_uri_complete.clone(),
        expires_at: start.expires_at,
        login_notice: start
            .login_notice
            .clone()
            .or_else(|| app.bootstrap().get().and_then(|b| b.login_notice.clone())),
    };
    set_login(app, LoginState::Pending(pending.clone()));
    let app = app.clone();
    app.clone().spawn(async move {
        let mut interval = start.interval;
        loop {
            tokio::time::sleep(interval).await;
            // A newer login or a logout replaced this one.
            if app.login_state() != LoginState::Pending(pending.clone()) {
                return;
            }
            if app.inner().deps.clock.now() >= start.expires_at {
                set_login(
                    &app,
                    LoginState::SignedOut {
                        error: Some(
                            "the code expired before sign-in finished; log in again".into(),
                        ),
                    },
                );
                return;
            }
            match central.poll(&start.device_code).await {
                Ok(Poll::Pending) => {}
                Ok(Poll::SlowDown) => {
                    interval = (interval + Duration::from_secs(5)).min(Duration::from_secs(60));
                }
                Ok(Poll::Done(tokens)) => {
                    let (keeper, origin) =
                        (app.inner().session.clone(), central.origin().to_owned());
                    match super::keychain(move || keeper.store(&origin, tokens)).await {
                        Ok(_) => {
                            set_login(&app, LoginState::SignedIn);
                            sync(&app).await;
                        }
                        Err(e) => set_login(
                            &app,
                            LoginState::SignedOut {
                                error: Some(e.to_string()),
                            },
                        ),
                    }
                    return;
                }
                Ok(Poll::Denied(why)) => {
                    set_login(
                        &app,
                        LoginState::SignedOut {
                            error: Some(format!("sign-in was refused: {why}")),
                        },
                    );
                    return;
                }
                Ok(Poll::Expired) => {
                    set_login(
                        &app,
                        LoginState::SignedOut {
                            error: Some("the code expired; log in again".into()),
                        },
                    );
                    return;
                }
                // The server is briefly unreachable: keep polling until the code expires.
                Err(e) => tracing::warn!(error = %e, "device-flow poll failed; retrying"),
            }
        }
    });
    Ok(())
}

pub async fn logout(app: &App) -> Result<(), AppError> {
    let keeper = app.inner().session.clone();
    let session = super::keychain(move || keeper.clear()).await?;
    if let (Some(s), Ok(central)) = (session, client(app)) {
        central.revoke(&s.tokens.access_token, "access_token").await;
        if let Some(rt) = &s.tokens.refresh_token {
            central.revoke(rt, "refresh_token").await;
        }
    }
    app.inner().state.put(SPEND_KEY, &Value::Null).await?;
    set_login(app, LoginState::SignedOut { error: None });
    Ok(())
}

/// The model allowlist of the cached managed settings, if it has one.
pub async fn cached_models(app: &App) -> Option<Vec<String>> {
    let cached: Cached = app.inner().state.get(POLICY_KEY).await.ok().flatten()?;
    let list = cached
        .body
        .pointer("/settings/availableModels")?
        .as_array()?;
    Some(
        list.iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
    )
}

/// Records a failed contact with the central server in the app state.
pub fn record_failure(app: &App, message: &str) {
    if let Ok(mut c) = app.inner().central.lock() {
        c.last_error = Some(message.to_owned());
        c.reachable = Some(false);
    }
    app.publish("app.state");
}

fn central_failed(app: &App, e: &CentralError) {
    let unreachable = matches!(e, CentralError::Unreachable { .. });
    if let Ok(mut c) = app.inner().central.lock() {
        c.last_error = Some(e.to_string());
        if unreachable {
            c.reachable = Some(false);
        }
    }
    if unreachable {
        app.inner().notes.notify(
            Kind::CentralUnreachable,
            "Central Gatehouse unreachable",
            &e.to_string(),
        );
    }
}

async fn session_ended(app: &App) {
    let keeper = app.inner().session.clone();
    if let Err(e) = super::keychain(move || keeper.clear()).await {
        tracing::warn!(error = %e, "could not remove the ended session from the keychain");
    }
    set_login(
        app,
        LoginState::Expired {
            error: "your session ended; log in again".into(),
        },
    );
    app.inner().notes.notify(
        Kind::LoginNeeded,
        "Gatehouse: sign in again",
        "Your session with the central Gatehouse ended. Open the tray menu and log in.",
    );
}

/// One round of refresh and pulls, one at a time (the periodic loop, a login and the tray's
/// "sync now" may ask together). Failures are recorded in the state, never fatal.
pub async fn sync(app: &App) {
    let Ok(central) = client(app) else { return };
    let inner = app.inner();
    let _one = inner.sync_gate.lock().await;
    let now = inner.deps.clock.now();
    if inner.session.needs_refresh()
        && let Some(s) = inner.session.current()
    {
        match &s.tokens.refresh_token {
            Some(rt) => match central.refresh(rt).await {
                Ok(tokens) => {
                    let (keeper, origin) = (inner.session.clone(), central.origin().to_owned());
                    if let Err(e) = super::keychain(move || keeper.store(&origin, tokens)).await {
                        tracing::warn!(error = %e, "could not keep the refreshed session");
                    }
                }
                Err(CentralError::InvalidGrant) => return session_ended(app).await,
                Err(e) => return central_failed(app, &e),
            },
            None if s.tokens.expires_at <= now => return session_ended(app).await,
            None => {}
        }
    }
    let Some(session) = inner.session.current() else {
        return;
    };
    let token = session.tokens.access_token;
    let previous: Option<Cached> = inner.state.get(POLICY_KEY).await.ok().flatten();
    let pulled = async {
        let policy = central
            .managed_settings(&token, previous.as_ref().and_then(|p| p.etag.as_deref()))
            .await?;
        let bootstrap = central.desktop_bootstrap(&token).await;
        let spend = central.my_spend(&token).await?;
        Ok::<_, CentralError>((policy, bootstrap, spend))
    }
    .await;
    let (policy, bootstrap, spend) = match pulled {
        Ok(p) => p,
        Err(CentralError::InvalidGrant) => return session_ended(app).await,
        Err(e) => return central_failed(app, &e),
    };
    let store = |key: &'static str, etag: Option<String>, body: Value| async move {
        let doc = Cached {
            fetched_at: now,
            etag,
            body,
        };
        if let Err(e) = app.inner().state.put(key, &doc).await {
            tracing::warn!(error = %e, key, "could not cache a central document");
        }
    };
    match policy {
        Pulled::Fresh { etag, body } => store(POLICY_KEY, etag, body).await,
        Pulled::NotModified => {
            if let Some(p) = previous {
                store(POLICY_KEY, p.etag, p.body).await;
            }
        }
    }
    // The Desktop bootstrap exists only when the operator configured one.
    if let Ok(Pulled::Fresh { body, .. }) = bootstrap {
        store(BOOTSTRAP_KEY, None, body).await;
    }
    if let Pulled::Fresh { body, .. } = spend {
        warn_thresholds(app, &body);
        store(SPEND_KEY, None, body).await;
    }
    if let Some(h) = inner.engine.lock().await.as_ref() {
        h.local().set_models(cached_models(app).await);
    }
    if let Ok(mut c) = inner.central.lock() {
        c.reachable = Some(true);
        c.last_sync_at = Some(now);
        c.last_error = None;
    }
    app.publish("app.state");
}

/// `{"periods": [{"period","limit_cents","spent_micro_usd","utilization","resets_at"}]}`:
/// the `/v1/me/spend` shape, used for local standings too.
fn warn_thresholds(app: &App, spend: &Value) {
    let Some(periods) = spend.get("periods").and_then(Value::as_array) else {
        return;
    };
    for p in periods {
        let (Some(period), Some(util), Some(reset)) = (
            p.get("period").and_then(Value::as_str),
            p.get("utilization").and_then(Value::as_f64),
            p.get("resets_at")
                .and_then(Value::as_str)
                .and_then(|r| DateTime::parse_from_rfc3339(r).ok()),
        ) else {
            continue;
        };
        let level = if util > 0.95 {
            95
        } else if util > 0.75 {
            75
        } else {
            continue;
        };
        let key = (period.to_owned(), reset.with_timezone(&Utc));
        let fresh = app.inner().central.lock().is_ok_and(|mut c| {
            let seen = c.warned.entry(key).or_insert(0);
            let fresh = *seen < level;
            *seen = (*seen).max(level);
            fresh
        });
        if fresh {
            app.inner().notes.notify(
                Kind::SpendWarning,
                &format!("{level}% of your {period} spend limit used"),
                &format!(
                    "{:.0}% used; it resets {}.",
                    util * 100.0,
                    reset.with_timezone(&Utc).format("%Y-%m-%d %H:%M UTC")
                ),
            );
        }
    }
}

/// Local standings (standalone budgets on the local key) in the `/v1/me/spend` shape.
pub async fn local_spend(app: &App) -> Option<Value> {
    let standings = app
        .inner()
        .store
        .standings(
            gatehouse_engine::identity::LOCAL_SUBJECT,
            &[],
            Default::default(),
            app.inner().deps.clock.now(),
        )
        .await
        .ok()?;
    let periods: Vec<Value> = standings
        .iter()
        .map(|s| {
            serde_json::json!({
                "period": s.period.as_str(),
                "model": s.family.map(gatehouse_engine::spend::Family::as_str),
                "limit_cents": s.cap_cents,
                "spent_micro_usd": s.spent_micro,
                "utilization": s.cap_cents.map(|_| s.utilization()),
                "resets_at": s.reset.map(|r| r.to_rfc3339()),
            })
        })
        .collect();
    Some(serde_json::json!({ "periods": periods }))
}

fn describe_block(e: &Event) -> Option<(Kind, String, String)> {
    let field = |k: &str| e.fields.get(k).and_then(Value::as_str).unwrap_or("");
    match e.evt {
        "spend.blocked" => Some((
            Kind::SpendBlocked,
            "Spend limit reached".to_owned(),
            match field("message") {
                "" => "A request was refused: a spend limit is reached.".to_owned(),
                m => m.to_owned(),
            },
        )),
        "access.denied" if field("layer") == "policy" => Some((
            Kind::PolicyBlocked,
            "Blocked by policy".to_owned(),
            format!("Model `{}` is not allowed by your policy.", field("model")),
        )),
        "policy.blocked" => Some((
            Kind::PolicyBlocked,
            "Blocked by policy".to_owned(),
            "A request was refused by your organization's policy.".to_owned(),
        )),
        _ => describe_routing(e),
    }
}

/// Traffic moving off a provider (its breaker opened, or a 429 cooled it down) and coming
/// back (its breaker closed). The gate rate-limits them like every notification.
fn describe_routing(e: &Event) -> Option<(Kind, String, String)> {
    let field = |k: &str| e.fields.get(k).and_then(Value::as_str).unwrap_or("");
    let name = field("upstream");
    match (e.evt, field("breaker")) {
        ("upstream.breaker", "open") => Some((
            Kind::ProviderAway,
            format!("Traffic moved off {name}"),
            format!(
                "{name} is failing; Gatehouse routes around it (to any other provider you have) and tries it again as it recovers."
            ),
        )),
        ("upstream.breaker", "closed") => Some((
            Kind::ProviderBack,
            format!("{name} is back"),
            format!("Requests go to {name} again."),
        )),
        ("upstream.cooldown", _) => Some((
            Kind::ProviderAway,
            format!("{name} is rate limited"),
            format!(
                "Gatehouse routes around it (to any other provider you have) for {} s.",
                e.fields.get("seconds").and_then(Value::as_u64).unwrap_or(0)
            ),
        )),
        _ => None,
    }
}

/// Reacts to engine events: notifications for blocks, spend warnings after usage.
/// One per engine instance (see `engine::restart`); ends when that engine's channel closes.
pub async fn run_taps(app: App, mut rx: broadcast::Receiver<Event>) {
    let mut last_spend_check = tokio::time::Instant::now() - SPEND_DEBOUNCE;
    let mut pending_check = false;
    loop {
        if pending_check && last_spend_check.elapsed() >= SPEND_DEBOUNCE {
            pending_check = false;
            last_spend_check = tokio::time::Instant::now();
            check_spend(&app).await;
            continue;
        }
        let event = if pending_check {
            let wait = SPEND_DEBOUNCE.saturating_sub(last_spend_check.elapsed());
            match tokio::time::timeout(wait, rx.recv()).await {
                Ok(e) => e,
                Err(_) => continue,
            }
        } else {
            rx.recv().await
        };
        let event = match event {
            Ok(e) => e,
            // Fell behind: some usage may have been missed, so check spend anyway.
            Err(broadcast::error::RecvError::Lagged(_)) => {
                pending_check = true;
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if let Some((kind, title, body)) = describe_block(&event) {
            app.inner().notes.notify(kind, &title, &body);
            app.publish("app.state");
        }
        if event.evt == "inference" {
            pending_check = true;
        }
    }
}

async fn check_spend(app: &App) {
    match app.settings().mode {
        Mode::Standalone => {
            if let Some(spend) = local_spend(app).await {
                warn_thresholds(app, &spend);
            }
        }
        Mode::Connected => sync(app).await,
    }
    app.publish("app.state");
}

/// Pulls on start and every minute in connected mode.
pub async fn run_sync(app: App) {
    loop {
        if app.settings().mode == Mode::Connected {
            sync(&app).await;
        }
        tokio::time::sleep(SYNC_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn routing_changes_become_notifications() {
        let open = Event::new("upstream.breaker")
            .with("upstream", "anthropic")
            .with("breaker", "open");
        let (kind, title, _) = describe_block(&open).unwrap();
        assert_eq!(
            (kind, title.as_str()),
            (Kind::ProviderAway, "Traffic moved off anthropic")
        );
        let closed = Event::new("upstream.breaker")
            .with("upstream", "anthropic")
            .with("breaker", "closed");
        assert_eq!(describe_block(&closed).unwrap().0, Kind::ProviderBack);
        let half = Event::new("upstream.breaker")
            .with("upstream", "anthropic")
            .with("breaker", "half_open");
        assert!(describe_block(&half).is_none(), "a trial is no news");
        let cool = Event::new("upstream.cooldown")
            .with("upstream", "bedrock")
            .with("seconds", 30);
        let (kind, title, body) = describe_block(&cool).unwrap();
        assert_eq!(kind, Kind::ProviderAway);
        assert_eq!(title, "bedrock is rate limited");
        assert!(body.contains("30 s"), "{body}");
    }
}
