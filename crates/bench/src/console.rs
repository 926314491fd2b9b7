//! The team console at scale (issue 33, `--console` or `gatehouse-bench console`): every
//! admin API call the console makes, timed over a store holding a company of
//! `--console-people` people and `--console-rows` usage rows, on SQLite and (given
//! `--postgres-url`) on PostgreSQL; and inference throughput with and without many console
//! tabs polling.
//!
//! Per store: a fresh store is seeded ([`crate::console_seed`]: the directory, limits and
//! audit rows and the usage rows through the engine's `Store` trait, the spend rows by
//! SQL), then `gatehouse serve` runs on it with an `admin:` block (a write key) in front of
//! one fake upstream. Each console call, with the admin key, is timed: its first call alone
//! (the overview's 15-second snapshot is computed then), then [`Options::sequential`]
//! calls on one keep-alive connection, then [`Options::workers`] clients at once making
//! [`Options::per_worker`] calls each. Last, c=16 inference (client key, non-streaming) for
//! a fixed time with no console traffic, then again with [`Options::pollers`] console
//! pollers (a thread of their own) each fetching `/overview` and `/users?limit=50` in a
//! loop. Every loop is bounded by a count or a deadline.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures_util::future::join_all;
use gatehouse_engine::config::PostgresConfig;
use gatehouse_engine::secret::Secret;
use gatehouse_engine::store::{PostgresStore, SqliteStore, Store};
use http::StatusCode;

use crate::client::{Auth, CLIENT_KEY, Conn, messages_body, parse_url};
use crate::console_seed::{self as seed, Seeded};
use crate::insight::Timing;
use crate::procs::Children;
use crate::reservation::{Database, WRITE_KEY};
use crate::stack::{preflight, set_fake};

/// Every console call's target at p95 (issue 33).
pub const TARGET_MS: f64 = 300.0;
/// One console call's longest wait.
const CALL_LIMIT: Duration = Duration::from_secs(60);
const SETTLE_MAX: Duration = Duration::from_secs(60);
/// Inference with pollers ÷ without, at or above which the console reads as not slowing it.
const RATIO_READING: f64 = 0.8;

/// Sizes of the phase.
#[derive(Debug, Clone)]
pub struct Options {
    pub gatehouse: PathBuf,
    pub fake: PathBuf,
    pub people: usize,
    pub rows: usize,
    pub postgres_url: Option<String>,
    pub sequential: usize,
    pub workers: usize,
    pub per_worker: usize,
    pub tput_warmup: Duration,
    pub tput_measure: Duration,
    pub pollers: usize,
    /// No call of one kind starts after this long, sequentially and then concurrently, so
    /// a very slow call cuts its own sample short instead of holding the phase for long.
    pub call_budget: Duration,
}

impl Options {
    pub fn new(gatehouse: PathBuf, fake: PathBuf, people: usize, rows: usize) -> Options {
        Options {
            gatehouse,
            fake,
            people,
            rows,
            postgres_url: None,
            sequential: 30,
            workers: 8,
            per_worker: 10,
            tput_warmup: Duration::from_secs(2),
            tput_measure: Duration::from_secs(10),
            pollers: 20,
            call_budget: Duration::from_secs(60),
        }
    }
}

/// One call's timings on one store.
#[derive(Debug, Clone, Default)]
pub struct CallResult {
    pub label: String,
    pub first_ms: f64,
    pub bytes: usize,
    pub sequential: Timing,
    pub concurrent: Timing,
    /// Non-2xx answers and transport errors, of every attempt.
    pub failures: usize,
    /// Of which in the sequential run, and in the concurrent one.
    pub failed_sequential: usize,
    pub failed_concurrent: usize,
    pub first_failure: Option<String>,
    /// The time budget ended a run before its count of calls.
    pub cut: bool,
}

impl CallResult {
    fn ok(t: &Timing, failed: usize) -> bool {
        failed == 0 && t.n > 0 && t.p95 <= TARGET_MS
    }
}

/// Inference with and without console pollers.
#[derive(Debug, Clone, Default)]
pub struct Inference {
    pub quiet_rps: f64,
    pub busy_rps: f64,
    pub quiet_errors: u64,
    pub busy_errors: u64,
    pub polls: u64,
    /// The pollers' calls answered 200, timed while the inference ran.
    pub poll: Timing,
    pub poll_failures: u64,
    pub first_poll_failure: Option<String>,
}

impl Inference {
    pub fn ratio(&self) -> f64 {
        self.busy_rps / self.quiet_rps.max(1e-9)
    }
}

/// One store's run.
#[derive(Debug, Clone)]
pub struct StoreRun {
    pub store: &'static str,
    pub seeded: Seeded,
    pub calls: Vec<CallResult>,
    pub inference: Inference,
}

/// The whole phase.
#[derive(Debug, Clone)]
pub struct Console {
    pub people: usize,
    pub rows: usize,
    pub stores: Vec<StoreRun>,
    /// Stores not measured, and why.
    pub skipped: Vec<String>,
    pub opts: Options,
    pub binaries: String,
    pub elapsed: Duration,
}

/// Runs the phase on its own single-threaded runtime in a temporary directory (removed
/// afterwards unless it failed).
pub fn run(opts: &Options) -> anyhow::Result<Console> {
    for (what, path) in [
        ("gatehouse", &opts.gatehouse),
        ("fake upstream", &opts.fake),
    ] {
        if !path.is_file() {
            bail!("{what} binary not found at {}", path.display());
        }
    }
    let started = Instant::now();
    let result = crate::procs::in_phase("console", async |children, dir| {
        measure(opts, children, dir).await
    });
    let mut out = result?;
    out.elapsed = started.elapsed();
    Ok(out)
}

async fn measure(opts: &Options, children: &mut Children, dir: &Path) -> anyhow::Result<Console> {
    let args = ["--listen", "127.0.0.1:0", "--exit-on-stdin-eof"].map(str::to_owned);
    let fake_url = children
        .spawn("fake-upstream", &opts.fake, &args, dir)
        .await?
        .url
        .clone();
    set_fake(parse_url(&fake_url)?, fake_upstream::FakeConfig::default()).await?;
    let mut out = Console {
        people: opts.people,
        rows: opts.rows,
        stores: Vec::new(),
        skipped: Vec::new(),
        opts: opts.clone(),
        binaries: binaries(&opts.gatehouse),
        elapsed: Duration::ZERO,
    };
    let db = dir.join("console.db");
    let sqlite = Target::Sqlite(db);
    out.stores
        .push(one_store(opts, children, dir, &fake_url, &sqlite).await?);
    match &opts.postgres_url {
        None => {
            let why =
                "PostgreSQL: not measured (no --postgres-url and no GATEHOUSE_TEST_POSTGRES_URL)";
            eprintln!("  console: {why}");
            out.skipped.push(why.to_owned());
        }
        Some(server) => {
            let name = format!("gatehouse_bench_console_{}", std::process::id());
            let db = Database::create_named(server, &name).await?;
            let target = Target::Postgres(db.url.clone());
            let run = one_store(opts, children, dir, &fake_url, &target).await;
            db.drop_it().await;
            out.stores.push(run?);
        }
    }
    Ok(out)
}

/// Where a run's store lives.
enum Target {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Target {
    fn name(&self) -> &'static str {
        match self {
            Target::Sqlite(_) => "sqlite",
            Target::Postgres(_) => "postgres",
        }
    }

    fn yaml(&self) -> String {
        match self {
            Target::Sqlite(p) => format!("store: {{sqlite_path: \"{}\"}}", p.display()),
            Target::Postgres(u) => format!("store: {{postgres_url: \"{u}\"}}"),
        }
    }
}

async fn one_store(
    opts: &Options,
    children: &mut Children,
    dir: &Path,
    fake_url: &str,
    target: &Target,
) -> anyhow::Result<StoreRun> {
    let store = target.name();
    let now = Utc::now();
    eprintln!(
        "  console ({store}): seeding {} people and {} usage rows",
        opts.people, opts.rows
    );
    let seeded = seed_store(opts, target, now).await?;
    eprintln!(
        "  console ({store}): seeded in {:.1} s (usage rows {:.1} s)",
        seeded.total().as_secs_f64(),
        seeded.rows_time.as_secs_f64()
    );
    let name = match target {
        Target::Sqlite(_) => "gatehouse-console-sqlite",
        Target::Postgres(_) => "gatehouse-console-postgres",
    };
    let config = dir.join(format!("{name}.yaml"));
    std::fs::write(&config, gatehouse_config(&target.yaml(), fake_url))
        .with_context(|| format!("cannot write {}", config.display()))?;
    let args = [
        "--data-dir".to_owned(),
        dir.display().to_string(),
        "serve".to_owned(),
        "--config".to_owned(),
        config.display().to_string(),
    ];
    let addr = parse_url(&children.spawn(name, &opts.gatehouse, &args, dir).await?.url)?;
    let result = async {
        preflight(name, addr).await?;
        children.settle(SETTLE_MAX).await;
        let calls = time_calls(opts, addr, store, now).await?;
        children.check_alive()?;
        let inference = inference(opts, children, addr, store).await?;
        children.check_alive()?;
        anyhow::Ok(StoreRun {
            store,
            seeded,
            calls,
            inference,
        })
    }
    .await;
    children.stop(name).await;
    result
}

fn gatehouse_config(store: &str, fake_url: &str) -> String {
    format!(
        "listen: {{host: 127.0.0.1, port: 0}}\n\
         {store}\n\
         rate_limits: {{client_key_concurrency: 0}}\n\
         timeouts: {{shutdown_drain_ms: 2000}}\n\
         upstreams:\n  - {{name: fake, provider: anthropic, base_url: \"{fake_url}\", auth: {{api_key: bench-operator-key-not-secret}}}}\n\
         client_keys:\n  - {{id: bench, key: \"{CLIENT_KEY}\"}}\n\
         admin: {{write_keys: [{{id: bench-admin, key: \"{WRITE_KEY}\"}}]}}\n"
    )
}

/// Seeds a fresh store: SQLite one write at a time (one writer), PostgreSQL with six writes
/// (three usage batches) in flight, as its writes wait on round trips and commits.
async fn seed_store(opts: &Options, target: &Target, now: DateTime<Utc>) -> anyhow::Result<Seeded> {
    let mut out = Seeded::default();
    let (store, parallel): (Arc<dyn Store>, usize) = match target {
        Target::Sqlite(db) => {
            let path = db.clone();
            let s = tokio::task::spawn_blocking(move || SqliteStore::open(&path, now))
                .await?
                .with_context(|| format!("cannot open {}", db.display()))?;
            (Arc::new(s), 1)
        }
        Target::Postgres(url) => (Arc::new(pg_store(url, now).await?), 6),
    };
    let label = target.name();
    seed::people_and_limits(&store, opts.people, parallel, now, &mut out).await?;
    let spend = seed::usage(
        &store,
        opts.people,
        opts.rows,
        parallel.min(3),
        now,
        label,
        &mut out,
    )
    .await?;
    seed::audit(&store, opts.people, parallel, now, &mut out).await?;
    drop(store);
    let t = Instant::now();
    match target {
        Target::Sqlite(db) => {
            let path = db.clone();
            let rows = spend.clone();
            tokio::task::spawn_blocking(move || seed::spend_sqlite(&path, &rows, now)).await??;
            out.bytes = ["", "-wal"]
                .iter()
                .filter_map(|e| std::fs::metadata(format!("{}{e}", db.display())).ok())
                .map(|m| m.len())
                .sum();
        }
        Target::Postgres(url) => {
            let client = pg_client(url).await?;
            seed::spend_postgres(&client, &spend, now).await?;
            client.batch_execute("ANALYZE").await?;
            let row = client
                .query_one("SELECT pg_database_size(current_database())", &[])
                .await?;
            out.bytes = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        }
    }
    out.spend_rows = spend.len();
    out.spend_time = t.elapsed();
    Ok(out)
}

async fn pg_store(url: &str, now: DateTime<Utc>) -> anyhow::Result<PostgresStore> {
    let cfg = PostgresConfig {
        url: Secret::new(url),
        username: None,
        password: None,
        max_connections: 8,
        connect_timeout: Duration::from_secs(10),
    };
    PostgresStore::open(&cfg, now)
        .await
        .context("cannot open the PostgreSQL store")
}

async fn pg_client(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("cannot connect to the benchmark's PostgreSQL database")?;
    tokio::spawn(connection);
    Ok(client)
}

/// A console call: what the table shows, the method (`None`: GET, else a POST body) and
/// the path with its query.
struct Call {
    label: String,
    post: Option<String>,
    path: String,
}

fn get(label: &str, path: String) -> Call {
    Call {
        label: label.to_owned(),
        post: None,
        path,
    }
}

/// The console's calls over a directory of `people` (`[]` percent-encoded).
fn calls(people: usize, now: DateTime<Utc>) -> Vec<Call> {
    const ORG: &str = "/v1/organizations";
    let one = seed::sub((people / 2).max(1).min(people - 1));
    let ids: String = (0..50)
        .map(|k| format!("user_ids%5B%5D={}&", seed::sub(k * people / 50)))
        .collect();
    let since = (now - chrono::Duration::days(30)).format("%Y-%m-%dT%H:%M:%SZ");
    let mut v = vec![
        get("`GET /me`", format!("{ORG}/me")),
        get("`GET /overview`", format!("{ORG}/overview")),
        get("`GET /users?limit=50`", format!("{ORG}/users?limit=50")),
        get(
            &format!("`GET /users?q={}`", seed::NEEDLE),
            format!("{ORG}/users?q={}", seed::NEEDLE),
        ),
        get(&format!("`GET /users/{one}`"), format!("{ORG}/users/{one}")),
        get(
            "`GET /spend_limits?limit=100`",
            format!("{ORG}/spend_limits?limit=100"),
        ),
        get(
            "`GET /spend_limits/effective?user_ids[]=…(50)&period[]=daily&period[]=monthly&limit=50`",
            format!(
                "{ORG}/spend_limits/effective?{ids}period%5B%5D=daily&period%5B%5D=monthly&limit=50"
            ),
        ),
        get(
            "`GET /spend_limits/effective?period[]=monthly&sort=spend_desc&limit=20`",
            format!("{ORG}/spend_limits/effective?period%5B%5D=monthly&sort=spend_desc&limit=20"),
        ),
        get(
            "`GET /spend_limits/audit?limit=100`",
            format!("{ORG}/spend_limits/audit?limit=100"),
        ),
        get(
            "`GET /spend_limits/audit?format=csv`",
            format!("{ORG}/spend_limits/audit?format=csv"),
        ),
    ];
    for g in ["day", "user", "group", "model", "upstream", "session"] {
        v.push(get(
            &format!("`GET /analytics/usage?group_by={g}`"),
            format!("{ORG}/analytics/usage?group_by={g}"),
        ));
    }
    v.push(get(
        "`GET /analytics/cost?starting_at=<30 days ago>&group_by[]=actor`",
        format!("{ORG}/analytics/cost?starting_at={since}&group_by%5B%5D=actor"),
    ));
    v.push(get("`GET /upstreams`", format!("{ORG}/upstreams")));
    v.push(get("`GET /policies`", format!("{ORG}/policies")));
    let body = serde_json::json!({
        "scope": {"type": "rbac_group", "rbac_group_id": seed::GROUPS[0]},
        "amount": "20000",
        "period": "monthly",
    });
    v.push(Call {
        label: "`POST /spend_limits/preview` (a group's monthly limit)".to_owned(),
        post: Some(body.to_string()),
        path: format!("{ORG}/spend_limits/preview"),
    });
    v
}

/// One call: `Ok(elapsed, bytes)` on a 2xx, else the failure in a few words.
async fn once(conn: &mut Conn, call: &Call) -> Result<(Duration, usize), String> {
    let t = Instant::now();
    let answer = match &call.post {
        None => conn.get_collect_within(&call.path, CALL_LIMIT).await,
        Some(body) => {
            conn.post_collect(&call.path, Bytes::from(body.clone()))
                .await
        }
    };
    match answer {
        Ok((status, text)) if status.is_success() => Ok((t.elapsed(), text.len())),
        Ok((status, text)) => Err(format!(
            "{status}: {}",
            text.chars().take(200).collect::<String>()
        )),
        Err(e) => Err(format!("{e:#}")),
    }
}

fn admin() -> Auth {
    Auth::ApiKey(WRITE_KEY.to_owned())
}

/// `n` calls on one connection (re-opened after a transport error): the times of the 2xx
/// answers and the failures.
async fn repeat(
    addr: SocketAddr,
    call: &Call,
    n: usize,
    until: Instant,
) -> anyhow::Result<(Vec<Duration>, Vec<String>)> {
    let mut conn = Conn::connect_as(addr, admin()).await?;
    let (mut times, mut failures) = (Vec::with_capacity(n), Vec::new());
    for _ in 0..n {
        if Instant::now() >= until {
            break;
        }
        match once(&mut conn, call).await {
            Ok((d, _)) => times.push(d),
            Err(e) => {
                failures.push(e);
                conn = Conn::connect_as(addr, admin()).await?;
            }
        }
    }
    Ok((times, failures))
}

async fn time_calls(
    opts: &Options,
    addr: SocketAddr,
    store: &str,
    now: DateTime<Utc>,
) -> anyhow::Result<Vec<CallResult>> {
    let mut out = Vec::new();
    for call in calls(opts.people, now) {
        let mut r = CallResult {
            label: call.label.clone(),
            ..CallResult::default()
        };
        let mut failures = Vec::new();
        let mut conn = Conn::connect_as(addr, admin()).await?;
        match once(&mut conn, &call).await {
            Ok((d, bytes)) => {
                r.first_ms = d.as_secs_f64() * 1e3;
                r.bytes = bytes;
            }
            Err(e) => failures.push(e),
        }
        let until = Instant::now() + opts.call_budget;
        let (times, f) = repeat(addr, &call, opts.sequential, until).await?;
        r.cut = times.len() + f.len() < opts.sequential;
        r.sequential = Timing::of(&times);
        r.failed_sequential = f.len();
        failures.extend(f);
        let until = Instant::now() + opts.call_budget;
        let runs =
            join_all((0..opts.workers).map(|_| repeat(addr, &call, opts.per_worker, until))).await;
        let (mut times, before) = (Vec::new(), failures.len());
        for run in runs {
            let (t, f) = run?;
            times.extend(t);
            failures.extend(f);
        }
        let attempts = times.len() + failures.len() - before;
        r.cut |= attempts < opts.workers * opts.per_worker;
        r.failed_concurrent = failures.len() - before;
        r.concurrent = Timing::of(&times);
        r.failures = failures.len();
        r.first_failure = failures.into_iter().next();
        eprintln!(
            "  console ({store}): {:<70} first {:>7.1} ms, seq p95 {:>7.1} ms, c={} p95 {:>7.1} ms{}",
            r.label,
            r.first_ms,
            r.sequential.p95,
            opts.workers,
            r.concurrent.p95,
            if r.failures > 0 {
                format!(", {} failed", r.failures)
            } else {
                String::new()
            }
        );
        out.push(r);
    }
    Ok(out)
}

/// c=16 inference without, then with, console pollers.
async fn inference(
    opts: &Options,
    children: &Children,
    addr: SocketAddr,
    store: &str,
) -> anyhow::Result<Inference> {
    let body = messages_body(false);
    let mut out = Inference::default();
    children.settle(SETTLE_MAX).await;
    let quiet =
        crate::load::throughput(addr, &body, 16, opts.tput_warmup, opts.tput_measure, &[]).await?;
    out.quiet_rps = quiet.requests_per_sec;
    out.quiet_errors = quiet.errors;
    children.settle(SETTLE_MAX).await;
    let deadline = Instant::now() + opts.tput_warmup + opts.tput_measure;
    let polls = Arc::new(Polls::default());
    let pollers = {
        let (n, polls) = (opts.pollers, polls.clone());
        std::thread::spawn(move || poll(addr, n, deadline, &polls))
    };
    let busy =
        crate::load::throughput(addr, &body, 16, opts.tput_warmup, opts.tput_measure, &[]).await;
    let joined = tokio::task::spawn_blocking(move || pollers.join()).await?;
    if let Ok(Err(e)) = joined {
        eprintln!("  console ({store}): pollers stopped early: {e:#}");
    }
    let busy = busy?;
    out.busy_rps = busy.requests_per_sec;
    out.busy_errors = busy.errors;
    let times = polls.times.lock().map(|t| t.clone()).unwrap_or_default();
    out.polls = times.len() as u64;
    out.poll = Timing::of(&times);
    out.poll_failures = polls.failed.load(Ordering::Relaxed);
    out.first_poll_failure = polls.first_failure.lock().ok().and_then(|f| f.clone());
    eprintln!(
        "  console ({store}): c=16 inference {:.0} req/s alone, {:.0} req/s with {} pollers ({:.2}×; {} polls, {} failed)",
        out.quiet_rps,
        out.busy_rps,
        opts.pollers,
        out.ratio(),
        out.polls,
        out.poll_failures
    );
    Ok(out)
}

/// What the console pollers saw.
#[derive(Default)]
struct Polls {
    failed: AtomicU64,
    first_failure: Mutex<Option<String>>,
    times: Mutex<Vec<Duration>>,
}

impl Polls {
    fn answered(&self, d: Duration) {
        if let Ok(mut t) = self.times.lock() {
            t.push(d);
        }
    }

    fn failed(&self, why: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut f) = self.first_failure.lock() {
            f.get_or_insert(why);
        }
    }
}

/// `n` pollers on a runtime of this thread, until `deadline`.
fn poll(addr: SocketAddr, n: usize, deadline: Instant, polls: &Polls) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        for r in join_all((0..n).map(|_| tab(addr, deadline, polls))).await {
            r?;
        }
        anyhow::Ok(())
    })
}

/// One console tab polling the overview and the people page, a round every [`POLL_GAP`]
/// (a real console page re-reads far less often; this is a heavy reading of many tabs).
async fn tab(addr: SocketAddr, deadline: Instant, polls: &Polls) -> anyhow::Result<()> {
    let mut conn = Conn::connect_as(addr, admin()).await?;
    // Bounded by the deadline; the count is only a safety stop.
    for _ in 0..1_000_000u32 {
        for path in [
            "/v1/organizations/overview",
            "/v1/organizations/users?limit=50",
        ] {
            let t = Instant::now();
            if t >= deadline {
                return Ok(());
            }
            let left = (deadline - t).max(Duration::from_millis(1));
            match conn.get_collect_within(path, left).await {
                Ok((s, _)) if s == StatusCode::OK => polls.answered(t.elapsed()),
                Ok((s, text)) => polls.failed(format!(
                    "{path}: {s}: {}",
                    text.chars().take(200).collect::<String>()
                )),
                Err(e) => {
                    if Instant::now() < deadline {
                        polls.failed(format!("{path}: {e:#}"));
                        conn = Conn::connect_as(addr, admin()).await?;
                    }
                }
            }
        }
        tokio::time::sleep(POLL_GAP).await;
    }
    Ok(())
}

/// The pause between a tab's rounds of polls.
const POLL_GAP: Duration = Duration::from_millis(200);

fn binaries(gatehouse: &Path) -> String {
    let p = gatehouse.display().to_string();
    if p.contains("/release/") {
        format!("release build (`{p}`)")
    } else if p.contains("/debug/") {
        format!("debug build (`{p}`): times are not representative")
    } else {
        format!("`{p}`")
    }
}

fn find<'a>(s: Option<&'a StoreRun>, label: &str) -> Option<&'a CallResult> {
    s.and_then(|s| s.calls.iter().find(|c| c.label == label))
}

/// One store's cells of a row: `pick` gives the run's timing and its failures.
fn cells(r: Option<&CallResult>, pick: impl Fn(&CallResult) -> (&Timing, usize)) -> String {
    let Some(r) = r else {
        return "— | — | — | — | —".to_owned();
    };
    let (t, failed) = pick(r);
    let verdict = if CallResult::ok(t, failed) {
        "✅"
    } else {
        "❌"
    };
    let mut notes = if failed > 0 {
        format!(" ({failed} failed)")
    } else {
        String::new()
    };
    if r.cut {
        notes.push_str(" (cut short)");
    }
    format!(
        "{} | {:.1} | {:.1} | {:.1} | {verdict}{notes}",
        t.n, t.p50, t.p95, t.max
    )
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
}

impl Console {
    fn store(&self, name: &str) -> Option<&StoreRun> {
        self.stores.iter().find(|s| s.store == name)
    }

    /// The per-call table: SQLite and PostgreSQL side by side.
    pub fn table(&self) -> String {
        let (sq, pg) = (self.store("sqlite"), self.store("postgres"));
        let mut out = String::from(
            "| call | clients | SQLite n | p50 (ms) | p95 (ms) | max (ms) | ≤ 300 ms p95 | PostgreSQL n | p50 (ms) | p95 (ms) | max (ms) | ≤ 300 ms p95 |\n\
             |---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|\n",
        );
        let labels: Vec<&str> = self
            .stores
            .first()
            .map(|s| s.calls.iter().map(|c| c.label.as_str()).collect())
            .unwrap_or_default();
        for l in labels {
            let (a, b) = (find(sq, l), find(pg, l));
            let _ = writeln!(
                out,
                "| {l} | 1 | {} | {} |",
                cells(a, |r| (&r.sequential, r.failed_sequential)),
                cells(b, |r| (&r.sequential, r.failed_sequential))
            );
            let _ = writeln!(
                out,
                "| {l} | {} | {} | {} |",
                self.opts.workers,
                cells(a, |r| (&r.concurrent, r.failed_concurrent)),
                cells(b, |r| (&r.concurrent, r.failed_concurrent))
            );
        }
        out
    }

    /// The BENCHMARKS.md section.
    pub fn markdown(&self) -> String {
        let mut out = String::from("\n## Team console at scale\n\n");
        let _ = writeln!(
            out,
            "Every admin API call the team console makes, over a store of {} people and {} usage \
             rows (issue 33: each ≤ {TARGET_MS} ms at p95), and whether console tabs slow \
             inference. Gatehouse: {}; phase took {:.0} s.\n",
            self.people,
            self.rows,
            self.binaries,
            self.elapsed.as_secs_f64()
        );
        out.push_str(&self.table());
        out.push_str(&self.firsts());
        out.push_str(&self.inference_table());
        out.push_str(&self.seeding_table());
        out.push('\n');
        for s in &self.skipped {
            let _ = writeln!(out, "- {s}.");
        }
        for s in &self.stores {
            for c in s.calls.iter().filter(|c| c.failures > 0) {
                let _ = writeln!(
                    out,
                    "- {} on {}: {} failed; first: {}.",
                    c.label,
                    s.store,
                    c.failures,
                    c.first_failure.as_deref().unwrap_or("?")
                );
            }
        }
        out.push_str(&self.how());
        out
    }

    /// The first call of each (the overview computes its snapshot then), and answer sizes.
    fn firsts(&self) -> String {
        let (sq, pg) = (self.store("sqlite"), self.store("postgres"));
        let mut out = String::from(
            "\n| call | SQLite first call (ms) | answer (bytes) | PostgreSQL first call (ms) | answer (bytes) |\n\
             |---|---:|---:|---:|---:|\n",
        );
        let first = |r: Option<&CallResult>| {
            r.map_or_else(
                || "— | —".to_owned(),
                |r| format!("{:.1} | {}", r.first_ms, r.bytes),
            )
        };
        for c in self
            .stores
            .first()
            .map(|s| s.calls.as_slice())
            .unwrap_or_default()
        {
            let l = c.label.as_str();
            let _ = writeln!(
                out,
                "| {l} | {} | {} |",
                first(find(sq, l)),
                first(find(pg, l))
            );
        }
        out
    }

    fn inference_table(&self) -> String {
        let mut out = format!(
            "\n| store | c=16 inference, no console (req/s) | with {} console pollers (req/s) | ratio | console polls answered (failed) | poll p50 / p95 (ms) | reading (≥ {RATIO_READING}×) |\n\
             |---|---:|---:|---:|---:|---:|---|\n",
            self.opts.pollers
        );
        let mut errors = String::new();
        for s in &self.stores {
            let i = &s.inference;
            let reading = if i.ratio() >= RATIO_READING {
                "✅"
            } else {
                "❌"
            };
            let _ = writeln!(
                out,
                "| {} | {:.0} | {:.0} | {:.2}× | {} ({}) | {:.1} / {:.1} | {reading} |",
                s.store,
                i.quiet_rps,
                i.busy_rps,
                i.ratio(),
                i.polls,
                i.poll_failures,
                i.poll.p50,
                i.poll.p95
            );
            if let Some(f) = &i.first_poll_failure {
                let _ = writeln!(errors, "\n- {}: first failed poll: {f}.", s.store);
            }
        }
        out.push_str(&errors);
        out
    }

    fn seeding_table(&self) -> String {
        let mut out = String::from(
            "\n| store | people | usage rows | sessions | limits | spend rows | audit rows | seeding: directory / limits / usage / spend / audit (s) | size |\n\
             |---|---:|---:|---:|---:|---:|---:|---|---:|\n",
        );
        for s in &self.stores {
            let d = &s.seeded;
            let secs = |t: Duration| format!("{:.1}", t.as_secs_f64());
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} / {} / {} / {} / {} (total {}) | {} |",
                s.store,
                d.people,
                d.rows,
                d.sessions,
                d.limits,
                d.spend_rows,
                d.audit_rows + d.limits,
                secs(d.people_time),
                secs(d.limits_time),
                secs(d.rows_time),
                secs(d.spend_time),
                secs(d.audit_time),
                secs(d.total()),
                mib(d.bytes)
            );
        }
        out
    }

    fn how(&self) -> String {
        let o = &self.opts;
        format!(
            "\n- How measured: per store a fresh store seeded by `console_seed` (fixed seed): \
             people in 1–3 of {} groups; the organization's daily and monthly limits, monthly \
             limits with a shared budget on 6 groups (one paused), daily limits on 6 groups and \
             on every 100th person, through `Store::upsert_limit`/`upsert_pooled_limit` (each \
             with its audit row), and {} more audit rows through `Store::append_audit`; usage \
             rows in sessions of 20–50 requests over the last 30 days, 3 upstreams, 4 models, \
             through `Store::insert_usage` in batches of {} rows (one transaction each, the \
             hourly rollup kept in it; SQLite one batch at a time, PostgreSQL three in flight and six directory or audit writes); \
             the `spend` rows those rows imply (per person: each day, week and month with \
             spend) by SQL, as the trait writes spend only through reservations. Then \
             `gatehouse serve` on it (an `admin` write key, one fake upstream, SQLite or \
             PostgreSQL as configured, the PostgreSQL server given by `--postgres-url` in a \
             fresh database dropped afterwards). Each call with the admin key: one first call \
             alone, {} sequential calls on one keep-alive connection, then {} clients at once \
             making {} calls each, neither started after {:?} (\"cut short\": fewer calls made); \
             time from sending to the end of the body; nearest-rank percentiles (n: the 2xx \
             answers); ❌ when p95 > {TARGET_MS} ms or any call failed (non-2xx or \
             transport). Inference: 16 keep-alive connections sending non-streaming \
             `/v1/messages` with the client key, {:?} warm-up then answers counted over {:?}, \
             first alone, then with {} console pollers (their own thread, one connection each) \
             fetching `/overview` and `/users?limit=50`, a round every 200 ms (5 rounds a second per \
             tab, far above a console page's own re-reads); all processes share the \
             machine's cores.\n",
            seed::GROUPS.len(),
            seed::AUDIT_ROWS,
            seed::BATCH,
            o.sequential,
            o.workers,
            o.per_worker,
            o.call_budget,
            o.tput_warmup,
            o.tput_measure,
            o.pollers
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn calls_cover_the_console_with_fifty_ids() {
        let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let calls = calls(10_000, now);
        assert_eq!(calls.len(), 20);
        let effective = &calls[6];
        assert_eq!(effective.path.matches("user_ids%5B%5D=").count(), 50);
        assert!(effective.path.contains("user_ids%5B%5D=u09800&"));
        assert!(calls[16].path.contains("starting_at=2026-12-16T08:00:00Z"));
        assert!(calls.iter().filter(|c| c.post.is_some()).count() == 1);
        assert!(
            calls
                .iter()
                .all(|c| c.path.starts_with("/v1/organizations/"))
        );
    }

    #[test]
    fn config_has_the_admin_key_and_the_store() {
        let c = gatehouse_config("store: {sqlite_path: \"/tmp/c.db\"}", "http://127.0.0.1:9");
        assert!(c.contains(WRITE_KEY) && c.contains(CLIENT_KEY) && c.contains("/tmp/c.db"));
    }

    #[test]
    fn the_section_puts_the_stores_side_by_side() {
        let t = |p95| Timing {
            n: 30,
            p50: 1.0,
            p95,
            max: p95,
        };
        let call = CallResult {
            label: "`GET /me`".into(),
            sequential: t(2.0),
            concurrent: t(400.0),
            ..CallResult::default()
        };
        let run = StoreRun {
            store: "sqlite",
            seeded: Seeded::default(),
            calls: vec![call],
            inference: Inference::default(),
        };
        let c = Console {
            people: 10,
            rows: 10,
            stores: vec![run],
            skipped: vec!["PostgreSQL: not measured".into()],
            opts: Options::new("g".into(), "f".into(), 10, 10),
            binaries: "b".into(),
            elapsed: Duration::ZERO,
        };
        let md = c.markdown();
        assert!(md.contains("## Team console at scale"));
        assert!(md.contains("| `GET /me` | 1 | 30 | 1.0 | 2.0 | 2.0 | ✅ | — | — | — | — | — |"));
        assert!(md.contains("| `GET /me` | 8 | 30 | 1.0 | 400.0 | 400.0 | ❌ | — |"));
        assert!(md.contains("\n\n- PostgreSQL: not measured."));
        assert!(md.contains("PostgreSQL: not measured"));
    }
}
