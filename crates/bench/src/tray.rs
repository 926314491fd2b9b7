//! The desktop tray's memory (`--tray BIN`): the tray app is started in a throwaway
//! desktop session (Xvfb, a session bus, gnome-keyring; `tests/desktop/tray_session.sh`,
//! the tray test's own script), its dashboard window opened, then closed with its close
//! button. Resident memory of the app and every process it started (WebKit's web and
//! network processes) is read with the window open and a few seconds after it closed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The tray's resident memory, in KiB, or why it was not measured.
#[derive(Debug)]
pub struct TrayMemory {
    pub binary: PathBuf,
    pub result: Result<(u64, u64), String>,
}

/// Runs the tray session script on `binary` (bounded by `timeout`) and reads its figures.
pub fn measure(binary: &Path) -> TrayMemory {
    let result = run(binary);
    if let Err(e) = &result {
        eprintln!("  tray: not measured: {e}");
    }
    TrayMemory {
        binary: binary.to_owned(),
        result,
    }
}

fn run(binary: &Path) -> Result<(u64, u64), String> {
    if !binary.is_file() {
        return Err(format!("{} not found", binary.display()));
    }
    let work = std::env::temp_dir().join(format!("gatehouse-bench-tray-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let out = Command::new("timeout")
        .arg("150")
        .arg("dbus-run-session")
        .arg("--")
        .arg("tests/desktop/tray_session.sh")
        .arg(binary)
        .arg(&work)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
        .map_err(|e| format!("cannot run the tray session (dbus-run-session, Xvfb): {e}"))?;
    let _ = std::fs::remove_dir_all(&work);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let field = |k: &str| -> Option<u64> {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
            .and_then(|v| v.trim().parse().ok())
    };
    match (field("rss_window_open_kib"), field("rss_window_closed_kib")) {
        (Some(open), Some(closed)) if open > 0 && closed > 0 => Ok((open, closed)),
        _ => Err(format!(
            "the tray session did not report its memory (exit {}): {}",
            out.status,
            stdout.lines().last().unwrap_or_default()
        )),
    }
}

impl TrayMemory {
    pub fn markdown(&self) -> String {
        let mut out = String::from("\n## Desktop tray memory\n\n");
        match &self.result {
            Ok((open, closed)) => {
                out.push_str("| tray app (and its WebKit processes) | RSS (MiB) |\n|---|---:|\n");
                let _ = writeln!(
                    out,
                    "| dashboard window open | {} |\n| window closed (tray and gateway running) | {} |",
                    crate::report::mib(*open),
                    crate::report::mib(*closed)
                );
                let _ = writeln!(
                    out,
                    "\n- How measured: `{}` (`gatehouse tray`, {}) in a throwaway desktop session \
                     (`tests/desktop/tray_session.sh`: Xvfb, a session bus, gnome-keyring); VmRSS summed \
                     over the app and every process it started, 2 s after the dashboard drew, then 3 s \
                     after its close button (the window's web view ends; WebKit's network process stays).",
                    self.binary.display(),
                    crate::profile(&self.binary)
                );
            }
            Err(e) => {
                let _ = writeln!(out, "Not measured: {e}.");
            }
        }
        out
    }
}
