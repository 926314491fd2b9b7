//! The real tray app under Xvfb: `gatehouse tray` starts in a throwaway desktop session
//! (virtual display, session bus, unlocked gnome-keyring Secret Service, dunst), opens its
//! dashboard window, and the window is screenshotted. The page must have drawn (a blank
//! webview has a handful of colours; the dashboard has hundreds), and the local token must
//! be in the Secret Service. The window is a child process of the tray (`gatehouse
//! tray-window`, its URL and token on stdin, not on its command line): closing it ends that
//! process and WebKit's, leaving the tray alone (no child, no WebKit thread, no GL driver),
//! with less memory; a second launch opens a new one, also after the window process
//! crashed, and the window process ends with the tray. With an IT bootstrap file naming an
//! unreachable central server, the notification daemon receives "Central Gatehouse
//! unreachable". See `tests/desktop/tray_session.sh`.

#![cfg(feature = "desktop")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

struct Session {
    stdout: String,
    work: tempfile::TempDir,
}

impl Session {
    fn field(&self, k: &str) -> Option<String> {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .map(str::to_owned)
    }

    fn app_err(&self) -> String {
        std::fs::read_to_string(self.work.path().join("app.err")).unwrap_or_default()
    }
}

fn session(bootstrap: Option<&str>, expect_notification: &str) -> Session {
    session_env(bootstrap, expect_notification, &[])
}

fn session_env(
    bootstrap: Option<&str>,
    expect_notification: &str,
    env: &[(&str, &str)],
) -> Session {
    for tool in [
        "Xvfb",
        "dbus-run-session",
        "gnome-keyring-daemon",
        "dunst",
        "dunstctl",
        "import",
        "xwininfo",
        "secret-tool",
    ] {
        assert!(have(tool), "{tool} is missing: run scripts/setup.sh");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let work = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("timeout");
    cmd.arg("120")
        .arg("dbus-run-session")
        .arg("--")
        .arg(root.join("tests/desktop/tray_session.sh"))
        .arg(env!("CARGO_BIN_EXE_gatehouse"))
        .arg(work.path())
        .arg(bootstrap.unwrap_or(""))
        .env("EXPECT_NOTIFICATION", expect_notification)
        .envs(env.iter().copied())
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("DBUS_SESSION_BUS_ADDRESS");
    let out = cmd.output().unwrap();
    let s = Session {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        work,
    };
    assert!(
        out.status.success() && s.stdout.contains("done"),
        "session failed: {}\n{}\napp stderr:\n{}",
        s.stdout,
        String::from_utf8_lossy(&out.stderr),
        s.app_err()
    );
    assert!(s.field("url").unwrap().starts_with("http://127.0.0.1:"));
    let colors: u64 = s.field("colors").unwrap().parse().unwrap();
    assert!(
        colors > 200,
        "the window looks blank ({colors} colours); app stderr:\n{}",
        s.app_err()
    );
    s
}

#[test]
fn the_tray_app_shows_its_dashboard_and_keeps_the_token_in_the_keychain() {
    let s = session(None, "");
    assert_eq!(s.field("keychain").as_deref(), Some("local-token"));
    // A second launch hands over to the first and exits; still one window, and the first
    // one's process shows it rather than a second process starting.
    assert_eq!(
        s.field("second_launch").as_deref(),
        Some("exited"),
        "{}",
        s.stdout
    );
    assert_eq!(s.field("windows").as_deref(), Some("1"));
    assert_eq!(
        s.field("window_processes_after_second_launch").as_deref(),
        Some("1"),
        "{}",
        s.stdout
    );
    assert_eq!(s.field("first_alive").as_deref(), Some("yes"));
    // The close button ends the window and its process; the tray and the gateway stay,
    // with less memory; a later launch opens a new window.
    assert_eq!(s.field("windows_after_close").as_deref(), Some("0"));
    assert_eq!(s.field("alive_after_close").as_deref(), Some("yes"));
    assert_eq!(s.field("health_after_close").as_deref(), Some("200"));
    assert_eq!(s.field("windows_after_reopen").as_deref(), Some("1"));
    let kib = |k: &str| -> u64 { s.field(k).unwrap().parse().unwrap() };
    let (open, closed) = (kib("rss_window_open_kib"), kib("rss_window_closed_kib"));
    assert!(
        closed + 32 * 1024 < open,
        "closing the window should give back the web view's memory: {open} KiB open, {closed} KiB closed"
    );
    eprintln!(
        "tray RSS: {open} KiB with the window open ({}), {closed} KiB with it closed ({})",
        s.field("rss_window_open_procs").unwrap_or_default(),
        s.field("rss_window_closed_procs").unwrap_or_default()
    );
    // Keep the screenshot for people (and the docs).
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    std::fs::copy(
        s.work.path().join("dashboard.png"),
        shots.join("tray-dashboard.png"),
    )
    .unwrap();
    // The docs' picture of the window, rewritten only when asked (`GATEHOUSE_SCREENSHOTS=1`).
    if std::env::var("GATEHOUSE_SCREENSHOTS").as_deref() == Ok("1") {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/screenshots");
        std::fs::copy(
            s.work.path().join("dashboard.png"),
            docs.join("tray-window.png"),
        )
        .unwrap();
    }
    // No secret reached the data dir or the log: the local token is only in the keychain.
    let mut texts = vec![s.app_err().into_bytes()];
    let mut dirs = vec![s.work.path().join("data")];
    let mut logs = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                logs += usize::from(path.to_string_lossy().contains("/logs/"));
                texts.push(std::fs::read(path).unwrap());
            }
        }
    }
    assert!(logs >= 1, "the tray writes its log files in the data dir");
    for bytes in texts {
        assert!(
            !bytes.windows(4).any(|w| w == b"gth_"),
            "a local token reached the data dir or the logs"
        );
    }
}

/// The window runs in a child process of the tray, which takes WebKit with it: after the
/// close button no process the tray started is left, and the tray itself never ran WebKit
/// (none of WebKit's threads) nor loaded a GL driver. Before, the tray created the web view
/// itself: WebKit's network process stayed, and so did WebKit's threads and the GL driver
/// (about 245 MB for a closed window).
#[test]
fn the_window_process_takes_webkit_with_it() {
    let s = session(None, "");
    let field = |k: &str| s.field(k).unwrap_or_else(|| panic!("no {k}: {}", s.stdout));
    assert_eq!(field("window_processes"), "1", "{}", s.stdout);
    assert_eq!(
        field("token_on_cmdline"),
        "no",
        "the app token must reach the window on its stdin, never on a command line"
    );
    assert_eq!(field("windows_after_close"), "0");
    assert_eq!(
        field("children_after_close"),
        "0",
        "a process of the window outlived it: {}",
        field("rss_window_closed_procs")
    );
    assert_eq!(field("tray_webkit_threads"), "0", "WebKit ran in the tray");
    assert_eq!(
        field("tray_gl_driver"),
        "0",
        "GDK loaded a GL driver in the tray"
    );
    assert_eq!(field("rss_window_closed_procs").split(' ').count(), 1);
    // A crashed window process leaves the tray up, and the next Open starts a new one.
    assert_eq!(field("alive_after_window_crash"), "yes");
    assert_eq!(field("windows_after_crash_reopen"), "1");
    assert_eq!(field("window_processes_after_crash_reopen"), "1");
    // The tray ending (killed: no Quit ran) ends the window process: its stdin closed.
    assert_eq!(field("window_after_tray_ended"), "gone", "{}", s.stdout);
}

#[test]
fn an_unreachable_central_server_is_notified() {
    let s = session(
        Some(r#"{"central_url": "http://127.0.0.1:1", "force_connected_mode": true}"#),
        "unreachable",
    );
    assert!(
        s.stdout
            .lines()
            .any(|l| l == "notification=Central Gatehouse unreachable"),
        "{}\n{}",
        s.stdout,
        s.app_err()
    );
}

/// Traffic moving off a failing provider reaches the notification daemon: the tray's
/// Anthropic upstream refuses connections, requests through the tray (with its local
/// token from the Secret Service) fail until the upstream's breaker opens, and dunst
/// shows "Traffic moved off anthropic".
#[test]
fn a_provider_that_fails_is_notified_when_traffic_moves_off_it() {
    let s = session_env(
        None,
        "Traffic moved off",
        &[
            ("PROVOKE_FAILOVER", "1"),
            ("ANTHROPIC_API_KEY", "sk-ant-tray-session-key-0123456789"),
            ("GATEHOUSE_ANTHROPIC_BASE_URL", "http://127.0.0.1:1"),
        ],
    );
    let statuses: Vec<&str> = s
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("failover_status="))
        .collect();
    assert_eq!(statuses.len(), 8, "{}", s.stdout);
    assert!(
        statuses.iter().all(|c| c.starts_with('5')),
        "a refused connection is an upstream failure: {statuses:?}"
    );
    assert!(
        s.stdout
            .lines()
            .any(|l| l == "notification=Traffic moved off anthropic"),
        "{}\n{}",
        s.stdout,
        s.app_err()
    );
}
