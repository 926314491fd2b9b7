//! The faulty-dependency phase: inference latency with a hung policy webhook and a dead
//! OTLP collector, against the same gateway without them, in one run.
//!
//! The webhook accepts connections and never answers (fail open, 300 ms timeout); the
//! collector's port refuses connections. While the faulty gateway is measured, a
//! background task posts OTLP logs to it every 5 ms, so the relay keeps meeting the dead
//! collector. Both dependencies sit behind circuit breakers: after a few failures they are
//! skipped, so the inference percentiles should match the healthy gateway's within noise.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;

use crate::client::{Auth, CLIENT_KEY, Conn, messages_body, parse_url};
use crate::load::{self, Percentiles};
use crate::procs::Children;

const RUN_MAX_TIME: Duration = Duration::from_secs(120);
/// How often the background task posts OTLP logs during the faulty run.
const OTLP_EVERY: Duration = Duration::from_millis(5);

#[derive(Debug, Default)]
pub struct Faults {
    pub warmup: usize,
    pub n: usize,
    pub healthy: Percentiles,
    pub faulty: Percentiles,
    pub otlp_posts: u64,
}

/// A listener that accepts and then says nothing, for as long as the run lasts.
async fn hung_server() -> anyhow::Result<(String, tokio::task::JoinHandle<()>)> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/check", l.local_addr()?);
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = l.accept().await {
            held.push(sock);
        }
    });
    Ok((url, task))
}

/// A port nothing listens on.
async fn dead_port() -> anyhow::Result<u16> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    Ok(l.local_addr()?.port())
}

fn config(db: &Path, fake_url: &str, faults: Option<(&str, u16)>) -> String {
    let mut yaml = format!(
        "listen: {{host: 127.0.0.1, port: 0}}\n\
         store: {{sqlite_path: \"{}\"}}\n\
         timeouts: {{shutdown_drain_ms: 2000}}\n\
         upstreams:\n  - {{name: fake, provider: anthropic, base_url: \"{fake_url}\", auth: {{api_key: bench-operator-key-not-secret}}}}\n\
         client_keys:\n  - {{id: bench, key: \"{CLIENT_KEY}\"}}\n",
        db.display()
    );
    if let Some((hook, port)) = faults {
        let _ = write!(
            yaml,
            "cri:\n  policy:\n    webhook: {{url: \"{hook}\", timeout_ms: 300, fail_closed: false, allow_loopback: true}}\n\
             telemetry:\n  allow_loopback: true\n  forward_to: [{{url: \"http://127.0.0.1:{port}\", logs: true}}]\n"
        );
    }
    yaml
}

pub async fn run(
    children: &mut Children,
    gatehouse: &Path,
    fake_url: &str,
    dir: &Path,
    quick: bool,
) -> anyhow::Result<Faults> {
    let mut out = Faults {
        warmup: 200,
        n: if quick { 500 } else { 3000 },
        ..Faults::default()
    };
    let (hook, hung) = hung_server().await?;
    let port = dead_port().await?;
    let body = messages_body(false);
    for (name, faulty) in [
        ("gatehouse-healthy-deps", false),
        ("gatehouse-faulty-deps", true),
    ] {
        let yaml = config(
            &dir.join(format!("{name}.db")),
            fake_url,
            faulty.then_some((hook.as_str(), port)),
        );
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(&path, yaml).with_context(|| format!("cannot write {}", path.display()))?;
        let args = [
            "--data-dir".to_owned(),
            dir.display().to_string(),
            "serve".to_owned(),
            "--config".to_owned(),
            path.display().to_string(),
        ];
        let p = children.spawn(name, gatehouse, &args, dir).await?;
        let addr = parse_url(&p.url)?;
        let (stop, otlp) = tokio::sync::watch::channel(false);
        let poster = faulty.then(|| tokio::spawn(post_otlp(addr, otlp)));
        let s = measure(addr, &body, &out).await;
        let _ = stop.send(true);
        if let Some(p) = poster {
            out.otlp_posts = p.await.unwrap_or(0);
        }
        children.stop(name).await;
        let s = s?;
        eprintln!(
            "  {name:<24} p50 {:.1} µs p99 {:.1} µs, {} errors",
            s.total.p50, s.total.p99, s.errors
        );
        if faulty {
            out.faulty = s.total;
        } else {
            out.healthy = s.total;
        }
    }
    hung.abort();
    Ok(out)
}

async fn measure(
    addr: std::net::SocketAddr,
    body: &Bytes,
    sizes: &Faults,
) -> anyhow::Result<load::Sequential> {
    load::sequential_as(
        addr,
        Auth::ApiKey(CLIENT_KEY.to_owned()),
        body,
        false,
        sizes.warmup,
        sizes.n,
        RUN_MAX_TIME,
    )
    .await
}

/// Posts a small OTLP logs payload every [`OTLP_EVERY`] until told to stop (bounded by the
/// run's deadline as well); the number of posts answered.
async fn post_otlp(
    addr: std::net::SocketAddr,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> u64 {
    let Ok(mut conn) = Conn::connect(addr).await else {
        return 0;
    };
    let payload = Bytes::from_static(br#"{"resourceLogs":[]}"#);
    let deadline = tokio::time::Instant::now() + RUN_MAX_TIME;
    let mut posts = 0;
    while !*stop.borrow() && tokio::time::Instant::now() < deadline {
        if conn.post_collect("/v1/logs", payload.clone()).await.is_ok() {
            posts += 1;
        }
        tokio::select! {
            _ = tokio::time::sleep(OTLP_EVERY) => {}
            _ = stop.changed() => {}
        }
    }
    posts
}

impl Faults {
    /// The BENCHMARKS.md section.
    pub fn markdown(&self) -> String {
        let mut out = String::from("\n## Faulty dependencies\n\n");
        out.push_str("| case | p50 (µs) | p99 (µs) |\n|---|---:|---:|\n");
        for (case, p) in [
            ("healthy: no webhook, no collector", &self.healthy),
            ("hung policy webhook + dead OTLP collector", &self.faulty),
        ] {
            let _ = writeln!(out, "| {case} | {:.1} | {:.1} |", p.p50, p.p99);
        }
        let _ = writeln!(
            out,
            "\n- How measured: two `gatehouse serve` processes (client key, SQLite) in front of \
             the fake; the second with a policy webhook that accepts connections and never \
             answers (`timeout_ms: 300`, fail open) and an OTLP destination on a port that \
             refuses connections, while a background connection posted OTLP logs every 5 ms \
             ({} posts answered). Each case: {} warm-up then {} sequential non-streaming \
             requests on one keep-alive connection. The webhook and every OTLP destination sit \
             behind circuit breakers (3 failures open them for 10 s, then one probe), so only \
             the warm-up pays the webhook's timeout.",
            self.otlp_posts, self.warmup, self.n
        );
        out
    }
}
