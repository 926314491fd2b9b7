//! One benchmark run: starts the processes (see `stack`), runs every phase
//! against the three paths (direct, proxy, gatehouse) one path after the
//! other, waiting for the processes to go idle before each measurement and
//! flagging measurements disturbed by other processes on the machine.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use fake_upstream::FakeConfig;

use crate::client::messages_body;
use crate::cpu::{CpuMeter, ThreadTimes};
use crate::load::{self, Sequential};
use crate::procs::{Children, rss_kib};
use crate::report::{Memory, Meta, Params, PathResults, Results};
use crate::stack::{Stack, Svc, preflight, set_fake};

/// Longest a sequential phase may run on one path.
const PHASE_MAX_TIME: Duration = Duration::from_secs(180);
/// Settling time after start-up before the idle RSS is read.
const IDLE_SETTLE: Duration = Duration::from_millis(500);
/// Warm-up streams before the TTFT measurement.
const TTFT_WARMUP: usize = 50;
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
    /// Server for the PostgreSQL half of the reservation-path phase.
    pub postgres_url: Option<String>,
    /// `--peers`: where the peers' programs are.
    pub peers: Option<crate::peers::PeerOptions>,
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
    let result = Run {
        meta,
        params: params(opts.quick),
        children: &mut children,
        foreign: (0, 0),
    }
    .go(opts, &dir)
    .await;
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

/// State of a run in progress.
struct Run<'a> {
    meta: Meta,
    params: Params,
    children: &'a mut Children,
    /// Clock ticks used by other processes, and elapsed, summed over every
    /// measurement window.
    foreign: (u64, u64),
}

impl Run<'_> {
    async fn go(mut self, opts: &Options, dir: &std::path::Path) -> anyhow::Result<Results> {
        let started = Instant::now();
        let mut stack = Stack::start(self.children, &opts.fake, &opts.gatehouse, dir).await?;
        tokio::time::sleep(IDLE_SETTLE).await;
        self.quiet("idle RSS", "all").await;
        let mut proxy_mem = Memory {
            idle_kib: rss_kib(stack.proxy.pid)?,
            ..Memory::default()
        };
        let mut gatehouse_mem = Memory {
            idle_kib: rss_kib(stack.gatehouse.pid)?,
            ..Memory::default()
        };
        let paths = [
            ("direct", stack.fake),
            ("proxy", stack.proxy),
            ("gatehouse", stack.gatehouse),
        ];
        for (name, svc) in paths {
            preflight(name, svc.addr).await?;
        }
        let mut res: [PathResults; 3] = Default::default();
        let pr = self.params.clone();

        phase("c=1 JSON latency");
        let json_body = messages_body(false);
        for (r, (name, svc)) in res.iter_mut().zip(paths) {
            let (s, cpu) = self
                .sequential(
                    "c=1 latency",
                    name,
                    svc,
                    &json_body,
                    false,
                    pr.latency_warmup,
                    pr.latency_n,
                )
                .await?;
            step(name, &s, "total");
            (r.latency, r.cpu_c1_us) = (s, cpu);
        }

        phase("c=16 JSON throughput");
        for (r, (name, svc)) in res.iter_mut().zip(paths) {
            let m = self.quiet("c=16 throughput", name).await;
            let cpu = ThreadTimes::of(svc.pid)?;
            let rss_pids = [stack.proxy.pid, stack.gatehouse.pid];
            let t = load::throughput(
                svc.addr,
                &json_body,
                pr.workers,
                pr.tput_warmup,
                pr.tput_measure,
                &rss_pids,
            )
            .await?;
            self.disturbed(&m, "c=16 throughput", name);
            r.cpu_c16_us = cpu_us_per(svc.pid, &cpu, t.completed)?;
            eprintln!(
                "  {name:<9} {:>8.0} req/s, {} errors",
                t.requests_per_sec, t.errors
            );
            proxy_mem.peak_c16_kib = proxy_mem
                .peak_c16_kib
                .max(t.peak_rss_kib.first().copied().unwrap_or(0));
            gatehouse_mem.peak_c16_kib = gatehouse_mem
                .peak_c16_kib
                .max(t.peak_rss_kib.get(1).copied().unwrap_or(0));
            r.throughput = t;
        }

        phase("streaming TTFT");
        let short = FakeConfig {
            output_tokens: pr.ttft_events,
            ..FakeConfig::default()
        };
        set_fake(stack.fake.addr, short).await?;
        let stream_body = messages_body(true);
        for (r, (name, svc)) in res.iter_mut().zip(paths) {
            let (s, _) = self
                .sequential(
                    "TTFT",
                    name,
                    svc,
                    &stream_body,
                    true,
                    TTFT_WARMUP,
                    pr.ttft_n,
                )
                .await?;
            step(name, &s, "first delta");
            r.ttft = s;
        }

        phase("per-event cost (long streams)");
        let long = FakeConfig {
            output_tokens: pr.long_events,
            ..FakeConfig::default()
        };
        set_fake(stack.fake.addr, long).await?;
        for (r, (name, svc)) in res.iter_mut().zip(paths) {
            let (s, cpu) = self
                .sequential(
                    "long streams",
                    name,
                    svc,
                    &stream_body,
                    true,
                    LONG_WARMUP,
                    pr.long_n,
                )
                .await?;
            step(name, &s, "total");
            (r.long, r.cpu_long_us) = (s, cpu);
        }

        phase("open streams (fresh proxy and gatehouse processes)");
        stack.restart_relays(self.children).await?;
        let paced = FakeConfig {
            output_tokens: 100,
            token_interval_ms: 50,
            ..FakeConfig::default()
        };
        set_fake(stack.fake.addr, paced).await?;
        tokio::time::sleep(IDLE_SETTLE).await;
        for (name, svc, mem) in [
            ("proxy", stack.proxy, &mut proxy_mem),
            ("gatehouse", stack.gatehouse, &mut gatehouse_mem),
        ] {
            let m = self.quiet("open streams", name).await;
            mem.streams = load::open_streams(svc.addr, pr.open_streams, svc.pid).await?;
            self.disturbed(&m, "open streams", name);
            eprintln!(
                "  {name:<9} {} streams open: RSS {} KiB (fresh idle {} KiB)",
                mem.streams.opened, mem.streams.with_streams_kib, mem.streams.before_kib
            );
        }
        self.children.check_alive()?;

        phase("spend reservation path (fresh gatehouse processes per store)");
        set_fake(stack.fake.addr, FakeConfig::default()).await?;
        let reservations = crate::reservation::run(
            self.children,
            &opts.gatehouse,
            &format!("http://{}", stack.fake.addr),
            dir,
            opts.postgres_url.as_deref(),
            pr.quick,
        )
        .await?;

        phase("faulty dependencies (hung policy webhook, dead OTLP collector)");
        let faults = crate::faults::run(
            self.children,
            &opts.gatehouse,
            &format!("http://{}", stack.fake.addr),
            dir,
            pr.quick,
        )
        .await?;

        let peers = match &opts.peers {
            None => None,
            Some(p) => {
                phase("peers (nginx, reference gateway, LiteLLM) beside Gatehouse");
                let cx = crate::peers::Inputs {
                    gatehouse: &opts.gatehouse,
                    fake: stack.fake.addr,
                    dir,
                    postgres_url: opts.postgres_url.as_deref(),
                    params: &self.params,
                };
                Some(crate::peers::run(self.children, p, &cx).await?)
            }
        };

        self.meta.foreign_cpu = self.foreign.0 as f64 / self.foreign.1.max(1) as f64;
        self.meta.elapsed = started.elapsed();
        let [direct, proxy, gatehouse] = res;
        Ok(Results {
            meta: self.meta,
            params: self.params,
            direct,
            proxy,
            gatehouse,
            proxy_mem,
            gatehouse_mem,
            reservations,
            faults,
            peers,
            tray: None,
            insight: None,
            affinity: None,
            soak: None,
            console: None,
        })
    }

    /// A sequential run on one path, bracketed by the idle wait, the
    /// disturbance check and CPU accounting; returns the samples and the
    /// answering process's CPU µs per request (warm-up included).
    #[allow(clippy::too_many_arguments)]
    async fn sequential(
        &mut self,
        phase: &str,
        name: &str,
        svc: Svc,
        body: &bytes::Bytes,
        streaming: bool,
        warmup: usize,
        n: usize,
    ) -> anyhow::Result<(Sequential, f64)> {
        let m = self.quiet(phase, name).await;
        let cpu = ThreadTimes::of(svc.pid)?;
        let s = load::sequential(svc.addr, body, streaming, warmup, n, PHASE_MAX_TIME).await?;
        self.disturbed(&m, phase, name);
        let per = cpu_us_per(svc.pid, &cpu, (warmup + s.total.n) as u64)?;
        self.children.check_alive()?;
        Ok((s, per))
    }

    /// Waits for the children to go quiet before measuring `phase` on
    /// `path`; long or failed waits are noted in the report. Returns a CPU
    /// meter started once they are quiet.
    async fn quiet(&mut self, phase: &str, path: &str) -> CpuMeter {
        let (waited, ok) = self.children.settle(SETTLE_MAX).await;
        let note = if !ok {
            Some(format!(
                "before {phase} on {path}: processes still busy after {SETTLE_MAX:?}; measured anyway"
            ))
        } else if waited > Duration::from_secs(1) {
            Some(format!(
                "before {phase} on {path}: waited {:.1} s for the processes to go idle",
                waited.as_secs_f64()
            ))
        } else {
            None
        };
        if let Some(note) = note {
            eprintln!("  {note}");
            self.meta.notes.push(note);
        }
        CpuMeter::start(&self.children.pids())
    }

    /// Notes a measurement during which other processes used more than
    /// [`FOREIGN_CPU_LIMIT`] of the machine.
    fn disturbed(&mut self, meter: &CpuMeter, phase: &str, path: &str) {
        let pids = self.children.pids();
        if let Some((foreign, elapsed)) = meter.foreign_ticks(&pids) {
            self.foreign.0 += foreign;
            self.foreign.1 += elapsed;
        }
        let share = meter.foreign_share(&pids).unwrap_or(0.0);
        if share > FOREIGN_CPU_LIMIT {
            let note = format!(
                "{phase} on {path}: other processes used {:.0}% of the machine's CPU meanwhile (disturbed)",
                share * 100.0
            );
            eprintln!("  {note}");
            self.meta.notes.push(note);
        }
    }
}

/// CPU time `pid` used since the `cpu` snapshot, per request, in µs.
fn cpu_us_per(pid: u32, cpu: &ThreadTimes, requests: u64) -> anyhow::Result<f64> {
    Ok(cpu.ns_since(pid)? as f64 / 1000.0 / requests.max(1) as f64)
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
