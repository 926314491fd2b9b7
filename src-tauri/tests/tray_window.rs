//! The real tray app under Xvfb: `gatehouse tray` starts in a throwaway desktop session
//! (virtual display, session bus, unlocked gnome-keyring Secret Service, dunst), opens its
//! dashboard window, and the window is screenshotted. The page must have drawn (a blank
//! webview has a handful of colours; the dashboard has hundreds), and the local token must
//! be in the Secret Service. See `tests/desktop/tray_session.sh`.

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

#[test]
fn the_tray_app_shows_its_dashboard_and_keeps_the_token_in_the_keychain() {
    for tool in [
        "Xvfb",
        "dbus-run-session",
        "gnome-keyring-daemon",
        "dunst",
        "import",
        "xwininfo",
        "secret-tool",
    ] {
        assert!(have(tool), "{tool} is missing: run scripts/setup.sh");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let work = tempfile::tempdir().unwrap();
    let out = Command::new("timeout")
        .arg("120")
        .arg("dbus-run-session")
        .arg("--")
        .arg(root.join("tests/desktop/tray_session.sh"))
        .arg(env!("CARGO_BIN_EXE_gatehouse"))
        .arg(work.path())
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let app_err = std::fs::read_to_string(work.path().join("app.err")).unwrap_or_default();
    assert!(
        out.status.success() && stdout.contains("done"),
        "session failed: {stdout}\n{}\napp stderr:\n{app_err}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |k: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .map(str::to_owned)
    };
    assert!(field("url").unwrap().starts_with("http://127.0.0.1:"));
    let colors: u64 = field("colors").unwrap().parse().unwrap();
    assert!(
        colors > 200,
        "the window looks blank ({colors} colours); app stderr:\n{app_err}"
    );
    assert_eq!(field("keychain").as_deref(), Some("local-token"));
    // Keep the screenshot for people (and the docs).
    let shots = root.join("target/screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    std::fs::copy(
        work.path().join("dashboard.png"),
        shots.join("tray-dashboard.png"),
    )
    .unwrap();
    // No secret reached the data dir: the local token is only in the keychain.
    for entry in std::fs::read_dir(work.path().join("data")).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        assert!(
            !bytes.windows(4).any(|w| w == b"gth_"),
            "a local token reached the data dir"
        );
    }
}
