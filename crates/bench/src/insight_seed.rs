//! The insight phase's data: usage rows over the last 30 days in the desktop app's SQLite
//! database, written through the engine's store API as the gateway writes them (batches in
//! time order, the rollup kept in each batch's transaction), and a Claude Code transcript
//! directory that maps the sessions to projects.
//!
//! The shape, from a fixed seed so every run writes the same rows: ~2,000 sessions with
//! uuid-like ids, each lasting 3 minutes to 6 hours (log-uniform) with about one request
//! every 9 s while it lasts; one session still running now (the status line's); ~10% of a
//! session's requests from its subagents (mostly Haiku); a session's main model Sonnet 4.5,
//! Opus 4.1 or Sonnet 4, with Haiku for titles and summaries; prompt caching (reads
//! growing along a session, 5-minute writes); ~0.6% errors; 3% of the rows without a
//! session (scripts). ~2% of the sessions have no transcript left, as when Claude Code has
//! cleaned old ones up: the views name them "unknown project".

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, NaiveTime, Utc};
use gatehouse_engine::store::{ClientTags, SqliteStore, Store, UsageRecord};

/// Sessions in the seeded database.
pub const SESSIONS: usize = 2_000;
/// Projects (working directories) the sessions ran in.
pub const PROJECTS: usize = 40;
/// Rows per `insert_usage` call.
pub const BATCH: usize = 5_000;
/// Every this many sessions, one has no transcript.
const UNKNOWN_EVERY: usize = 50;
/// Share of the rows sent without a session (scripts, other tools).
const NO_SESSION_SHARE: f64 = 0.03;
/// The principal of the local token's requests.
const PRINCIPAL: &str = "local";
const CLIENT: &str = "claude-cli/2.1.337";

const MIN_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MIN_MS;

/// One seeded session.
#[derive(Debug, Clone)]
pub struct SeededSession {
    pub id: String,
    /// `None`: no transcript names it.
    pub project: Option<usize>,
    pub rows: usize,
    pub start_ms: i64,
    pub end_ms: i64,
}

/// What was written.
#[derive(Debug, Default)]
pub struct Seeded {
    pub rows: usize,
    pub sessions: Vec<SeededSession>,
    pub no_session_rows: usize,
    pub subagent_rows: usize,
    pub transcripts: usize,
    /// Generating and inserting the rows (store opened, batches written and committed).
    pub rows_time: Duration,
    pub transcripts_time: Duration,
    /// The database and its WAL after seeding.
    pub db_bytes: u64,
    /// The session still running now (index into `sessions`).
    pub current: usize,
    /// The session with the most rows.
    pub largest: usize,
}

impl Seeded {
    /// The sessions that got rows (all of them, unless very few rows were asked for).
    pub fn active(&self) -> impl Iterator<Item = &SeededSession> {
        self.sessions.iter().filter(|s| s.rows > 0)
    }

    pub fn projects_with_sessions(&self) -> usize {
        let mut seen = [false; PROJECTS];
        for s in self.active() {
            if let Some(p) = s.project {
                seen[p] = true;
            }
        }
        seen.iter().filter(|b| **b).count()
    }
}

/// The project directory of index `p`.
pub fn project_cwd(p: usize) -> String {
    format!("/home/bench/p{p}")
}

/// splitmix64: small, fast and reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi.saturating_sub(lo) + 1)
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    fn uuid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | ((b >> 48) & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }
}

/// Price per token in micro-USD (= USD per million tokens): input, output, cache read,
/// 5-minute cache write.
fn prices(model: &str) -> [f64; 4] {
    match model {
        "claude-opus-4-1" => [15.0, 75.0, 1.5, 18.75],
        "claude-haiku-4-5" => [1.0, 5.0, 0.1, 1.25],
        _ => [3.0, 15.0, 0.3, 3.75],
    }
}

struct Plan {
    sessions: Vec<SeededSession>,
    models: Vec<&'static str>,
    agents: Vec<u64>,
    /// Every row's time and session (`u32::MAX`: none), oldest first.
    events: Vec<(i64, u32)>,
}

/// Sessions and row times for `rows` rows ending at `now_ms`, all inside the views'
/// 30-day window (which starts at midnight UTC 29 days ago).
fn plan(rng: &mut Rng, rows: usize, now_ms: i64, window_start_ms: i64) -> Plan {
    let mut sessions = Vec::with_capacity(SESSIONS);
    let mut weights = Vec::with_capacity(SESSIONS);
    let mut models = Vec::with_capacity(SESSIONS);
    let mut agents = Vec::with_capacity(SESSIONS);
    let span = now_ms - MIN_MS - window_start_ms;
    for i in 0..SESSIONS {
        // 3 minutes to 6 hours, log-uniform; the first session is still running.
        let dur = if i == 0 {
            2 * HOUR_MS
        } else {
            (3.0 * MIN_MS as f64 * 120f64.powf(rng.unit())) as i64
        };
        let start = if i == 0 {
            now_ms - dur
        } else {
            window_start_ms + MIN_MS + (rng.unit() * (span - dur - MIN_MS).max(1) as f64) as i64
        };
        // Some projects see far more sessions than others.
        let project = (i % UNKNOWN_EVERY != UNKNOWN_EVERY - 1)
            .then(|| ((PROJECTS as f64) * rng.unit().powi(2)) as usize)
            .map(|p| p.min(PROJECTS - 1));
        let r = rng.unit();
        models.push(if r < 0.65 {
            "claude-sonnet-4-5"
        } else if r < 0.85 {
            "claude-opus-4-1"
        } else {
            "claude-sonnet-4"
        });
        agents.push(rng.next());
        weights.push(dur as f64 * (0.5 + rng.unit()));
        sessions.push(SeededSession {
            id: rng.uuid(),
            project,
            rows: 0,
            start_ms: start,
            end_ms: start + dur,
        });
    }
    let no_session = ((rows as f64) * NO_SESSION_SHARE) as usize;
    let in_sessions = rows - no_session;
    let total: f64 = weights.iter().sum();
    let mut given = 0;
    for (s, w) in sessions.iter_mut().zip(&weights) {
        s.rows = ((w / total) * in_sessions as f64) as usize;
        given += s.rows;
    }
    for k in 0..in_sessions.saturating_sub(given) {
        sessions[k % SESSIONS].rows += 1;
    }
    let mut events = Vec::with_capacity(rows);
    for (i, s) in sessions.iter().enumerate() {
        let dur = (s.end_ms - s.start_ms).max(1) as f64;
        for _ in 0..s.rows {
            events.push((s.start_ms + (rng.unit() * dur) as i64, i as u32));
        }
    }
    let all = (now_ms - window_start_ms - MIN_MS) as f64;
    for _ in 0..no_session {
        events.push((
            window_start_ms + MIN_MS + (rng.unit() * all) as i64,
            u32::MAX,
        ));
    }
    events.sort_unstable();
    Plan {
        sessions,
        models,
        agents,
        events,
    }
}

/// One usage row as the gateway would write it.
fn row(rng: &mut Rng, plan: &Plan, n: usize, at_ms: i64, s: u32, pos: &mut [u32]) -> UsageRecord {
    let mut tags = ClientTags::default();
    let (model, progress) = match plan.sessions.get(s as usize) {
        Some(sess) => {
            let i = s as usize;
            tags.session_id = Some(sess.id.clone());
            tags.client = Some(CLIENT.to_owned());
            pos[i] += 1;
            let progress = f64::from(pos[i]) / sess.rows.max(1) as f64;
            let r = rng.unit();
            let model = if r < 0.10 {
                // A subagent: one of the session's few agents, mostly on Haiku.
                let agents = 1 + sess.rows as u64 / 200;
                let k = rng.range(0, agents - 1);
                tags.agent_id = Some(format!(
                    "agent-{:08x}",
                    plan.agents[i].wrapping_add(k) & 0xffff_ffff
                ));
                tags.request_class = Some("subagent");
                if rng.chance(0.6) {
                    "claude-haiku-4-5"
                } else {
                    plan.models[i]
                }
            } else if r < 0.13 {
                tags.request_class = Some("auxiliary");
                "claude-haiku-4-5"
            } else if r < 0.135 {
                tags.request_class = Some("compaction");
                plan.models[i]
            } else {
                tags.request_class = Some("main");
                plan.models[i]
            };
            (model, progress)
        }
        None => {
            if rng.chance(0.5) {
                tags.client = Some("python-httpx/0.28.1".to_owned());
            }
            let model = if rng.chance(0.5) {
                "claude-haiku-4-5"
            } else {
                "claude-sonnet-4-5"
            };
            (model, rng.unit())
        }
    };
    let failed = rng.chance(0.006);
    let (input, output, cache_read, cache_write) = if failed {
        (0, 0, 0, 0)
    } else {
        (
            rng.range(1, 600),
            rng.range(40, 2_000),
            (8_000.0 + progress * 140_000.0 * (0.8 + 0.4 * rng.unit())) as u64,
            if rng.chance(0.3) {
                rng.range(200, 8_000)
            } else {
                0
            },
        )
    };
    let [pi, po, pr, pw] = prices(model);
    let cost =
        input as f64 * pi + output as f64 * po + cache_read as f64 * pr + cache_write as f64 * pw;
    let latency = rng.range(1_500, 60_000);
    UsageRecord {
        request_id: format!("req_bench{n:010}"),
        row_key: (rng.next() >> 1).max(1) as i64,
        created_at: DateTime::from_timestamp_millis(at_ms).unwrap_or_default(),
        principal: PRINCIPAL.to_owned(),
        endpoint: "messages".to_owned(),
        model: model.to_owned(),
        upstream: Some("anthropic".to_owned()),
        upstream_model: Some(model.to_owned()),
        status: if failed {
            if rng.chance(0.7) { 529 } else { 500 }
        } else {
            200
        },
        route_reason: "primary: first healthy".to_owned(),
        stream: true,
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: cache_read,
        cache_write_5m_tokens: cache_write,
        cache_write_1h_tokens: 0,
        web_search_requests: 0,
        cost_micro_usd: cost.round() as u64,
        usage_source: if failed { "none" } else { "reported" }.to_owned(),
        latency_ms: latency,
        ttfb_ms: (!failed).then(|| rng.range(300, 3_000).min(latency)),
        client_disconnected: false,
        reservation_id: None,
        tags,
    }
}

/// Writes `rows` usage rows into the desktop database under `data_dir` and the transcripts
/// under `claude_dir`; progress on stderr.
pub async fn seed(
    data_dir: &Path,
    claude_dir: &Path,
    rows: usize,
    now: DateTime<Utc>,
) -> anyhow::Result<Seeded> {
    let started = Instant::now();
    let mut rng = Rng(0x6a09_e667_f3bc_c908);
    let now_ms = now.timestamp_millis();
    // The views' 30 days end today and start at midnight 29 days before (UTC here).
    let window_start_ms = (now.date_naive() - chrono::Days::new(29))
        .and_time(NaiveTime::MIN)
        .and_utc()
        .timestamp_millis();
    let plan = plan(&mut rng, rows, now_ms, window_start_ms);
    let db = data_dir.join("gatehouse.db");
    let path = db.clone();
    let store = tokio::task::spawn_blocking(move || SqliteStore::open(&path, now))
        .await?
        .with_context(|| format!("cannot open {}", db.display()))?;
    let mut pos = vec![0u32; SESSIONS];
    let mut subagent_rows = 0;
    let mut written = 0;
    let mut last_report = Instant::now();
    for (b, chunk) in plan.events.chunks(BATCH).enumerate() {
        let batch: Vec<UsageRecord> = chunk
            .iter()
            .enumerate()
            .map(|(k, &(at, s))| row(&mut rng, &plan, b * BATCH + k, at, s, &mut pos))
            .collect();
        subagent_rows += batch.iter().filter(|r| r.tags.is_subagent()).count();
        written += batch.len();
        store
            .insert_usage(Arc::new(batch))
            .await
            .with_context(|| format!("inserting usage rows (batch {b})"))?;
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "  insight: {written} of {rows} rows written ({:.0} s)",
                started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
    }
    drop(store);
    let rows_time = started.elapsed();
    let t = Instant::now();
    let transcripts = write_transcripts(claude_dir, &plan.sessions)?;
    let transcripts_time = t.elapsed();
    let db_bytes = ["", "-wal"]
        .iter()
        .filter_map(|ext| std::fs::metadata(data_dir.join(format!("gatehouse.db{ext}"))).ok())
        .map(|m| m.len())
        .sum();
    let largest = plan
        .sessions
        .iter()
        .enumerate()
        .max_by_key(|(_, s)| s.rows)
        .map_or(0, |(i, _)| i);
    Ok(Seeded {
        rows: written,
        no_session_rows: plan.events.iter().filter(|e| e.1 == u32::MAX).count(),
        sessions: plan.sessions,
        subagent_rows,
        transcripts,
        rows_time,
        transcripts_time,
        db_bytes,
        current: 0,
        largest,
    })
}

/// Claude Code's encoding of a working directory as a directory name.
fn encode(cwd: &str) -> String {
    cwd.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// `<claude_dir>/projects/<encoded cwd>/<session>.jsonl` for every session with a project.
fn write_transcripts(claude_dir: &Path, sessions: &[SeededSession]) -> anyhow::Result<usize> {
    let mut n = 0;
    for s in sessions {
        let Some(p) = s.project else { continue };
        let cwd = project_cwd(p);
        let dir: PathBuf = claude_dir.join("projects").join(encode(&cwd));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let first = serde_json::json!({"type": "user", "sessionId": s.id, "cwd": cwd});
        let second = serde_json::json!({
            "type": "assistant", "sessionId": s.id, "cwd": cwd,
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Looking at the tests first."}]},
        });
        let path = dir.join(format!("{}.jsonl", s.id));
        std::fs::write(&path, format!("{first}\n{second}\n"))
            .with_context(|| format!("cannot write {}", path.display()))?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_plan_has_the_asked_shape() {
        let now = 1_800_000_000_000;
        let start = now - 29 * 86_400_000 - 3_600_000;
        let plan = plan(&mut Rng(7), 200_000, now, start);
        assert_eq!(plan.events.len(), 200_000);
        assert_eq!(plan.sessions.len(), SESSIONS);
        assert!(plan.events.windows(2).all(|w| w[0] <= w[1]));
        assert!(plan.events.iter().all(|e| e.0 > start && e.0 <= now));
        let none = plan.events.iter().filter(|e| e.1 == u32::MAX).count();
        assert_eq!(none, 6_000);
        assert!(plan.sessions.iter().all(|s| s.rows > 0));
        let unknown = plan.sessions.iter().filter(|s| s.project.is_none()).count();
        assert_eq!(unknown, SESSIONS / UNKNOWN_EVERY);
        assert!(plan.sessions[0].end_ms == now);
        let ids: std::collections::BTreeSet<&str> =
            plan.sessions.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids.len(), SESSIONS);
        assert!(
            ids.iter()
                .all(|id| id.len() == 36
                    && gatehouse_engine::metering::tags::valid_id(id.as_bytes()))
        );
        assert_eq!(encode("/home/bench/p7"), "-home-bench-p7");
    }

    #[test]
    fn rows_carry_sessions_subagents_and_costs() {
        let now = 1_800_000_000_000;
        let mut rng = Rng(1);
        let plan = plan(&mut rng, 20_000, now, now - 29 * 86_400_000);
        let mut pos = vec![0u32; SESSIONS];
        let rows: Vec<UsageRecord> = plan
            .events
            .iter()
            .enumerate()
            .map(|(n, &(at, s))| row(&mut rng, &plan, n, at, s, &mut pos))
            .collect();
        let sub = rows.iter().filter(|r| r.tags.is_subagent()).count() as f64;
        let with_session = rows.iter().filter(|r| r.tags.session_id.is_some()).count() as f64;
        assert!((0.07..0.13).contains(&(sub / with_session)), "{sub}");
        assert!(
            rows.iter()
                .filter(|r| r.status == 200)
                .all(|r| r.cost_micro_usd > 0)
        );
        assert!(rows.iter().any(|r| r.cache_write_5m_tokens > 0));
        let models: std::collections::BTreeSet<&str> =
            rows.iter().map(|r| r.model.as_str()).collect();
        assert_eq!(models.len(), 4, "{models:?}");
    }
}
