//! The Tauri tray app: a thin shell over [`gatehouse_desktop::app::App`].
//!
//! Two processes of this binary. `gatehouse tray` ([`run`]) starts the app service (which
//! runs the engine on 127.0.0.1), then Tauri with the tray icon and menu ([`tray`]) and the
//! single-instance check; it never creates a web view. The dashboard window runs in a child
//! process, `gatehouse tray-window` ([`window`]), which the tray starts at launch and on
//! Open and tells the URL with this launch's app token over its stdin ([`dashboard`]).
//! Closing the window ends that process and WebKit's processes with it, so the tray with
//! its window closed holds no WebKit state; Open (or a second launch, which hands over to
//! the first) shows the running window or starts a new one; Quit ends the window process,
//! drains the engine and exits.

mod dashboard;
mod tray;
pub mod window;

use std::path::PathBuf;
use std::sync::Arc;

use gatehouse_desktop::app::{App, AppDeps, SystemOpener};
use gatehouse_desktop::keychain::KeyringStore;
use gatehouse_desktop::notifier::SystemNotifier;
use gatehouse_engine::deps::{CredentialStore, ProcessEnvironment};
use gatehouse_engine::events::StderrEventSink;
use tauri::{Manager, RunEvent};

use dashboard::Dashboard;

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

/// Log lines a desktop process buffers for its log file (see [`crate::logging::init_buffered`]):
/// 8,192 take 256 KB where the default takes 4 MB.
const LOG_LINES_BUFFERED: usize = 8192;

/// The app's Tauri context (config, icons), one copy for both processes.
fn context() -> tauri::Context<tauri::Wry> {
    tauri::generate_context!()
}

/// Starts GTK with its OpenGL support off (`GDK_GL=disable` while it reads its settings;
/// not left in the environment, so the window process and whatever the tray opens keep
/// theirs). GDK on X11 otherwise loads the GL driver when it opens the display to pick
/// visuals — Mesa with LLVM, about 50 MB resident — and the tray draws nothing with GL.
/// Runs first, while this is the process's only thread, since it writes the environment.
#[cfg(target_os = "linux")]
fn init_gtk_without_gl() -> Result<(), String> {
    let ours = std::env::var_os("GDK_GL").is_none();
    if ours {
        gtk::glib::setenv("GDK_GL", "disable", false)
            .map_err(|e| format!("cannot configure GTK: {e}"))?;
    }
    let started = gtk::init().map_err(|e| format!("cannot start GTK: {e}"));
    if ours {
        gtk::glib::unsetenv("GDK_GL");
    }
    started
}

pub fn run(data_dir: PathBuf, port: Option<u16>) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    init_gtk_without_gl()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    tauri::async_runtime::set(rt.handle().clone());
    let home = directories::BaseDirs::new()
        .map(|d| d.home_dir().to_owned())
        .ok_or("cannot find the home directory")?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate gatehouse: {e}"))?;
    let dashboard = Dashboard::new(exe.clone(), data_dir.clone(), rt.handle().clone());
    // Logs and events also go to rotating files in the data dir: a tray has no terminal.
    let logging = gatehouse_engine::config::LoggingConfig {
        dir: Some((
            data_dir.join("logs"),
            gatehouse_engine::config::Rotation::Daily,
        )),
    };
    let _log_guard = crate::logging::init_buffered(&logging, LOG_LINES_BUFFERED)?;
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
            // Without a window the tray and the gateway still serve; Open tries again.
            if let Err(e) = dashboard.show(&app.dashboard_url()) {
                eprintln!("gatehouse: cannot open the dashboard window: {e}");
            }
            tauri_app.manage(dashboard);
            tauri_app.manage(app);
            Ok(())
        })
        .build(context())
        .map_err(|e| format!("cannot start the tray: {e}"))?;
    tauri_app.run(move |handle, event| {
        if let RunEvent::ExitRequested { api, code, .. } = &event
            && code.is_none()
        {
            // This process has no window (the dashboard is another process): stay in the
            // tray until Quit.
            api.prevent_exit();
        }
        if let RunEvent::Exit = event {
            // The window process first (its stdin closes, then a kill), then the engine.
            if let Some(dashboard) = handle.try_state::<Dashboard>() {
                rt.block_on(dashboard.close());
            }
            if let Some(app) = handle.try_state::<App>() {
                rt.block_on(app.shutdown());
            }
        }
    });
    Ok(())
}

/// Shows and focuses the dashboard window, starting its process when none runs.
pub fn show_dashboard<R: tauri::Runtime>(handle: &tauri::AppHandle<R>) {
    if let (Some(dashboard), Some(app)) =
        (handle.try_state::<Dashboard>(), handle.try_state::<App>())
        && let Err(e) = dashboard.show(&app.dashboard_url())
    {
        eprintln!("gatehouse: cannot open the dashboard window: {e}");
    }
}
