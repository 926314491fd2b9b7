//! The processes under test: the fake upstream, the bare proxy (this binary's
//! hidden `proxy` subcommand) and Gatehouse, started as separate children;
//! the Gatehouse config of the run; the fake's control API; and the
//! preflight check that every path answers before anything is measured.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use bytes::Bytes;
use fake_upstream::FakeConfig;
use http::StatusCode;

use crate::client::{CLIENT_KEY, Conn, messages_body, parse_url};
use crate::procs::Children;

/// A started child: where it listens and its pid.
#[derive(Clone, Copy, Debug)]
pub struct Svc {
    pub addr: SocketAddr,
    pub pid: u32,
}

/// The three processes of a run.
pub struct Stack {
    pub fake: Svc,
    pub proxy: Svc,
    pub gatehouse: Svc,
    fake_url: String,
    gatehouse_bin: PathBuf,
    dir: PathBuf,
}

impl Stack {
    /// Starts the fake (recording off), the proxy and Gatehouse in `dir`.
    pub async fn start(
        children: &mut Children,
        fake_bin: &Path,
        gatehouse_bin: &Path,
        dir: &Path,
    ) -> anyhow::Result<Stack> {
        let fake_cfg = json(&FakeConfig::default())?;
        let args = [
            "--listen",
            "127.0.0.1:0",
            "--exit-on-stdin-eof",
            "--config-json",
            &fake_cfg,
        ];
        let fake = children
            .spawn("fake-upstream", fake_bin, &strings(&args), dir)
            .await?;
        let fake_url = fake.url.clone();
        let fake = Svc {
            addr: parse_url(&fake.url)?,
            pid: fake.pid,
        };
        set_fake(fake.addr, FakeConfig::default()).await?;
        let proxy = spawn_proxy(children, &fake_url, dir).await?;
        let gatehouse = spawn_gatehouse(children, gatehouse_bin, &fake_url, dir, 1).await?;
        Ok(Stack {
            fake,
            proxy,
            gatehouse,
            fake_url,
            gatehouse_bin: gatehouse_bin.to_owned(),
            dir: dir.to_owned(),
        })
    }

    /// Stops the proxy and Gatehouse and starts fresh ones (Gatehouse on a
    /// new database), so a phase starts from an unloaded process.
    pub async fn restart_relays(&mut self, children: &mut Children) -> anyhow::Result<()> {
        children.stop("proxy").await;
        children.stop("gatehouse").await;
        self.proxy = spawn_proxy(children, &self.fake_url, &self.dir).await?;
        self.gatehouse =
            spawn_gatehouse(children, &self.gatehouse_bin, &self.fake_url, &self.dir, 2).await?;
        Ok(())
    }
}

async fn spawn_proxy(children: &mut Children, fake_url: &str, dir: &Path) -> anyhow::Result<Svc> {
    let me = std::env::current_exe().context("cannot locate the gatehouse-bench executable")?;
    let args = [
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        fake_url,
        "--exit-on-stdin-eof",
    ];
    let p = children.spawn("proxy", &me, &strings(&args), dir).await?;
    Ok(Svc {
        addr: parse_url(&p.url)?,
        pid: p.pid,
    })
}

/// Starts Gatehouse with the run's config; `generation` numbers its database.
async fn spawn_gatehouse(
    children: &mut Children,
    bin: &Path,
    fake_url: &str,
    dir: &Path,
    generation: u32,
) -> anyhow::Result<Svc> {
    let config_path = dir.join(format!("gatehouse-{generation}.yaml"));
    let db = dir.join(format!("bench-{generation}.db"));
    std::fs::write(&config_path, gatehouse_config(&db, fake_url))
        .with_context(|| format!("cannot write {}", config_path.display()))?;
    let args = [
        "--data-dir".to_owned(),
        dir.display().to_string(),
        "serve".to_owned(),
        "--config".to_owned(),
        config_path.display().to_string(),
    ];
    let g = children.spawn("gatehouse", bin, &args, dir).await?;
    Ok(Svc {
        addr: parse_url(&g.url)?,
        pid: g.pid,
    })
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

fn json(cfg: &FakeConfig) -> anyhow::Result<String> {
    Ok(serde_json::to_string(cfg)?)
}

/// The Gatehouse config of the run: loopback, SQLite at `db`, the fake as
/// the only upstream, one static client key without the default cap of 50 concurrent
/// requests per key (the open-streams phase holds 200 on it).
fn gatehouse_config(db: &Path, fake_url: &str) -> String {
    format!(
        "listen: {{host: 127.0.0.1, port: 0}}\n\
         store: {{sqlite_path: \"{}\"}}\n\
         rate_limits: {{client_key_concurrency: 0}}\n\
         timeouts: {{shutdown_drain_ms: 2000}}\n\
         upstreams:\n  - {{name: fake, provider: anthropic, base_url: \"{fake_url}\", auth: {{api_key: bench-operator-key-not-secret}}}}\n\
         client_keys:\n  - {{id: bench, key: \"{CLIENT_KEY}\"}}\n",
        db.display()
    )
}

/// Replaces the fake's config and turns its request recording off.
pub async fn set_fake(addr: SocketAddr, cfg: FakeConfig) -> anyhow::Result<()> {
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
pub async fn preflight(name: &str, addr: SocketAddr) -> anyhow::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gatehouse_config_names_the_fake_and_the_key() {
        let c = gatehouse_config(Path::new("/tmp/x/bench-1.db"), "http://127.0.0.1:9");
        assert!(c.contains("base_url: \"http://127.0.0.1:9\""));
        assert!(c.contains(CLIENT_KEY));
        assert!(c.contains("sqlite_path: \"/tmp/x/bench-1.db\""));
    }
}
