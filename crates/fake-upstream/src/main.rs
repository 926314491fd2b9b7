//! `fake-upstream` binary: runs the fake Anthropic API as a subprocess.
//!
//! ```text
//! fake-upstream [--listen 127.0.0.1:0] [--config-json '<FakeConfig json>'] [--exit-on-stdin-eof]
//! ```
//!
//! Prints exactly one line, `fake-upstream listening on http://ADDR`, once
//! bound, then serves until SIGINT/SIGTERM (or stdin EOF with
//! `--exit-on-stdin-eof`). Only loopback addresses are accepted.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Parser;
use fake_upstream::{FakeConfig, FakeUpstream};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

#[derive(Parser, Debug)]
#[command(
    name = "fake-upstream",
    about = "Fake Anthropic Messages API server (loopback only)"
)]
struct Args {
    /// Address to listen on; must be a loopback address.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Initial FakeConfig as JSON (missing fields take their defaults).
    #[arg(long)]
    config_json: Option<String>,
    /// Exit when stdin is closed (lets a parent process tie our lifetime to it).
    #[arg(long)]
    exit_on_stdin_eof: bool,
}

async fn resolve_loopback(listen: &str) -> anyhow::Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(listen)
        .await
        .with_context(|| format!("cannot resolve --listen {listen}"))?
        .collect();
    if addrs.is_empty() {
        bail!("--listen {listen} resolved to no address");
    }
    if let Some(bad) = addrs.iter().find(|a| !a.ip().is_loopback()) {
        bail!("refusing to listen on non-loopback address {bad}");
    }
    Ok(addrs[0])
}

async fn stdin_eof() {
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 1024];
    loop {
        match stdin.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[cfg(unix)]
async fn terminate() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}

#[cfg(not(unix))]
async fn terminate() {
    std::future::pending::<()>().await;
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fake-upstream: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let config = match &args.config_json {
        Some(json) => serde_json::from_str::<FakeConfig>(json).context("invalid --config-json")?,
        None => FakeConfig::default(),
    };
    let addr = resolve_loopback(&args.listen).await?;
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot bind {addr}"))?;
    let fake = FakeUpstream::start_on(listener, config).await?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "fake-upstream listening on {}", fake.url())?;
        out.flush()?;
    }
    let stdin_closed = async {
        if args.exit_on_stdin_eof {
            stdin_eof().await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate() => {}
        () = stdin_closed => {}
    }
    fake.shutdown().await;
    Ok(())
}
