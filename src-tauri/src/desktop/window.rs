//! The dashboard window's own process: `gatehouse tray-window`, a hidden subcommand the
//! tray starts ([`super::dashboard`]); never run by hand.
//!
//! It reads the dashboard URL (with this launch's app token) from the first line of its
//! stdin, opens one window titled "Gatehouse" on it, and then follows its stdin: `show`
//! shows and focuses the window, end of file (the tray quit or died) closes it. When the
//! window closes it says `closed` on its stdout (the tray's next Open then starts a new
//! process) and exits, and WebKit's web and network processes end with it. The page
//! talks only to the tray's gateway (the app API, with the token); external links go
//! through that API to the tray's opener, so this process holds no state of its own.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use tauri::{AppHandle, Manager, RunEvent, Runtime, WebviewUrl, WebviewWindowBuilder, WindowEvent};

/// The window's label in this process.
const LABEL: &str = "main";

pub fn run(data_dir: PathBuf) -> Result<(), String> {
    let mut first = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut first)
        .map_err(|e| format!("cannot read the dashboard URL: {e}"))?;
    if first.trim().is_empty() {
        return Err(
            "tray-window is started by `gatehouse tray`, with the dashboard URL on stdin".into(),
        );
    }
    // Never print it: it carries the launch's app token.
    let url: tauri::Url = first
        .trim()
        .parse()
        .map_err(|_| "bad dashboard URL on stdin".to_owned())?;
    let logging = gatehouse_engine::config::LoggingConfig {
        dir: Some((
            data_dir.join("logs"),
            gatehouse_engine::config::Rotation::Daily,
        )),
    };
    let _log_guard = crate::logging::init_buffered(&logging, super::LOG_LINES_BUFFERED)?;
    let app = tauri::Builder::default()
        .setup(move |app| {
            let handle = app.handle().clone();
            open(&handle, url)?;
            std::thread::Builder::new()
                .name("window-control".into())
                .spawn(move || control(&handle))
                .map_err(|e| format!("cannot read the tray's requests: {e}"))?;
            Ok(())
        })
        .build(super::context())
        .map_err(|e| format!("cannot start the dashboard window: {e}"))?;
    // The window closing is the last window closing: the process exits.
    app.run(|_, event| {
        if let RunEvent::WindowEvent {
            event: WindowEvent::Destroyed,
            ..
        } = event
        {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "closed");
            let _ = out.flush();
        }
    });
    Ok(())
}

/// The tray's requests, one per line on stdin, until it closes.
fn control<R: Runtime>(handle: &AppHandle<R>) {
    for line in std::io::stdin().lock().lines() {
        match line {
            Ok(l) if l.trim() == "show" => show(handle),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    handle.exit(0);
}

fn show<R: Runtime>(handle: &AppHandle<R>) {
    if let Some(w) = handle.get_webview_window(LABEL) {
        let _ = w.unminimize();
        let _ = w.show();
        let _ = w.set_focus();
    }
}

/// Opens the dashboard window.
fn open<R: Runtime>(handle: &AppHandle<R>, url: tauri::Url) -> Result<(), String> {
    WebviewWindowBuilder::new(handle, LABEL, WebviewUrl::External(url))
        .title("Gatehouse")
        .inner_size(1120.0, 780.0)
        .on_download(|_, event| {
            match event {
                // The page's exports (a Blob with the server's file name) go to the user's
                // Downloads folder, never over an existing file.
                tauri::webview::DownloadEvent::Requested { destination, .. } => {
                    *destination = download_path(destination);
                }
                tauri::webview::DownloadEvent::Finished { path, success, .. } => {
                    tracing::info!(?path, success, "export downloaded");
                }
                _ => {}
            }
            true
        })
        .build()
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Where a download from the window is saved: the Downloads folder (else the home
/// directory), the suggested file name without any directory, ` (n)` added when taken.
fn download_path(suggested: &std::path::Path) -> PathBuf {
    let name = suggested
        .file_name()
        .map(std::ffi::OsStr::to_os_string)
        .unwrap_or_else(|| "gatehouse-export".into());
    let dirs = directories::UserDirs::new();
    let dir = dirs
        .as_ref()
        .and_then(|d| d.download_dir().map(PathBuf::from))
        .or_else(|| dirs.as_ref().map(|d| d.home_dir().to_owned()))
        .unwrap_or_else(std::env::temp_dir);
    let first = dir.join(&name);
    if !first.exists() {
        return first;
    }
    let path = std::path::Path::new(&name);
    let stem = path
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    (1..1000)
        .map(|n| dir.join(format!("{stem} ({n}){ext}")))
        .find(|p| !p.exists())
        .unwrap_or(first)
}
