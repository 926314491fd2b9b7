//! The reference gateway (`claude gateway` from npm `@anthropic-ai/claude-code`) as a
//! peer. It needs PostgreSQL (a fresh database on the server given to the benchmark,
//! dropped afterwards), `CLAUDE_GATEWAY_ALLOW_LOOPBACK=1` for the loopback upstream and
//! IdP, and callers signed in through its own device flow: the test IdP
//! (`tests/e2e/idp.mjs`, an `oidc-provider`) runs beside it and
//! `tests/e2e/reference_session.mjs` approves a device code in headless Chromium and
//! polls the token endpoint. Two people sign in: one gets a daily spend cap set through
//! the reference's admin API (never reached), the other none.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::client::Auth;
use crate::procs::Children;
use crate::reservation::{Database, WRITE_KEY, set_cap};

/// Time the IdP and the gateway get to accept connections (the gateway migrates its
/// database first).
const STARTUP: Duration = Duration::from_secs(60);
/// Longest a device-flow sign-in may take (Chromium start, IdP pages, token polls).
const SIGN_IN_TIMEOUT: Duration = Duration::from_secs(120);
const SESSION_SECRET: &str = "bench-reference-session-secret-0123456789";
const IDP_CLIENT_ID: &str = "claude-gateway-bench";
const IDP_CLIENT_SECRET: &str = "bench-idp-client-secret";
/// Test IdP accounts (tests/e2e/idp.mjs): the capped and the uncapped caller.
const CAPPED: &str = "alice";
const UNCAPPED: &str = "bob";
const IDP_PASSWORD: &str = "secret-password";

/// Where the reference's pieces are.
pub struct Tools<'a> {
    pub claude: &'a Path,
    /// `tests/e2e`: idp.mjs, reference_session.mjs and their node_modules.
    pub e2e: &'a Path,
}

/// A running reference gateway with its two callers.
pub struct Reference {
    pub addr: SocketAddr,
    pub pid: u32,
    pub version: String,
    /// Signed in, no spend cap.
    pub plain: Auth,
    /// Signed in, a daily spend cap binds.
    pub capped: Auth,
    pub db: Database,
}

/// The gateway.yaml of the run.
pub fn config(listen: SocketAddr, fake: SocketAddr, idp: SocketAddr, postgres_url: &str) -> String {
    format!(
        "# gatehouse-bench --peers: the reference gateway in front of the fake upstream\n\
         listen: {{host: 127.0.0.1, port: {port}, public_url: \"http://{listen}\"}}\n\
         upstreams:\n  - {{name: fake, provider: anthropic, base_url: \"http://{fake}\", auth: {{api_key: bench-operator-key-not-secret}}}}\n\
         oidc: {{issuer: \"http://{idp}\", client_id: {IDP_CLIENT_ID}, client_secret: {IDP_CLIENT_SECRET}}}\n\
         session: {{jwt_secret: \"{SESSION_SECRET}\", ttl_hours: 4}}\n\
         store: {{postgres_url: \"{postgres_url}\"}}\n\
         admin: {{write_keys: [{{id: bench-admin, key: \"{WRITE_KEY}\"}}]}}\n",
        port = listen.port()
    )
}

/// `claude --version` prints e.g. `2.1.332 (Claude Code)`.
pub fn version(claude: &Path) -> anyhow::Result<String> {
    let out = std::process::Command::new(claude)
        .arg("--version")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .output()
        .with_context(|| format!("cannot run {} --version", claude.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_version(&text)
        .with_context(|| format!("unexpected `claude --version` output: {}", text.trim()))
}

fn parse_version(text: &str) -> Option<String> {
    let v = text.split_whitespace().next()?;
    v.chars()
        .all(|c| c.is_ascii_digit() || c == '.')
        .then(|| v.to_owned())
        .filter(|v| v.contains('.'))
}

/// Starts the IdP and the gateway (on a fresh database of `pg_server`), signs the two
/// callers in and sets the cap. On failure the database is dropped and the error says
/// which step failed.
pub async fn start(
    children: &mut Children,
    tools: &Tools<'_>,
    dir: &Path,
    fake: SocketAddr,
    pg_server: &str,
) -> anyhow::Result<Reference> {
    let version = version(tools.claude)?;
    let db = Database::create_named(
        pg_server,
        &format!("claude_gateway_bench_{}", std::process::id()),
    )
    .await?;
    match serve(children, tools, dir, fake, &db.url).await {
        Ok((addr, pid, plain, capped)) => Ok(Reference {
            addr,
            pid,
            version,
            plain,
            capped,
            db,
        }),
        Err(e) => {
            db.drop_it().await;
            Err(e)
        }
    }
}

async fn serve(
    children: &mut Children,
    tools: &Tools<'_>,
    dir: &Path,
    fake: SocketAddr,
    postgres_url: &str,
) -> anyhow::Result<(SocketAddr, u32, Auth, Auth)> {
    let (idp, listen) = (super::free_port()?, super::free_port()?);
    let redirect = format!("http://{listen}/oauth/callback");
    let idp_port = idp.port().to_string();
    let idp_env = [
        ("IDP_PORT", idp_port.as_str()),
        ("IDP_REDIRECT_URIS", redirect.as_str()),
        ("IDP_CLIENT_ID", IDP_CLIENT_ID),
        ("IDP_CLIENT_SECRET", IDP_CLIENT_SECRET),
    ];
    let idp_args = [tools.e2e.join("idp.mjs").display().to_string()];
    children
        .spawn_on(
            "reference-idp",
            Path::new("node"),
            &idp_args,
            &idp_env,
            dir,
            idp,
            STARTUP,
        )
        .await
        .context("the test IdP (tests/e2e/idp.mjs) did not start")?;
    let conf = dir.join("reference-gateway.yaml");
    std::fs::write(&conf, config(listen, fake, idp, postgres_url))
        .with_context(|| format!("cannot write {}", conf.display()))?;
    let args = [
        "gateway".to_owned(),
        "--config".to_owned(),
        conf.display().to_string(),
    ];
    let env = [
        ("CLAUDE_GATEWAY_ALLOW_LOOPBACK", "1"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ];
    let pid = children
        .spawn_on("reference", tools.claude, &args, &env, dir, listen, STARTUP)
        .await?
        .pid;
    let capped = sign_in(tools.e2e, listen, CAPPED, dir).await?;
    let plain = sign_in(tools.e2e, listen, UNCAPPED, dir).await?;
    set_cap(listen, CAPPED)
        .await
        .context("setting the capped caller's daily cap on the reference")?;
    Ok((listen, pid, Auth::Bearer(plain), Auth::Bearer(capped)))
}

/// Signs `login` in through the reference's device flow; returns the session token.
async fn sign_in(
    e2e: &Path,
    gateway: SocketAddr,
    login: &str,
    dir: &Path,
) -> anyhow::Result<String> {
    let script: PathBuf = e2e.join("reference_session.mjs");
    let stderr_path = dir.join(format!("reference-session-{login}.stderr"));
    let stderr = std::fs::File::create(&stderr_path)
        .with_context(|| format!("cannot create {}", stderr_path.display()))?;
    let child = tokio::process::Command::new("node")
        .arg(&script)
        .env("GATEWAY", format!("http://{gateway}"))
        .env("LOGIN", login)
        .env("PASSWORD", IDP_PASSWORD)
        .env("TIMEOUT_SECS", (SIGN_IN_TIMEOUT.as_secs() - 10).to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::from(stderr))
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start node {}", script.display()))?;
    let out = tokio::time::timeout(SIGN_IN_TIMEOUT, child.wait_with_output())
        .await
        .with_context(|| format!("signing {login} in took longer than {SIGN_IN_TIMEOUT:?}"))??;
    session_token(&String::from_utf8_lossy(&out.stdout))
        .with_context(|| format!("signing {login} in through the reference's device flow"))
}

/// The token from reference_session.mjs's JSON line, or its error (never the token).
fn session_token(stdout: &str) -> anyhow::Result<String> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let v: serde_json::Value =
        serde_json::from_str(line).context("no JSON line from reference_session.mjs")?;
    if let Some(token) = v
        .get("access_token")
        .and_then(|t| t.as_str())
        .filter(|t| !t.is_empty())
    {
        return Ok(token.to_owned());
    }
    let error = v
        .get("error")
        .and_then(|e| e.as_str())
        .unwrap_or("no token and no error");
    let url = v.get("url").and_then(|e| e.as_str()).unwrap_or("");
    bail!("{error} (last page {url})")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn config_names_the_fake_the_idp_and_the_store() {
        let c = config(
            "127.0.0.1:4100".parse().unwrap(),
            "127.0.0.1:4200".parse().unwrap(),
            "127.0.0.1:4300".parse().unwrap(),
            "postgres://u:p@127.0.0.1:5/db",
        );
        for want in [
            "port: 4100, public_url: \"http://127.0.0.1:4100\"",
            "provider: anthropic, base_url: \"http://127.0.0.1:4200\"",
            "issuer: \"http://127.0.0.1:4300\"",
            "postgres_url: \"postgres://u:p@127.0.0.1:5/db\"",
            WRITE_KEY,
        ] {
            assert!(c.contains(want), "missing `{want}` in:\n{c}");
        }
        // The reference wants jwt_secret and admin keys of at least 32 characters.
        assert!(SESSION_SECRET.len() >= 32 && WRITE_KEY.len() >= 32);
    }

    #[test]
    fn version_and_token_parsing() {
        assert_eq!(
            parse_version("2.1.332 (Claude Code)\n").as_deref(),
            Some("2.1.332")
        );
        assert_eq!(parse_version("error: unknown option\n"), None);
        assert_eq!(
            session_token("{\"access_token\":\"eyJ.x.y\",\"expires_in\":3600}\n").unwrap(),
            "eyJ.x.y"
        );
        let e = session_token("{\"error\":\"the IdP rejected the login\",\"url\":\"http://i/x\"}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("rejected") && e.contains("http://i/x"), "{e}");
        assert!(session_token("").is_err());
        assert!(session_token("{\"access_token\":\"\"}").is_err());
    }
}
