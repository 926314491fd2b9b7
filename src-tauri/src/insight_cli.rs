//! `gatehouse statusline` (Claude Code's `statusLine` command) and `gatehouse usage export`.
//!
//! Both read the local gateway's app API with the local token from the keychain (the
//! token Claude Code's `apiKeyHelper` prints). The status line talks only to a loopback
//! address, gives up after [`STATUSLINE_DEADLINE`] and always exits 0 with a short line,
//! so Claude Code's footer never hangs or fills with an error. The export falls back to the
//! instance's database when no instance answers (the app is stopped).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Subcommand;
use gatehouse_desktop::app::export::{self, Query};
use gatehouse_desktop::keychain::{KeyringStore, LOCAL_TOKEN_ACCOUNT, SERVICE};
use gatehouse_engine::config::DEFAULT_LOCAL_PORT;
use gatehouse_engine::deps::CredentialStore;
use serde_json::Value;

/// The whole status line, keychain and HTTP included, within this.
pub const STATUSLINE_DEADLINE: Duration = Duration::from_millis(900);
/// The most of Claude Code's status JSON read from stdin.
const MAX_STDIN: u64 = 256 * 1024;
/// What the status line says when the gateway cannot be asked.
pub const FALLBACK: &str = "Gatehouse: not running";

#[derive(Subcommand, Debug)]
pub enum UsageAction {
    /// Write usage rows (raw or grouped) for a range of days as CSV or JSON.
    Export {
        /// First day, YYYY-MM-DD, in this computer's time zone (default: 29 days before --until).
        #[arg(long)]
        since: Option<String>,
        /// Last day, YYYY-MM-DD, included (default: today).
        #[arg(long)]
        until: Option<String>,
        /// csv or json.
        #[arg(long, default_value = "csv")]
        format: String,
        /// raw, day, model, project or session.
        #[arg(long, default_value = "raw")]
        group: String,
        /// Write here instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

/// The local gateway's origin: Claude Code's `ANTHROPIC_BASE_URL` when it is a loopback
/// URL (Claude Code passes its settings' `env` to the command), else the saved port.
fn local_origin(data: &Path) -> String {
    if let Ok(base) = std::env::var("ANTHROPIC_BASE_URL")
        && let Ok(url) = url::Url::parse(&base)
        && is_loopback(&url)
    {
        return url.origin().ascii_serialization();
    }
    let port = crate::desktop_cli::saved_port(data)
        .ok()
        .flatten()
        .unwrap_or(DEFAULT_LOCAL_PORT);
    format!("http://127.0.0.1:{port}")
}

fn is_loopback(url: &url::Url) -> bool {
    url.scheme() == "http"
        && match url.host() {
            Some(url::Host::Ipv4(a)) => a.is_loopback(),
            Some(url::Host::Ipv6(a)) => a.is_loopback(),
            Some(url::Host::Domain(d)) => d == "localhost",
            None => false,
        }
}

fn local_token() -> Result<String, String> {
    let keychain = KeyringStore::native().map_err(|e| e.to_string())?;
    keychain
        .get(SERVICE, LOCAL_TOKEN_ACCOUNT)
        .map_err(|e| format!("cannot read the local token: {e}"))?
        .map(|t| t.expose().to_owned())
        .ok_or_else(|| "no local token in the keychain; start the Gatehouse app".into())
}

fn client(timeout: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(timeout)
        .build()
        .map_err(|e| e.to_string())
}

/// `gatehouse statusline`: one line for Claude Code's footer. Never fails.
pub fn statusline(data: Result<PathBuf, String>) -> Result<(), String> {
    let mut input = Vec::new();
    let _ = std::io::stdin().take(MAX_STDIN).read_to_end(&mut input);
    let session = session_id(&input);
    let line = match data {
        Ok(data) => ask(&data, session.as_deref()).unwrap_or_else(|_| FALLBACK.to_owned()),
        Err(_) => FALLBACK.to_owned(),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    Ok(())
}

/// The session id of Claude Code's status JSON, when it is a plausible id.
pub fn session_id(input: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(input).ok()?;
    let id = v.get("session_id")?.as_str()?;
    gatehouse_engine::metering::tags::valid_id(id.as_bytes()).then(|| id.to_owned())
}

fn ask(data: &Path, session: Option<&str>) -> Result<String, String> {
    let rt = crate::runtime()?;
    let origin = local_origin(data);
    let session = session.map(str::to_owned);
    rt.block_on(async move {
        let work = async {
            let token = tokio::task::spawn_blocking(local_token)
                .await
                .map_err(|e| e.to_string())??;
            let mut url = url::Url::parse(&format!("{origin}/gatehouse/app/statusline"))
                .map_err(|e| e.to_string())?;
            if let Some(s) = &session {
                url.query_pairs_mut().append_pair("session_id", s);
            }
            let r = client(STATUSLINE_DEADLINE)?
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            if !r.status().is_success() {
                return Err(format!("HTTP {}", r.status()));
            }
            let v: Value = r.json().await.map_err(|e| e.to_string())?;
            Ok(render(&v))
        };
        tokio::time::timeout(STATUSLINE_DEADLINE, work)
            .await
            .map_err(|_| "timed out".to_owned())?
    })
}

fn dollars(micro: u64) -> String {
    format!("${:.2}", micro as f64 / 1e6)
}

/// `$0.42 this session · $3.10 today of $10.00 · cache 87%` from the app API's figures.
pub fn render(v: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(s) = v["session_cost_micro_usd"].as_u64() {
        parts.push(format!("{} this session", dollars(s)));
    }
    let today = dollars(v["today_cost_micro_usd"].as_u64().unwrap_or(0));
    parts.push(match v["daily_limit_micro_usd"].as_u64() {
        Some(l) => format!("{today} today of {}", dollars(l)),
        None => format!("{today} today"),
    });
    if let Some(r) = v["cache_read_ratio"].as_f64() {
        parts.push(format!("cache {:.0}%", r * 100.0));
    }
    if v["over_budget"].as_bool() == Some(true) {
        parts.push("over budget".into());
    }
    if v["paused"].as_bool() == Some(true) {
        parts.push("paused".into());
    }
    parts.join(" · ")
}

/// `gatehouse usage export`.
pub fn usage(data: &Path, action: UsageAction) -> Result<(), String> {
    let UsageAction::Export {
        since,
        until,
        format,
        group,
        output,
    } = action;
    // Days are this computer's days, as a person typing dates means them.
    let tz = chrono::Local::now().offset().local_minus_utc() / 60;
    let local = gatehouse_engine::insight::Days::new(tz).unwrap_or_default();
    let query = Query::parse(
        crate::chrono_now(),
        local,
        since.as_deref(),
        until.as_deref(),
        Some(&format),
        Some(&group),
    )
    .map_err(|e| e.to_string())?;
    let mut out: Box<dyn Write> = match &output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let rt = crate::runtime()?;
    let from_running = rt.block_on(export_running(data, &format, &group, &query, &mut out));
    match from_running {
        Ok(()) => {}
        // No instance answers: read its database directly.
        Err(Running::Unreachable) => rt.block_on(export_stored(data, &query, &mut out))?,
        Err(Running::Failed(e)) => return Err(e),
    }
    out.flush()
        .map_err(|e| format!("cannot write the export: {e}"))?;
    if let Some(p) = output {
        eprintln!("gatehouse: wrote {}", p.display());
    }
    Ok(())
}

enum Running {
    Unreachable,
    Failed(String),
}

async fn export_running(
    data: &Path,
    format: &str,
    group: &str,
    q: &Query,
    out: &mut Box<dyn Write>,
) -> Result<(), Running> {
    let origin = local_origin(data);
    let token = tokio::task::spawn_blocking(local_token)
        .await
        .map_err(|e| Running::Failed(e.to_string()))?
        .map_err(|_| Running::Unreachable)?;
    let url = format!(
        "{origin}/gatehouse/app/usage/export?since={}&until={}&format={format}&group={group}&tz={}",
        q.since, q.until, q.local.offset_minutes
    );
    let client = client(Duration::from_secs(600)).map_err(Running::Failed)?;
    let mut r = match client.get(url).bearer_auth(token).send().await {
        Ok(r) => r,
        Err(e) if e.is_connect() => return Err(Running::Unreachable),
        Err(e) => return Err(Running::Failed(e.to_string())),
    };
    if !r.status().is_success() {
        let body = r.text().await.unwrap_or_default();
        return Err(Running::Failed(format!(
            "the running Gatehouse answered: {body}"
        )));
    }
    while let Some(chunk) = r
        .chunk()
        .await
        .map_err(|e| Running::Failed(e.to_string()))?
    {
        out.write_all(&chunk)
            .map_err(|e| Running::Failed(format!("cannot write the export: {e}")))?;
    }
    Ok(())
}

async fn export_stored(data: &Path, q: &Query, out: &mut Box<dyn Write>) -> Result<(), String> {
    let store = crate::desktop_cli::open_data_store(data)?;
    let index = match gatehouse_desktop::transcripts::config_dir(
        std::env::var_os("CLAUDE_CONFIG_DIR").as_deref(),
        directories::BaseDirs::new().as_ref().map(|d| d.home_dir()),
    ) {
        Some(dir) => gatehouse_desktop::transcripts::scan(&dir, &Default::default()),
        None => Default::default(),
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    let q2 = q.clone();
    let writer = tokio::spawn(async move { export::write(&store, &index, &q2, &tx).await });
    while let Some(chunk) = rx.recv().await {
        out.write_all(&chunk)
            .map_err(|e| format!("cannot write the export: {e}"))?;
    }
    writer
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::panic, clippy::unwrap_used)]
    use super::*;

    #[test]
    fn status_json_and_line() {
        assert_eq!(
            session_id(br#"{"session_id":"4f0c-aa","model":{"id":"x"}}"#).as_deref(),
            Some("4f0c-aa")
        );
        assert_eq!(session_id(br#"{"session_id":"<img src=x>"}"#), None);
        assert_eq!(session_id(b"\xff not json"), None);
        let v = serde_json::json!({
            "session_cost_micro_usd": 420_000, "today_cost_micro_usd": 3_100_000,
            "daily_limit_micro_usd": 10_000_000, "cache_read_ratio": 0.87,
            "over_budget": false, "paused": false
        });
        assert_eq!(
            render(&v),
            "$0.42 this session · $3.10 today of $10.00 · cache 87%"
        );
        let v = serde_json::json!({"today_cost_micro_usd": 0, "paused": true});
        assert_eq!(render(&v), "$0.00 today · paused");
        assert!(is_loopback(
            &url::Url::parse("http://127.0.0.1:8788").unwrap_or_else(|e| panic!("{e}"))
        ));
        assert!(!is_loopback(
            &url::Url::parse("http://example.com").unwrap_or_else(|e| panic!("{e}"))
        ));
    }
}
