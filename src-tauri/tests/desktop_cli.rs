//! The desktop's terminal commands against a real Secret Service: `configure-claude-code`
//! (configure, status, drift, undo), `keys set | rm` and `token --local`.
//!
//! A Rust test cannot move itself onto a new session bus, so each keychain step runs the
//! real binary inside `dbus-run-session` with an unlocked gnome-keyring (its keyring file
//! lives in the test's temporary HOME, so later sessions see the same items), and checks
//! with libsecret's `secret-tool` what is really stored. Every file the run leaves (the
//! data directory with the SQLite file, Claude Code's directory) and every output other
//! than the commands that print a secret on purpose is searched for the secrets' bytes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";
const PROVIDER_SECRET: &str = "sk-ant-api03-provider-key-for-the-keychain-test-0123456789";

/// A throwaway user: home, data directory, runtime directory (no session bus in it).
struct User {
    root: tempfile::TempDir,
}

impl User {
    fn new() -> Self {
        let u = Self {
            root: tempfile::tempdir().unwrap(),
        };
        for d in ["home", "data", "runtime", "out", "input"] {
            std::fs::create_dir_all(u.path(d)).unwrap();
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(u.path("runtime"), std::fs::Permissions::from_mode(0o700))
                .unwrap();
        }
        u
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    fn settings(&self) -> PathBuf {
        self.path("home/.claude/settings.json")
    }

    /// The child's whole environment: nothing from the test process leaks in.
    fn envs(&self) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("PATH", PathBuf::from(PATH)),
            ("HOME", self.path("home")),
            ("XDG_DATA_HOME", self.path("home/.local/share")),
            ("XDG_CONFIG_HOME", self.path("home/.config")),
            ("XDG_RUNTIME_DIR", self.path("runtime")),
        ]
    }

    /// The binary outside any session bus.
    fn gatehouse(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_gatehouse"));
        c.env_clear()
            .envs(self.envs())
            .arg("--data-dir")
            .arg(self.path("data"));
        c.args(args).stdin(Stdio::null());
        c
    }

    /// Runs shell steps in one D-Bus session with an unlocked gnome-keyring. Each step's
    /// exit status, stdout and stderr are returned by name. `$GH` is the binary, `$DATA`
    /// the data directory, `$INPUT` a directory of files to feed on stdin.
    fn in_secret_service(&self, steps: &[(&str, &str)]) -> HashMap<String, Step> {
        require_tools();
        let mut script = String::from(
            "eval \"$(printf pw | gnome-keyring-daemon --unlock --components=secrets)\" \
             >\"$OUT/unlock.out\" 2>\"$OUT/unlock.err\" || exit 90\n",
        );
        for (name, cmd) in steps {
            script.push_str(&format!(
                "{{ {cmd} ; }} >\"$OUT/{name}.out\" 2>\"$OUT/{name}.err\" </dev/null; \
                 echo $? >\"$OUT/{name}.rc\"\n"
            ));
        }
        let out = Command::new("dbus-run-session")
            .args(["--", "sh", "-c", &script])
            .env_clear()
            .envs(self.envs())
            .env("GH", env!("CARGO_BIN_EXE_gatehouse"))
            .env("DATA", self.path("data"))
            .env("INPUT", self.path("input"))
            .env("OUT", self.path("out"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "dbus-run-session with gnome-keyring failed ({:?}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.path("out/unlock.err")).unwrap_or_default()
        );
        steps
            .iter()
            .map(|(name, _)| {
                let read = |ext: &str| {
                    std::fs::read_to_string(self.path(&format!("out/{name}.{ext}"))).unwrap()
                };
                let step = Step {
                    rc: read("rc").trim().parse().unwrap(),
                    out: read("out"),
                    err: read("err"),
                };
                (name.to_string(), step)
            })
            .collect()
    }
}

#[derive(Debug)]
struct Step {
    rc: i32,
    out: String,
    err: String,
}

fn require_tools() {
    for tool in ["dbus-run-session", "gnome-keyring-daemon", "secret-tool"] {
        let found = PATH.split(':').any(|d| Path::new(d).join(tool).is_file());
        assert!(
            found,
            "`{tool}` is not installed: this test needs a Secret Service in a D-Bus session \
             (apt-get install gnome-keyring dbus-x11 libsecret-tools; scripts/setup.sh does)"
        );
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

const REALISTIC: &str = r#"{
  "env": {
    "ANTHROPIC_BASE_URL": "https://llm-proxy.corp.example",
    "BASH_DEFAULT_TIMEOUT_MS": "60000"
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "~/.claude/hooks/guard.sh"
          }
        ]
      }
    ]
  },
  "enabledPlugins": {
    "formatter@company-tools": true
  },
  "statusLine": {
    "type": "command",
    "command": "~/.claude/statusline.sh"
  },
  "permissions": {
    "allow": ["Bash(npm test)"],
    "deny": ["Read(./.env)"]
  }
}
"#;

#[test]
fn configure_status_undo_round_trip_with_the_token_in_a_secret_service() {
    let user = User::new();
    std::fs::create_dir_all(user.settings().parent().unwrap()).unwrap();
    std::fs::write(user.settings(), REALISTIC).unwrap();
    std::fs::write(user.path("input/provider"), format!("{PROVIDER_SECRET}\n")).unwrap();

    let s = user.in_secret_service(&[
        (
            "configure",
            r#""$GH" --data-dir "$DATA" configure-claude-code"#,
        ),
        ("again", r#""$GH" --data-dir "$DATA" configure-claude-code"#),
        ("token", r#""$GH" token --local"#),
        (
            "lookup",
            "secret-tool lookup service gatehouse username local-token",
        ),
        (
            "set",
            r#""$GH" keys set provider:anthropic < "$INPUT/provider""#,
        ),
        (
            "get",
            "secret-tool lookup service gatehouse username provider:anthropic",
        ),
        (
            "reserved",
            r#""$GH" keys set local-token < "$INPUT/provider""#,
        ),
        ("empty", r#""$GH" keys set provider:other < /dev/null"#),
    ]);
    for name in ["configure", "again", "token", "lookup", "set", "get"] {
        assert_eq!(s[name].rc, 0, "{name}: {:?}", s[name]);
    }
    let configure = &s["configure"].out;
    assert!(configure.contains("configured Claude Code"), "{configure}");
    assert!(
        configure.contains("ANTHROPIC_BASE_URL=http://127.0.0.1:8788"),
        "{configure}"
    );
    assert!(
        s["again"].out.contains("already configured"),
        "{:?}",
        s["again"]
    );

    // The token the helper prints is the one in the Secret Service, and a gth_ key.
    let token = s["token"].out.trim_end().to_owned();
    assert!(token.starts_with("gth_") && token.len() > 40, "{token}");
    assert_eq!(s["token"].out, format!("{token}\n"));
    assert_eq!(s["lookup"].out.trim_end(), token);
    assert_eq!(s["get"].out.trim_end(), PROVIDER_SECRET);
    assert!(
        s["set"]
            .out
            .contains("${keyring:gatehouse/provider:anthropic}"),
        "{:?}",
        s["set"]
    );
    assert_eq!(s["reserved"].rc, 1);
    assert!(
        s["reserved"]
            .err
            .contains("`local-token` is managed by Gatehouse"),
        "{:?}",
        s["reserved"]
    );
    assert_eq!(s["empty"].rc, 1);
    assert!(
        s["empty"].err.contains("no secret on standard input"),
        "{:?}",
        s["empty"]
    );

    // The settings: merged, with the helper command and no token in the file.
    let settings: serde_json::Value =
        serde_json::from_slice(&std::fs::read(user.settings()).unwrap()).unwrap();
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_gatehouse")).unwrap();
    let helper = settings["apiKeyHelper"].as_str().unwrap().to_owned();
    assert_eq!(helper, format!("{} token --local", exe.display()));
    assert_eq!(
        settings["env"]["ANTHROPIC_BASE_URL"],
        "http://127.0.0.1:8788"
    );
    assert_eq!(settings["env"]["BASH_DEFAULT_TIMEOUT_MS"], "60000");
    assert_eq!(settings["hooks"]["PreToolUse"][0]["matcher"], "Bash");
    assert_eq!(settings["statusLine"]["command"], "~/.claude/statusline.sh");
    assert_eq!(settings["enabledPlugins"]["formatter@company-tools"], true);
    assert_eq!(settings["permissions"]["deny"][0], "Read(./.env)");

    // A later session (the keyring file persists in HOME) runs the helper as Claude Code
    // would, and removes the provider key.
    std::fs::write(user.path("input/helper.sh"), &helper).unwrap();
    let s2 = user.in_secret_service(&[
        ("helper", r#"sh "$INPUT/helper.sh""#),
        ("rm", r#""$GH" keys rm provider:anthropic"#),
        ("rm_again", r#""$GH" keys rm provider:anthropic"#),
        (
            "gone",
            "secret-tool lookup service gatehouse username provider:anthropic",
        ),
        (
            "configure_again",
            r#""$GH" --data-dir "$DATA" configure-claude-code"#,
        ),
        ("token_again", r#""$GH" token --local"#),
    ]);
    assert_eq!(s2["helper"].rc, 0, "{:?}", s2["helper"]);
    assert_eq!(s2["helper"].out.trim_end(), token);
    assert_eq!(s2["rm"].rc, 0, "{:?}", s2["rm"]);
    assert_eq!(s2["rm_again"].rc, 1);
    assert!(
        s2["rm_again"]
            .err
            .contains("no key `provider:anthropic` in the keychain")
    );
    assert_ne!(s2["gone"].rc, 0, "still stored: {:?}", s2["gone"]);
    // Configuring again keeps the same token.
    assert_eq!(s2["token_again"].out.trim_end(), token);

    // The engine accepts the token: its hash is in the SQLite state.
    assert_eq!(engine_status_for(&user.path("data"), &token), 200);
    assert_eq!(
        engine_status_for(&user.path("data"), "gth_not-the-token"),
        401
    );

    // No secret in any file of the data directory (SQLite included) or Claude Code's
    // directory, nor anywhere else under the test's root in plaintext (the keyring file
    // is encrypted), nor in any output except the commands that print it on purpose.
    let mut files = Vec::new();
    files_under(user.root.path(), &mut files);
    let printed_on_purpose = ["token", "lookup", "get", "helper", "token_again"]
        .map(|n| user.path(&format!("out/{n}.out")));
    let mut searched = 0;
    for f in &files {
        if printed_on_purpose.contains(f) || f.starts_with(user.path("input")) {
            continue;
        }
        // The keyring daemon replaces its files atomically: one listed a moment ago may be
        // gone (its successor is listed too, or written after the walk).
        let bytes = match std::fs::read(f) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("{}: {e}", f.display()),
        };
        for secret in [token.as_str(), PROVIDER_SECRET] {
            assert!(
                !contains(&bytes, secret.as_bytes()),
                "{} holds a secret",
                f.display()
            );
        }
        searched += 1;
    }
    assert!(user.path("data/gatehouse.db").exists());
    assert!(
        files
            .iter()
            .any(|f| f.starts_with(user.path("home/.local/share/keyrings")))
    );
    assert!(searched >= 10, "{searched} files searched");

    // Status, drift and undo need no keychain.
    let out = user
        .gatehouse(&["configure-claude-code", "--status"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("is configured for Gatehouse at http://127.0.0.1:8788"));
    // The port saved in the desktop settings wins over the default: until configure runs
    // again, that is drift.
    save_desktop_port(&user.path("data"), 9123);
    let out = user
        .gatehouse(&["configure-claude-code", "--status"])
        .output()
        .unwrap();
    assert!(
        text(&out).contains(
            "env.ANTHROPIC_BASE_URL: expected \"http://127.0.0.1:9123\", found \"http://127.0.0.1:8788\""
        ),
        "{}",
        text(&out)
    );
    save_desktop_port(&user.path("data"), 8788);
    let mut edited = settings.clone();
    edited["env"]["ANTHROPIC_BASE_URL"] = "https://elsewhere.example".into();
    edited["model"] = "opus".into();
    std::fs::write(user.settings(), serde_json::to_vec_pretty(&edited).unwrap()).unwrap();
    let out = user
        .gatehouse(&["configure-claude-code", "--status"])
        .output()
        .unwrap();
    assert!(
        text(&out).contains(
            "env.ANTHROPIC_BASE_URL: expected \"http://127.0.0.1:8788\", found \"https://elsewhere.example\""
        ),
        "{}",
        text(&out)
    );
    // Back to what Gatehouse wrote: undo restores the original bytes.
    std::fs::write(
        user.settings(),
        serde_json::to_string_pretty(&settings).unwrap() + "\n",
    )
    .unwrap();
    let out = user
        .gatehouse(&["configure-claude-code", "--undo"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("restored"), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(user.settings()).unwrap(), REALISTIC);
    let out = user
        .gatehouse(&["configure-claude-code", "--status"])
        .output()
        .unwrap();
    assert!(
        text(&out).contains("is not configured for Gatehouse"),
        "{}",
        text(&out)
    );
}

/// Saves the desktop settings with `port`, as the tray does.
fn save_desktop_port(data: &Path, port: u16) {
    use gatehouse_desktop::settings::{SETTINGS_KEY, Settings, StateStore};
    let store =
        gatehouse_engine::store::SqliteStore::open(&data.join("gatehouse.db"), chrono::Utc::now())
            .unwrap();
    let state = StateStore::new(std::sync::Arc::new(store));
    let settings = Settings {
        port,
        ..Settings::default()
    };
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(state.put(SETTINGS_KEY, &settings))
        .unwrap();
}

/// The status an in-process engine on the data directory answers for `token`.
fn engine_status_for(data: &Path, token: &str) -> u16 {
    use gatehouse_engine::deps::{Deps, MapEnvironment, NoCredentialStore, SystemClock};
    use std::sync::Arc;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let env = MapEnvironment::default();
        let config = gatehouse_engine::config::embedded_default(&env, data, Some(0)).unwrap();
        let deps = Deps {
            clock: Arc::new(SystemClock),
            env: Arc::new(env),
            credentials: Arc::new(NoCredentialStore),
            events: Arc::new(gatehouse_engine::events::MemoryEventSink::default()),
        };
        let handle = gatehouse_engine::start(config, deps).await.unwrap();
        assert!(
            handle.issued_local_key().is_none(),
            "the engine issued its own key"
        );
        let status = reqwest::Client::new()
            .get(format!("{}/v1/models", handle.base_url()))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        handle.shutdown().await;
        status
    })
}

#[test]
fn without_a_keychain_nothing_is_stored_and_the_settings_are_untouched() {
    let user = User::new();
    let claude = user.path("claude-config");
    std::fs::create_dir_all(&claude).unwrap();
    let settings = claude.join("settings.json");
    std::fs::write(&settings, REALISTIC).unwrap();

    let out = user
        .gatehouse(&["configure-claude-code"])
        .env("CLAUDE_CONFIG_DIR", &claude)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("gatehouse: cannot configure Claude Code: no keychain reachable: "),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), REALISTIC);
    assert_eq!(
        std::fs::read_dir(&claude).unwrap().count(),
        1,
        "backup or record written"
    );
    // No token was generated into the state either.
    assert!(!user.path("data/gatehouse.db").exists());

    let mut set = user.gatehouse(&["keys", "set", "provider:anthropic"]);
    set.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = set.spawn().unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), PROVIDER_SECRET.as_bytes()).unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let all = text(&out);
    assert!(
        all.contains("cannot store the key: no keychain reachable: "),
        "{all}"
    );
    assert!(!all.contains(PROVIDER_SECRET));

    let out = user.gatehouse(&["token", "--local"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("no keychain reachable: "),
        "{}",
        text(&out)
    );
    assert!(out.stdout.is_empty());

    // Status and undo work without a keychain (and CLAUDE_CONFIG_DIR is honoured).
    let out = user
        .gatehouse(&["configure-claude-code", "--status"])
        .env("CLAUDE_CONFIG_DIR", &claude)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        text(&out).contains(&format!(
            "not configured for Gatehouse ({})",
            settings.display()
        )),
        "{}",
        text(&out)
    );
    let out = user
        .gatehouse(&["configure-claude-code", "--undo"])
        .env("CLAUDE_CONFIG_DIR", &claude)
        .output()
        .unwrap();
    assert!(text(&out).contains("nothing to undo"), "{}", text(&out));
    // A secret is never taken from the command line.
    let out = user
        .gatehouse(&["keys", "set", "provider:anthropic", PROVIDER_SECRET])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_malformed_settings_file_is_refused_before_the_keychain_is_touched() {
    let user = User::new();
    std::fs::create_dir_all(user.settings().parent().unwrap()).unwrap();
    let broken = "{\n  \"env\": \"ANTHROPIC_BASE_URL=http://x\"\n}\n";
    std::fs::write(user.settings(), broken).unwrap();
    // Outside any session bus: the keychain would fail, but the file is checked first.
    let out = user.gatehouse(&["configure-claude-code"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "gatehouse: Claude Code settings file {}: `env` is a string, not an object; \
             the file was left unchanged\n",
            user.settings().display()
        )
    );
    assert_eq!(std::fs::read_to_string(user.settings()).unwrap(), broken);
    assert_eq!(
        std::fs::read_dir(user.path("home/.claude"))
            .unwrap()
            .count(),
        1
    );
    assert!(!user.path("data/gatehouse.db").exists());
}
