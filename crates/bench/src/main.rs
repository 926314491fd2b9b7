//! `gatehouse-bench`: measures Gatehouse against a direct connection to a
//! fake upstream and against a bare pass-through proxy, in one run on one
//! machine, and writes the comparison (with the SPEC §5 targets) to
//! BENCHMARKS.md.
//!
//! ```text
//! gatehouse-bench [--gatehouse PATH] [--fake PATH] [--out BENCHMARKS.md] [--quick]
//!                 [--postgres-url URL] [--peers [--nginx PATH] [--claude PATH] [--litellm PATH]]
//!                 [--tray PATH] [--insight [--insight-rows N]] [--affinity]
//!                 [--soak [--soak-minutes N]]
//!                 [--console [--console-people N] [--console-rows N]]
//! gatehouse-bench insight [--rows N] [--gatehouse PATH] [--tray PATH] [--out FILE]
//! gatehouse-bench affinity [--conversations N] [--turns N] [--gatehouse PATH] [--fake PATH] [--out FILE]
//! gatehouse-bench soak [--minutes N] [--rps R] [--gatehouse PATH] [--fake PATH] [--out FILE]
//! gatehouse-bench console [--people N] [--rows N] [--postgres-url URL] [--gatehouse PATH]
//!                         [--fake PATH] [--out FILE]
//! gatehouse-bench proxy --listen 127.0.0.1:0 --upstream http://127.0.0.1:PORT   (hidden)
//! gatehouse-bench load --target 127.0.0.1:PORT [--concurrency 16] [--seconds 5]
//!                      [--session SUB]                                      (hidden)
//! gatehouse-bench issuer                                                    (hidden)
//! ```
//!
//! The `proxy` subcommand is the bare proxy baseline; the benchmark starts
//! it as a subprocess of itself. The `load` subcommand sends the throughput
//! phase's requests (bench client key, or a session token of the reservation phase's
//! issuer, which `issuer` serves) to a server started by hand, for profiling it from
//! outside (perf, strace, /proc); at `--concurrency 1` it prints latency percentiles. The last phases measure the spend-reservation
//! path on SQLite and, given a server, on PostgreSQL (see `reservation`), then
//! inference with a hung policy webhook and a dead OTLP collector (see `faults`).
//! With `--peers`, a last phase measures nginx, the reference gateway and
//! LiteLLM's proxy beside Gatehouse (see `peers`). With `--tray`, the desktop tray's
//! memory with its window open and closed (see `tray`). With `--insight`, the desktop's
//! Projects and Sessions views and the status line over a million usage rows (see
//! `insight`); the `insight` subcommand runs that phase alone and prints its section. With
//! `--affinity`, prompt caching with one upstream and with two behind weighted routing,
//! conversation affinity off and on (see `affinity`); the `affinity` subcommand runs that
//! phase alone and prints its section. With `--soak`, mixed traffic at a steady rate for
//! `--soak-minutes` (default 2): the gateway's memory, descriptors, threads and store size
//! per million requests, open reservations and usage rows at the end (see `soak`); the
//! `soak` subcommand runs that phase alone and prints its section. With `--console`, every
//! team-console admin API call over a store of `--console-people` people and
//! `--console-rows` usage rows on SQLite and (given `--postgres-url`) PostgreSQL, and
//! inference with many console tabs open (see `console`); the `console` subcommand runs
//! that phase alone and prints its section.

mod affinity;
mod bench;
mod causes;
mod client;
mod console;
mod console_seed;
mod cpu;
mod discovery;
mod faults;
mod insight;
mod insight_seed;
mod load;
mod markdown;
mod peers;
mod procs;
mod proxy;
mod report;
mod reservation;
mod soak;
mod soak_traffic;
mod stack;
mod statusline;
mod store_ops;
mod tray;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::report::Meta;

#[derive(Parser)]
#[command(
    name = "gatehouse-bench",
    about = "Benchmark Gatehouse vs direct vs a bare pass-through proxy (loopback only)"
)]
struct Cli {
    /// The gatehouse binary.
    #[arg(long, default_value = "target/release/gatehouse")]
    gatehouse: PathBuf,
    /// The fake-upstream binary.
    #[arg(long, default_value = "target/release/fake-upstream")]
    fake: PathBuf,
    /// Markdown report to write.
    #[arg(long, default_value = "BENCHMARKS.md")]
    out: PathBuf,
    /// Smaller sample sizes and shorter phases.
    #[arg(long)]
    quick: bool,
    /// PostgreSQL server for the reservation-path phase (a database is created and
    /// dropped on it); without it that phase measures SQLite only.
    #[arg(long, env = "GATEHOUSE_TEST_POSTGRES_URL", hide_env_values = true)]
    postgres_url: Option<String>,
    /// Also measure the peers (nginx, the reference gateway, LiteLLM's proxy) in a
    /// last phase; a peer that is not installed is skipped with the reason.
    #[arg(long)]
    peers: bool,
    /// nginx for --peers (Debian package `nginx`).
    #[arg(long, default_value = "nginx", requires = "peers")]
    nginx: PathBuf,
    /// Claude Code binary holding `claude gateway`, for --peers (the pinned reference, 2.1.337).
    #[arg(
        long,
        default_value = "tests/e2e/node_modules/claude-gateway-reference/claude",
        requires = "peers"
    )]
    claude: PathBuf,
    /// LiteLLM's `litellm` command, for --peers (scripts/bench_peers_setup.sh).
    #[arg(
        long,
        default_value = "target/peers/litellm/bin/litellm",
        requires = "peers"
    )]
    litellm: PathBuf,
    /// Also measure the desktop tray's memory with its window open and closed: the
    /// `gatehouse` binary built with the desktop feature (needs Xvfb, dbus-run-session and
    /// gnome-keyring, as the tray test does).
    #[arg(long)]
    tray: Option<PathBuf>,
    /// Also measure the desktop's insight views (Projects, Sessions, a session, the charts)
    /// and Claude Code's status line command over a seeded database:
    /// `gatehouse-statusline` beside --gatehouse, and `gatehouse statusline` of --gatehouse
    /// and --tray's binary.
    #[arg(long)]
    insight: bool,
    /// Usage rows seeded for --insight.
    #[arg(long, default_value_t = 1_000_000, requires = "insight", value_parser = parse_rows)]
    insight_rows: usize,
    /// Also measure prompt caching across two upstreams with conversation affinity off
    /// and on, against one upstream (two fakes with their prompt cache on).
    #[arg(long)]
    affinity: bool,
    /// Also run the soak: mixed traffic (JSON, streams, hang-ups, upstream faults,
    /// failovers, idempotent repeats, the OpenAI front door, refreshes) at a steady rate,
    /// sampling the gateway's RSS, descriptors, threads and store size.
    #[arg(long)]
    soak: bool,
    /// Minutes of traffic for --soak.
    #[arg(long, default_value_t = 2, requires = "soak", value_parser = clap::value_parser!(u64).range(1..=1440))]
    soak_minutes: u64,
    /// Also time every team-console admin API call over a seeded company (people, limits,
    /// usage rows) on SQLite and, with --postgres-url, PostgreSQL; and c=16 inference with
    /// and without console pollers.
    #[arg(long)]
    console: bool,
    /// People in the identity directory for --console.
    #[arg(long, default_value_t = 10_000, requires = "console", value_parser = parse_people)]
    console_people: usize,
    /// Usage rows seeded for --console.
    #[arg(long, default_value_t = 2_000_000, requires = "console", value_parser = parse_rows)]
    console_rows: usize,
    #[command(subcommand)]
    command: Option<Command>,
}

/// 1,000 to 20,000,000 usage rows (`_` separators allowed).
fn parse_rows(s: &str) -> Result<usize, String> {
    match s.replace('_', "").parse::<usize>() {
        Ok(n) if (1_000..=20_000_000).contains(&n) => Ok(n),
        _ => Err("a whole number from 1000 to 20000000".into()),
    }
}

/// 100 to 1,000,000 people (`_` separators allowed).
fn parse_people(s: &str) -> Result<usize, String> {
    match s.replace('_', "").parse::<usize>() {
        Ok(n) if (100..=1_000_000).contains(&n) => Ok(n),
        _ => Err("a whole number from 100 to 1000000".into()),
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run the bare pass-through proxy (the baseline).
    #[command(hide = true)]
    Proxy {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
        #[arg(long)]
        upstream: String,
        /// Exit when stdin is closed.
        #[arg(long)]
        exit_on_stdin_eof: bool,
    },
    /// Send the throughput phase's load to a running server and print req/s (at
    /// concurrency 1: sequential requests and their latency percentiles).
    #[command(hide = true)]
    Load {
        #[arg(long)]
        target: std::net::SocketAddr,
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        /// Measured seconds (after one second of warm-up); at most 600.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=600))]
        seconds: u64,
        /// Send as this signed-in person (a session token for a Gatehouse configured as in
        /// the reservation phase, with `gatehouse-bench issuer` as its OIDC issuer).
        #[arg(long)]
        session: Option<String>,
    },
    /// Serve the reservation phase's minimal OIDC issuer until stdin is closed.
    #[command(hide = true)]
    Issuer,
    /// Measure the desktop insight views and the status line commands alone (the
    /// `--insight` phase) and print its BENCHMARKS.md section.
    Insight {
        /// Usage rows to seed.
        #[arg(long, default_value_t = 1_000_000, value_parser = parse_rows)]
        rows: usize,
        /// The gatehouse binary whose `statusline` command is timed; `gatehouse-statusline`
        /// is looked for beside it.
        #[arg(long, default_value = "target/release/gatehouse")]
        gatehouse: PathBuf,
        /// A second gatehouse binary to time (the desktop build, when --gatehouse is the
        /// headless one).
        #[arg(long)]
        tray: Option<PathBuf>,
        /// Also write the section to this file.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Measure prompt caching with one upstream and two (conversation affinity off and on)
    /// alone (the `--affinity` phase) and print its BENCHMARKS.md section.
    Affinity {
        /// Conversations per configuration.
        #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(1..=400))]
        conversations: u64,
        /// Turns per conversation.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=100))]
        turns: u64,
        /// The gatehouse binary.
        #[arg(long, default_value = "target/release/gatehouse")]
        gatehouse: PathBuf,
        /// The fake-upstream binary.
        #[arg(long, default_value = "target/release/fake-upstream")]
        fake: PathBuf,
        /// Also write the section to this file.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run the soak alone (the `--soak` phase) and print its BENCHMARKS.md section.
    Soak {
        /// Minutes of traffic (the warm-up is a quarter of it, 10 s to 60 s).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=1440))]
        minutes: u64,
        /// Mix steps per second, all workers together.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=5000))]
        rps: u64,
        /// The gatehouse binary.
        #[arg(long, default_value = "target/release/gatehouse")]
        gatehouse: PathBuf,
        /// The fake-upstream binary.
        #[arg(long, default_value = "target/release/fake-upstream")]
        fake: PathBuf,
        /// Also write the section to this file.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Time the team console's admin API calls over a seeded company and inference with
    /// console pollers alone (the `--console` phase) and print its BENCHMARKS.md section.
    Console {
        /// People in the identity directory.
        #[arg(long, default_value_t = 10_000, value_parser = parse_people)]
        people: usize,
        /// Usage rows to seed.
        #[arg(long, default_value_t = 2_000_000, value_parser = parse_rows)]
        rows: usize,
        /// PostgreSQL server for the PostgreSQL half (a database is created and dropped on
        /// it); without it only SQLite is measured.
        #[arg(long, env = "GATEHOUSE_TEST_POSTGRES_URL", hide_env_values = true)]
        postgres_url: Option<String>,
        /// The gatehouse binary.
        #[arg(long, default_value = "target/release/gatehouse")]
        gatehouse: PathBuf,
        /// The fake-upstream binary.
        #[arg(long, default_value = "target/release/fake-upstream")]
        fake: PathBuf,
        /// Also write the section to this file.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Proxy {
            ref listen,
            ref upstream,
            exit_on_stdin_eof,
        }) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(proxy::run(listen, upstream, exit_on_stdin_eof))),
        Some(Command::Load {
            target,
            concurrency,
            seconds,
            ref session,
        }) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| {
                rt.block_on(load::report(
                    target,
                    concurrency,
                    seconds,
                    session.as_deref(),
                ))
            }),
        Some(Command::Issuer) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(discovery::serve_until_stdin_eof())),
        Some(Command::Insight {
            rows,
            ref gatehouse,
            ref tray,
            ref out,
        }) => run_insight(rows, gatehouse, tray.as_deref(), out.as_deref()),
        Some(Command::Affinity {
            conversations,
            turns,
            ref gatehouse,
            ref fake,
            ref out,
        }) => {
            let opts = affinity::Options {
                conversations: conversations as usize,
                turns: turns as usize,
                ..affinity::Options::new(gatehouse.clone(), fake.clone())
            };
            run_affinity(&opts, out.as_deref())
        }
        Some(Command::Soak {
            minutes,
            rps,
            ref gatehouse,
            ref fake,
            ref out,
        }) => {
            let opts = soak::Options {
                rps: rps as f64,
                ..soak::Options::new(gatehouse.clone(), fake.clone(), minutes)
            };
            run_soak(&opts, out.as_deref())
        }
        Some(Command::Console {
            people,
            rows,
            ref postgres_url,
            ref gatehouse,
            ref fake,
            ref out,
        }) => {
            let opts = console::Options {
                postgres_url: postgres_url.clone(),
                ..console::Options::new(gatehouse.clone(), fake.clone(), people, rows)
            };
            run_console(&opts, out.as_deref())
        }
        None => run_bench(&cli),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gatehouse-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_bench(cli: &Cli) -> anyhow::Result<()> {
    let opts = bench::Options {
        gatehouse: cli.gatehouse.clone(),
        fake: cli.fake.clone(),
        quick: cli.quick,
        postgres_url: cli.postgres_url.clone(),
        peers: cli.peers.then(|| peers::PeerOptions {
            nginx: cli.nginx.clone(),
            claude: cli.claude.clone(),
            e2e: PathBuf::from("tests/e2e"),
            litellm: cli.litellm.clone(),
        }),
    };
    let meta = Meta {
        date_utc: chrono::Utc::now()
            .format("%Y-%m-%d %H:%M:%S UTC")
            .to_string(),
        commit: git_commit(),
        nproc: std::thread::available_parallelism().map_or(0, usize::from),
        cpu: cpu_model(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".to_owned(), |s| s.trim().to_owned()),
        profile: profile(&cli.gatehouse),
        elapsed: Default::default(),
        foreign_cpu: 0.0,
        notes: Vec::new(),
    };
    // The load generator is single-threaded: it leaves the other core(s) to
    // the processes under test and avoids cross-thread wake-ups at c=1.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut results = rt.block_on(bench::run(&opts, meta))?;
    results.tray = cli.tray.as_deref().map(tray::measure);
    if cli.insight {
        let opts = insight::Options::new(
            cli.insight_rows,
            binaries(&cli.gatehouse, cli.tray.as_deref()),
        );
        results.insight = Some(insight::run(&opts).map_err(|e| {
            eprintln!("  insight: not measured: {e:#}");
            format!("{e:#}")
        }));
    }
    if cli.affinity {
        let opts = affinity::Options::new(cli.gatehouse.clone(), cli.fake.clone());
        results.affinity = Some(affinity::run(&opts).map_err(|e| {
            eprintln!("  affinity: not measured: {e:#}");
            format!("{e:#}")
        }));
    }
    if cli.soak {
        let opts = soak::Options::new(cli.gatehouse.clone(), cli.fake.clone(), cli.soak_minutes);
        results.soak = Some(soak::run(&opts).map_err(|e| {
            eprintln!("  soak: not measured: {e:#}");
            format!("{e:#}")
        }));
    }
    if cli.console {
        let opts = console::Options {
            postgres_url: cli.postgres_url.clone(),
            ..console::Options::new(
                cli.gatehouse.clone(),
                cli.fake.clone(),
                cli.console_people,
                cli.console_rows,
            )
        };
        results.console = Some(console::run(&opts).map_err(|e| {
            eprintln!("  console: not measured: {e:#}");
            format!("{e:#}")
        }));
    }
    let table = results.table();
    println!("\n{table}");
    println!("{}", results.reservations.table());
    if let Some(p) = &results.peers {
        println!("{}", p.table());
    }
    std::fs::write(&cli.out, results.markdown())
        .with_context(|| format!("cannot write {}", cli.out.display()))?;
    println!(
        "gatehouse-bench: wrote {} (run took {:.0} s; other processes used {:.1}% of the machine's CPU meanwhile)",
        cli.out.display(),
        results.meta.elapsed.as_secs_f64(),
        results.meta.foreign_cpu * 100.0
    );
    Ok(())
}

/// The `gatehouse` binaries whose `statusline` is timed beside `gatehouse-statusline`: the
/// given one, and the tray's (the desktop build) when it is another.
fn binaries(gatehouse: &std::path::Path, tray: Option<&std::path::Path>) -> Vec<PathBuf> {
    let mut v = vec![gatehouse.to_owned()];
    if let Some(t) = tray.filter(|t| *t != gatehouse) {
        v.push(t.to_owned());
    }
    v
}

/// `gatehouse-bench insight`: the phase alone, its section on stdout (and in `out`).
fn run_insight(
    rows: usize,
    gatehouse: &std::path::Path,
    tray: Option<&std::path::Path>,
    out: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let opts = insight::Options::new(rows, binaries(gatehouse, tray));
    let section = insight::run(&opts)?.markdown();
    println!("{section}");
    if let Some(out) = out {
        std::fs::write(out, &section).with_context(|| format!("cannot write {}", out.display()))?;
    }
    Ok(())
}

/// `gatehouse-bench affinity`: the phase alone, its section on stdout (and in `out`).
fn run_affinity(opts: &affinity::Options, out: Option<&std::path::Path>) -> anyhow::Result<()> {
    let section = affinity::run(opts)?.markdown();
    println!("{section}");
    if let Some(out) = out {
        std::fs::write(out, &section).with_context(|| format!("cannot write {}", out.display()))?;
    }
    Ok(())
}

/// `gatehouse-bench soak`: the phase alone, its section on stdout (and in `out`).
fn run_soak(opts: &soak::Options, out: Option<&std::path::Path>) -> anyhow::Result<()> {
    let section = soak::run(opts)?.markdown();
    println!("{section}");
    if let Some(out) = out {
        std::fs::write(out, &section).with_context(|| format!("cannot write {}", out.display()))?;
    }
    Ok(())
}

/// `gatehouse-bench console`: the phase alone, its section on stdout (and in `out`).
fn run_console(opts: &console::Options, out: Option<&std::path::Path>) -> anyhow::Result<()> {
    let section = console::run(opts)?.markdown();
    println!("{section}");
    if let Some(out) = out {
        std::fs::write(out, &section).with_context(|| format!("cannot write {}", out.display()))?;
    }
    Ok(())
}

fn git_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "uncommitted".to_owned())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

/// Build profile, guessed from the gatehouse binary's path.
fn profile(gatehouse: &std::path::Path) -> String {
    let p = gatehouse.to_string_lossy();
    if p.contains("/release/") {
        "release (workspace profile.release: lto = \"thin\", codegen-units = 4)".to_owned()
    } else if p.contains("/debug/") {
        "debug (numbers not meaningful)".to_owned()
    } else {
        format!("unknown (gatehouse binary {p})")
    }
}
