//! The soak (issue 35, `--soak [--soak-minutes N]` or `gatehouse-bench soak`): mixed traffic
//! at a steady rate for minutes, sampling the gateway's memory, descriptors, threads and
//! store size, then checking that every spend reservation settled and that every answered
//! request left exactly one usage row.
//!
//! One `gatehouse serve` (SQLite, a client key, sign-in against the bench's loopback issuer,
//! spend caps on) in front of two fakes `a` and `b` in `ordered` routing, so a failed
//! attempt on `a` fails over to `b`; the breaker and cooldown are shortened so they open and
//! close during the run. The traffic and the faults are [`crate::soak_traffic`]'s. Every
//! second the sampler reads VmRSS and Threads from `/proc/PID/status`, counts
//! `/proc/PID/fd` and sums the SQLite file, its WAL and its shared-memory file, against the
//! number of inference requests sent so far. Growth per million requests is the slope of a
//! least-squares line through the samples after the warm-up. Gatehouse's `/metrics` has no
//! tokio task count, so "tasks" are the process's threads.
//!
//! At the end the gateway is left to settle (its CPU quiet, `gatehouse_open_reservations`
//! 0), then its database is opened read-only: reservations still `open`, and usage rows
//! against the requests the bench counts as answered — those to which the gateway sent
//! response headers, less `idempotent-replayed` answers (served from the idempotency store,
//! never routed) and refusals before routing (401/403/409/422; see
//! [`soak_traffic::refused_before_routing`]). Streams the client left mid-way count: they
//! reached an upstream and are metered as disconnected.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use fake_upstream::FakeConfig;
use http::StatusCode;

use crate::client::{Auth, CLIENT_KEY, Conn, parse_url};
use crate::discovery::Issuer;
use crate::procs::{Children, rss_kib};
use crate::reservation::{PUBLIC, SESSION_SECRET, WRITE_KEY, set_cap};
use crate::soak_traffic::{self as traffic, BURST, PEOPLE, Tally};
use crate::stack::{preflight, set_fake};

/// RSS growth allowed per million requests after the warm-up (issue 35).
const RSS_TARGET_MIB_PER_M: f64 = 2.0;
/// Descriptors the median of the last quarter of the measured samples may exceed the
/// median of the first quarter by and still read as flat (connections come and go with the
/// hang-ups, so single samples move by a few).
const FD_TOLERANCE: f64 = 2.0;
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Longest wait for the gateway to go quiet, and then for its reservations to close.
const SETTLE_MAX: Duration = Duration::from_secs(30);
/// `routing.health.breaker_failures` of the soak's gateway.
const BREAKER_FAILURES: usize = 20;
const PROCESS: &str = "gatehouse-soak";
/// Requests of the preflight check (one JSON, one stream), routed before the traffic.
const PREFLIGHT_ANSWERED: u64 = 2;

/// Size of the phase.
#[derive(Debug, Clone)]
pub struct Options {
    pub gatehouse: PathBuf,
    pub fake: PathBuf,
    pub minutes: u64,
    /// Mix steps per second, all workers together.
    pub rps: f64,
    pub workers: usize,
}

impl Options {
    pub fn new(gatehouse: PathBuf, fake: PathBuf, minutes: u64) -> Options {
        Options {
            gatehouse,
            fake,
            minutes,
            rps: 1000.0,
            workers: 16,
        }
    }

    /// A quarter of the run, at least 10 s and at most a minute.
    fn warmup(&self) -> Duration {
        Duration::from_secs(self.minutes * 15)
            .clamp(Duration::from_secs(10), Duration::from_secs(60))
    }
}

/// One reading of the gateway process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Seconds since the traffic started.
    pub at: f64,
    /// Inference requests sent by then.
    pub requests: u64,
    pub rss_kib: u64,
    /// The private part of RSS (`RssAnon`: heaps, stacks).
    pub anon_kib: u64,
    /// The file-backed and shared part (`RssFile` + `RssShmem`: the binary's pages,
    /// SQLite's shared-memory WAL index).
    pub file_kib: u64,
    pub fds: u64,
    pub threads: u64,
    pub store_bytes: u64,
}

/// A least-squares line through the samples after the warm-up: growth per million
/// requests, and the standard error of that slope.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fit {
    pub per_million: f64,
    pub se: f64,
}

/// The phase's result.
#[derive(Debug, Clone, Default)]
pub struct Soak {
    pub minutes: u64,
    pub warmup: Duration,
    pub target_rps: f64,
    pub workers: usize,
    pub traffic_time: Duration,
    pub sent: u64,
    pub answered: u64,
    pub replayed: u64,
    pub refused: u64,
    pub failed: u64,
    pub hung_up: u64,
    pub body_errors: u64,
    pub refreshes: u64,
    pub refresh_failures: u64,
    pub sign_ins: u64,
    pub faults_a: u64,
    pub faults_b: u64,
    pub statuses: BTreeMap<u16, u64>,
    pub first_error: Option<String>,
    /// Before any traffic, after start-up and one request.
    pub idle_start: Sample,
    /// The first sample after the warm-up, the last one under load, and after settling.
    pub warm: Sample,
    pub last: Sample,
    pub idle_end: Sample,
    pub samples: usize,
    /// Median descriptors of the last quarter of the measured samples less the first's.
    pub fd_drift: f64,
    pub rss: Fit,
    pub anon: Fit,
    pub file: Fit,
    pub fds: Fit,
    pub threads: Fit,
    pub store: Fit,
    pub settle: Duration,
    pub quiet: bool,
    /// `gatehouse_open_reservations` after settling, and `open` rows in the store.
    pub open_metric: Option<u64>,
    pub open_rows: u64,
    pub reservation_rows: u64,
    pub usage_rows: u64,
    pub disconnected_rows: u64,
    pub kv_rows: u64,
    /// The sum of `gatehouse_requests_total` (one per usage row).
    pub requests_metric: Option<u64>,
    pub binaries: String,
}

/// Runs the phase on its own single-threaded runtime (the load generator leaves the other
/// core to the processes under test), in a temporary directory removed afterwards.
pub fn run(opts: &Options) -> anyhow::Result<Soak> {
    for (what, path, pkg) in [
        (
            "gatehouse",
            &opts.gatehouse,
            "gatehouse --no-default-features",
        ),
        ("fake upstream", &opts.fake, "fake-upstream"),
    ] {
        if !path.is_file() {
            bail!(
                "{what} binary not found at {}; build it with `cargo build --release -p {pkg}`",
                path.display()
            );
        }
    }
    crate::procs::in_phase("soak", async |children, dir| {
        soak(opts, children, dir).await
    })
}

async fn soak(opts: &Options, children: &mut Children, dir: &Path) -> anyhow::Result<Soak> {
    let mut fakes = Vec::new();
    for name in ["fake-a", "fake-b"] {
        let args = ["--listen", "127.0.0.1:0", "--exit-on-stdin-eof"].map(str::to_owned);
        let url = children
            .spawn(name, &opts.fake, &args, dir)
            .await?
            .url
            .clone();
        set_fake(parse_url(&url)?, fake_config(name)).await?;
        fakes.push(url);
    }
    let issuer = Issuer::start().await?;
    let db = dir.join("soak.db");
    let config = dir.join("soak.yaml");
    std::fs::write(&config, gatehouse_config(&db, &fakes, &issuer.url))
        .with_context(|| format!("cannot write {}", config.display()))?;
    let args = [
        "--data-dir".to_owned(),
        dir.display().to_string(),
        "serve".to_owned(),
        "--config".to_owned(),
        config.display().to_string(),
    ];
    let p = children.spawn(PROCESS, &opts.gatehouse, &args, dir).await?;
    let (pid, addr) = (p.pid, parse_url(&p.url)?);
    for i in 0..PEOPLE {
        set_cap(addr, &format!("soak-{i}")).await?;
    }
    preflight("gatehouse (soak)", addr).await?;
    children.settle(SETTLE_MAX).await;
    let mut out = Soak {
        minutes: opts.minutes,
        warmup: opts.warmup(),
        target_rps: opts.rps,
        workers: opts.workers,
        idle_start: sample(pid, &db, 0.0, 0)?,
        binaries: binaries(&opts.gatehouse),
        ..Soak::default()
    };
    let (a, b) = (parse_url(&fakes[0])?, parse_url(&fakes[1])?);
    let tally = Tally::default();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(opts.minutes * 60);
    eprintln!(
        "  soak: {} min at {} steps/s ({} workers), warm-up {:?}",
        opts.minutes, opts.rps, opts.workers, out.warmup
    );
    let (driven, (), samples) = tokio::join!(
        traffic::drive(addr, opts.workers, opts.rps, deadline, &tally),
        traffic::faults(a, b, deadline, &tally),
        sampler(pid, addr, &db, started, deadline, &tally),
    );
    out.traffic_time = started.elapsed();
    driven?;
    children.check_alive()?;
    let samples = samples?;
    // Settle: the recorder's backlog written, idle leases released.
    let settling = Instant::now();
    let (_, quiet) = children.settle(SETTLE_MAX).await;
    out.quiet = quiet;
    out.open_metric = None;
    while settling.elapsed() < 2 * SETTLE_MAX {
        let m = scrape(addr).await.ok();
        out.open_metric = m.as_ref().and_then(|m| m.open_reservations);
        out.requests_metric = m.as_ref().map(|m| m.requests);
        if out.open_metric == Some(0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    out.settle = settling.elapsed();
    let end = started.elapsed().as_secs_f64();
    out.idle_end = sample(pid, &db, end, tally.sent.load(Ordering::Relaxed))?;
    read_store(&db, &mut out).context("reading the store read-only")?;
    take_tally(&tally, &mut out);
    fit_samples(&samples, out.warmup, &mut out);
    children.check_alive()?;
    eprintln!(
        "  soak: {} requests ({:.0}/s), RSS {:+.2} MiB/M requests, fds {:+.1}/M, {} reservations open, {} usage rows for {} answered",
        out.sent,
        out.rate(),
        out.rss.per_million,
        out.fds.per_million,
        out.open_rows,
        out.usage_rows,
        out.answered
    );
    Ok(out)
}

/// Both fakes stream 16 deltas 2 ms apart, so a client can leave a stream mid-way.
fn fake_config(name: &str) -> FakeConfig {
    FakeConfig {
        reply_text: format!("Hello from {name}, one word at a time for the soak."),
        output_tokens: 16,
        token_interval_ms: 2,
        ..FakeConfig::default()
    }
}

fn gatehouse_config(db: &Path, fakes: &[String], issuer: &str) -> String {
    let mut yaml = format!(
        "listen: {{host: 127.0.0.1, port: 0, public_url: \"{PUBLIC}\"}}\n\
         store: {{sqlite_path: \"{}\"}}\n\
         rate_limits: {{client_key_concurrency: 0}}\n\
         timeouts: {{shutdown_drain_ms: 2000}}\n\
         client_keys:\n  - {{id: bench, key: \"{CLIENT_KEY}\"}}\n\
         session: {{jwt_secret: [\"{SESSION_SECRET}\"], ttl_hours: 1}}\n\
         oidc: {{issuer: \"{issuer}\", client_id: bench, client_secret: bench-client-secret, allow_loopback: true}}\n\
         admin: {{write_keys: [{{id: bench-admin, key: \"{WRITE_KEY}\"}}]}}\n\
         routing:\n  strategy: ordered\n  \
           health: {{breaker_failures: {BREAKER_FAILURES}, breaker_window_s: 5, breaker_open_s: 2, cooldown_default_s: 1, cooldown_max_s: 2}}\n  \
           retry: {{backoff_ms: 20}}\n\
         upstreams:\n",
        db.display()
    );
    for (name, url) in ["a", "b"].iter().zip(fakes) {
        let _ = writeln!(
            yaml,
            "  - {{name: {name}, provider: anthropic, base_url: \"{url}\", auth: {{api_key: bench-operator-key-not-secret}}}}"
        );
    }
    yaml
}

/// Samples every [`SAMPLE_EVERY`] until `deadline`; also tells the fault clock whether
/// upstream `a`'s breaker is open.
async fn sampler(
    pid: u32,
    addr: SocketAddr,
    db: &Path,
    started: Instant,
    deadline: Instant,
    tally: &Tally,
) -> anyhow::Result<Vec<Sample>> {
    let mut out = Vec::new();
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.tick().await;
    // Bounded by the deadline: one sample per tick.
    while Instant::now() < deadline {
        tick.tick().await;
        let at = started.elapsed().as_secs_f64();
        out.push(sample(pid, db, at, tally.sent.load(Ordering::Relaxed))?);
        if let Ok(m) = scrape(addr).await {
            tally.a_down.store(m.a_down, Ordering::Relaxed);
        }
    }
    Ok(out)
}

fn sample(pid: u32, db: &Path, at: f64, requests: u64) -> anyhow::Result<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("gatehouse (pid {pid}) is gone"))?;
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let kib = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    let store_bytes = ["", "-wal", "-shm"]
        .iter()
        .filter_map(|s| std::fs::metadata(format!("{}{s}", db.display())).ok())
        .map(|m| m.len())
        .sum();
    Ok(Sample {
        at,
        requests,
        rss_kib: rss_kib(pid)?,
        anon_kib: kib("RssAnon:"),
        file_kib: kib("RssFile:") + kib("RssShmem:"),
        fds,
        threads,
        store_bytes,
    })
}

/// What the soak reads from `/metrics`.
struct Metrics {
    open_reservations: Option<u64>,
    requests: u64,
    a_down: bool,
}

async fn scrape(addr: SocketAddr) -> anyhow::Result<Metrics> {
    let mut conn = Conn::connect_as(addr, Auth::ApiKey(WRITE_KEY.to_owned())).await?;
    let (status, text) = conn.get_collect("/metrics").await?;
    if status != StatusCode::OK {
        bail!("/metrics answered {status}");
    }
    Ok(parse_metrics(&text))
}

fn parse_metrics(text: &str) -> Metrics {
    let value = |l: &str| {
        l.rsplit_once(' ')
            .and_then(|(_, v)| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let mut m = Metrics {
        open_reservations: None,
        requests: 0,
        a_down: false,
    };
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        if l.starts_with("gatehouse_open_reservations ") {
            m.open_reservations = Some(value(l) as u64);
        } else if l.starts_with("gatehouse_requests_total{") {
            m.requests += value(l) as u64;
        } else if l.starts_with("gatehouse_upstream_state{")
            && l.contains("upstream=\"a\"")
            && l.contains("state=\"down\"")
        {
            m.a_down = value(l) >= 1.0;
        }
    }
    m
}

/// Counts in the gateway's database, opened read-only.
fn read_store(db: &Path, out: &mut Soak) -> anyhow::Result<()> {
    use rusqlite::{Connection, OpenFlags};
    let c = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let count = |sql: &str| -> anyhow::Result<u64> {
        let n: i64 = c.query_row(sql, [], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    };
    out.open_rows = count("SELECT count(*) FROM reservations WHERE state = 'open'")?;
    out.reservation_rows = count("SELECT count(*) FROM reservations")?;
    out.usage_rows = count("SELECT count(*) FROM usage_events")?;
    out.disconnected_rows =
        count("SELECT count(*) FROM usage_events WHERE client_disconnected = 1")?;
    out.kv_rows = count("SELECT count(*) FROM kv")?;
    Ok(())
}

fn take_tally(t: &Tally, out: &mut Soak) {
    let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    out.sent = n(&t.sent);
    out.answered = n(&t.answered) + PREFLIGHT_ANSWERED;
    out.replayed = n(&t.replayed);
    out.refused = n(&t.refused);
    out.failed = n(&t.failed);
    out.hung_up = n(&t.hung_up);
    out.body_errors = n(&t.body_errors);
    out.refreshes = n(&t.refreshes);
    out.refresh_failures = n(&t.refresh_failures);
    out.sign_ins = n(&t.sign_ins);
    out.faults_a = n(&t.faults_a);
    out.faults_b = n(&t.faults_b);
    out.statuses = t.statuses.lock().map(|s| s.clone()).unwrap_or_default();
    out.first_error = t.first_error.lock().ok().and_then(|e| e.clone());
}

fn fit_samples(samples: &[Sample], warmup: Duration, out: &mut Soak) {
    let after: Vec<Sample> = samples
        .iter()
        .filter(|s| s.at >= warmup.as_secs_f64())
        .copied()
        .collect();
    out.samples = after.len();
    out.warm = after.first().copied().unwrap_or_default();
    out.last = after.last().copied().unwrap_or_default();
    let line = |y: fn(&Sample) -> f64| {
        let points: Vec<(f64, f64)> = after.iter().map(|s| (s.requests as f64, y(s))).collect();
        fit(&points)
    };
    let quarter = (after.len() / 4).max(1);
    let median = |part: &[Sample]| {
        let mut v: Vec<u64> = part.iter().map(|s| s.fds).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0) as f64
    };
    if after.len() >= 4 {
        out.fd_drift = median(&after[after.len() - quarter..]) - median(&after[..quarter]);
    }
    out.rss = line(|s| s.rss_kib as f64 / 1024.0);
    out.anon = line(|s| s.anon_kib as f64 / 1024.0);
    out.file = line(|s| s.file_kib as f64 / 1024.0);
    out.fds = line(|s| s.fds as f64);
    out.threads = line(|s| s.threads as f64);
    out.store = line(|s| s.store_bytes as f64 / (1024.0 * 1024.0));
}

/// Least squares of y on x (x in requests): slope per million requests and its standard
/// error (0 with fewer than three points or no spread in x).
pub fn fit(points: &[(f64, f64)]) -> Fit {
    let n = points.len() as f64;
    if points.len() < 3 {
        return Fit::default();
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return Fit::default();
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    let residual: f64 = points
        .iter()
        .map(|p| (p.1 - my - slope * (p.0 - mx)).powi(2))
        .sum();
    let se = (residual / (n - 2.0) / sxx).sqrt();
    Fit {
        per_million: slope * 1e6,
        se: se * 1e6,
    }
}

fn binaries(gatehouse: &Path) -> String {
    let p = gatehouse.display().to_string();
    if p.contains("/release/") {
        format!("release build (`{p}`)")
    } else if p.contains("/debug/") {
        format!("debug build (`{p}`): rates are not representative; growth still is telling")
    } else {
        format!("`{p}`")
    }
}

impl Soak {
    /// Inference requests per second over the traffic window.
    pub fn rate(&self) -> f64 {
        self.sent as f64 / self.traffic_time.as_secs_f64().max(1e-9)
    }

    /// Requests between the first and the last sample after the warm-up.
    fn measured(&self) -> u64 {
        self.last.requests.saturating_sub(self.warm.requests)
    }

    pub fn rss_ok(&self) -> bool {
        self.samples >= 3 && self.rss.per_million <= RSS_TARGET_MIB_PER_M
    }

    /// Descriptors the fitted line gains over the measured window.
    fn fd_growth(&self) -> f64 {
        self.fds.per_million / 1e6 * self.measured() as f64
    }

    pub fn fds_ok(&self) -> bool {
        self.samples >= 4 && self.fd_drift <= FD_TOLERANCE
    }

    pub fn rows_ok(&self) -> bool {
        self.usage_rows == self.answered
    }

    /// The BENCHMARKS.md section.
    pub fn markdown(&self) -> String {
        let verdict = |ok: bool| if ok { "pass" } else { "**miss**" };
        let mut out = String::from("\n## Soak\n\n");
        let _ = writeln!(
            out,
            "Mixed traffic at a steady rate for {} minute(s) against one gateway (issue 35): \
             {} inference requests in {:.0} s ({:.0}/s; {} workers aiming at {:.0} mix steps/s), \
             warm-up {:.0} s, then {} requests measured over {} samples. Growth is the slope of a \
             least-squares line through the samples after the warm-up against requests sent \
             (± its standard error), per million requests.\n",
            self.minutes,
            self.sent,
            self.traffic_time.as_secs_f64(),
            self.rate(),
            self.workers,
            self.target_rps,
            self.warmup.as_secs_f64(),
            self.measured(),
            self.samples
        );
        out.push_str(
            "| gatehouse process | idle before | warm-up end | end of load | after settling | growth per M requests | target | verdict |\n\
             |---|---:|---:|---:|---:|---:|---|---|\n",
        );
        let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
        let smib = |b: u64| format!("{:.2}", b as f64 / (1024.0 * 1024.0));
        let (i, w, l, e) = (&self.idle_start, &self.warm, &self.last, &self.idle_end);
        let _ = writeln!(
            out,
            "| RSS (MiB) | {} | {} | {} | {} | {:+.2} ± {:.2} MiB | ≤ {RSS_TARGET_MIB_PER_M} MiB | {} |",
            mib(i.rss_kib),
            mib(w.rss_kib),
            mib(l.rss_kib),
            mib(e.rss_kib),
            self.rss.per_million,
            self.rss.se,
            verdict(self.rss_ok())
        );
        for (name, fit, kib) in [
            (
                "of which private (RssAnon)",
                self.anon,
                [i.anon_kib, w.anon_kib, l.anon_kib, e.anon_kib],
            ),
            (
                "of which file-backed and shared (RssFile + RssShmem)",
                self.file,
                [i.file_kib, w.file_kib, l.file_kib, e.file_kib],
            ),
        ] {
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} | {} | {:+.2} ± {:.2} MiB | — | — |",
                mib(kib[0]),
                mib(kib[1]),
                mib(kib[2]),
                mib(kib[3]),
                fit.per_million,
                fit.se
            );
        }
        let _ = writeln!(
            out,
            "| open descriptors | {} | {} | {} | {} | {:+.1} ± {:.1} ({:+.2} over the measured window; last quarter's median {:+.0} on the first's) | flat: medians ≤ +{FD_TOLERANCE} | {} |",
            i.fds,
            w.fds,
            l.fds,
            e.fds,
            self.fds.per_million,
            self.fds.se,
            self.fd_growth(),
            self.fd_drift,
            verdict(self.fds_ok())
        );
        let _ = writeln!(
            out,
            "| threads | {} | {} | {} | {} | {:+.1} ± {:.1} | — | — |",
            i.threads, w.threads, l.threads, e.threads, self.threads.per_million, self.threads.se
        );
        let _ = writeln!(
            out,
            "| store: SQLite file + WAL + shm (MiB) | {} | {} | {} | {} | {:+.1} ± {:.1} MiB | — (usage rows are kept) | — |",
            smib(i.store_bytes),
            smib(w.store_bytes),
            smib(l.store_bytes),
            smib(e.store_bytes),
            self.store.per_million,
            self.store.se
        );
        out.push('\n');
        let open = self
            .open_metric
            .map_or_else(|| "unread".to_owned(), |n| n.to_string());
        let _ = writeln!(
            out,
            "| end check | figure | verdict |\n|---|---|---|\n\
             | reservations open after settling ({:.1} s; CPU quiet: {}) | {} in the store of {} ever taken (`gatehouse_open_reservations` {open}) | {} |\n\
             | usage rows = requests answered by routing | {} rows, {} answered ({} rows of streams the client left; `gatehouse_requests_total` {}) | {} |",
            self.settle.as_secs_f64(),
            if self.quiet { "yes" } else { "no" },
            self.open_rows,
            self.reservation_rows,
            verdict(self.open_rows == 0),
            self.usage_rows,
            self.answered,
            self.disconnected_rows,
            self.requests_metric
                .map_or_else(|| "unread".to_owned(), |n| n.to_string()),
            verdict(self.rows_ok())
        );
        let statuses: Vec<String> = self
            .statuses
            .iter()
            .map(|(s, n)| format!("{s}: {n}"))
            .collect();
        let _ = writeln!(
            out,
            "\n- Requests: {} sent = {} answered by routing + {} idempotent replays + {} refused \
             before routing + {} without an answer; {} streams left by the client after their \
             first delta, {} answers whose body broke off (an upstream reset relayed). Statuses \
             seen: {}. Besides: {} refresh grants ({} refused), {} sign-ins, {} faults queued on \
             `a` and {} on `b`; {} keyed-state rows (idempotency keys, refresh claims) at the end.",
            self.sent,
            self.answered,
            self.replayed,
            self.refused,
            self.failed,
            self.hung_up,
            self.body_errors,
            statuses.join(", "),
            self.refreshes,
            self.refresh_failures,
            self.sign_ins,
            self.faults_a,
            self.faults_b,
            self.kv_rows
        );
        if let Some(e) = &self.first_error {
            let _ = writeln!(out, "- First error: {e}.");
        }
        let _ = writeln!(
            out,
            "- How measured: {}, SQLite, `ordered` routing over two fake upstreams `a` and `b` \
             (16 deltas 2 ms apart), breaker {BREAKER_FAILURES} failures in 5 s → open 2 s, \
             429 cooldown 1 s, one same-upstream retry after 20 ms. The mix, repeated in turn by \
             all workers: `/v1/messages` JSON and streamed, streams the client hangs up on after \
             the first delta, `/v1/chat/completions` JSON and streamed, `Idempotency-Key` pairs \
             (JSON and streamed: the second is replayed), about half as one of {PEOPLE} \
             signed-in people with a daily cap set through the admin API (so every such request \
             takes spend out of a reservation lease) and half with a client key; refresh grants \
             through Gatehouse's `POST /oauth/token` (a sealed refresh token minted with the \
             session secret, redeemed against the bench's loopback issuer, which answers the IdP \
             refresh without an ID token and `/userinfo`), and sign-ins as a freshly minted \
             session token (no IdP round trip: the bench has no IdP that signs ID tokens). \
             Faults on a 100 ms clock: on `a` a 503, 529, `error` event mid-stream, reset before \
             the headers, reset mid-stream or 500 per tick, a 429 every 5 s and {BURST} 503s \
             every 30 s (its breaker opens, traffic fails over to `b`), none while its breaker is \
             open; on `b` a 503 or a mid-stream `error` event every second. Sampled every second: \
             VmRSS and Threads of `/proc/PID/status`, entries of `/proc/PID/fd`, and the sizes of \
             the database, its WAL and its shm file. `/metrics` has no tokio task count, so the \
             threads stand for tasks. Answered by routing = the gateway sent response headers, \
             less replays (`idempotent-replayed: true`, never routed) and 401/403/409/422 \
             (refused before routing), plus the two requests of the preflight check; streams \
             the client left count, as they reached an upstream. At the end the gateway is left until its CPU is quiet and \
             `gatehouse_open_reservations` reads 0 (at most {} s), then its database is opened \
             read-only.",
            self.binaries,
            2 * SETTLE_MAX.as_secs()
        );
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn fit_finds_the_slope_per_million() {
        let points: Vec<(f64, f64)> = (0..10)
            .map(|i| (i as f64 * 1000.0, 50.0 + i as f64 * 0.002))
            .collect();
        let f = fit(&points);
        assert!((f.per_million - 2.0).abs() < 1e-6, "{f:?}");
        assert!(f.se < 1e-6);
        assert_eq!(fit(&points[..2]).per_million, 0.0);
    }

    #[test]
    fn metrics_give_open_reservations_requests_and_a_breaker() {
        let text = "# HELP x\n\
                    gatehouse_open_reservations 3\n\
                    gatehouse_requests_total{endpoint=\"messages\",status=\"200\"} 10\n\
                    gatehouse_requests_total{endpoint=\"chat\",status=\"503\"} 5\n\
                    gatehouse_upstream_state{upstream=\"a\",state=\"down\"} 1\n";
        let m = parse_metrics(text);
        assert_eq!(m.open_reservations, Some(3));
        assert_eq!(m.requests, 15);
        assert!(m.a_down);
    }

    #[test]
    fn config_has_two_upstreams_sign_in_and_caps() {
        let c = gatehouse_config(
            Path::new("/tmp/s.db"),
            &["http://127.0.0.1:1".into(), "http://127.0.0.1:2".into()],
            "http://127.0.0.1:3",
        );
        assert!(c.contains("name: a") && c.contains("name: b") && c.contains("strategy: ordered"));
        assert!(c.contains("oidc:") && c.contains("admin:") && c.contains("breaker_failures: 20"));
    }
}
