//! The desktop bundle settings for every platform, checked here although only the Linux
//! bundles are built on this machine: tauri.conf.json merged (JSON merge patch, as the
//! Tauri CLI does) with tauri.{linux,macos,windows}.conf.json, then the identifiers,
//! targets, icons, the macOS entitlements and the Windows installer's upgrade code, and the
//! files the .deb installs (the IT bootstrap location, the autostart entry).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn json(name: &str) -> Value {
    let text = std::fs::read_to_string(dir().join(name)).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn merge(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    b.remove(k);
                } else {
                    merge(b.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (b, p) => *b = p.clone(),
    }
}

fn effective(platform: &str) -> Value {
    let mut config = json("tauri.conf.json");
    merge(&mut config, &json(&format!("tauri.{platform}.conf.json")));
    config
}

fn targets(config: &Value) -> Vec<&str> {
    config["bundle"]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect()
}

/// A path in the config, relative to src-tauri/.
fn existing(rel: &str) -> PathBuf {
    let path = dir().join(rel);
    assert!(path.is_file(), "{rel} does not exist");
    path
}

#[test]
fn every_platform_bundles_the_same_app() {
    let base = json("tauri.conf.json");
    assert_eq!(base["identifier"], "dev.gatehouse.desktop");
    assert_eq!(
        base["mainBinaryName"], "gatehouse",
        "the cargo [[bin]] name"
    );
    assert_eq!(base["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(base["bundle"]["active"], true);
    assert_eq!(base["build"]["frontendDist"], "../ui/dist");
    let icons: Vec<&str> = base["bundle"]["icon"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    for icon in &icons {
        let bytes = std::fs::read(existing(icon)).unwrap();
        let magic: &[u8] = match Path::new(icon).extension().unwrap().to_str().unwrap() {
            "png" => b"\x89PNG",
            "icns" => b"icns",
            "ico" => b"\0\0\x01\0",
            other => panic!("unexpected icon type {other}"),
        };
        assert!(bytes.starts_with(magic), "{icon} is not what its name says");
    }
    for needed in [".icns", ".ico", "128x128.png", "32x32.png"] {
        assert!(
            icons.iter().any(|i| i.ends_with(needed)),
            "no {needed} icon"
        );
    }
    // The tray and window icon is the first PNG (Tauri's default window icon).
    assert!(icons[0].ends_with(".png"));

    assert_eq!(targets(&effective("linux")), ["deb", "rpm", "appimage"]);
    assert_eq!(targets(&effective("macos")), ["app", "dmg"]);
    assert_eq!(targets(&effective("windows")), ["msi"]);
    // The platform files change bundling only.
    for platform in ["linux", "macos", "windows"] {
        let patch = json(&format!("tauri.{platform}.conf.json"));
        let keys: Vec<&String> = patch.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["bundle"], "tauri.{platform}.conf.json");
        assert_eq!(effective(platform)["identifier"], base["identifier"]);
    }
}

#[test]
fn macos_bundle_is_hardened_with_keychain_entitlements() {
    let config = effective("macos");
    let mac = &config["bundle"]["macOS"];
    assert_eq!(mac["hardenedRuntime"], true);
    let plist = std::fs::read_to_string(existing(mac["entitlements"].as_str().unwrap())).unwrap();
    assert!(plist.starts_with("<?xml") && plist.trim_end().ends_with("</plist>"));
    let groups = plist
        .split("<key>keychain-access-groups</key>")
        .nth(1)
        .expect("keychain-access-groups")
        .split("</array>")
        .next()
        .unwrap();
    let identifier = config["identifier"].as_str().unwrap();
    assert!(
        groups.contains(&format!(
            "<string>$(AppIdentifierPrefix){identifier}</string>"
        )),
        "the access group is the app's identifier under the team prefix: {groups}"
    );
    // Hardened-runtime exceptions stay off.
    for key in [
        "com.apple.security.cs.allow-jit",
        "com.apple.security.cs.allow-unsigned-executable-memory",
        "com.apple.security.cs.disable-library-validation",
    ] {
        if let Some(after) = plist.split(&format!("<key>{key}</key>")).nth(1) {
            assert!(
                after.trim_start().starts_with("<false/>"),
                "{key} must be false"
            );
        }
    }
    let info = std::fs::read_to_string(existing("Info.plist")).unwrap();
    assert!(
        info.contains("<key>LSUIElement</key>\n  <true/>"),
        "a tray app: no Dock icon"
    );
    assert!(mac["minimumSystemVersion"].is_string());
}

#[test]
fn windows_msi_keeps_one_upgrade_code() {
    let config = effective("windows");
    let win = &config["bundle"]["windows"];
    let code = win["wix"]["upgradeCode"].as_str().unwrap();
    let groups: Vec<usize> = code.split('-').map(str::len).collect();
    assert_eq!(groups, [8, 4, 4, 4, 12], "{code} is a UUID");
    assert!(code.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
    assert_eq!(win["digestAlgorithm"], "sha256");
    assert!(win["webviewInstallMode"]["type"].is_string());
}

#[test]
fn linux_packages_install_the_it_bootstrap_location_and_autostart_entry() {
    let config = effective("linux");
    let binary = config["mainBinaryName"].as_str().unwrap();
    for format in ["deb", "rpm"] {
        let files = config["bundle"]["linux"][format]["files"]
            .as_object()
            .unwrap();
        for (dest, src) in files {
            let src = src.as_str().unwrap();
            // A built binary is staged by scripts/package.sh; every other file is in the tree.
            if src.starts_with("../deploy/desktop/staged/") {
                let name = src.rsplit('/').next().unwrap();
                let script = std::fs::read_to_string(dir().join("../scripts/package.sh")).unwrap();
                assert!(
                    script.contains(&format!("deploy/desktop/staged/{name}")),
                    "package.sh must stage {name}"
                );
            } else {
                existing(src);
            }
            assert!(dest.starts_with('/'), "{format}: {dest}");
        }
        assert_eq!(
            files["/usr/bin/gatehouse-statusline"], "../deploy/desktop/staged/gatehouse-statusline",
            "{format}: the status line command ships beside gatehouse"
        );
        // bootstrap.rs's documented Linux path is in the IT directory the package creates.
        let system =
            gatehouse_desktop::bootstrap::system_path(&gatehouse_engine::deps::ProcessEnvironment);
        if cfg!(target_os = "linux") {
            let it_dir = system.parent().unwrap().to_str().unwrap();
            assert!(files.contains_key(&format!("{it_dir}/README")), "{format}");
            assert!(
                !files.contains_key(system.to_str().unwrap()),
                "the package must not own IT's bootstrap file"
            );
        }
        let example = files["/etc/gatehouse/bootstrap.json.example"]
            .as_str()
            .unwrap();
        let text = std::fs::read_to_string(existing(example)).unwrap();
        let parsed = gatehouse_desktop::bootstrap::parse(Path::new(example), &text)
            .unwrap_or_else(|e| panic!("the shipped example must be valid: {e}"));
        assert_eq!(parsed.central_url.scheme(), "https");

        let autostart_dest = "/etc/xdg/autostart/gatehouse.desktop";
        let autostart = files[autostart_dest].as_str().unwrap();
        let entry = std::fs::read_to_string(existing(autostart)).unwrap();
        assert!(entry.starts_with("[Desktop Entry]\n"));
        assert!(
            entry.contains(&format!("\nExec=/usr/bin/{binary} tray\n")),
            "{entry}"
        );
        assert!(
            entry.contains("\nHidden=true\n"),
            "off until the user turns it on"
        );
        // The app's own per-user entry has the same file name, so it overrides this one.
        let user = gatehouse_desktop::autostart::entry_path(Path::new("/home/u"), None);
        if cfg!(target_os = "linux") {
            assert_eq!(
                user.unwrap().file_name().unwrap(),
                Path::new(autostart_dest).file_name().unwrap()
            );
        }
    }
}
