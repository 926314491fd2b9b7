//! The desktop insight views (issue 31, `--insight` or `gatehouse-bench insight`): the
//! tray window's Projects, Sessions, session detail and charts, and the status line, over
//! a database of a million usage rows.
//!
//! A fresh data dir is seeded through the engine's store API (`insight_seed`), with a
//! Claude Code transcript directory mapping the sessions to projects; then the real desktop
//! app service (`gatehouse_desktop::app::App`) is started in this process on a loopback
//! port over it, with an in-memory keychain, and each insight call of its app API is timed
//! as the window makes it (the per-launch app token, one keep-alive connection, sequential
//! calls). The steps behind the views (the rollup query, the transcript scan, the row
//! reads) are timed on their own through the same store, so a slow view shows which one
//! dominates. Last, Claude Code's status line command is timed as Claude Code runs it, a
//! process per run, over the `statusline.json` the app wrote in its data dir
//! (`statusline`): `gatehouse-statusline`, and `gatehouse statusline` beside it.
//!
//! The app service runs inside gatehouse-bench, so its figures are of the bench binary's
//! own build (the section says which); the status line command's are of the binaries
//! given (`gatehouse-statusline` is the one beside `--gatehouse`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use chrono::{Duration as Days, NaiveTime, Utc};
use gatehouse_desktop::app::{App, AppDeps, Opener};
use gatehouse_desktop::notifier::Notifier;
use gatehouse_desktop::transcripts;
use gatehouse_engine::deps::{CredentialStore, MapEnvironment};
use gatehouse_engine::events::{Event, EventSink};
use gatehouse_engine::insight::Days as LocalDays;
use gatehouse_engine::store::RowQuery;
use gatehouse_engine::store::rollup::hour_of;
use http::StatusCode;
use serde_json::Value;

use crate::client::{Auth, Conn, parse_url};
use crate::cpu::CpuMeter;
use crate::insight_seed::{self, Seeded};
use crate::statusline;

/// The Projects and Sessions views' target (issue 31), at p95.
const VIEW_TARGET_MS: f64 = 300.0;
/// The status line command's target (issue 31), at p50, process start included.
const COMMAND_TARGET_MS: f64 = 30.0;
/// One app API call's longest wait.
const CALL_LIMIT: Duration = Duration::from_secs(60);
/// Calls before the measured ones.
const WARMUP: usize = 3;
/// Other processes' share of the CPU above which a measurement is flagged.
const DISTURBED: f64 = 0.05;

/// Sizes of the phase.
#[derive(Debug, Clone)]
pub struct Options {
    pub rows: usize,
    /// `gatehouse` binaries whose `statusline` command is timed; `gatehouse-statusline` is
    /// looked for beside the first.
    pub binaries: Vec<PathBuf>,
    /// Measured calls per view.
    pub calls: usize,
    /// Measured calls of the status line's app API route.
    pub statusline_calls: usize,
    /// Measured runs of the status line command per binary.
    pub command_runs: usize,
}

impl Options {
    pub fn new(rows: usize, binaries: Vec<PathBuf>) -> Options {
        Options {
            rows,
            binaries,
            calls: 50,
            statusline_calls: 200,
            command_runs: 50,
        }
    }
}

/// Nearest-rank percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    pub n: usize,
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
}

impl Timing {
    pub fn of(samples: &[Duration]) -> Timing {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let n = ms.len();
        let at = |q: f64| {
            if n == 0 {
                0.0
            } else {
                ms[((q * n as f64).ceil() as usize).clamp(1, n) - 1]
            }
        };
        Timing {
            n,
            p50: at(0.50),
            p95: at(0.95),
            max: ms.last().copied().unwrap_or(0.0),
        }
    }
}

/// One app API call, timed.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The call as shown (ids shortened).
    pub call: String,
    /// What it answered, in a few words.
    pub answer: String,
    pub bytes: usize,
    /// The first call after the app started (the Projects call also scans the transcripts).
    pub first_ms: f64,
    pub timing: Timing,
    /// p95 target in ms.
    pub target_ms: Option<f64>,
    /// Share of the machine's CPU other processes used during the timed calls.
    pub foreign_cpu: Option<f64>,
}

/// One step behind the views, timed through the same store.
#[derive(Debug, Clone)]
pub struct Step {
    pub name: String,
    pub what: String,
    pub timing: Timing,
}

/// The whole phase.
#[derive(Debug)]
pub struct Insight {
    pub seeded: Seeded,
    pub rollup_rows: usize,
    pub endpoints: Vec<Endpoint>,
    pub steps: Vec<Step>,
    /// The status line commands' runs per binary (or why none); `Err` when the app's
    /// `statusline.json` was not there to point them at it.
    pub commands: Result<statusline::Measured, String>,
    pub opts: Options,
    pub elapsed: Duration,
}

/// A keychain in memory: the app keeps its local token here.
type MemoryKeychain = gatehouse_engine::deps::MemoryCredentials;

/// Notifications, browser windows and events go nowhere.
struct Quiet;

impl Notifier for Quiet {
    fn show(&self, _: &str, _: &str) -> Result<(), String> {
        Ok(())
    }
}

impl Opener for Quiet {
    fn open(&self, _: &str) -> Result<(), String> {
        Ok(())
    }
}

impl EventSink for Quiet {
    fn emit(&self, _: &Event) {}
}

/// Runs the phase in a temporary directory (removed afterwards) on its own runtime.
pub fn run(opts: &Options) -> anyhow::Result<Insight> {
    let started = Instant::now();
    let work = std::env::temp_dir().join(format!("gatehouse-bench-insight-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    // The app service and the client share the machine's two cores, as the tray and its
    // window do.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = rt.block_on(measure(opts, &work));
    rt.shutdown_timeout(Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(&work);
    let mut insight = result?;
    insight.elapsed = started.elapsed();
    Ok(insight)
}

async fn measure(opts: &Options, work: &Path) -> anyhow::Result<Insight> {
    let data_dir = work.join("data");
    let claude_dir = work.join("claude");
    eprintln!(
        "  insight: seeding {} usage rows in {}",
        opts.rows,
        data_dir.display()
    );
    let seeded = insight_seed::seed(&data_dir, &claude_dir, opts.rows, Utc::now()).await?;
    eprintln!(
        "  insight: {} rows in {:.1} s, {} transcripts in {:.0} ms",
        seeded.rows,
        seeded.rows_time.as_secs_f64(),
        seeded.transcripts,
        seeded.transcripts_time.as_secs_f64() * 1e3
    );

    let keychain = Arc::new(MemoryKeychain::default());
    let env = MapEnvironment::default()
        .with_var(
            "GATEHOUSE_BOOTSTRAP_FILE",
            &work.join("no-bootstrap.json").to_string_lossy(),
        )
        .with_var("CLAUDE_CONFIG_DIR", &claude_dir.to_string_lossy());
    let quiet = Arc::new(Quiet);
    let deps = AppDeps {
        clock: Arc::new(gatehouse_engine::deps::SystemClock),
        data_dir: data_dir.clone(),
        env: Arc::new(env),
        keychain: Ok(keychain.clone()),
        events: quiet.clone(),
        notifier: quiet.clone(),
        opener: quiet,
        home: work.join("home"),
        gatehouse_exe: "/usr/local/bin/gatehouse".into(),
        port: Some(0),
    };
    let app = App::start(deps)
        .await
        .map_err(|e| anyhow!("the desktop app service did not start: {e}"))?;
    let result = with_app(opts, &app, &keychain, seeded, &data_dir, &claude_dir).await;
    app.shutdown().await;
    result
}

async fn with_app(
    opts: &Options,
    app: &App,
    keychain: &MemoryKeychain,
    seeded: Seeded,
    data_dir: &Path,
    claude_dir: &Path,
) -> anyhow::Result<Insight> {
    let addr = parse_url(&app.base_url())?;
    let app_token = app
        .dashboard_url()
        .split("#token=")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let local_token = keychain
        .get("gatehouse", "local-token")?
        .context("the app kept no local token")?
        .expose()
        .to_owned();
    let current = &seeded.sessions[seeded.current];
    let largest = &seeded.sessions[seeded.largest];

    let mut window = Conn::connect_as(addr, Auth::AppToken(app_token)).await?;
    let mut endpoints = Vec::new();
    let views = [
        (
            "insight/projects?days=30&tz=0".to_owned(),
            "insight/projects?days=30&tz=0".to_owned(),
            Some(VIEW_TARGET_MS),
        ),
        (
            "insight/sessions?days=30&q=&limit=200&tz=0".to_owned(),
            "insight/sessions?days=30&q=&limit=200&tz=0".to_owned(),
            Some(VIEW_TARGET_MS),
        ),
        (
            format!("insight/sessions/{}", largest.id),
            format!(
                "insight/sessions/<id> (the largest session, {} requests)",
                largest.rows
            ),
            None,
        ),
        (
            "insight/charts?days=30&tz=0".to_owned(),
            "insight/charts?days=30&tz=0".to_owned(),
            None,
        ),
    ];
    for (path, call, target_ms) in views {
        eprintln!("  insight: timing {call}");
        endpoints.push(
            time_calls(&mut window, &path, call, target_ms, opts.calls)
                .await
                .with_context(|| format!("GET /gatehouse/app/{path}"))?,
        );
    }
    drop(window);
    // The route as the command asks it: with the status token of the app's statusline.json
    // (the local token opens it too, through a database read; used only without the file).
    let status = statusline::status_file(data_dir).and_then(|f| {
        if f.port != addr.port() {
            bail!("its port {} is not the app's {}", f.port, addr.port());
        }
        Ok(f)
    });
    let (token, whom) = match &status {
        Ok(f) => (f.token.clone(), "status token, as the command asks"),
        Err(_) => (local_token, "local token: no statusline.json"),
    };
    let mut line = Conn::connect_as(addr, Auth::Bearer(token)).await?;
    let path = format!("statusline?session_id={}", current.id);
    eprintln!("  insight: timing the status line's route");
    let e = time_calls(
        &mut line,
        &path,
        format!("statusline?session_id=<id> ({whom})"),
        None,
        opts.statusline_calls,
    )
    .await
    .context("GET /gatehouse/app/statusline")?;
    if !e.answer.contains("this session") {
        bail!(
            "the status line's route does not know the running session: {}",
            e.answer
        );
    }
    endpoints.push(e);
    drop(line);

    eprintln!("  insight: timing the steps behind the views");
    let (steps, rollup_rows) = steps(app, &seeded, claude_dir).await?;

    let commands = match status {
        Err(e) => Err(format!("{e:#}")),
        Ok(_) => {
            eprintln!("  insight: timing the status line commands, a process per run");
            let small = opts.binaries.first().map_or_else(
                || PathBuf::from(statusline::SMALL),
                |g| statusline::beside(g),
            );
            let binaries = opts.binaries.clone();
            let target = statusline::Target {
                data_dir: data_dir.to_owned(),
                session_id: current.id.clone(),
                cwd: current
                    .project
                    .map_or_else(|| "/home/bench".to_owned(), insight_seed::project_cwd),
                runs: opts.command_runs,
            };
            // Blocking (processes): off the runtime's workers, which serve the app.
            tokio::task::spawn_blocking(move || statusline::measure(&small, &binaries, &target))
                .await
                .map_err(|e| format!("the status line runs' task failed: {e}"))
        }
    };
    if let Err(e) = &commands {
        eprintln!("  insight: status line command not measured: {e}");
    }
    Ok(Insight {
        seeded,
        rollup_rows,
        endpoints,
        steps,
        commands,
        opts: opts.clone(),
        elapsed: Duration::ZERO,
    })
}

/// The first call, `WARMUP` more, then `n` timed calls of `GET /gatehouse/app/<path>`.
async fn time_calls(
    conn: &mut Conn,
    path: &str,
    call: String,
    target_ms: Option<f64>,
    n: usize,
) -> anyhow::Result<Endpoint> {
    let full = format!("/gatehouse/app/{path}");
    let one = async |conn: &mut Conn| -> anyhow::Result<(Duration, String)> {
        let start = Instant::now();
        let (status, body) = conn.get_collect_within(&full, CALL_LIMIT).await?;
        let took = start.elapsed();
        if status != StatusCode::OK {
            bail!("answered {status}: {body}");
        }
        Ok((took, body))
    };
    let (first, body) = one(conn).await?;
    let v: Value = serde_json::from_str(&body).context("the answer is not JSON")?;
    let answer = describe(path, &v);
    for _ in 0..WARMUP {
        one(conn).await?;
    }
    let mut samples = Vec::with_capacity(n);
    let meter = CpuMeter::start(&[]);
    for _ in 0..n {
        samples.push(one(conn).await?.0);
    }
    let foreign_cpu = meter.foreign_share(&[]);
    Ok(Endpoint {
        call,
        answer,
        bytes: body.len(),
        first_ms: first.as_secs_f64() * 1e3,
        timing: Timing::of(&samples),
        target_ms,
        foreign_cpu,
    })
}

fn count(v: &Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}

/// A few words on an answer, to show it held what it should.
fn describe(path: &str, v: &Value) -> String {
    if path.starts_with("insight/projects") {
        let list = v["projects"].as_array().cloned().unwrap_or_default();
        let known = list.iter().filter(|p| p["known"] == true).count();
        format!(
            "{known} projects, {} unknown-project entries",
            list.len() - known
        )
    } else if path.starts_with("insight/sessions/") {
        format!(
            "{} agents, {} requests listed",
            count(&v["agents"]),
            count(&v["requests"])
        )
    } else if path.starts_with("insight/sessions") {
        format!(
            "{} of {} sessions",
            count(&v["sessions"]),
            v["total"].as_u64().unwrap_or(0)
        )
    } else if path.starts_with("insight/charts") {
        format!(
            "{} days, {} model and {} project series",
            count(&v["days"]),
            count(&v["by_model"]),
            count(&v["by_project"])
        )
    } else if path.starts_with("statusline") {
        match v["session_cost_micro_usd"].as_u64() {
            Some(c) => format!(
                "${:.2} this session, ${:.2} today",
                c as f64 / 1e6,
                v["today_cost_micro_usd"].as_u64().unwrap_or(0) as f64 / 1e6
            ),
            None => "no session cost".to_owned(),
        }
    } else {
        String::new()
    }
}

/// Times `f` `n` times.
async fn repeat<T>(
    n: usize,
    mut f: impl AsyncFnMut() -> anyhow::Result<T>,
) -> anyhow::Result<(Timing, T)> {
    let mut samples = Vec::with_capacity(n);
    let mut last = None;
    for _ in 0..n.max(1) {
        let start = Instant::now();
        last = Some(f().await?);
        samples.push(start.elapsed());
    }
    let last = last.context("no run")?;
    Ok((Timing::of(&samples), last))
}

/// The views' steps on their own: the rollup reads, the sums, the handlers without HTTP,
/// the transcript scan, a session's rows, today's totals.
async fn steps(
    app: &App,
    seeded: &Seeded,
    claude_dir: &Path,
) -> anyhow::Result<(Vec<Step>, usize)> {
    let store = app.store();
    let now = Utc::now();
    // As the window asks (its `tz`; UTC on this machine): 30 days to now, by the hour.
    let utc = LocalDays::default();
    let today = utc.of(now);
    let (from, to) = (utc.first_hour(today - 29), hour_of(now));
    let mut steps = Vec::new();

    let (t, rows) = repeat(20, async || {
        Ok(store.usage_rollup(from, to, None).await?.len())
    })
    .await?;
    steps.push(Step {
        name: "rollup rows of 30 days (`Store::usage_rollup`)".into(),
        what: format!(
            "{rows} rows (session, model, agent kind and hour); Projects, Sessions and Charts \
             each read them once"
        ),
        timing: t,
    });
    let rollup_rows = rows;

    let rows = store.usage_rollup(from, to, None).await?;
    let (t, n) = repeat(20, async || {
        Ok(gatehouse_engine::insight::sessions(&rows).len())
    })
    .await?;
    steps.push(Step {
        name: "sessions summed from those rows (`insight::sessions`)".into(),
        what: format!("{n} sessions; Sessions (Projects sums per project in its own loop)"),
        timing: t,
    });

    let (t, bytes) = repeat(10, async || {
        let v = gatehouse_desktop::app::insight::projects(app, 30, utc)
            .await
            .map_err(|e| anyhow!("{e}"))?;
        Ok(v.to_string().len())
    })
    .await?;
    steps.push(Step {
        name: "the Projects handler without HTTP (`app::insight::projects`, and its JSON text)"
            .into(),
        what: format!(
            "{bytes} bytes; the rollup read, the project of each session, the sums, the JSON"
        ),
        timing: t,
    });
    let (t, bytes) = repeat(10, async || {
        let v = gatehouse_desktop::app::insight::sessions(app, 30, utc, None, 200)
            .await
            .map_err(|e| anyhow!("{e}"))?;
        Ok(v.to_string().len())
    })
    .await?;
    steps.push(Step {
        name: "the Sessions handler without HTTP (`app::insight::sessions`, and its JSON text)"
            .into(),
        what: format!(
            "{bytes} bytes; the rollup read, the sessions summed, a JSON object for each \
             session (all of them, for the search and the total), the first 200 kept"
        ),
        timing: t,
    });
    let answer = gatehouse_desktop::app::insight::sessions(app, 30, utc, None, 200)
        .await
        .map_err(|e| anyhow!("{e}"))?;
    let (t, bytes) = repeat(10, async || Ok(answer.to_string().len())).await?;
    steps.push(Step {
        name: "of which the Sessions answer's JSON text alone (`Value::to_string`, as the route \
               makes it)"
            .into(),
        what: format!("{bytes} bytes, 200 sessions"),
        timing: t,
    });

    let dir = claude_dir.to_owned();
    let (t, known) = repeat(5, async || {
        let dir = dir.clone();
        let index = tokio::task::spawn_blocking(move || {
            transcripts::scan(&dir, &transcripts::Limits::default())
        })
        .await?;
        Ok(index.len())
    })
    .await?;
    steps.push(Step {
        name: "transcript index scan (`transcripts::scan`)".into(),
        what: format!(
            "{} transcripts, {known} sessions found; the views reuse a scan for 30 s, so the \
             first view after that pays it",
            seeded.transcripts
        ),
        timing: t,
    });

    let largest = &seeded.sessions[seeded.largest];
    let id = largest.id.clone();
    let (t, rows) = repeat(20, async || {
        Ok(store
            .usage_rollup(hour_of(now - Days::days(400)), to, Some(id.clone()))
            .await?
            .len())
    })
    .await?;
    steps.push(Step {
        name: "one session's rollup rows (`usage_rollup` by session)".into(),
        what: format!("{rows} rows of the largest session; the detail and the status line"),
        timing: t,
    });

    let from_at = insight_seed_time(largest.start_ms);
    let to_at = insight_seed_time(largest.end_ms + 1);
    let (t, rows) = repeat(10, async || {
        Ok(store
            .usage_between(RowQuery {
                from: from_at,
                to: to_at,
                session_id: Some(largest.id.clone()),
                newest_first: true,
                limit: 500,
            })
            .await?
            .len())
    })
    .await?;
    let span_h = (largest.end_ms - largest.start_ms) as f64 / 3.6e6;
    steps.push(Step {
        name: "one session's newest requests (`usage_between`, time index)".into(),
        what: format!(
            "{rows} of the largest session's {} rows, over its {span_h:.1} h; the detail",
            largest.rows
        ),
        timing: t,
    });

    let since = now.date_naive().and_time(NaiveTime::MIN).and_utc();
    let (t, n) = repeat(20, async || Ok(store.usage_totals(since).await?.requests)).await?;
    steps.push(Step {
        name: "today's totals (`Store::usage_totals`)".into(),
        what: format!("{n} rows summed; the status line's cost today"),
        timing: t,
    });
    Ok((steps, rollup_rows))
}

fn insight_seed_time(ms: i64) -> chrono::DateTime<Utc> {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// The bench binary's own build: the app service's figures are of it.
fn own_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug (numbers not meaningful)"
    } else {
        "release"
    }
}

/// What a binary links at start, from `ldd`: `None` when that cannot be told.
fn links_webkit(bin: &Path) -> Option<bool> {
    let out = std::process::Command::new("ldd")
        .arg(bin)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).contains("libwebkit2gtk"))
}

/// Whether a `gatehouse` binary is the desktop build (it links WebKitGTK at start).
fn build_kind(bin: &Path) -> &'static str {
    match links_webkit(bin) {
        Some(true) => "desktop build: links GTK and WebKitGTK",
        Some(false) => "headless build",
        None => "build unknown",
    }
}

/// The status line commands' table: `gatehouse-statusline` against the target, each
/// `gatehouse statusline` beside it.
fn commands_table(m: &statusline::Measured) -> String {
    let mut out = String::from(
        "| Claude Code's status line command (a process per run) | p50 (ms) | p95 (ms) | max (ms) | process start alone, `--version` p50 (ms) | target | verdict |\n\
         |---|---:|---:|---:|---:|---|---|\n",
    );
    let target = format!("p50 ≤ {COMMAND_TARGET_MS:.0} ms");
    match &m.small {
        Ok(c) => {
            let t = Timing::of(&c.statusline);
            let gui = match links_webkit(&c.binary) {
                Some(false) => "no GUI libraries",
                Some(true) => "links WebKitGTK",
                None => "libraries unknown",
            };
            let _ = writeln!(
                out,
                "| `{} --data-dir <dir>` ({}; {gui}): the configured command | {:.1} | {:.1} | {:.1} | — | {target} | {} |",
                c.binary.display(),
                crate::profile(&c.binary),
                t.p50,
                t.p95,
                t.max,
                verdict((t.n > 0).then_some(t.p50 <= COMMAND_TARGET_MS))
            );
        }
        Err(e) => {
            let _ = writeln!(
                out,
                "| `{}`: not measured: {e} | — | — | — | — | {target} | n/a |",
                statusline::SMALL
            );
        }
    }
    for c in &m.gatehouse {
        match c {
            Ok(c) => {
                let t = Timing::of(&c.statusline);
                let v = Timing::of(&c.version);
                let _ = writeln!(
                    out,
                    "| `{} --data-dir <dir> statusline` ({}; {}): for comparison | {:.1} | {:.1} | {:.1} | {:.1} | — | n/a |",
                    c.binary.display(),
                    crate::profile(&c.binary),
                    build_kind(&c.binary),
                    t.p50,
                    t.p95,
                    t.max,
                    v.p50
                );
            }
            Err(e) => {
                let _ = writeln!(
                    out,
                    "| `gatehouse statusline`: not measured: {e} | — | — | — | — | — | n/a |"
                );
            }
        }
    }
    let printed = std::iter::once(&m.small)
        .chain(&m.gatehouse)
        .find_map(|c| c.as_ref().ok());
    if let Some(c) = printed {
        let _ = writeln!(out, "\nThe command printed `{}`.", c.line);
    }
    out
}

fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A call as shown: the route as code, a remark after it in plain text.
fn shown(call: &str) -> String {
    match call.split_once(" (") {
        Some((route, rest)) => format!("`{route}` ({rest}"),
        None => format!("`{call}`"),
    }
}

fn verdict(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "pass",
        Some(false) => "**miss**",
        None => "n/a",
    }
}

impl Insight {
    /// The "Desktop insight views" section of BENCHMARKS.md.
    pub fn markdown(&self) -> String {
        let s = &self.seeded;
        let mut out = String::from("\n## Desktop insight views\n\n");
        let _ = writeln!(
            out,
            "The tray window's Projects and Sessions views, a session's detail, the charts and \
             the status line (issue 31) over a database of {} usage rows. Targets: the Projects \
             and Sessions views answer in ≤ {VIEW_TARGET_MS:.0} ms at p95; Claude Code's status \
             line command, `gatehouse-statusline`, takes ≤ {COMMAND_TARGET_MS:.0} ms at p50, \
             process start included.\n",
            thousands(s.rows)
        );
        let subagent_share = s.subagent_rows as f64 / s.rows.max(1) as f64 * 100.0;
        let no_session = s.no_session_rows as f64 / s.rows.max(1) as f64 * 100.0;
        let unknown = s.active().filter(|x| x.project.is_none()).count();
        out.push_str("| data | value |\n|---|---:|\n");
        let _ = writeln!(out, "| usage rows (last 30 days) | {} |", thousands(s.rows));
        let _ = writeln!(
            out,
            "| sessions (projects; without a transcript) | {} ({}; {unknown}) |",
            thousands(s.active().count()),
            s.projects_with_sessions()
        );
        let _ = writeln!(
            out,
            "| rows from subagents / without a session | {subagent_share:.1}% / {no_session:.1}% |"
        );
        let _ = writeln!(
            out,
            "| usage rollup rows (30 days) | {} |",
            thousands(self.rollup_rows)
        );
        let _ = writeln!(
            out,
            "| seeding: rows through `Store::insert_usage`, {} a batch (s) | {:.1} ({:.0} rows/s) |",
            thousands(insight_seed::BATCH),
            s.rows_time.as_secs_f64(),
            s.rows as f64 / s.rows_time.as_secs_f64().max(1e-9)
        );
        let _ = writeln!(
            out,
            "| seeding: {} transcript files (ms) | {:.0} |",
            thousands(s.transcripts),
            s.transcripts_time.as_secs_f64() * 1e3
        );
        let _ = writeln!(
            out,
            "| database and WAL after seeding (MiB) | {:.1} |",
            s.db_bytes as f64 / 1024.0 / 1024.0
        );

        out.push_str(
            "\n| app API call (`GET /gatehouse/app/…`) | answer | bytes | first call (ms) | p50 (ms) | p95 (ms) | max (ms) | target | verdict |\n\
             |---|---|---:|---:|---:|---:|---:|---|---|\n",
        );
        for e in &self.endpoints {
            let t = &e.timing;
            let (target, ok) = match e.target_ms {
                Some(limit) => (format!("p95 ≤ {limit:.0} ms"), Some(t.p95 <= limit)),
                None => ("—".to_owned(), None),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {target} | {} |",
                shown(&e.call),
                e.answer,
                e.bytes,
                e.first_ms,
                t.p50,
                t.p95,
                t.max,
                verdict(ok)
            );
        }

        let disturbed: Vec<String> = self
            .endpoints
            .iter()
            .filter_map(|e| {
                let share = e.foreign_cpu.filter(|s| *s > DISTURBED)?;
                Some(format!(
                    "- {}: other processes used {:.0}% of the machine's CPU meanwhile (disturbed).\n",
                    shown(&e.call),
                    share * 100.0
                ))
            })
            .collect();
        if !disturbed.is_empty() {
            out.push('\n');
            out.push_str(&disturbed.concat());
        }
        out.push_str(
            "\nWhere a view's time goes: each step behind it, timed on its own through the \
             same store, without HTTP.\n\n\
             | step | p50 (ms) | max (ms) | what |\n|---|---:|---:|---|\n",
        );
        for st in &self.steps {
            let _ = writeln!(
                out,
                "| {} | {:.1} | {:.1} | {} |",
                st.name, st.timing.p50, st.timing.max, st.what
            );
        }

        out.push('\n');
        match &self.commands {
            Err(e) => {
                let _ = writeln!(out, "The status line commands: not measured: {e}.");
            }
            Ok(m) => out.push_str(&commands_table(m)),
        }

        let o = &self.opts;
        let _ = writeln!(
            out,
            "\n- How measured: a fresh data dir seeded through the engine's store API \
             (`SqliteStore::open`, `Store::insert_usage` in batches of {} rows in time order, so \
             the usage rollup is kept in each batch's transaction as the gateway keeps it) with \
             a fixed-seed shape: sessions of 3 minutes to 6 hours (log-uniform), one still \
             running, three or four models, cache reads and writes, ~0.6% errors; and a Claude \
             Code transcript dir (`<config>/projects/<encoded cwd>/<session>.jsonl`) mapping \
             the sessions to projects. Then the desktop app service (`App::start`, in-memory \
             keychain, `CLAUDE_CONFIG_DIR` at the transcripts) on a loopback port, inside \
             gatehouse-bench (build: {}). Each call as the window makes it (its time-zone \
             offset `tz=0`: this machine runs on UTC), on one keep-alive connection with the \
             window's app token (the status line's with the status token of the app's \
             `statusline.json` as Bearer, as the command sends it), the first \
             call timed alone, {WARMUP} warm-up, then {} sequential calls ({} for the status \
             line's route); time from sending the request to the end of the body; \
             nearest-rank percentiles. The first call after start also scans the transcripts.",
            thousands(insight_seed::BATCH),
            own_profile(),
            o.calls,
            o.statusline_calls
        );
        let _ = writeln!(
            out,
            "- The status line commands: run as Claude Code runs them, a new process per run \
             with Claude Code's status JSON on stdin, over the `statusline.json` the app wrote \
             in its data dir at start (its loopback URL and this launch's status token; no \
             keychain, no database): `gatehouse-statusline --data-dir <dir>` (the binary beside \
             `gatehouse` that \"Configure Claude Code\" writes as `statusLine.command`) and, \
             for comparison, `gatehouse --data-dir <dir> statusline` (the command written when \
             the small binary is missing) with `gatehouse --version` (process start and exit \
             alone). {WARMUP} warm-up runs each, then {} rounds of one run of each command; \
             spawn to exit; nearest-rank percentiles. Every run must print the session's cost \
             line, not `Gatehouse: not running`.",
            o.command_runs
        );
        let _ = writeln!(out, "- The phase took {:.0} s.", self.elapsed.as_secs_f64());
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn nearest_rank_in_milliseconds() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let t = Timing::of(&v);
        assert_eq!((t.n, t.p50, t.p95, t.max), (100, 50.0, 95.0, 100.0));
        assert_eq!(Timing::of(&[]).n, 0);
    }

    #[test]
    fn numbers_read_with_separators() {
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(5_000), "5,000");
    }

    #[test]
    fn a_call_shows_its_route_as_code() {
        assert_eq!(shown("insight/charts?days=30"), "`insight/charts?days=30`");
        assert_eq!(
            shown("insight/sessions/<id> (the largest session, 9 requests)"),
            "`insight/sessions/<id>` (the largest session, 9 requests)"
        );
    }
}
