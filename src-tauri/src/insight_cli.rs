//! `gatehouse statusline` (Claude Code's `statusLine` command, the `gatehouse-statusline`
//! crate's logic) and `gatehouse usage export`, which reads the local gateway's app API with
//! the local token from the keychain (the token Claude Code's `apiKeyHelper` prints), or
//! the instance's database when no instance answers (the app is stopped).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Subcommand;
use gatehouse_desktop::app::export::{self, Query};
use gatehouse_desktop::keychain::{KeyringStore, LOCAL_TOKEN_ACCOUNT, SERVICE};
use gatehouse_engine::config::DEFAULT_LOCAL_PORT;
use gatehouse_engine::deps::CredentialStore;

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

/// The local gateway's origin: the one the running tray wrote in its data directory
/// (`statusline.json`), else `ANTHROPIC_BASE_URL` when it is a loopback URL, else the saved
/// port.
fn local_origin(data: &Path) -> String {
    if let Some(e) = gatehouse_statusline::endpoint(data) {
        return e.url.origin().ascii_serialization();
    }
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

use gatehouse_statusline::is_loopback;

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

/// `gatehouse statusline`: one line for Claude Code's footer, the same as
/// `gatehouse-statusline` prints (see that crate). Never fails.
pub fn statusline(data: Result<PathBuf, String>) -> Result<(), String> {
    gatehouse_statusline::run(data.ok().as_deref());
    Ok(())
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
    fn only_loopback_origins() {
        assert!(is_loopback(
            &url::Url::parse("http://127.0.0.1:8788").unwrap()
        ));
        assert!(!is_loopback(
            &url::Url::parse("http://example.com").unwrap()
        ));
    }
}
