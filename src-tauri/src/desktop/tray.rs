//! The tray icon and its menu. Every item calls one method of the app service; the status
//! line (mode, today's spend) and the toggles' labels follow the app state.

use std::time::Duration;

use gatehouse_desktop::app::{App, LoginState};
use tauri::menu::{Menu, MenuItem, PredefinedMenuItem};
use tauri::tray::TrayIconBuilder;
use tauri::{AppHandle, Runtime};

/// Menu item ids, in menu order.
pub const ITEMS: &[(&str, &str)] = &[
    ("status", "Gatehouse"),
    ("open", "Open dashboard"),
    ("login", "Log in"),
    ("pause", "Pause gateway"),
    ("configure", "Configure Claude Code"),
    ("quit", "Quit"),
];

pub struct TrayMenu<R: Runtime> {
    pub menu: Menu<R>,
    pub status: MenuItem<R>,
    pub login: MenuItem<R>,
    pub pause: MenuItem<R>,
}

/// Builds the menu (generic over the runtime so the mock runtime can check it).
pub fn build_menu<R: Runtime>(handle: &AppHandle<R>) -> tauri::Result<TrayMenu<R>> {
    let item = |id: &str, text: &str, enabled: bool| {
        MenuItem::with_id(handle, id, text, enabled, None::<&str>)
    };
    let status = item(ITEMS[0].0, ITEMS[0].1, false)?;
    let open = item(ITEMS[1].0, ITEMS[1].1, true)?;
    let login = item(ITEMS[2].0, ITEMS[2].1, true)?;
    let pause = item(ITEMS[3].0, ITEMS[3].1, true)?;
    let configure = item(ITEMS[4].0, ITEMS[4].1, true)?;
    let quit = item(ITEMS[5].0, ITEMS[5].1, true)?;
    let sep = PredefinedMenuItem::separator(handle)?;
    let sep2 = PredefinedMenuItem::separator(handle)?;
    let menu = Menu::with_items(
        handle,
        &[
            &status, &sep, &open, &login, &pause, &configure, &sep2, &quit,
        ],
    )?;
    Ok(TrayMenu {
        menu,
        status,
        login,
        pause,
    })
}

pub fn install<R: Runtime>(handle: &AppHandle<R>, app: App) -> tauri::Result<()> {
    let tm = build_menu(handle)?;
    let mut tray = TrayIconBuilder::with_id("gatehouse")
        .tooltip("Gatehouse")
        .menu(&tm.menu)
        .show_menu_on_left_click(true);
    if let Some(icon) = handle.default_window_icon() {
        tray = tray.icon(icon.clone());
    }
    let actions = app.clone();
    tray.on_menu_event(move |handle, event| {
        let app = actions.clone();
        match event.id.as_ref() {
            "open" => super::show_dashboard(handle),
            "quit" => handle.exit(0),
            "login" => {
                let handle = handle.clone();
                tauri::async_runtime::spawn(async move {
                    let result = match app.login_state() {
                        LoginState::SignedIn => app.logout().await,
                        _ => app.login().await,
                    };
                    match result {
                        // The dashboard shows the code and the button to the sign-in page.
                        Ok(()) => super::show_dashboard(&handle),
                        Err(e) => tracing::warn!(error = %e, "log in / log out failed"),
                    }
                });
            }
            "pause" => {
                tauri::async_runtime::spawn(async move {
                    let paused = app.paused().await;
                    app.set_paused(!paused).await;
                });
            }
            "configure" => {
                tauri::async_runtime::spawn(async move {
                    if let Err(e) = app.configure_claude_code(false, false).await {
                        tracing::warn!(error = %e, "configure Claude Code failed");
                    }
                });
            }
            _ => {}
        }
    })
    .build(handle)?;
    // Keep the labels true to the state.
    tauri::async_runtime::spawn(async move {
        loop {
            let line = app.status_line().await;
            let _ = tm.status.set_text(line);
            let _ = tm.login.set_text(match app.login_state() {
                LoginState::SignedIn => "Log out",
                _ => "Log in",
            });
            let _ = tm.pause.set_text(if app.paused().await {
                "Resume gateway"
            } else {
                "Pause gateway"
            });
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
    });
    Ok(())
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use tauri::menu::MenuItemKind;

    use super::*;

    #[test]
    fn the_menu_has_every_item_in_order() {
        let app = tauri::test::mock_app();
        let tm = build_menu(app.handle()).expect("menu builds on the mock runtime");
        let items = tm.menu.items().expect("items");
        let ids: Vec<String> = items
            .iter()
            .filter_map(|i| match i {
                MenuItemKind::MenuItem(m) => Some(m.id().0.clone()),
                _ => None,
            })
            .collect();
        let want: Vec<&str> = ITEMS.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, want);
        let texts: Vec<String> = items
            .iter()
            .filter_map(|i| match i {
                MenuItemKind::MenuItem(m) => m.text().ok(),
                _ => None,
            })
            .collect();
        assert_eq!(texts[1], "Open dashboard");
        assert_eq!(texts[5], "Quit");
        assert!(
            !matches!(items[0], MenuItemKind::MenuItem(ref m) if m.is_enabled().unwrap_or(true))
        );
    }
}
