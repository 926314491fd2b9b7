//! Start at login, the per-OS way: an XDG autostart entry on Linux, a LaunchAgent on
//! macOS, the `Run` key on Windows. Each starts `gatehouse tray`.

use std::path::{Path, PathBuf};

/// Where the entry lives (Linux and macOS); `None` on Windows, which uses the registry.
pub fn entry_path(home: &Path, xdg_config_home: Option<&Path>) -> Option<PathBuf> {
    if cfg!(target_os = "macos") {
        Some(home.join("Library/LaunchAgents/dev.gatehouse.desktop.plist"))
    } else if cfg!(windows) {
        None
    } else {
        let base = xdg_config_home
            .filter(|p| p.is_absolute())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| home.join(".config"));
        Some(base.join("autostart/gatehouse.desktop"))
    }
}

/// A desktop-entry `Exec` argument, quoted as the spec asks.
fn desktop_quote(arg: &str) -> String {
    let mut out = String::from("\"");
    for c in arg.chars() {
        if matches!(c, '"' | '`' | '$' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The entry's contents for this OS.
pub fn entry(exe: &Path) -> String {
    let exe = exe.display().to_string();
    if cfg!(target_os = "macos") {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
             <plist version=\"1.0\"><dict>\n\
             <key>Label</key><string>dev.gatehouse.desktop</string>\n\
             <key>ProgramArguments</key><array><string>{}</string><string>tray</string></array>\n\
             <key>RunAtLoad</key><true/>\n\
             </dict></plist>\n",
            xml_escape(&exe)
        )
    } else {
        format!(
            "[Desktop Entry]\nType=Application\nName=Gatehouse\n\
             Comment=LLM gateway for Claude Code\nExec={} tray\nTerminal=false\n\
             X-GNOME-Autostart-enabled=true\n",
            desktop_quote(&exe)
        )
    }
}

/// Turns start-at-login on or off.
pub fn set(
    home: &Path,
    xdg_config_home: Option<&Path>,
    exe: &Path,
    enabled: bool,
) -> Result<(), String> {
    let Some(path) = entry_path(home, xdg_config_home) else {
        return windows_run_key(exe, enabled);
    };
    if !enabled {
        return match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("cannot remove {}: {e}", path.display())),
        };
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(&path, entry(exe)).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn windows_run_key(exe: &Path, enabled: bool) -> Result<(), String> {
    let key = r"HKCU\Software\Microsoft\Windows\CurrentVersion\Run";
    let mut cmd = std::process::Command::new("reg");
    if enabled {
        cmd.args(["add", key, "/v", "Gatehouse", "/t", "REG_SZ", "/f", "/d"])
            .arg(format!("\"{}\" tray", exe.display()));
    } else {
        cmd.args(["delete", key, "/v", "Gatehouse", "/f"]);
    }
    match cmd.output() {
        Ok(o) if o.status.success() || !enabled => Ok(()),
        Ok(o) => Err(format!(
            "reg.exe failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("cannot run reg.exe: {e}")),
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn an_xdg_entry_is_written_and_removed() {
        let home = tempfile::tempdir().unwrap();
        let exe = Path::new("/opt/Gate house/gatehouse");
        set(home.path(), None, exe, true).unwrap();
        let path = home.path().join(".config/autostart/gatehouse.desktop");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            text.contains("Exec=\"/opt/Gate house/gatehouse\" tray"),
            "{text}"
        );
        set(home.path(), None, exe, false).unwrap();
        assert!(!path.exists());
        // Turning it off twice is fine.
        assert!(set(home.path(), None, exe, false).is_ok());
    }

    #[test]
    fn exec_arguments_are_quoted() {
        assert_eq!(desktop_quote(r#"/a "b"/$c"#), r#""/a \"b\"/\$c""#);
    }
}
