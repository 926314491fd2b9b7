//! Claude Code's status line from the local Gatehouse: one line such as
//! `$0.42 this session · $3.10 today of $10.00 · cache 87%`.
//!
//! Claude Code runs the `statusLine` command after each message, pipes it a JSON object
//! (`session_id`, `model`, `cwd`, …) and shows the first line it prints. This is that
//! command's logic, shared by the `gatehouse-statusline` binary (no GUI libraries, so it
//! starts in milliseconds) and `gatehouse statusline`.
//!
//! Where to ask comes from the file the running tray writes in its data directory
//! ([`FILE`]: the gateway's loopback URL and a status token that opens only this one
//! read-only route), so no keychain call or database is touched per line. Only a loopback
//! `http` URL is ever asked, within [`DEADLINE`]; anything that goes wrong prints
//! [`FALLBACK`], so Claude Code's footer never hangs or fills with an error.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

/// The file in the data directory the tray writes at start: `{"url": …, "token": …}`.
pub const FILE: &str = "statusline.json";
/// The line when the gateway cannot be asked.
pub const FALLBACK: &str = "Gatehouse: not running";
/// The whole question, connection included, within this.
pub const DEADLINE: Duration = Duration::from_millis(900);
/// The most of Claude Code's status JSON read from stdin.
pub const MAX_STDIN: u64 = 256 * 1024;
/// The most of the tray's file or the gateway's answer read.
const MAX_READ: u64 = 64 * 1024;

/// Where the tray and `gatehouse` keep their state when not told otherwise (the user's
/// data directory for Gatehouse); the one definition both binaries use.
pub fn default_data_dir() -> Option<std::path::PathBuf> {
    directories::ProjectDirs::from("dev", "Gatehouse", "gatehouse").map(|p| p.data_dir().to_owned())
}

/// The route the status token opens.
pub const ROUTE: &str = "/gatehouse/app/statusline";

/// Where the tray listens and the token for [`ROUTE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: url::Url,
    pub token: String,
}

/// The whole command: reads Claude Code's status JSON from stdin (bounded), prints the
/// line for the tray in `data_dir` (or the fallback without one). Never fails.
pub fn run(data_dir: Option<&Path>) {
    use std::io::Write;
    let mut input = Vec::new();
    let _ = std::io::stdin().take(MAX_STDIN).read_to_end(&mut input);
    let line = match data_dir {
        Some(dir) => line(dir, &input),
        None => FALLBACK.to_owned(),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// The line for Claude Code: asks the tray named in `data_dir` about the session in
/// `input`. Never fails.
pub fn line(data_dir: &Path, input: &[u8]) -> String {
    let Some(endpoint) = endpoint(data_dir) else {
        return FALLBACK.to_owned();
    };
    match ask(&endpoint, session_id(input).as_deref()) {
        Some(v) => render(&v),
        None => FALLBACK.to_owned(),
    }
}

/// The tray's file, when it names a loopback `http` URL and a plausible token.
pub fn endpoint(data_dir: &Path) -> Option<Endpoint> {
    let mut text = String::new();
    std::fs::File::open(data_dir.join(FILE))
        .ok()?
        .take(MAX_READ)
        .read_to_string(&mut text)
        .ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    let url = url::Url::parse(v.get("url")?.as_str()?).ok()?;
    let token = v.get("token")?.as_str()?;
    let plausible = !token.is_empty()
        && token.len() <= 256
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    (is_loopback(&url) && plausible).then(|| Endpoint {
        url,
        token: token.to_owned(),
    })
}

/// `http` to 127.0.0.0/8, ::1 or `localhost`.
pub fn is_loopback(url: &url::Url) -> bool {
    url.scheme() == "http"
        && match url.host() {
            Some(url::Host::Ipv4(a)) => a.is_loopback(),
            Some(url::Host::Ipv6(a)) => a.is_loopback(),
            Some(url::Host::Domain(d)) => d == "localhost",
            None => false,
        }
}

/// The session id of Claude Code's status JSON, when it is a plausible id (the gateway
/// checks it again).
pub fn session_id(input: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(input).ok()?;
    let id = v.get("session_id")?.as_str()?;
    let plausible = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
    plausible.then(|| id.to_owned())
}

/// The gateway's figures for the session, or `None`.
fn ask(endpoint: &Endpoint, session: Option<&str>) -> Option<Value> {
    let mut url = endpoint.url.join(ROUTE).ok()?;
    if let Some(s) = session {
        url.query_pairs_mut().append_pair("session_id", s);
    }
    let agent = ureq::AgentBuilder::new()
        .timeout(DEADLINE)
        .redirects(0)
        .build();
    let answer = agent
        .get(url.as_str())
        .set("authorization", &format!("Bearer {}", endpoint.token))
        .call()
        .ok()?;
    let mut body = String::new();
    answer
        .into_reader()
        .take(MAX_READ)
        .read_to_string(&mut body)
        .ok()?;
    serde_json::from_str(&body).ok()
}

fn dollars(micro: u64) -> String {
    format!("${:.2}", micro as f64 / 1e6)
}

/// `$0.42 this session · $3.10 today of $10.00 · cache 87%` from the gateway's figures.
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
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
    }

    #[test]
    fn only_a_loopback_endpoint_with_a_plain_token_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(endpoint(dir.path()), None, "no file: not running");
        assert_eq!(line(dir.path(), b"{}"), FALLBACK);
        for (body, ok) in [
            (
                r#"{"url":"http://127.0.0.1:8788","token":"gst_abc-1"}"#,
                true,
            ),
            (r#"{"url":"http://localhost:8788","token":"gst_abc"}"#, true),
            (r#"{"url":"http://[::1]:8788","token":"gst_abc"}"#, true),
            (r#"{"url":"http://10.0.0.5:8788","token":"gst_abc"}"#, false),
            (
                r#"{"url":"https://127.0.0.1:8788","token":"gst_abc"}"#,
                false,
            ),
            (r#"{"url":"http://127.0.0.1:8788","token":"a b"}"#, false),
            (r#"{"url":"http://127.0.0.1:8788"}"#, false),
            ("not json", false),
        ] {
            std::fs::write(dir.path().join(FILE), body).unwrap();
            assert_eq!(endpoint(dir.path()).is_some(), ok, "{body}");
        }
    }

    #[test]
    fn a_closed_port_falls_back_quickly() {
        let dir = tempfile::tempdir().unwrap();
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        std::fs::write(
            dir.path().join(FILE),
            format!(r#"{{"url":"http://127.0.0.1:{port}","token":"gst_x"}}"#),
        )
        .unwrap();
        let started = std::time::Instant::now();
        assert_eq!(line(dir.path(), br#"{"session_id":"s"}"#), FALLBACK);
        assert!(started.elapsed() < DEADLINE + Duration::from_millis(500));
    }
}
