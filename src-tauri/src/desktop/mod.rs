//! The Tauri tray app: a thin shell over [`gatehouse_desktop::app::App`].
//!
//! It starts the app service (which runs the engine on 127.0.0.1), then Tauri with a tray
//! icon and menu ([`tray`]) and one window showing the dashboard the engine serves, opened
//! with this launch's app token. Closing the window ends its web view and keeps the tray
//! (Open makes a new window); a second launch
//! focuses the first (single-instance plugin); Quit drains the engine and exits.

mod tray;

use std::path::PathBuf;
use std::sync::Arc;

use gatehouse_desktop::app::{App, AppDeps, SystemOpener};
use gatehouse_desktop::keychain::KeyringStore;
use gatehouse_desktop::notifier::SystemNotifier;
use gatehouse_engine::deps::{CredentialStore, ProcessEnvironment};
use gatehouse_engine::events::StderrEventSink;
use tauri::{Manager, RunEvent, WebviewUrl, WebviewWindowBuilder};

/// Is there a display to put a tray on?
pub fn display_present() -> bool {
    if cfg!(any(target_os = "macos", windows)) {
        return true;
    }
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
}

fn keychain() -> Result<Arc<dyn CredentialStore>, String> {
    let store = KeyringStore::native().map_err(|e| e.to_string())?;
    store.probe().map_err(|e| e.to_string())?;
    Ok(Arc::new(store))
}

pub fn run(data_dir: PathBuf, port: Option<u16>) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    tauri::async_runtime::set(rt.handle().clone());
    let home = directories::BaseDirs::new()
        .map(|d| d.home_dir().to_owned())
        .ok_or("cannot find the home directory")?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate gatehouse: {e}"))?;
    // Logs and events also go to rotating files in the data dir: a tray has no terminal.
    let logging = gatehouse_engine::config::LoggingConfig {
        dir: Some((
            data_dir.join("logs"),
            gatehouse_engine::config::Rotation::Daily,
        )),
    };
    let _log_guard = crate::logging::init(&logging)?;
    let mut events: Arc<dyn gatehouse_engine::events::EventSink> = Arc::new(StderrEventSink);
    if let Some(file) = crate::logging::event_file_sink(&logging)? {
        events = Arc::new(gatehouse_engine::events::FanoutEventSink(vec![
            events, file,
        ]));
    }
    let keychain = keychain();
    if let Err(e) = &keychain {
        eprintln!("gatehouse: {e}; secrets cannot be stored until a keychain is available");
    }
    let deps = AppDeps {
        clock: Arc::new(gatehouse_engine::deps::SystemClock),
        data_dir,
        env: Arc::new(ProcessEnvironment),
        keychain,
        events,
        notifier: Arc::new(SystemNotifier),
        opener: Arc::new(SystemOpener),
        home,
        gatehouse_exe: exe,
        port,
    };
    let rt_handle = rt.handle().clone();
    // The single-instance check runs while Tauri builds, before `setup`: a second launch
    // hands over to the first without touching the port or the database.
    let tauri_app = tauri::Builder::default()
        .plugin(tauri_plugin_single_instance::init(|handle, _argv, _cwd| {
            show_dashboard(handle);
        }))
        .setup(move |tauri_app| {
            let app = rt_handle
                .block_on(App::start(deps))
                .map_err(|e| format!("cannot start: {e}"))?;
            println!("gatehouse: tray running; gateway on {}", app.base_url());
            let handle = tauri_app.handle().clone();
            tray::install(&handle, app.clone())?;
            open_dashboard(&handle, &app)?;
            tauri_app.manage(app);
            Ok(())
        })
        .build(tauri::generate_context!())
        .map_err(|e| format!("cannot start the tray: {e}"))?;
    tauri_app.run(move |handle, event| {
        if let RunEvent::ExitRequested { api, code, .. } = &event
            && code.is_none()
        {
            // Last window closed: stay in the tray.
            api.prevent_exit();
        }
        if let RunEvent::Exit = event
            && let Some(app) = handle.try_state::<App>()
        {
            rt.block_on(app.shutdown());
        }
    });
    Ok(())
}

/// Shows and focuses the dashboard window, opening a new one when it was closed.
pub fn show_dashboard<R: tauri::Runtime>(handle: &tauri::AppHandle<R>) {
    if let Some(w) = handle.get_webview_window("main") {
        let _ = w.unminimize();
        let _ = w.show();
        let _ = w.set_focus();
    } else if let Some(app) = handle.try_state::<App>()
        && let Err(e) = open_dashboard(handle, &app)
    {
        eprintln!("gatehouse: cannot open the dashboard window: {e}");
    }
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

/// Opens the dashboard window. Closing it ends its web view, so WebKit's web process
/// (most of the tray's memory) exits while the tray and the gateway keep running; the
/// tray's Open (or a second launch) makes a new one with the same launch token.
fn open_dashboard<R: tauri::Runtime>(
    handle: &tauri::AppHandle<R>,
    app: &App,
) -> Result<(), String> {
    let url = app
        .dashboard_url()
        .parse()
        .map_err(|e| format!("bad dashboard URL: {e}"))?;
    WebviewWindowBuilder::new(handle, "main", WebviewUrl::External(url))
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
