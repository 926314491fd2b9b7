//! The tray icon and its menu. Every item calls one method of the app service; the status
//! line (mode, today's spend) and the toggles' labels follow the app state, and so do the
//! icon's badge and tooltip ([`TrayState`]: set up needed, ready, paused, over budget,
//! sign-in needed, central server unreachable).

use std::time::Duration;

use gatehouse_desktop::app::tray_state::TrayState;
use gatehouse_desktop::app::{App, LoginState};
use tauri::image::Image;
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
    let base = handle.default_window_icon().map(|i| i.clone().to_owned());
    if let Some(icon) = &base {
        tray = tray.icon(icon.clone());
    }
    let actions = app.clone();
    let tray = tray
        .on_menu_event(move |handle, event| {
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
    // Keep the labels, the badge and the tooltip true to the state.
    tauri::async_runtime::spawn(async move {
        let mut shown: Option<TrayState> = None;
        loop {
            let state = app.tray_state().await;
            if shown != Some(state) {
                shown = Some(state);
                let _ = tray.set_tooltip(Some(state.tooltip()));
                if let Some(base) = &base {
                    let icon = match state.badge() {
                        Some(colour) => with_badge(base, colour),
                        None => base.clone(),
                    };
                    let _ = tray.set_icon(Some(icon));
                }
            }
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

/// The icon with a round badge of `colour` in its lower right corner, ringed in white so
/// it reads on dark and light panels.
pub fn with_badge(icon: &Image<'_>, colour: [u8; 4]) -> Image<'static> {
    let (w, h) = (icon.width() as usize, icon.height() as usize);
    let mut rgba = icon.rgba().to_vec();
    let r = (w.min(h) as f32) * 0.22;
    let (cx, cy) = (w as f32 - r - 1.0, h as f32 - r - 1.0);
    for y in 0..h {
        for x in 0..w {
            let d = ((x as f32 + 0.5 - cx).powi(2) + (y as f32 + 0.5 - cy).powi(2)).sqrt();
            let px = match d {
                d if d <= r - 1.5 => colour,
                d if d <= r => [0xff, 0xff, 0xff, 0xff],
                _ => continue,
            };
            let at = (y * w + x) * 4;
            if let Some(dst) = rgba.get_mut(at..at + 4) {
                dst.copy_from_slice(&px);
            }
        }
    }
    Image::new_owned(rgba, w as u32, h as u32)
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    #[test]
    fn a_badge_colours_only_the_corner() {
        let icon = Image::new_owned(vec![0u8; 32 * 32 * 4], 32, 32);
        let red = [0xdc, 0x26, 0x26, 0xff];
        let b = with_badge(&icon, red);
        let px = |x: usize, y: usize| b.rgba()[(y * 32 + x) * 4..(y * 32 + x) * 4 + 4].to_vec();
        assert_eq!(px(2, 2), [0, 0, 0, 0], "the icon itself is kept");
        assert_eq!(px(24, 24), red, "the badge sits in the lower right");
        assert_eq!((b.width(), b.height()), (32, 32));
    }

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
