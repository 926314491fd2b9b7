//! `--peers`: the same fake upstream and load generator measured through other
//! gateways in the same run — nginx (one worker, the floor for any proxy), the
//! reference gateway (`claude gateway`), and LiteLLM's proxy — beside Gatehouse with a
//! client key and Gatehouse with a signed-in person under a binding daily cap.
//!
//! Every peer is started here (free loopback ports, files in the run's directory) and
//! stopped before the phase returns. A peer that is not installed or fails to start or
//! to answer is skipped with the reason, which the report prints instead of a figure.
//! The c=1 JSON and stream TTFT samples are taken in interleaved rounds over every path
//! (see `rounds`); c=16 runs each path in turn after the processes went quiet. Direct is
//! measured again in this phase as the baseline of the "added" columns.

mod litellm;
mod nginx;
mod reference;
mod report;
mod rounds;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use fake_upstream::FakeConfig;
use http::StatusCode;

use crate::client::{Auth, CLIENT_KEY, Conn, messages_body};
use crate::cpu::CpuMeter;
use crate::discovery::Issuer;
use crate::load::{self, Sequential};
use crate::procs::{Children, tree_rss_kib};
use crate::report::Params;
use crate::reservation::{Gateways, set_cap, token};
use crate::stack::set_fake;

/// Longest a sequential run on one path may take.
const RUN_MAX_TIME: Duration = Duration::from_secs(180);
/// Longest wait for the processes to go quiet before a measurement.
const SETTLE_MAX: Duration = Duration::from_secs(60);
/// Settling time after start-up before the idle RSS is read.
const IDLE_SETTLE: Duration = Duration::from_millis(500);
/// Rounds of the c=1 measurements (see `rounds`).
const ROUNDS: usize = 5;
/// Warm-up streams before the TTFT measurement.
const TTFT_WARMUP: usize = 50;
/// Share of the machine's CPU other processes may use before a measurement is
/// flagged as disturbed.
const FOREIGN_CPU_LIMIT: f64 = 0.05;
/// Children started here, stopped at the end of the phase.
const NAMES: [&str; 6] = [
    "peers-gatehouse",
    "peers-gatehouse-capped",
    "nginx",
    "reference",
    "reference-idp",
    "litellm",
];

/// Where the peers' programs are.
#[derive(Clone, Debug)]
pub struct PeerOptions {
    pub nginx: PathBuf,
    /// The Claude Code binary holding `claude gateway`.
    pub claude: PathBuf,
    /// `tests/e2e` (idp.mjs, reference_session.mjs, node_modules).
    pub e2e: PathBuf,
    /// LiteLLM's `litellm` command (in its venv).
    pub litellm: PathBuf,
}

/// What is measured behind each row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Direct,
    Nginx,
    Gatehouse,
    GatehouseCapped,
    Reference,
    ReferenceCapped,
    LiteLlm,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Direct => "direct (client → fake upstream)",
            Kind::Nginx => "nginx (one worker, proxy_pass, keep-alive upstream)",
            Kind::Gatehouse => "Gatehouse, client key",
            Kind::GatehouseCapped => {
                "Gatehouse, signed-in person with a binding daily cap (SQLite)"
            }
            Kind::Reference => "reference gateway, signed-in person without a cap",
            Kind::ReferenceCapped => "reference gateway, signed-in person with a binding daily cap",
            Kind::LiteLlm => "LiteLLM proxy (`/v1/messages`, master key)",
        }
    }
}

/// Measurements of one path.
#[derive(Debug)]
pub struct PeerRow {
    pub kind: Kind,
    pub version: String,
    /// RSS of the process and its children after start-up, before any request.
    pub idle_kib: Option<u64>,
    pub latency: Sequential,
    pub ttft: Sequential,
    pub rps: f64,
    pub tput_errors: u64,
    /// Why a phase could not be measured on this path.
    pub failed: Vec<String>,
}

/// The whole peers phase.
#[derive(Debug, Default)]
pub struct Peers {
    pub rows: Vec<PeerRow>,
    /// (peer, why) for every peer that was not measured.
    pub skipped: Vec<(String, String)>,
    /// Measurements during which other processes used much of the machine.
    pub notes: Vec<String>,
    pub params: Option<Params>,
}

/// One path under test.
struct Target {
    kind: Kind,
    version: String,
    addr: SocketAddr,
    pid: Option<u32>,
    auth: Auth,
}

/// What the phase takes from the run.
pub struct Inputs<'a> {
    pub gatehouse: &'a Path,
    pub fake: SocketAddr,
    pub dir: &'a Path,
    pub postgres_url: Option<&'a str>,
    pub params: &'a Params,
}

/// A free loopback port (bound, read, released) for a program that must be told its port.
pub fn free_port() -> anyhow::Result<SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("cannot bind a loopback port")?;
    Ok(l.local_addr()?)
}

/// Runs the phase; every child it started is stopped before it returns.
pub async fn run(
    children: &mut Children,
    opts: &PeerOptions,
    cx: &Inputs<'_>,
) -> anyhow::Result<Peers> {
    let issuer = Issuer::start().await?;
    let mut peers = Peers {
        params: Some(cx.params.clone()),
        ..Peers::default()
    };
    let mut db = None;
    let result = async {
        let mut targets = start_all(children, opts, cx, &issuer.url, &mut peers, &mut db).await?;
        measure(children, cx, &mut targets, &mut peers).await
    }
    .await;
    for name in NAMES {
        children.stop(name).await;
    }
    if let Some(db) = db {
        db.drop_it().await;
    }
    set_fake(cx.fake, FakeConfig::default()).await?;
    result.map(|()| peers)
}

/// Starts Gatehouse (both callers) and every peer that is installed; peers that cannot
/// be started are noted in `peers.skipped`.
async fn start_all(
    children: &mut Children,
    opts: &PeerOptions,
    cx: &Inputs<'_>,
    issuer: &str,
    peers: &mut Peers,
    db: &mut Option<crate::reservation::Database>,
) -> anyhow::Result<Vec<Target>> {
    let fake_url = format!("http://{}", cx.fake);
    let key = Auth::ApiKey(CLIENT_KEY.to_owned());
    let mut targets = vec![Target {
        kind: Kind::Direct,
        version: "fake-upstream (this commit)".to_owned(),
        addr: cx.fake,
        pid: None,
        auth: key.clone(),
    }];
    let g = Gateways {
        bin: cx.gatehouse,
        fake_url: &fake_url,
        issuer,
        dir: cx.dir,
    };
    let version = gatehouse_version(cx.gatehouse);
    for (kind, name, caps) in [
        (Kind::Gatehouse, "peers-gatehouse", false),
        (Kind::GatehouseCapped, "peers-gatehouse-capped", true),
    ] {
        let store = format!(
            "store: {{sqlite_path: \"{}\"}}",
            cx.dir.join(format!("{name}.db")).display()
        );
        let addr = g.spawn(children, name, &g.config(&store, caps)).await?;
        let auth = if caps {
            set_cap(addr, "bench-capped").await?;
            Auth::Bearer(token("bench-capped")?)
        } else {
            key.clone()
        };
        let pid = child_pid(children, addr);
        targets.push(Target {
            kind,
            version: version.clone(),
            addr,
            pid,
            auth,
        });
    }
    match start_nginx(children, opts, cx).await {
        Ok(t) => targets.push(t),
        Err(e) => skip(peers, "nginx", &e),
    }
    match start_reference(children, opts, cx).await {
        Ok((r, version)) => {
            for (kind, auth) in [
                (Kind::Reference, r.plain),
                (Kind::ReferenceCapped, r.capped),
            ] {
                targets.push(Target {
                    kind,
                    version: version.clone(),
                    addr: r.addr,
                    pid: Some(r.pid),
                    auth,
                });
            }
            *db = Some(r.db);
        }
        Err(e) => skip(peers, "reference gateway", &e),
    }
    match litellm::start(children, &opts.litellm, cx.dir, cx.fake).await {
        Ok(l) => targets.push(Target {
            kind: Kind::LiteLlm,
            version: l.version,
            addr: l.addr,
            pid: Some(l.pid),
            auth: l.auth,
        }),
        Err(e) => skip(peers, "LiteLLM", &e),
    }
    Ok(targets)
}

fn skip(peers: &mut Peers, name: &str, e: &anyhow::Error) {
    let why = format!("{e:#}");
    eprintln!("  {name}: skipped: {why}");
    peers.skipped.push((name.to_owned(), why));
}

async fn start_nginx(
    children: &mut Children,
    opts: &PeerOptions,
    cx: &Inputs<'_>,
) -> anyhow::Result<Target> {
    let version = nginx::version(&opts.nginx).context(
        "not installed (Debian package `nginx`; scripts/bench_peers_setup.sh installs it, or pass --nginx PATH)",
    )?;
    let listen = free_port()?;
    let pid = nginx::start(children, &opts.nginx, cx.dir, listen, cx.fake).await?;
    Ok(Target {
        kind: Kind::Nginx,
        version,
        addr: listen,
        pid: Some(pid),
        auth: Auth::ApiKey(CLIENT_KEY.to_owned()),
    })
}

async fn start_reference(
    children: &mut Children,
    opts: &PeerOptions,
    cx: &Inputs<'_>,
) -> anyhow::Result<(reference::Reference, String)> {
    if !opts.claude.is_file() {
        bail!(
            "not installed: no {} (npm `@anthropic-ai/claude-code`, pinned in tests/e2e/package.json: \
             run `npm ci` in tests/e2e, or pass --claude PATH)",
            opts.claude.display()
        );
    }
    let Some(server) = cx.postgres_url else {
        bail!(
            "it needs PostgreSQL: no --postgres-url and no GATEHOUSE_TEST_POSTGRES_URL (scripts/postgres.sh prints one)"
        );
    };
    let tools = reference::Tools {
        claude: &opts.claude,
        e2e: &opts.e2e,
    };
    let r = reference::start(children, &tools, cx.dir, cx.fake, server).await?;
    let version = format!(
        "claude gateway {} (npm @anthropic-ai/claude-code-linux-x64, pinned in tests/e2e)",
        r.version
    );
    Ok((r, version))
}

/// The pid of the child listening on `addr`.
fn child_pid(children: &Children, addr: SocketAddr) -> Option<u32> {
    children.pid_of_url(&format!("http://{addr}"))
}

fn gatehouse_version(bin: &Path) -> String {
    std::process::Command::new(bin)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|v| !v.is_empty())
        .map_or_else(
            || "gatehouse (this commit)".to_owned(),
            |v| format!("{v} (this commit)"),
        )
}

/// Idle RSS, preflight, then the three measurements, each over every path in turn.
async fn measure(
    children: &mut Children,
    cx: &Inputs<'_>,
    targets: &mut Vec<Target>,
    peers: &mut Peers,
) -> anyhow::Result<()> {
    let pr = cx.params;
    tokio::time::sleep(IDLE_SETTLE).await;
    children.settle(SETTLE_MAX).await;
    let rows: Vec<PeerRow> = targets
        .iter()
        .map(|t| PeerRow {
            kind: t.kind,
            version: t.version.clone(),
            idle_kib: t.pid.and_then(|p| tree_rss_kib(p).ok()),
            latency: Sequential::default(),
            ttft: Sequential::default(),
            rps: 0.0,
            tput_errors: 0,
            failed: Vec::new(),
        })
        .collect();
    // A path that does not answer both request kinds is dropped, with the answer.
    let mut kept = Vec::new();
    for (t, row) in std::mem::take(targets).into_iter().zip(rows) {
        match preflight(t.addr, &t.auth).await {
            Ok(()) => kept.push((t, row)),
            Err(e) if t.kind == Kind::Direct || t.kind == Kind::Gatehouse => {
                return Err(e.context(format!("{}: preflight", t.kind.label())));
            }
            Err(e) => skip(
                peers,
                t.kind.label(),
                &e.context("preflight request failed"),
            ),
        }
    }
    let json = messages_body(false);
    let stream = messages_body(true);
    let paths: Vec<(SocketAddr, Auth)> =
        kept.iter().map(|(t, _)| (t.addr, t.auth.clone())).collect();
    eprintln!("gatehouse-bench: peers: c=1 JSON latency ({ROUNDS} interleaved rounds)");
    let plan = rounds::Plan {
        body: &json,
        streaming: false,
        warmup: pr.latency_warmup,
        n: pr.latency_n,
        rounds: ROUNDS,
        max_time: RUN_MAX_TIME,
    };
    let meter = CpuMeter::start(&children.pids());
    let results = rounds::interleaved(children, &paths, &plan).await;
    disturbed(children, &meter, "c=1 JSON (all paths)", peers);
    for ((t, row), r) in kept.iter_mut().zip(results) {
        record(&mut row.latency, &mut row.failed, "c=1 JSON", r, t.kind);
    }
    eprintln!("gatehouse-bench: peers: streaming TTFT ({ROUNDS} interleaved rounds)");
    let short = FakeConfig {
        output_tokens: pr.ttft_events,
        ..FakeConfig::default()
    };
    set_fake(cx.fake, short).await?;
    let plan = rounds::Plan {
        body: &stream,
        streaming: true,
        warmup: TTFT_WARMUP,
        n: pr.ttft_n,
        rounds: ROUNDS,
        max_time: RUN_MAX_TIME,
    };
    let meter = CpuMeter::start(&children.pids());
    let results = rounds::interleaved(children, &paths, &plan).await;
    disturbed(children, &meter, "stream TTFT (all paths)", peers);
    for ((t, row), r) in kept.iter_mut().zip(results) {
        record(&mut row.ttft, &mut row.failed, "TTFT", r, t.kind);
    }
    set_fake(cx.fake, FakeConfig::default()).await?;
    eprintln!("gatehouse-bench: peers: c={} JSON throughput", pr.workers);
    for (t, row) in &mut kept {
        children.settle(SETTLE_MAX).await;
        let meter = CpuMeter::start(&children.pids());
        let x = load::throughput_as(
            t.addr,
            t.auth.clone(),
            &json,
            pr.workers,
            pr.tput_warmup,
            pr.tput_measure,
            &[],
        )
        .await;
        let what = format!("c={} on {}", pr.workers, t.kind.label());
        disturbed(children, &meter, &what, peers);
        match x {
            Ok(x) => {
                eprintln!(
                    "  {:<60} {:>8.0} req/s, {} errors",
                    t.kind.label(),
                    x.requests_per_sec,
                    x.errors
                );
                (row.rps, row.tput_errors) = (x.requests_per_sec, x.errors);
            }
            Err(e) => row.failed.push(format!("c={}: {e:#}", pr.workers)),
        }
    }
    peers.rows = kept.into_iter().map(|(_, row)| row).collect();
    Ok(())
}

/// Notes a measurement during which other processes used more than
/// [`FOREIGN_CPU_LIMIT`] of the machine.
fn disturbed(children: &Children, meter: &CpuMeter, what: &str, peers: &mut Peers) {
    let share = meter.foreign_share(&children.pids()).unwrap_or(0.0);
    if share > FOREIGN_CPU_LIMIT {
        let note = format!(
            "{what}: other processes used {:.0}% of the machine's CPU meanwhile (disturbed)",
            share * 100.0
        );
        eprintln!("  {note}");
        peers.notes.push(note);
    }
}

fn record(
    slot: &mut Sequential,
    failed: &mut Vec<String>,
    what: &str,
    r: Result<Sequential, String>,
    kind: Kind,
) {
    match r {
        Ok(s) => {
            let p = if what == "TTFT" {
                &s.first_delta
            } else {
                &s.total
            };
            eprintln!(
                "  {:<60} p50 {:.1} µs p99 {:.1} µs, {} errors",
                kind.label(),
                p.p50,
                p.p99,
                s.errors
            );
            *slot = s;
        }
        Err(e) => failed.push(format!("{what}: {e}")),
    }
}

/// One JSON and one streaming request with `auth`; fails with the answer if not 200.
async fn preflight(addr: SocketAddr, auth: &Auth) -> anyhow::Result<()> {
    let mut conn = Conn::connect_as(addr, auth.clone()).await?;
    for stream in [false, true] {
        let (status, text) = conn
            .post_collect("/v1/messages", messages_body(stream))
            .await?;
        if status != StatusCode::OK {
            bail!(
                "answered {status}: {}",
                text.chars().take(300).collect::<String>()
            );
        }
        if stream && !text.contains("event: content_block_delta") {
            bail!(
                "the stream has no content_block_delta event: {}",
                text.chars().take(300).collect::<String>()
            );
        }
    }
    Ok(())
}
