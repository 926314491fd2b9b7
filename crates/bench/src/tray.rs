//! The desktop tray's memory (`--tray BIN`): the tray app is started in a throwaway
//! desktop session (Xvfb, a session bus, gnome-keyring; `tests/desktop/tray_session.sh`,
//! the tray test's own script), its dashboard window opened, then closed with its close
//! button. Resident memory of the app and every process it started (the window's own
//! process, `gatehouse tray-window`, and WebKit's web and network processes under it) is
//! read with the window open and a few seconds after it closed, in all and per process.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The tray's resident memory, in KiB, or why it was not measured.
#[derive(Debug)]
pub struct TrayMemory {
    pub binary: PathBuf,
    pub result: Result<(u64, u64), String>,
    /// Per process (`name:KiB …`) with the window open and closed, as the script names them.
    pub processes: Option<(String, String)>,
}

/// Runs the tray session script on `binary` (bounded by `timeout`) and reads its figures.
pub fn measure(binary: &Path) -> TrayMemory {
    let (result, processes) = match run(binary) {
        Ok((figures, processes)) => (Ok(figures), processes),
        Err(e) => {
            eprintln!("  tray: not measured: {e}");
            (Err(e), None)
        }
    };
    TrayMemory {
        binary: binary.to_owned(),
        result,
        processes,
    }
}

type Figures = ((u64, u64), Option<(String, String)>);

fn run(binary: &Path) -> Result<Figures, String> {
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
    let text = |k: &str| -> Option<String> {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
            .map(|v| v.trim().to_owned())
    };
    let processes = text("rss_window_open_procs").zip(text("rss_window_closed_procs"));
    match (field("rss_window_open_kib"), field("rss_window_closed_kib")) {
        (Some(open), Some(closed)) if open > 0 && closed > 0 => Ok(((open, closed), processes)),
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
                out.push_str(
                    "| tray app (and its window and WebKit processes) | RSS (MiB) |\n|---|---:|\n",
                );
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
                     after its close button ended the window's process (`gatehouse tray-window`, which \
                     takes WebKit's processes with it).",
                    self.binary.display(),
                    crate::profile(&self.binary)
                );
                if let Some((open, closed)) = &self.processes {
                    let mib = |list: &str| -> String {
                        list.split_whitespace()
                            .filter_map(|p| p.rsplit_once(':'))
                            .map(|(name, kib)| {
                                let kib = kib.parse().unwrap_or(0);
                                format!("{name} {}", crate::report::mib(kib))
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    let _ = writeln!(
                        out,
                        "- Per process (MiB): window open: {}; window closed: {}.",
                        mib(open),
                        mib(closed)
                    );
                }
            }
            Err(e) => {
                let _ = writeln!(out, "Not measured: {e}.");
            }
        }
        out
    }
}
