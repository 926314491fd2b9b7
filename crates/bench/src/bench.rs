//! One benchmark run: starts the fake upstream, the bare proxy and Gatehouse
//! as separate processes, runs every phase against the three paths
//! (direct, proxy, gatehouse), stops the processes and returns the results.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use fake_upstream::FakeConfig;
use http::StatusCode;

use crate::client::{CLIENT_KEY, Conn, messages_body, parse_url};
use crate::cpu::{CpuMeter, ThreadTimes};
use crate::load::{self, Sequential};
use crate::procs::{Children, rss_kib};
use crate::report::{Memory, Meta, Params, PathResults, Results};

/// Longest a sequential phase may run on one path.
const PHASE_MAX_TIME: Duration = Duration::from_secs(180);
/// Settling time after start-up before the idle RSS is read.
const IDLE_SETTLE: Duration = Duration::from_millis(500);
/// Warm-up streams before the long-stream measurement.
const LONG_WARMUP: usize = 5;
/// Longest wait for the processes to go quiet before a measurement.
const SETTLE_MAX: Duration = Duration::from_secs(60);
/// Share of the machine's CPU other processes may use before a measurement
/// is flagged as disturbed.
const FOREIGN_CPU_LIMIT: f64 = 0.05;

/// Command-line choices of a run.
pub struct Options {
    pub gatehouse: PathBuf,
    pub fake: PathBuf,
    pub quick: bool,
}

/// Sizes of a full or a quick run.
pub fn params(quick: bool) -> Params {
    Params {
        quick,
        latency_warmup: 200,
        latency_n: if quick { 500 } else { 3000 },
        workers: 16,
        tput_warmup: Duration::from_secs(1),
        tput_measure: Duration::from_secs(if quick { 3 } else { 8 }),
        ttft_n: if quick { 200 } else { 1000 },
        ttft_events: 16,
        long_n: if quick { 10 } else { 50 },
        long_events: 2000,
        open_streams: 200,
    }
}

/// The three measured paths, in table order.
/// Each is (address the client talks to, pid of the process that answers it).
struct Paths {
    direct: (SocketAddr, u32),
    proxy: (SocketAddr, u32),
    gatehouse: (SocketAddr, u32),
}

impl Paths {
    fn all(&self) -> [(&'static str, SocketAddr, u32); 3] {
        [
            ("direct", self.direct.0, self.direct.1),
            ("proxy", self.proxy.0, self.proxy.1),
            ("gatehouse", self.gatehouse.0, self.gatehouse.1),
        ]
    }
}

/// Runs the benchmark; children are stopped whatever happens.
pub async fn run(opts: &Options, meta: Meta) -> anyhow::Result<Results> {
    for (what, path, pkg) in [
        ("gatehouse", &opts.gatehouse, "gatehouse"),
        ("fake upstream", &opts.fake, "fake-upstream"),
    ] {
        if !path.is_file() {
            bail!(
                "{what} binary not found at {}; build it with `cargo build --release -p {pkg}` \
                 (or `cargo build --release -p gatehouse-bench -p gatehouse -p fake-upstream`), or pass its path",
                path.display()
            );
        }
    }
    let dir = std::env::temp_dir().join(format!("gatehouse-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut children = Children::default();
    let result = run_in(opts, meta, &dir, &mut children).await;
    children.stop_all().await;
    drop(children);
    match &result {
        Ok(_) => {
            let _ = std::fs::remove_dir_all(&dir);
        }
        Err(_) => eprintln!("gatehouse-bench: child logs kept in {}", dir.display()),
    }
    result
}

async fn run_in(
    opts: &Options,
    mut meta: Meta,
    dir: &Path,
    children: &mut Children,
) -> anyhow::Result<Results> {
    let started = Instant::now();
    let params = params(opts.quick);
    let fake_cfg = json(&FakeConfig::default())?;
    let fake_args = [
        "--listen",
        "127.0.0.1:0",
        "--exit-on-stdin-eof",
        "--config-json",
        &fake_cfg,
    ];
    let fake = children
        .spawn("fake-upstream", &opts.fake, &strings(&fake_args), dir)
        .await?;
    let (fake_url, fake_pid) = (fake.url.clone(), fake.pid);
    let fake_addr = parse_url(&fake_url)?;
    set_fake(fake_addr, FakeConfig::default()).await?;

    let me = std::env::current_exe().context("cannot locate the gatehouse-bench executable")?;
    let proxy_args = [
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &fake_url,
        "--exit-on-stdin-eof",
    ];
    let proxy = children
        .spawn("proxy", &me, &strings(&proxy_args), dir)
        .await?;
    let (proxy_pid, proxy_addr) = (proxy.pid, parse_url(&proxy.url)?);

    let config_path = dir.join("gatehouse.yaml");
    std::fs::write(&config_path, gatehouse_config(dir, &fake_url))
        .with_context(|| format!("cannot write {}", config_path.display()))?;
    let gh_args = [
        "--data-dir".to_owned(),
        dir.display().to_string(),
        "serve".to_owned(),
        "--config".to_owned(),
        config_path.display().to_string(),
    ];
    let gh = children
        .spawn("gatehouse", &opts.gatehouse, &gh_args, dir)
        .await?;
    let (gh_pid, gh_addr) = (gh.pid, parse_url(&gh.url)?);
    let paths = Paths {
        direct: (fake_addr, fake_pid),
        proxy: (proxy_addr, proxy_pid),
        gatehouse: (gh_addr, gh_pid),
    };

    tokio::time::sleep(IDLE_SETTLE).await;
    let overall = quiet(children, &mut meta, "idle RSS", "all").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    if let Some(share) = overall.foreign_share(&children.pids())
        && share > FOREIGN_CPU_LIMIT
    {
        eprintln!(
            "gatehouse-bench: warning: other processes use {:.0}% of the machine's CPU; results will be noisy",
            share * 100.0
        );
    }
    let mut proxy_mem = Memory {
        idle_kib: rss_kib(proxy_pid)?,
        ..Memory::default()
    };
    let mut gatehouse_mem = Memory {
        idle_kib: rss_kib(gh_pid)?,
        ..Memory::default()
    };
    for (name, addr, _) in paths.all() {
        preflight(name, addr).await?;
    }
    let mut res = [
        PathResults::default(),
        PathResults::default(),
        PathResults::default(),
    ];

    phase("c=1 JSON latency");
    let json_body = messages_body(false);
    for (i, (name, addr, pid)) in paths.all().into_iter().enumerate() {
        let m = quiet(children, &mut meta, "c=1 latency", name).await;
        let cpu = ThreadTimes::of(pid)?;
        res[i].latency = load::sequential(
            addr,
            &json_body,
            false,
            params.latency_warmup,
            params.latency_n,
            PHASE_MAX_TIME,
        )
        .await?;
        disturbed(children, &m, &mut meta, "c=1 latency", name);
        let done = params.latency_warmup + res[i].latency.total.n;
        res[i].cpu_c1_us = cpu_us_per(pid, &cpu, done as u64)?;
        step(name, &res[i].latency, "total");
    }
    children.check_alive()?;

    phase("c=16 JSON throughput");
    for (i, (name, addr, pid)) in paths.all().into_iter().enumerate() {
        let m = quiet(children, &mut meta, "c=16 throughput", name).await;
        let cpu = ThreadTimes::of(pid)?;
        let t = load::throughput(
            addr,
            &json_body,
            params.workers,
            params.tput_warmup,
            params.tput_measure,
            &[proxy_pid, gh_pid],
        )
        .await?;
        disturbed(children, &m, &mut meta, "c=16 throughput", name);
        res[i].cpu_c16_us = cpu_us_per(pid, &cpu, t.completed)?;
        eprintln!(
            "  {name:<9} {:>8.0} req/s, {} errors",
            t.requests_per_sec, t.errors
        );
        match name {
            "proxy" => proxy_mem.peak_c16_kib = t.peak_rss_kib.first().copied().unwrap_or(0),
            "gatehouse" => gatehouse_mem.peak_c16_kib = t.peak_rss_kib.get(1).copied().unwrap_or(0),
            _ => {}
        }
        res[i].throughput = t;
    }
    children.check_alive()?;

    phase("streaming TTFT");
    set_fake(
        fake_addr,
        FakeConfig {
            output_tokens: params.ttft_events,
            ..FakeConfig::default()
        },
    )
    .await?;
    let stream_body = messages_body(true);
    for (i, (name, addr, _)) in paths.all().into_iter().enumerate() {
        let m = quiet(children, &mut meta, "TTFT", name).await;
        res[i].ttft =
            load::sequential(addr, &stream_body, true, 50, params.ttft_n, PHASE_MAX_TIME).await?;
        disturbed(children, &m, &mut meta, "TTFT", name);
        step(name, &res[i].ttft, "first delta");
    }
    children.check_alive()?;

    phase("per-event cost (long streams)");
    set_fake(
        fake_addr,
        FakeConfig {
            output_tokens: params.long_events,
            ..FakeConfig::default()
        },
    )
    .await?;
    for (i, (name, addr, pid)) in paths.all().into_iter().enumerate() {
        let m = quiet(children, &mut meta, "long streams", name).await;
        let cpu = ThreadTimes::of(pid)?;
        res[i].long = load::sequential(
            addr,
            &stream_body,
            true,
            LONG_WARMUP,
            params.long_n,
            PHASE_MAX_TIME,
        )
        .await?;
        disturbed(children, &m, &mut meta, "long streams", name);
        let streams = (LONG_WARMUP + res[i].long.total.n) as u64;
        res[i].cpu_long_us = cpu_us_per(pid, &cpu, streams)?;
        step(name, &res[i].long, "total");
    }
    children.check_alive()?;

    phase("open streams");
    let paced = FakeConfig {
        output_tokens: 100,
        token_interval_ms: 50,
        ..FakeConfig::default()
    };
    set_fake(fake_addr, paced).await?;
    for (name, addr, pid, mem) in [
        ("proxy", proxy_addr, proxy_pid, &mut proxy_mem),
        ("gatehouse", gh_addr, gh_pid, &mut gatehouse_mem),
    ] {
        let m = quiet(children, &mut meta, "open streams", name).await;
        mem.streams = load::open_streams(addr, params.open_streams, pid).await?;
        disturbed(children, &m, &mut meta, "open streams", name);
        eprintln!(
            "  {name:<9} {} streams open: RSS {} KiB (idle {} KiB)",
            mem.streams.opened, mem.streams.with_streams_kib, mem.idle_kib
        );
        // Let the dropped streams wind down before the next process is measured.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    children.check_alive()?;

    meta.foreign_cpu = overall.foreign_share(&children.pids()).unwrap_or(0.0);
    meta.elapsed = started.elapsed();
    let [direct, proxy, gatehouse] = res;
    Ok(Results {
        meta,
        params,
        direct,
        proxy,
        gatehouse,
        proxy_mem,
        gatehouse_mem,
    })
}

/// Waits for the children to go quiet before measuring `phase` on `path`;
/// long or failed waits are noted in the report. Returns a CPU meter started
/// once they are quiet.
async fn quiet(children: &Children, meta: &mut Meta, phase: &str, path: &str) -> CpuMeter {
    let (waited, ok) = children.settle(SETTLE_MAX).await;
    let note = if !ok {
        format!(
            "before {phase} on {path}: processes still busy after {SETTLE_MAX:?}; measured anyway"
        )
    } else if waited > Duration::from_secs(1) {
        format!(
            "before {phase} on {path}: waited {:.1} s for the processes to go idle (CPU < 2 ticks per 200 ms)",
            waited.as_secs_f64()
        )
    } else {
        return CpuMeter::start(&children.pids());
    };
    eprintln!("  {note}");
    meta.notes.push(note);
    CpuMeter::start(&children.pids())
}

/// Notes a measurement during which other processes used more than
/// [`FOREIGN_CPU_LIMIT`] of the machine.
fn disturbed(children: &Children, meter: &CpuMeter, meta: &mut Meta, phase: &str, path: &str) {
    let share = meter.foreign_share(&children.pids()).unwrap_or(0.0);
    if share > FOREIGN_CPU_LIMIT {
        let note = format!(
            "{phase} on {path}: other processes used {:.0}% of the machine's CPU meanwhile (disturbed)",
            share * 100.0
        );
        eprintln!("  {note}");
        meta.notes.push(note);
    }
}

/// CPU time `pid` used since the `cpu` snapshot, per request, in µs.
fn cpu_us_per(pid: u32, cpu: &ThreadTimes, requests: u64) -> anyhow::Result<f64> {
    Ok(cpu.ns_since(pid)? as f64 / 1000.0 / requests.max(1) as f64)
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

fn json(cfg: &FakeConfig) -> anyhow::Result<String> {
    Ok(serde_json::to_string(cfg)?)
}

fn phase(name: &str) {
    eprintln!("gatehouse-bench: {name}");
}

fn step(name: &str, s: &Sequential, what: &str) {
    let p = if what == "first delta" {
        &s.first_delta
    } else {
        &s.total
    };
    eprintln!(
        "  {name:<9} n={} {what} p50 {:.1} µs p99 {:.1} µs, {} errors",
        p.n, p.p50, p.p99, s.errors
    );
}

/// The Gatehouse config of the run (SQLite store inside the run directory).
fn gatehouse_config(dir: &Path, fake_url: &str) -> String {
    format!(
        "listen: {{host: 127.0.0.1, port: 0}}\n\
         store: {{sqlite_path: \"{}\"}}\n\
         timeouts: {{shutdown_drain_ms: 2000}}\n\
         upstreams:\n  - {{name: fake, provider: anthropic, base_url: \"{fake_url}\", auth: {{api_key: bench-operator-key-not-secret}}}}\n\
         client_keys:\n  - {{id: bench, key: \"{CLIENT_KEY}\"}}\n",
        dir.join("bench.db").display()
    )
}

/// Replaces the fake's config and turns its request recording off.
async fn set_fake(addr: SocketAddr, cfg: FakeConfig) -> anyhow::Result<()> {
    let mut conn = Conn::connect(addr).await?;
    for (path, body) in [
        ("/_fake/config", json(&cfg)?),
        ("/_fake/recording", "{\"on\":false}".to_owned()),
    ] {
        let (status, text) = conn.post_collect(path, Bytes::from(body)).await?;
        if status != StatusCode::NO_CONTENT {
            bail!("fake upstream answered {status} to {path}: {text}");
        }
    }
    Ok(())
}

/// One JSON and one streaming request; fails with the answer if not 200.
async fn preflight(name: &str, addr: SocketAddr) -> anyhow::Result<()> {
    let mut conn = Conn::connect(addr).await?;
    for stream in [false, true] {
        let (status, text) = conn
            .post_collect("/v1/messages", messages_body(stream))
            .await?;
        if status != StatusCode::OK {
            bail!("{name} path: preflight request answered {status}: {text}");
        }
        if stream && !text.contains("event: content_block_delta") {
            bail!("{name} path: preflight stream has no content_block_delta event: {text}");
        }
    }
    Ok(())
}
