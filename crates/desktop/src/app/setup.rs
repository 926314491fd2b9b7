//! The guided first run and the Claude Code touch points: where setup stands (the app
//! state's `setup`), what configuring Claude Code will change before it does (`GET
//! claude-code/preview`), and the figures behind `gatehouse statusline`.

use chrono::{Duration, NaiveTime};
use gatehouse_engine::insight::Days;
use gatehouse_engine::spend::Period;
use gatehouse_engine::store::rollup::hour_of;
use serde_json::{Value, json};

use super::{App, AppError, insight};
use crate::claude_settings::{Change, Key, Target};
use crate::settings::Mode;

/// How many of the newest usage rows are searched for Claude Code's first request.
const FIRST_REQUEST_WINDOW: usize = 200;

/// A provider is usable: standalone, one with its key (or needing none); connected,
/// signed in to the central server.
pub fn provider_ready(app: &App) -> bool {
    let settings = app.settings();
    match settings.mode {
        Mode::Standalone => settings
            .providers
            .iter()
            .any(|p| super::state::key_stored(app, p)),
        Mode::Connected => app.inner().session.current().is_some(),
    }
}

/// The app state's `setup` block: whether the window should open on Get started, and the
/// live state of its three steps.
pub async fn state(app: &App, claude_code_configured: bool) -> Value {
    let settings = app.settings();
    let provider_ready = provider_ready(app);
    let first = app
        .store()
        .recent_usage(FIRST_REQUEST_WINDOW)
        .await
        .ok()
        .and_then(|rows| rows.into_iter().find(|r| r.tags.from_claude_code()))
        .map(|r| {
            json!({
                "at": r.created_at,
                "model": r.model,
                "status": r.status,
                "cost_micro_usd": r.cost_micro_usd,
                "client": r.tags.client,
            })
        });
    json!({
        "needed": settings.mode == Mode::Standalone && !provider_ready,
        "provider_ready": provider_ready,
        "claude_code_configured": claude_code_configured,
        "first_request": first,
    })
}

/// `none`, `gatehouse` or `other`: whose status line Claude Code shows.
pub fn statusline_owner(settings_doc: Option<&serde_json::Map<String, Value>>) -> &'static str {
    match settings_doc.and_then(|d| d.get(Key::StatusLine.name())) {
        None => "none",
        Some(v) if Target::is_ours(Some(v)) => "gatehouse",
        Some(_) => "other",
    }
}

/// What configuring Claude Code would change, key by key, as the window shows it. Values
/// that may hold a credential (a helper command, a token, someone's status line command)
/// are shown as `(set)`.
pub fn preview(changes: &[Change], path: &std::path::Path) -> Value {
    let shown = |key: Key, v: Option<&Value>| -> Value {
        match (key, v) {
            (_, None) => Value::Null,
            (Key::BaseUrl, Some(Value::String(s))) => Value::String(s.clone()),
            (Key::ApiKeyHelper, Some(v))
                if v.as_str().is_some_and(|c| c.ends_with(" token --local")) =>
            {
                Value::String("gatehouse token --local (the local token from the keychain)".into())
            }
            (Key::StatusLine, Some(v)) if Target::is_ours(Some(v)) => {
                Value::String("Gatehouse's cost line".into())
            }
            _ => Value::String("(set)".into()),
        }
    };
    let changes: Vec<Value> = changes
        .iter()
        .map(|c| {
            json!({
                "key": c.key.name(),
                "from": shown(c.key, c.now.as_ref()),
                "to": shown(c.key, c.wanted.as_ref()),
            })
        })
        .collect();
    json!({"settings_path": path.display().to_string(), "changes": changes})
}

/// Writes `statusline.json` in the data directory: this gateway's URL and the status token,
/// for Claude Code's status line command (`gatehouse-statusline`). Private to the user
/// (0600, written whole then renamed); the token opens only the status line's figures.
pub fn write_status_file(app: &App) -> std::io::Result<()> {
    let dir = &app.inner().deps.data_dir;
    let body = serde_json::to_vec(&json!({
        "url": app.base_url(),
        "token": app.status_token().expose(),
    }))?;
    let tmp = dir.join(format!(".{}.tmp", gatehouse_statusline::FILE));
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
    {
        use std::io::Write;
        let mut f = open.open(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(gatehouse_statusline::FILE))
}

/// What `gatehouse statusline` prints from: this session's cost, today's, the daily
/// budget and the cache-read ratio of the session (or of today without one). Today is the
/// UTC day, the window the daily budget and the central daily cap count in.
pub async fn statusline(app: &App, session_id: Option<&str>) -> Result<Value, AppError> {
    let now = app.inner().deps.clock.now();
    let midnight = now.date_naive().and_time(NaiveTime::MIN).and_utc();
    let store = app.store();
    let today = store.usage_totals(midnight).await?;
    let session =
        match session_id.filter(|s| gatehouse_engine::metering::tags::valid_id(s.as_bytes())) {
            Some(id) => {
                let rows = store
                    .usage_rollup(
                        hour_of(now - Duration::days(insight::MAX_DAYS)),
                        hour_of(now),
                        Some(id.to_owned()),
                    )
                    .await?;
                gatehouse_engine::insight::sessions(&rows)
                    .into_iter()
                    .next()
            }
            None => None,
        };
    let ratio = match &session {
        Some(s) => gatehouse_engine::insight::cache_read_ratio(&s.total),
        None => {
            // Today as the caps count it: the UTC day (the daily budget's window).
            let utc = Days::default();
            let today = utc.of(now);
            let rows = store
                .usage_rollup(utc.first_hour(today), hour_of(now), None)
                .await?;
            let day = gatehouse_engine::insight::per_day(&rows, utc, today, today);
            day.first()
                .and_then(gatehouse_engine::insight::cache_read_ratio)
        }
    };
    let settings = app.settings();
    let (daily_limit, over) = match settings.mode {
        Mode::Standalone => {
            let limit = settings
                .budgets
                .daily_cents
                .map(|c| c.saturating_mul(10_000));
            (limit, limit.is_some_and(|l| today.cost_micro_usd >= l))
        }
        Mode::Connected => central_daily(app).await,
    };
    Ok(json!({
        "session_cost_micro_usd": session.as_ref().map(|s| s.total.cost_micro_usd),
        "session_requests": session.as_ref().map(|s| s.total.requests),
        "today_cost_micro_usd": today.cost_micro_usd,
        "daily_limit_micro_usd": daily_limit,
        "over_budget": over,
        "cache_read_ratio": ratio,
        "paused": app.paused().await,
        "mode": settings.mode,
    }))
}

/// The central server's daily limit and whether it is used up (connected mode, cached).
async fn central_daily(app: &App) -> (Option<u64>, bool) {
    let cached: Option<super::connected::Cached> = app
        .inner()
        .state
        .get(crate::settings::SPEND_KEY)
        .await
        .ok()
        .flatten();
    let Some(body) = cached.map(|c| c.body) else {
        return (None, false);
    };
    let daily = body
        .get("periods")
        .and_then(Value::as_array)
        .and_then(|ps| ps.iter().find(|p| p["period"] == Period::Daily.as_str()));
    match daily {
        Some(p) => {
            let limit = p["limit_cents"].as_u64().map(|c| c.saturating_mul(10_000));
            let spent = p["spent_micro_usd"].as_u64().unwrap_or(0);
            (limit, limit.is_some_and(|l| spent >= l))
        }
        None => (None, false),
    }
}
