//! Gatehouse's status line in the real Claude Code's footer.
//!
//! The tray app (in-process, port 0, in front of the fake upstream) writes
//! `statusline.json` in its data dir when its engine starts (its loopback URL and this
//! launch's status token, 0600), then configures Claude Code as its "Configure Claude Code"
//! button does with the status line chosen: the gateway's URL, `apiKeyHelper =
//! '<gatehouse>' token --local` and `statusLine = '<dir of gatehouse>/gatehouse-statusline'
//! --data-dir '<data dir>'` (the small binary the workspace build puts beside `gatehouse`).
//! The status line command reads only that file and asks the app's status line route; no
//! keychain, no database. Claude Code itself still gets its API key from `apiKeyHelper`,
//! which reads the local token from the OS keychain, so it runs in a throwaway desktop
//! session (`dbus-run-session`, an unlocked gnome-keyring holding the app's local token as
//! the tray stores it): the pinned Claude Code CLI runs INTERACTIVELY in a pseudo-terminal,
//! a prompt is typed and answered, and the footer is read off the emulated screen
//! (tests/desktop/statusline_session.sh, tests/e2e/claude_statusline.py). The footer must
//! show Gatehouse's line, and its `$x.xx this session` must be the sum of the usage rows of
//! Claude Code's session (the session of its transcript), rounded to cents; `today` is the
//! sum of all of today's rows. `gatehouse --data-dir <dir> statusline` (the command written
//! when the small binary is missing) prints the same line as the configured command. With
//! the gateway stopped (its `statusline.json` left behind), both print `Gatehouse: not
//! running` and exit 0 within 2 s.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_desktop::app::App;
use gatehouse_engine::deps::{CredentialStore, MapEnvironment};
use gatehouse_engine::store::UsageRecord;
use gatehouse_tests::OPERATOR_KEY;
use gatehouse_tests::desktop::{Desk, desktop_deps};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// What the status line command prints when the gateway cannot be asked.
const FALLBACK: &str = "Gatehouse: not running";

/// `gatehouse-statusline` beside `gatehouse`, where the workspace build puts it and where
/// "Configure Claude Code" looks for it.
fn statusline_bin(gatehouse: &Path) -> PathBuf {
    let bin = gatehouse.with_file_name("gatehouse-statusline");
    assert!(
        bin.is_file(),
        "{} is missing: build the workspace (`cargo build -p gatehouse-statusline -p \
         gatehouse`; a workspace test run builds it); without it Claude Code would be \
         configured with the slower `gatehouse statusline`",
        bin.display()
    );
    warn_if_stale(
        &bin,
        &[
            "crates/statusline/src/lib.rs",
            "crates/statusline/src/main.rs",
        ],
    );
    bin
}

/// A run of this package alone does not rebuild other packages' binaries: say so when
/// their sources are newer.
fn warn_if_stale(bin: &Path, sources: &[&str]) {
    let built = std::fs::metadata(bin).and_then(|m| m.modified()).ok();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for src in sources {
        let changed = std::fs::metadata(root.join(src))
            .and_then(|m| m.modified())
            .ok();
        if changed > built {
            eprintln!("warning: {src} is newer than {}: rebuild it", bin.display());
        }
    }
}

/// The words of a command as a POSIX shell splits it: bare words and `'…'` quoting (what
/// "Configure Claude Code" quotes paths with), backslash escapes outside quotes.
fn shell_words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => words.extend(word.take()),
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    w.push(q);
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// One status line as Claude Code runs it: `sh -c <command>` with the status JSON on stdin,
/// no environment beyond PATH and a bare HOME; its line, exit status and time.
async fn status_line(command: &str, home: &Path, input: &str) -> (String, bool, Duration) {
    let t = Instant::now();
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut child_stdin = child.stdin.take().unwrap();
    child_stdin.write_all(input.as_bytes()).await.unwrap();
    drop(child_stdin);
    let out = tokio::time::timeout(Duration::from_secs(5), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("`{command}` returns"))
        .unwrap();
    let took = t.elapsed();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.ends_with('\n') && text.lines().count() == 1,
        "`{command}` prints one line: {text:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (text.trim_end().to_owned(), out.status.success(), took)
}

fn require_tools() {
    for tool in [
        "dbus-run-session",
        "dbus-send",
        "gnome-keyring-daemon",
        "secret-tool",
        "python3",
        "timeout",
    ] {
        let found = PATH.split(':').any(|d| Path::new(d).join(tool).is_file());
        assert!(found, "`{tool}` is missing: run scripts/setup.sh");
    }
}

/// tests/desktop/statusline_session.sh in a new D-Bus session: nothing of this process's
/// environment, a home and runtime directory under `work` (the bus daemon and any service
/// it starts get them too; the keyring file is kept in that home across sessions).
fn desktop_session(gatehouse: &Path, work: &Path, mode: &str) -> tokio::process::Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("desktop/statusline_session.sh");
    let home = work.join("home");
    let runtime = work.join(format!("run-{mode}"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&runtime).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let mut cmd = tokio::process::Command::new("timeout");
    cmd.args(["-k", "5", "240", "dbus-run-session", "--", "bash"])
        .arg(script)
        .arg(gatehouse)
        .arg(work)
        .arg(mode)
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", &home)
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_RUNTIME_DIR", &runtime)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// `$1.23 this session` / `$1.23 today` in a status line, as micro-USD.
fn figure(line: &str, label: &str) -> Option<u64> {
    line.split(" · ").find_map(|part| {
        let (d, c) = part
            .strip_suffix(label)?
            .trim()
            .strip_prefix('$')?
            .split_once('.')?;
        (c.len() == 2).then_some(())?;
        Some(d.parse::<u64>().ok()? * 1_000_000 + c.parse::<u64>().ok()? * 10_000)
    })
}

/// Whether `shown` (whole cents) is `micro` rounded to cents (a tie may go either way).
fn rounds_to(shown: u64, micro: u64) -> bool {
    shown.abs_diff(micro) <= 5_000
}

/// Every usage row, once at least one has landed and no more arrive for half a second.
async fn settled_rows(app: &App) -> Vec<UsageRecord> {
    let mut last = Vec::new();
    for _ in 0..100 {
        let rows = app.store().recent_usage(10_000).await.unwrap();
        if !rows.is_empty() && rows.len() == last.len() {
            return rows;
        }
        last = rows;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("usage rows did not settle: {} rows", last.len());
}

/// The single session id of Claude Code's requests.
fn session_of(rows: &[UsageRecord]) -> String {
    let ids: BTreeSet<&str> = rows
        .iter()
        .filter_map(|r| r.tags.session_id.as_deref())
        .collect();
    assert_eq!(ids.len(), 1, "one Claude Code session: {rows:?}");
    assert!(rows.iter().all(|r| r.tags.from_claude_code()), "{rows:?}");
    ids.into_iter().next().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_shows_gatehouse_status_line_with_the_session_cost() {
    require_tools();
    let claude = gatehouse_tests::e2e_bin("claude");
    assert!(claude.exists(), "run scripts/test.sh (npm ci in tests/e2e)");
    let gatehouse = gatehouse_tests::gatehouse_bin();
    let small = statusline_bin(&gatehouse);
    let started = Instant::now();

    // Answers shaped like a real turn (a cached system prompt), so a session costs cents.
    let fake = FakeUpstream::start(FakeConfig {
        input_tokens: 3_000,
        output_tokens: 20,
        cache_read_input_tokens: 40_000,
        cache_creation_5m_tokens: 10_000,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let claude_dir = work.path().join("claude");
    let project = work.path().join("projects/shop");
    std::fs::create_dir_all(&claude_dir).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let env = MapEnvironment::default()
        .with_var("GATEHOUSE_ANTHROPIC_BASE_URL", &fake.url())
        .with_var(
            "GATEHOUSE_BOOTSTRAP_FILE",
            work.path().join("no-bootstrap.json").to_str().unwrap(),
        )
        .with_var("CLAUDE_CONFIG_DIR", claude_dir.to_str().unwrap());
    let (mut deps, parts) = desktop_deps(work.path(), env);
    deps.gatehouse_exe = gatehouse.clone();
    let data_dir = deps.data_dir.clone();
    let app = App::start(deps).await.unwrap();
    // Where the status line command finds this gateway: its URL and the status token,
    // private to the user.
    let status_file = data_dir.join("statusline.json");
    let written: Value = serde_json::from_slice(&std::fs::read(&status_file).unwrap()).unwrap();
    assert_eq!(written["url"], app.base_url(), "{written}");
    assert!(
        written["token"]
            .as_str()
            .is_some_and(|t| t.starts_with("gst_")),
        "{written}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&status_file)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{}", status_file.display());
    }
    let desk = Desk::new(&app);
    let (status, body) = desk
        .post(
            "providers",
            json!({"kind": "anthropic", "api_key": OPERATOR_KEY}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    // Configure Claude Code with Gatehouse's status line, as the app's button does.
    let (status, body) = desk
        .post(
            "claude-code",
            json!({"action": "configure", "statusline": true}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let settings: Value =
        serde_json::from_slice(&std::fs::read(claude_dir.join("settings.json")).unwrap()).unwrap();
    let command = settings["statusLine"]["command"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        shell_words(&command),
        [
            small.to_str().unwrap(),
            "--data-dir",
            data_dir.to_str().unwrap()
        ],
        "the small binary beside gatehouse, pointed at the app's data dir: {settings}"
    );
    assert_eq!(settings["env"]["ANTHROPIC_BASE_URL"], app.base_url());
    // Claude Code's first-run screens (theme, onboarding, trusting the folder) answered.
    std::fs::write(
        claude_dir.join(".claude.json"),
        json!({
            "hasCompletedOnboarding": true,
            "theme": "dark",
            "projects": {project.to_str().unwrap(): {
                "hasTrustDialogAccepted": true,
                "hasCompletedProjectOnboarding": true,
            }},
        })
        .to_string(),
    )
    .unwrap();

    // Claude Code, interactive, in the desktop session holding the app's local token.
    let local = parts
        .keychain
        .get("gatehouse", "local-token")
        .unwrap()
        .expect("the app made its local token");
    let mut run = desktop_session(&gatehouse, work.path(), "claude")
        .env("LOCAL_TOKEN", local.expose())
        .env("CLAUDE", &claude)
        .env("PROJECT", &project)
        .spawn()
        .unwrap();
    let mut stdin = run.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(run.stdout.take().unwrap()).lines();
    let mut stderr = run.stderr.take().unwrap();
    let stderr = tokio::spawn(async move {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s).await;
        s
    });
    let mut seen: Vec<Value> = Vec::new();
    let mut shown: Option<(String, Vec<UsageRecord>)> = None;
    let mut answered_after = None;
    let mut mismatch = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(200);
    while let Ok(Ok(Some(line))) = tokio::time::timeout_at(deadline, lines.next_line()).await {
        // The session's own daemons may write to the same stdout (gnome-keyring prints
        // its control socket when the bus starts it): only the script's JSON lines count.
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            seen.push(Value::String(line));
            continue;
        };
        seen.push(v.clone());
        if v.get("error").is_some() {
            break;
        }
        if v["answered"] == true {
            answered_after = Some(started.elapsed());
        }
        let Some(text) = v["statusline"].as_str() else {
            continue;
        };
        if v["phase"] != "answered" || figure(text, " this session").is_none() {
            continue;
        }
        // Gatehouse's line for a session: is its cost the cost of the session's rows?
        let rows = settled_rows(&app).await;
        let session = session_of(&rows);
        let cost: u64 = rows
            .iter()
            .filter(|r| r.tags.session_id.as_deref() == Some(session.as_str()))
            .map(|r| r.cost_micro_usd)
            .sum();
        if figure(text, " this session").is_some_and(|s| rounds_to(s, cost)) {
            shown = Some((text.to_owned(), rows));
            // Done: the driver quits Claude Code (it may have stopped on its own already).
            let _ = stdin.write_all(b"stop\n").await;
        } else {
            mismatch = format!("{text:?}, but session {session}'s rows cost {cost} µ$");
        }
    }
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), run.wait())
        .await
        .expect("the session ended")
        .unwrap();
    let stderr = stderr.await.unwrap();
    let report = seen
        .iter()
        .map(|v| match v["screen"].as_str() {
            Some(screen) => format!("{}\n{screen}", v["error"].as_str().unwrap_or("screen:")),
            None => v.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        seen.iter().find_map(|v| v["keychain"].as_str()),
        Some("token --local prints the stored token"),
        "{report}\n{stderr}"
    );
    let Some((line, rows)) = shown else {
        panic!(
            "Claude Code's footer never showed the session's cost ({status}) {mismatch}:\n\
             {report}\n{stderr}"
        );
    };
    assert!(status.success(), "{status}: {report}\n{stderr}");

    // The line is Gatehouse's, for Claude Code's session, with today's total beside it.
    assert_ne!(line, FALLBACK);
    let session = session_of(&rows);
    let transcripts = claude_dir.join("projects");
    let transcript = std::fs::read_dir(&transcripts)
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .find(|p| p.file_stem().is_some_and(|s| s == session.as_str()));
    assert!(
        transcript.is_some(),
        "Claude Code's transcript is of the session the rows carry ({session})"
    );
    let session_cost: u64 = rows
        .iter()
        .filter(|r| r.tags.session_id.as_deref() == Some(session.as_str()))
        .map(|r| r.cost_micro_usd)
        .sum();
    assert!(session_cost >= 10_000, "a session of cents: {rows:?}");
    let today: u64 = rows.iter().map(|r| r.cost_micro_usd).sum();
    let shown_today = figure(&line, " today").unwrap_or_else(|| panic!("no today in {line}"));
    assert!(rounds_to(shown_today, today), "{line} vs {today} µ$ today");
    assert!(
        line.split(" · ")
            .any(|p| p.starts_with("cache ") && p.ends_with('%')),
        "{line}"
    );
    let footers: Vec<&str> = seen
        .iter()
        .filter_map(|v| v["statusline"].as_str())
        .collect();
    eprintln!(
        "footers seen: {footers:?}\nsession {session}: {} requests, {session_cost} µ$; \
         answered after {:.1} s, footer checked after {:.1} s",
        rows.iter()
            .filter(|r| r.tags.session_id.as_deref() == Some(session.as_str()))
            .count(),
        answered_after.unwrap_or_default().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );

    // The same line from `gatehouse statusline`, the command written when the small binary
    // is missing; both as Claude Code runs them, with nothing of a desktop session.
    let home = work.path().join("no-session-home");
    std::fs::create_dir_all(&home).unwrap();
    let input = json!({"session_id": session, "cwd": project}).to_string();
    let fallback_command = format!(
        "'{}' --data-dir '{}' statusline",
        gatehouse.display(),
        data_dir.display()
    );
    // Claude Code has quit: its session's rows are final now.
    let session_cost: u64 = settled_rows(&app)
        .await
        .iter()
        .filter(|r| r.tags.session_id.as_deref() == Some(session.as_str()))
        .map(|r| r.cost_micro_usd)
        .sum();
    let (small_line, ok, small_took) = status_line(&command, &home, &input).await;
    assert!(ok, "`{command}` exits 0");
    assert!(
        figure(&small_line, " this session").is_some_and(|s| rounds_to(s, session_cost)),
        "`{command}` printed {small_line:?}; the session's rows cost {session_cost} µ$"
    );
    let (big_line, ok, big_took) = status_line(&fallback_command, &home, &input).await;
    assert!(ok, "`{fallback_command}` exits 0");
    assert_eq!(big_line, small_line, "`{fallback_command}`");
    eprintln!(
        "running: `gatehouse-statusline` {} ms, `gatehouse statusline` {} ms (debug builds)",
        small_took.as_millis(),
        big_took.as_millis()
    );

    // The gateway stopped, its statusline.json left behind: both fall back at once.
    app.shutdown().await;
    assert!(status_file.is_file(), "the stale file stays");
    for cmd in [&command, &fallback_command] {
        let (line, ok, took) = status_line(cmd, &home, &input).await;
        assert!(ok, "`{cmd}` exits 0 with the gateway stopped");
        assert_eq!(line, FALLBACK, "`{cmd}`");
        assert!(
            took < Duration::from_secs(2),
            "`{cmd}`: the fallback took {took:?}"
        );
        eprintln!("stopped: `{cmd}` fell back in {} ms", took.as_millis());
    }
}
