//! What the tray window shows about where the money went: projects, sessions, a session's
//! requests and the charts (the app API's `insight/*`, see the UI contract), from the
//! engine's usage rollup ([`gatehouse_engine::insight`]) and Claude Code's transcript
//! index ([`crate::transcripts`]), which maps a session to the project it ran in.
//!
//! Nothing here writes: the rollup is kept by the store, the transcripts are read-only.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use gatehouse_engine::insight::Days;
use gatehouse_engine::insight::{self, SessionSummary, cache_read_ratio};
use gatehouse_engine::store::RowQuery;
use gatehouse_engine::store::rollup::{RollupRow, RollupSums, hour_of};
use serde_json::{Value, json};

use super::{App, AppError};
use crate::transcripts::{Project, TranscriptIndex};

/// The most days a view or export reaches back.
pub const MAX_DAYS: i64 = 400;
/// The most requests a session's detail lists.
const DETAIL_REQUESTS: usize = 500;

/// A session's project as the views name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectRef {
    /// The project's path, or `session:<id>` when the transcripts do not know the session.
    pub key: String,
    pub name: String,
    pub path: Option<String>,
    pub known: bool,
}

impl ProjectRef {
    pub fn of(index: &TranscriptIndex, session_id: &str) -> ProjectRef {
        match index.project_of(session_id) {
            Some(Project { path, name }) => ProjectRef {
                key: path.clone().unwrap_or_else(|| format!("dir:{name}")),
                name: name.clone(),
                path: path.clone(),
                known: true,
            },
            None => ProjectRef {
                key: format!("session:{session_id}"),
                name: format!("unknown project (session {}…)", short(session_id)),
                path: None,
                known: false,
            },
        }
    }

    fn json(&self) -> Value {
        json!({"key": self.key, "name": self.name, "path": self.path, "known": self.known})
    }
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// The transcript index, rescanned at most every few seconds.
pub(crate) fn transcripts(app: &App) -> Arc<TranscriptIndex> {
    let deps = &app.inner().deps;
    let dir = crate::transcripts::config_dir(
        deps.env
            .var("CLAUDE_CONFIG_DIR")
            .as_deref()
            .map(std::ffi::OsStr::new),
        Some(deps.home.as_path()),
    );
    match dir {
        Some(dir) => app.inner().transcripts.get(&dir, std::time::Instant::now()),
        None => Arc::new(TranscriptIndex::default()),
    }
}

/// `days` from a query, 1..=[`MAX_DAYS`], default 30.
pub fn days_param(v: Option<&str>) -> Result<i64, AppError> {
    match v {
        None => Ok(30),
        Some(s) => match s.parse::<i64>() {
            Ok(d) if (1..=MAX_DAYS).contains(&d) => Ok(d),
            _ => Err(AppError::BadInput(format!(
                "days must be a whole number from 1 to {MAX_DAYS}"
            ))),
        },
    }
}

/// What a view covers: its last `days` local days, today included.
struct Window {
    now: DateTime<Utc>,
    local: Days,
    today: i64,
    from_day: i64,
}

impl Window {
    fn new(app: &App, days: i64, local: Days) -> Window {
        let now = app.inner().deps.clock.now();
        let today = local.of(now);
        Window {
            now,
            local,
            today,
            from_day: today - (days - 1),
        }
    }
}

async fn rollup(app: &App, w: &Window, session: Option<&str>) -> Result<Vec<RollupRow>, AppError> {
    Ok(app
        .store()
        .usage_rollup(
            w.local.first_hour(w.from_day),
            hour_of(w.now),
            session.map(str::to_owned),
        )
        .await?)
}

/// `tz` from a query: the viewer's offset from UTC in minutes east (0 when absent).
pub fn tz_param(v: Option<&str>) -> Result<Days, AppError> {
    let bad = || {
        AppError::BadInput(format!(
            "tz must be the offset from UTC in whole minutes, -{0} to {0}",
            gatehouse_engine::insight::MAX_OFFSET_MINUTES
        ))
    };
    match v {
        None => Ok(Days::default()),
        Some(s) => s.parse::<i32>().ok().and_then(Days::new).ok_or_else(bad),
    }
}

fn sums_json(s: &RollupSums) -> Value {
    json!({
        "requests": s.requests,
        "input_tokens": s.input_tokens,
        "output_tokens": s.output_tokens,
        "cache_read_tokens": s.cache_read_tokens,
        "cache_write_tokens": s.cache_write_tokens,
        "cost_micro_usd": s.cost_micro_usd,
    })
}

fn session_json(s: &SessionSummary, project: &ProjectRef) -> Value {
    let mut v = sums_json(&s.total);
    let extra = json!({
        "session_id": s.session_id,
        "project": project.json(),
        "first_at": s.first_at(),
        "last_at": s.last_at(),
        "models": s.models,
        "errors": s.total.errors,
        "cache_read_ratio": cache_read_ratio(&s.total),
        "subagent_requests": s.subagent.requests,
        "subagent_cost_micro_usd": s.subagent.cost_micro_usd,
        "compactions": s.total.compactions,
    });
    merge(&mut v, extra);
    v
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(a), Value::Object(b)) = (into.as_object_mut(), from) {
        a.extend(b);
    }
}

/// `GET insight/sessions?days&q&limit`.
pub async fn sessions(
    app: &App,
    days: i64,
    local: Days,
    q: Option<&str>,
    limit: usize,
) -> Result<Value, AppError> {
    let w = Window::new(app, days, local);
    let rows = rollup(app, &w, None).await?;
    let index = transcripts(app);
    let q = q.map(str::to_lowercase).filter(|q| !q.is_empty());
    let all = insight::sessions(&rows);
    let matching: Vec<(&SessionSummary, ProjectRef)> = all
        .iter()
        .map(|s| (s, ProjectRef::of(&index, &s.session_id)))
        .filter(|(s, p)| match &q {
            None => true,
            Some(q) => {
                s.session_id.to_lowercase().contains(q)
                    || p.name.to_lowercase().contains(q)
                    || p.path
                        .as_deref()
                        .is_some_and(|x| x.to_lowercase().contains(q))
                    || s.models.iter().any(|m| m.to_lowercase().contains(q))
            }
        })
        .collect();
    // Counted whole, answered only as far as asked: building JSON is most of the cost.
    let total = matching.len();
    let page: Vec<Value> = matching
        .iter()
        .take(limit)
        .map(|(s, p)| session_json(s, p))
        .collect();
    Ok(json!({
        "generated_at": w.now,
        "days": days,
        "total": total,
        "sessions": page,
    }))
}

/// `GET insight/sessions/<id>`: the session, its agents and its newest requests.
pub async fn session_detail(app: &App, session_id: &str) -> Result<Option<Value>, AppError> {
    if !gatehouse_engine::metering::tags::valid_id(session_id.as_bytes()) {
        return Ok(None);
    }
    let w = Window::new(app, MAX_DAYS, Days::default());
    let rows = rollup(app, &w, Some(session_id)).await?;
    let Some(summary) = insight::sessions(&rows).into_iter().next() else {
        return Ok(None);
    };
    let project = ProjectRef::of(&transcripts(app), session_id);
    let requests = app
        .store()
        .usage_between(RowQuery {
            from: summary.first_at(),
            to: summary.last_at() + Duration::milliseconds(1),
            session_id: Some(session_id.to_owned()),
            newest_first: true,
            limit: DETAIL_REQUESTS,
        })
        .await?;
    // Agents: the main agent, then each subagent by id, summed from the rows listed.
    let mut agents: BTreeMap<Option<String>, (Option<String>, RollupSums)> = BTreeMap::new();
    for r in &requests {
        let e = agents
            .entry(r.tags.agent_id.clone())
            .or_insert_with(|| (r.tags.parent_agent_id.clone(), RollupSums::default()));
        e.1.add(r);
    }
    let agents: Vec<Value> = agents
        .into_iter()
        .map(|(id, (parent, sums))| {
            let mut v = sums_json(&sums);
            merge(
                &mut v,
                json!({
                    "agent_id": id,
                    "parent_agent_id": parent,
                    "kind": if id.is_some() { "subagent" } else { "main" },
                }),
            );
            v
        })
        .collect();
    let listed: Vec<Value> = requests
        .iter()
        .map(|r| {
            json!({
                "at": r.created_at,
                "request_id": r.request_id,
                "model": r.model,
                "upstream": r.upstream,
                "status": r.status,
                "request_class": r.tags.request_class,
                "agent_id": r.tags.agent_id,
                "input_tokens": r.input_tokens,
                "output_tokens": r.output_tokens,
                "cache_read_tokens": r.cache_read_tokens,
                "cache_write_tokens": r.cache_write_5m_tokens.saturating_add(r.cache_write_1h_tokens),
                "cost_micro_usd": r.cost_micro_usd,
                "latency_ms": r.latency_ms,
            })
        })
        .collect();
    Ok(Some(json!({
        "session": session_json(&summary, &project),
        "agents": agents,
        "requests": listed,
        "requests_truncated": requests.len() >= DETAIL_REQUESTS,
    })))
}

/// One project's sums over the window.
#[derive(Default)]
struct ProjectSums {
    project: Option<ProjectRef>,
    sessions: usize,
    today: u64,
    week: u64,
    total: RollupSums,
    subagent_cost: u64,
}

/// `GET insight/projects?days`.
pub async fn projects(app: &App, days: i64, local: Days) -> Result<Value, AppError> {
    let w = Window::new(app, days, local);
    let rows = rollup(app, &w, None).await?;
    let index = transcripts(app);
    let mut by_key: BTreeMap<String, ProjectSums> = BTreeMap::new();
    let mut seen_sessions: BTreeMap<&str, String> = BTreeMap::new();
    for r in rows.iter().filter(|r| !r.key.session_id.is_empty()) {
        let sid = r.key.session_id.as_str();
        let key = match seen_sessions.get(sid) {
            Some(k) => k.clone(),
            None => {
                let p = ProjectRef::of(&index, sid);
                let k = p.key.clone();
                let e = by_key.entry(k.clone()).or_default();
                e.sessions += 1;
                e.project.get_or_insert(p);
                seen_sessions.insert(sid, k.clone());
                k
            }
        };
        let e = by_key.entry(key).or_default();
        e.total.merge(&r.sums);
        let day = w.local.of_hour(r.key.hour);
        if day == w.today {
            e.today += r.sums.cost_micro_usd;
        }
        if day > w.today - 7 {
            e.week += r.sums.cost_micro_usd;
        }
        if r.key.subagent {
            e.subagent_cost += r.sums.cost_micro_usd;
        }
    }
    let mut list: Vec<Value> = by_key
        .into_values()
        .filter_map(|p| {
            let project = p.project?;
            let cost = p.total.cost_micro_usd;
            Some(json!({
                "key": project.key,
                "name": project.name,
                "path": project.path,
                "known": project.known,
                "sessions": p.sessions,
                "requests": p.total.requests,
                "cost_today_micro_usd": p.today,
                "cost_week_micro_usd": p.week,
                "cost_month_micro_usd": cost,
                "subagent_cost_micro_usd": p.subagent_cost,
                "subagent_share": (cost > 0).then(|| p.subagent_cost as f64 / cost as f64),
                "input_tokens": p.total.input_tokens,
                "output_tokens": p.total.output_tokens,
                "cache_read_tokens": p.total.cache_read_tokens,
                "cache_write_tokens": p.total.cache_write_tokens,
                "cache_read_ratio": cache_read_ratio(&p.total),
                "last_at": insight::from_ms(p.total.last_at_ms),
            }))
        })
        .collect();
    list.sort_by_key(|v| std::cmp::Reverse(v["cost_month_micro_usd"].as_u64().unwrap_or(0)));
    Ok(json!({"generated_at": w.now, "days": days, "projects": list}))
}

/// The name of a rollup row's project series in the charts.
fn project_series(index: &TranscriptIndex, r: &RollupRow) -> String {
    if r.key.session_id.is_empty() {
        "other (no session)".to_owned()
    } else {
        ProjectRef::of(index, &r.key.session_id).name
    }
}

/// `GET insight/charts?days`.
pub async fn charts(app: &App, days: i64, local: Days) -> Result<Value, AppError> {
    let w = Window::new(app, days, local);
    let rows = rollup(app, &w, None).await?;
    let index = transcripts(app);
    let series = |list: Vec<(String, Vec<u64>)>| -> Vec<Value> {
        list.into_iter()
            .map(|(name, v)| json!({"name": name, "cost_micro_usd": v}))
            .collect()
    };
    let by_model = insight::daily_cost(&rows, local, w.from_day, w.today, |r| r.key.model.clone());
    let by_project = insight::daily_cost(&rows, local, w.from_day, w.today, |r| {
        project_series(&index, r)
    });
    let day_names: Vec<String> = (w.from_day..=w.today).map(|d| local.label(d)).collect();
    let ratios: Vec<Option<f64>> = insight::per_day(&rows, local, w.from_day, w.today)
        .iter()
        .map(cache_read_ratio)
        .collect();
    Ok(json!({
        "generated_at": w.now,
        "days": day_names,
        "by_model": series(by_model),
        "by_project": series(by_project),
        "cache_read_ratio": ratios,
        "tz": local.offset_minutes,
        "today_by_hour": insight::hourly(&rows, local, w.today)
            .iter()
            .enumerate()
            .map(|(h, s)| json!({"hour": h, "requests": s.requests, "cost_micro_usd": s.cost_micro_usd}))
            .collect::<Vec<_>>(),
    }))
}
