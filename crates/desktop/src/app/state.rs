//! The app state the UI shows (the `AppState` of the UI contract) and the user's changes
//! to it: settings, providers, Claude Code configuration. Locks from the IT bootstrap file
//! are enforced here, not only greyed out in the UI.

use chrono::Utc;
use gatehouse_engine::spend::{Period, ScopeType};
use serde_json::{Value, json};

use super::connected::{Cached, LoginState};
use super::{App, AppError};
use crate::claude_settings::{ClaudeSettings, Status, Target, settings_path};
use crate::keychain::SERVICE;
use crate::settings::{
    Budgets, Mode, POLICY_KEY, SETTINGS_KEY, SPEND_KEY, Settings, provider_account,
};

fn claude(app: &App) -> (ClaudeSettings, Result<Target, AppError>) {
    let inner = app.inner();
    let dir = inner
        .deps
        .env
        .var("CLAUDE_CONFIG_DIR")
        .map(std::path::PathBuf::from);
    let file = ClaudeSettings::new(settings_path(&inner.deps.home, dir.as_deref()));
    let target = Target::new(&app.base_url(), &inner.deps.gatehouse_exe)
        .map_err(|e| AppError::Internal(e.to_string()));
    (file, target)
}

/// The status line command for this app's binary and data directory.
fn statusline_command(app: &App) -> Result<String, AppError> {
    let deps = &app.inner().deps;
    crate::claude_settings::statusline_command(&deps.gatehouse_exe, &deps.data_dir)
        .map_err(|e| AppError::Internal(e.to_string()))
}

fn iso(t: chrono::DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `/v1/me/spend` periods -> the contract's meter rows.
fn meters(spend: &Value) -> Vec<Value> {
    spend
        .get("periods")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    json!({
                        "period": p.get("period"),
                        "limit_micro_usd": p.get("limit_cents").and_then(Value::as_u64).map(|c| c * 10_000),
                        "spent_micro_usd": p.get("spent_micro_usd"),
                        "utilization": p.get("utilization"),
                        "resets_at": p.get("resets_at"),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

pub async fn build(app: &App) -> Value {
    let inner = app.inner();
    let settings = app.settings();
    let boot = app.bootstrap();
    let b = boot.get();
    let locked_mode = b.is_some_and(|b| b.force_connected_mode);
    let login = match app.login_state() {
        LoginState::SignedOut { error } => json!({"state": "signed_out", "error": error}),
        LoginState::Expired { error } => json!({"state": "expired", "error": error}),
        LoginState::Pending(p) => json!({
            "state": "pending",
            "user_code": p.user_code,
            "verification_uri": p.verification_uri,
            "verification_uri_complete": p.verification_uri_complete,
            "expires_at": iso(p.expires_at),
            "login_notice": p.login_notice,
        }),
        LoginState::SignedIn => json!({"state": "signed_in"}),
    };
    let mut login = login;
    if let (Some(obj), Some(s)) = (login.as_object_mut(), inner.session.current()) {
        obj.insert("email".into(), json!(s.holder.email));
        obj.insert("name".into(), json!(s.holder.name));
        obj.insert("groups".into(), json!(s.holder.groups));
    } else if let Some(obj) = login.as_object_mut() {
        obj.insert("groups".into(), json!([]));
    }
    let central = inner
        .central
        .lock()
        .map(|c| {
            json!({
                "url": settings.central_url,
                "reachable": c.reachable,
                "last_sync_at": c.last_sync_at.map(iso),
                "last_error": c.last_error,
            })
        })
        .unwrap_or(Value::Null);
    let spend: Option<Cached> = inner.state.get(SPEND_KEY).await.ok().flatten();
    let central_spend = spend
        .filter(|s| !s.body.is_null() && settings.mode == Mode::Connected)
        .map(|s| json!({"fetched_at": iso(s.fetched_at), "limits": meters(&s.body)}));
    let policy: Option<Cached> = inner.state.get(POLICY_KEY).await.ok().flatten();
    let policy = policy.map(|p| {
        json!({
            "fetched_at": iso(p.fetched_at),
            "checksum": p.body.get("checksum"),
            "available_models": p.body.pointer("/settings/availableModels"),
        })
    });
    // From the keys loaded at start or stored since: no keychain round trip per view.
    let tests = inner.tests.lock().map(|t| t.clone()).unwrap_or_default();
    // Which providers the running engine routes to (none while it restarts).
    let active: Vec<String> = match inner.engine.try_lock() {
        Ok(guard) => guard
            .as_ref()
            .map(|h| {
                h.gateway()
                    .upstreams
                    .list
                    .iter()
                    .map(|u| u.name.clone())
                    .collect()
            })
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    let providers: Vec<Value> = settings
        .providers
        .iter()
        .map(|p| {
            let stored = key_stored(app, p);
            json!({
                "name": p.name,
                "kind": p.kind,
                "key_stored": stored,
                "region": p.region,
                "project_id": p.project_id,
                "resource": p.resource,
                "aws_profile": p.aws_profile,
                "preset": p.preset,
                "base_url": p.base_url,
                "model_map": p.model_map,
                "last_test": tests.get(&p.name),
                "active": active.contains(&p.name),
            })
        })
        .collect();
    let (file, target) = claude(app);
    let (cc_status, cc_detail) = match target.map(|t| file.status(&t)) {
        Ok(Ok(Status::NotConfigured)) => ("not_configured", None),
        Ok(Ok(Status::Configured)) => ("configured", None),
        Ok(Ok(Status::Drifted { keys })) => (
            "drifted",
            Some(
                keys.iter()
                    .map(|d| format!("{}: expected {}, found {}", d.key, d.expected, d.found))
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
        ),
        Ok(Err(e)) => ("not_configured", Some(e.to_string())),
        Err(e) => ("not_configured", Some(e.to_string())),
    };
    let doc = file.read().ok();
    let setup = super::setup::state(app, cc_status != "not_configured").await;
    json!({
        "setup": setup,
        "mode": settings.mode,
        "paused": app.paused().await,
        "listen": app.base_url(),
        "keychain": {
            "available": inner.deps.keychain.is_ok(),
            "error": inner.deps.keychain.as_ref().err(),
        },
        "bootstrap": {
            "path": boot.path.display().to_string(),
            "present": b.is_some() || boot.result.is_err(),
            "error": boot.result.as_ref().err(),
            "central_url": b.map(|b| b.central_url.as_str().trim_end_matches('/').to_owned()),
            "login_notice": b.and_then(|b| b.login_notice.clone()),
        },
        "locks": {
            "mode": locked_mode,
            "central_url": b.is_some(),
            "local_providers": b.is_some_and(|b| !b.allow_local_providers),
            "claude_code": b.is_some_and(|b| b.auto_configure_claude_code),
        },
        "central": central,
        "login": login,
        "central_spend": central_spend,
        "policy": policy,
        "providers": providers,
        "presets": super::presets::all_json(),
        "primary": settings.primary.as_deref().unwrap_or("anthropic"),
        // The running engine's upstreams in the order it tries them.
        "routing": active,
        "budgets": settings.budgets,
        "start_at_login": settings.start_at_login,
        "port": settings.port,
        "claude_code": {
            "status": cc_status,
            "settings_path": file.path().display().to_string(),
            "detail": cc_detail,
            "statusline": super::setup::statusline_owner(doc.as_ref()),
        },
    })
}

/// Whether a provider has the key it is shown with: Anthropic's in its slot; a cloud
/// provider or preset is an engine upstream only with what it needs (a profile or a local
/// server has no key).
pub(super) fn key_stored(app: &App, p: &crate::settings::ProviderEntry) -> bool {
    if p.name == "anthropic" {
        app.inner().keys.slot(&p.name).has_stored()
    } else {
        p.aws_profile.is_none()
            && p.preset
                .as_deref()
                .and_then(super::presets::find)
                .is_none_or(|pr| pr.key != super::presets::KeyNeed::None)
    }
}

pub async fn status_line(app: &App) -> String {
    let settings = app.settings();
    let today = app
        .inner()
        .store
        .usage_totals(
            app.inner()
                .deps
                .clock
                .now()
                .date_naive()
                .and_time(chrono::NaiveTime::MIN)
                .and_utc(),
        )
        .await
        .map(|t| format!("${:.2}", t.cost_micro_usd as f64 / 1e6))
        .unwrap_or_else(|_| "unavailable".into());
    let mode = match settings.mode {
        Mode::Standalone => "Standalone".to_owned(),
        Mode::Connected => match app.login_state() {
            LoginState::SignedIn => "Connected".to_owned(),
            _ => "Connected (not signed in)".to_owned(),
        },
    };
    let paused = if app.paused().await { " · paused" } else { "" };
    format!("{mode} · today {today}{paused}")
}

async fn save(app: &App, settings: Settings) -> Result<(), AppError> {
    app.inner().state.put(SETTINGS_KEY, &settings).await?;
    if let Ok(mut s) = app.inner().settings.lock() {
        *s = settings;
    }
    Ok(())
}

async fn apply_budgets(app: &App, b: &Budgets) -> Result<(), AppError> {
    let store = &app.inner().store;
    for (period, cents) in [
        (Period::Daily, b.daily_cents),
        (Period::Weekly, b.weekly_cents),
        (Period::Monthly, b.monthly_cents),
    ] {
        let cents = cents
            .map(i64::try_from)
            .transpose()
            .map_err(|_| AppError::BadInput("budget too large".into()))?;
        store
            .upsert_limit(
                ScopeType::User,
                gatehouse_engine::identity::LOCAL_SUBJECT,
                period,
                cents,
                "desktop",
                app.inner().deps.clock.now(),
            )
            .await?;
    }
    // Leases reserved under the old budgets admit no more (a restarting engine starts anew).
    if let Ok(engine) = app.inner().engine.try_lock()
        && let Some(handle) = engine.as_ref()
    {
        handle.caps_changed();
    }
    Ok(())
}

pub async fn update_settings(app: &App, patch: &Value) -> Result<(), AppError> {
    let Some(obj) = patch.as_object() else {
        return Err(AppError::BadInput("the body must be a JSON object".into()));
    };
    let boot = app.bootstrap().get();
    let mut next = app.settings();
    let mut restart = false;
    for (k, v) in obj {
        match k.as_str() {
            "mode" => {
                let mode: Mode = serde_json::from_value(v.clone()).map_err(|_| {
                    AppError::BadInput("mode must be \"standalone\" or \"connected\"".into())
                })?;
                if boot.is_some_and(|b| b.force_connected_mode) && mode != Mode::Connected {
                    return Err(AppError::Locked("connected mode is required".into()));
                }
                if mode == Mode::Connected
                    && next.central_url.is_none()
                    && !obj.contains_key("central_url")
                {
                    return Err(AppError::BadInput(
                        "set the central Gatehouse URL before switching to connected mode".into(),
                    ));
                }
                restart |= mode != next.mode;
                next.mode = mode;
            }
            "central_url" => {
                if boot.is_some() {
                    return Err(AppError::Locked(
                        "the central Gatehouse URL is set by IT".into(),
                    ));
                }
                let url = v
                    .as_str()
                    .ok_or_else(|| AppError::BadInput("central_url must be a string".into()))?;
                let origin =
                    crate::central::origin(url).map_err(|e| AppError::BadInput(e.to_string()))?;
                restart |= next.central_url.as_deref() != Some(origin.as_str());
                next.central_url = Some(origin);
            }
            "budgets" => {
                next.budgets = serde_json::from_value(v.clone()).map_err(|e| {
                    AppError::BadInput(format!(
                        "budgets: {e} (daily_cents, weekly_cents, monthly_cents: whole cents or null)"
                    ))
                })?;
            }
            "start_at_login" => {
                let on = v.as_bool().ok_or_else(|| {
                    AppError::BadInput("start_at_login must be true or false".into())
                })?;
                let inner = app.inner();
                let xdg = inner
                    .deps
                    .env
                    .var("XDG_CONFIG_HOME")
                    .map(std::path::PathBuf::from);
                crate::autostart::set(
                    &inner.deps.home,
                    xdg.as_deref(),
                    &inner.deps.gatehouse_exe,
                    on,
                )
                .map_err(AppError::Internal)?;
                next.start_at_login = on;
            }
            "port" => {
                // Takes effect at the next start (Claude Code is configured with the port).
                next.port = v
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .filter(|p| *p >= 1024)
                    .ok_or_else(|| {
                        AppError::BadInput("port must be a number from 1024 to 65535".into())
                    })?;
            }
            other => {
                return Err(AppError::BadInput(format!("unknown setting `{other}`")));
            }
        }
    }
    apply_budgets(app, &next.budgets).await?;
    save(app, next).await?;
    if restart {
        // Not awaited here: the restart drains in-flight requests, this one included.
        let app = app.clone();
        app.clone().spawn(async move {
            match app.restart_engine().await {
                Ok(()) => app.sync_now().await,
                Err(e) => tracing::error!(error = %e, "could not restart the gateway"),
            }
        });
    }
    app.publish("app.state");
    Ok(())
}

/// Restarts the engine after this answer: the restart drains in-flight requests, the one
/// that asked for it included. The view follows through `app.state`.
fn restart_soon(app: &App) {
    let app = app.clone();
    app.clone().spawn(async move {
        if let Err(e) = app.restart_engine().await {
            tracing::error!(error = %e, "could not restart the gateway");
        }
    });
}

pub async fn add_provider(app: &App, body: &Value) -> Result<(), AppError> {
    if app
        .bootstrap()
        .get()
        .is_some_and(|b| !b.allow_local_providers)
    {
        return Err(AppError::Locked("local providers are not allowed".into()));
    }
    let (entry, secret) = super::providers::parse(body)?;
    if let Err(e) = &app.inner().deps.keychain {
        return Err(AppError::Keychain(format!(
            "no keychain reachable ({e}); Gatehouse does not store keys elsewhere"
        )));
    }
    let creds = crate::keychain::credentials(&app.inner().deps.keychain);
    let account = provider_account(&entry.name);
    match secret.clone() {
        Some(secret) => super::keychain(move || creds.set(SERVICE, &account, &secret)).await?,
        // An AWS profile: nothing secret to keep, and no older key left behind.
        None => super::keychain(move || creds.delete(SERVICE, &account)).await?,
    }
    let mut next = app.settings();
    let cloud = entry.name != "anthropic";
    let name = entry.name.clone();
    next.providers.retain(|p| p.name != name);
    next.providers.push(entry);
    save(app, next).await?;
    if cloud {
        // A cloud provider's client is built with the engine: restart it.
        restart_soon(app);
    } else {
        app.inner().keys.slot(&name).set(secret);
    }
    app.publish("app.state");
    Ok(())
}

/// Makes `name` the first provider tried (the others follow in their order); the
/// gateway restarts in the background, Claude Code's settings stay as they are.
pub async fn make_primary(app: &App, name: &str) -> Result<(), AppError> {
    let mut next = app.settings();
    if name != "anthropic" && !next.providers.iter().any(|p| p.name == name) {
        return Err(AppError::BadInput(format!("no provider named `{name}`")));
    }
    next.primary = (name != "anthropic").then(|| name.to_owned());
    save(app, next).await?;
    restart_soon(app);
    app.publish("app.state");
    Ok(())
}

pub async fn remove_provider(app: &App, name: &str) -> Result<(), AppError> {
    let mut next = app.settings();
    let Some(removed) = next.providers.iter().find(|p| p.name == name).cloned() else {
        return Err(AppError::BadInput(format!("no provider named `{name}`")));
    };
    next.providers.retain(|p| p.name != name);
    if next.primary.as_deref() == Some(name) {
        next.primary = None;
    }
    let creds = crate::keychain::credentials(&app.inner().deps.keychain);
    let account = provider_account(name);
    super::keychain(move || creds.delete(SERVICE, &account)).await?;
    save(app, next).await?;
    app.inner().keys.slot(name).set(None);
    if removed.name != "anthropic" {
        restart_soon(app);
    }
    app.publish("app.state");
    Ok(())
}

/// What configuring Claude Code would change (`GET claude-code/preview`).
pub fn preview_claude_code(app: &App, statusline: bool) -> Result<Value, AppError> {
    let (file, target) = claude(app);
    let mut target = target?;
    if statusline {
        target = target.with_statusline(statusline_command(app)?);
    }
    let changes = file
        .changes(&target)
        .map_err(|e| AppError::BadInput(e.to_string()))?;
    Ok(super::setup::preview(&changes, file.path()))
}

pub async fn configure_claude_code(
    app: &App,
    undo: bool,
    statusline: bool,
) -> Result<(), AppError> {
    let locked = app
        .bootstrap()
        .get()
        .is_some_and(|b| b.auto_configure_claude_code);
    let (file, target) = claude(app);
    if undo {
        if locked {
            return Err(AppError::Locked(
                "Claude Code configuration is managed".into(),
            ));
        }
        file.undo().map_err(|e| AppError::BadInput(e.to_string()))?;
    } else {
        let target = if statusline {
            target?.with_statusline(statusline_command(app)?)
        } else {
            target?
        };
        file.configure(&target)
            .map_err(|e| AppError::BadInput(e.to_string()))?;
    }
    app.publish("app.state");
    Ok(())
}
