//! LiteLLM's proxy as a peer: `litellm --config` from its own virtualenv (installed by
//! scripts/bench_peers_setup.sh, pinned), serving its Anthropic-format `/v1/messages`
//! endpoint with one model routed to the fake upstream as an `anthropic/` model, a master
//! key (sent as `x-api-key`) and no database.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::client::Auth;
use crate::procs::Children;

/// Time the proxy gets to accept connections (Python imports are slow).
const STARTUP: Duration = Duration::from_secs(120);
const MASTER_KEY: &str = "sk-bench-litellm-master-key-0123456789";
/// The model the benchmark's requests name (crate::client::messages_body).
const MODEL: &str = "claude-sonnet-4-6";

/// A running LiteLLM proxy.
pub struct LiteLlm {
    pub addr: SocketAddr,
    pub pid: u32,
    pub version: String,
    pub auth: Auth,
}

/// The proxy's config.yaml: the benchmark's model routed to the fake.
pub fn config(fake: SocketAddr) -> String {
    format!(
        "# gatehouse-bench --peers: LiteLLM's proxy in front of the fake upstream\n\
         model_list:\n\
         \x20 - model_name: {MODEL}\n\
         \x20   litellm_params:\n\
         \x20     model: anthropic/{MODEL}\n\
         \x20     api_base: http://{fake}\n\
         \x20     api_key: bench-operator-key-not-secret\n\
         general_settings:\n\
         \x20 master_key: {MASTER_KEY}\n\
         litellm_settings:\n\
         \x20 telemetry: false\n"
    )
}

/// The installed version, from the venv's Python next to `litellm`.
fn version(litellm: &Path) -> anyhow::Result<String> {
    let python = litellm.with_file_name("python");
    let out = std::process::Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('litellm'))",
        ])
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || v.is_empty() {
        bail!("{} does not have the litellm package", python.display());
    }
    Ok(v)
}

/// Starts the proxy on a free loopback port.
pub async fn start(
    children: &mut Children,
    litellm: &Path,
    dir: &Path,
    fake: SocketAddr,
) -> anyhow::Result<LiteLlm> {
    if !litellm.is_file() {
        bail!(
            "not installed: no {} (PyPI `litellm[proxy]`, pinned; scripts/bench_peers_setup.sh \
             installs it into a virtualenv, or pass --litellm PATH)",
            litellm.display()
        );
    }
    let version = version(litellm)?;
    let conf = dir.join("litellm.yaml");
    std::fs::write(&conf, config(fake))
        .with_context(|| format!("cannot write {}", conf.display()))?;
    let addr = super::free_port()?;
    let args = [
        "--config".to_owned(),
        conf.display().to_string(),
        "--host".to_owned(),
        "127.0.0.1".to_owned(),
        "--port".to_owned(),
        addr.port().to_string(),
        "--num_workers".to_owned(),
        "1".to_owned(),
    ];
    let env = [
        ("LITELLM_LOG", "ERROR"),
        ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
        ("DISABLE_SCHEMA_UPDATE", "true"),
        ("NO_DOCS", "True"),
        ("NO_REDOC", "True"),
    ];
    let pid = children
        .spawn_on("litellm", litellm, &args, &env, dir, addr, STARTUP)
        .await?
        .pid;
    Ok(LiteLlm {
        addr,
        pid,
        version: format!("LiteLLM {version} (PyPI litellm[proxy])"),
        auth: Auth::ApiKey(MASTER_KEY.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn config_routes_the_model_to_the_fake() {
        let c = config("127.0.0.1:4200".parse().unwrap());
        for want in [
            "- model_name: claude-sonnet-4-6",
            "model: anthropic/claude-sonnet-4-6",
            "api_base: http://127.0.0.1:4200",
            "master_key: sk-bench-litellm-master-key-0123456789",
        ] {
            assert!(c.contains(want), "missing `{want}` in:\n{c}");
        }
        // Two-space YAML nesting throughout (a tab or odd indent breaks the file).
        assert!(
            c.lines()
                .all(|l| (l.len() - l.trim_start().len()) % 2 == 0 && !l.contains('\t'))
        );
    }
}
