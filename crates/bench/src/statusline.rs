//! `gatehouse statusline` timed as Claude Code runs it: a new process per footer refresh,
//! Claude Code's status JSON on stdin, the local token read from the OS keychain, one
//! request to the tray's app API, one line out.
//!
//! The command reads the keychain, so the runs happen in a throwaway session: a session
//! bus (`dbus-run-session`) with gnome-keyring's Secret Service unlocked by a throwaway
//! password, its files under the run's own directory (as `tests/desktop/tray_session.sh`
//! sets it up). The app's local token is stored there with `secret-tool` under the
//! attributes keyring-core's Secret Service store looks up (`service gatehouse username
//! local-token`), then this binary's hidden `statusline-runs` subcommand, inside the
//! session, checks the token reads back through the desktop crate's own keychain code and
//! times the command: every run is a fresh process, measured from spawn to exit.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use gatehouse_desktop::keychain::{KeyringStore, LOCAL_TOKEN_ACCOUNT, SERVICE};
use gatehouse_engine::deps::CredentialStore;

/// What `gatehouse statusline` prints when it cannot ask the app.
const FALLBACK: &str = "Gatehouse: not running";
/// One process's longest run before it is killed.
const RUN_LIMIT: Duration = Duration::from_secs(10);
/// The whole keychain session's longest run.
const SESSION_LIMIT: Duration = Duration::from_secs(600);
/// How long the session's output may stay open after it ended.
const PIPE_GRACE: Duration = Duration::from_secs(10);
/// Runs before the measured ones (page cache, the keychain daemon's first unlock).
const WARMUP: usize = 3;

/// The session script: `$1` the work dir, the rest the command to run inside; the token
/// comes on stdin.
const SCRIPT: &str = r#"set -euo pipefail
work=$1; shift
mkdir -p "$work/home" "$work/run"
chmod 700 "$work/run"
export HOME="$work/home" XDG_DATA_HOME="$work/home/.local/share" XDG_CONFIG_HOME="$work/home/.config"
export XDG_RUNTIME_DIR="$work/run"
eval "$(printf 'throwaway' | gnome-keyring-daemon --unlock --components=secrets)"
secret-tool store --label='keyring:local-token@gatehouse' service gatehouse username local-token
"$@"
"#;

/// One binary's runs.
#[derive(Debug, Clone)]
pub struct CommandTimes {
    pub binary: PathBuf,
    /// What the first measured run printed.
    pub line: String,
    /// `gatehouse statusline`, spawn to exit.
    pub statusline: Vec<Duration>,
    /// `gatehouse --version` (process start and exit alone), interleaved with the above.
    pub version: Vec<Duration>,
}

/// Where the command is pointed.
pub struct Target {
    pub port: u16,
    pub data_dir: PathBuf,
    pub session_id: String,
    pub cwd: String,
    pub token: String,
    pub runs: usize,
}

/// What the keychain session measured.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// Reading the local token alone, as each run does (a new D-Bus connection and Secret
    /// Service session, then the lookup), inside gatehouse-bench.
    pub keychain: Vec<Duration>,
    /// Per binary its times, or why none.
    pub binaries: Vec<Result<CommandTimes, String>>,
}

/// Runs the keychain session for `binaries`.
pub fn measure(binaries: &[PathBuf], target: &Target, work: &Path) -> anyhow::Result<Session> {
    let exe = std::env::current_exe().context("cannot find the bench's own binary")?;
    let mut cmd = Command::new("dbus-run-session");
    cmd.args(["--", "bash", "-c", SCRIPT, "bash"])
        .arg(work)
        .arg(&exe)
        .arg("statusline-runs")
        .args(["--port", &target.port.to_string()])
        .arg("--data-dir")
        .arg(&target.data_dir)
        .args(["--session", &target.session_id, "--cwd", &target.cwd])
        .args(["--runs", &target.runs.to_string()])
        .args(binaries)
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        // Its own process group, so a session over its time is ended whole.
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .context("cannot start the keychain session (dbus-run-session, bash)")?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(target.token.as_bytes())?;
    }
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            let _ = tx.send(text);
        });
        rx
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + SESSION_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status.to_string();
        }
        if Instant::now() > deadline {
            // The group this session leads: our own processes, by its id.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            break format!("killed after {SESSION_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // A daemon the session started may hold the pipes a little longer.
    let stdout = stdout.recv_timeout(PIPE_GRACE).unwrap_or_default();
    let stderr = stderr.recv_timeout(PIPE_GRACE).unwrap_or_default();
    let parsed = parse(&stdout);
    if parsed.binaries.is_empty() {
        let why = stdout
            .lines()
            .chain(stderr.lines())
            .rfind(|l| !l.contains("Failed to set fd limit") && !l.trim().is_empty())
            .unwrap_or_default()
            .to_owned();
        bail!("the keychain session ended ({status}) without timing the command: {why}");
    }
    Ok(parsed)
}

/// The `statusline-runs` output: `keychain_us=`, then per binary `bin=` and its `line=`,
/// `statusline_us=`, `version_us=` or `error=` lines.
fn parse(stdout: &str) -> Session {
    let mut keychain = Vec::new();
    let mut out: Vec<Result<CommandTimes, String>> = Vec::new();
    let list = |v: &str| -> Vec<Duration> {
        v.split(',')
            .filter_map(|x| x.trim().parse::<u64>().ok())
            .map(Duration::from_micros)
            .collect()
    };
    for l in stdout.lines() {
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        if k == "keychain_us" {
            keychain = list(v);
            continue;
        }
        if k == "bin" {
            out.push(Ok(CommandTimes {
                binary: PathBuf::from(v),
                line: String::new(),
                statusline: Vec::new(),
                version: Vec::new(),
            }));
            continue;
        }
        let Some(Ok(cur)) = out.last_mut() else {
            continue;
        };
        match k {
            "line" => cur.line = v.to_owned(),
            "statusline_us" => cur.statusline = list(v),
            "version_us" => cur.version = list(v),
            "error" => {
                let e = format!("{}: {v}", cur.binary.display());
                if let Some(last) = out.last_mut() {
                    *last = Err(e);
                }
            }
            _ => {}
        }
    }
    Session {
        keychain,
        binaries: out,
    }
}

/// One process run, bounded: spawn to exit, with what it printed.
fn run_once(mut cmd: Command, stdin: &[u8]) -> Result<(Duration, String), String> {
    // Its own process group, so a hung run is ended with whatever it started.
    cmd.process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("cannot start: {e}"))?;
    let pid = child.id();
    let (done, watch) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = watch.recv_timeout(RUN_LIMIT) {
            // Our own child's group, by its id.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
        }
    });
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin);
    }
    let mut printed = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut printed);
    }
    let status = child.wait().map_err(|e| e.to_string());
    let elapsed = start.elapsed();
    let _ = done.send(());
    let _ = watchdog.join();
    let status = status?;
    if !status.success() {
        return Err(format!("exited with {status}"));
    }
    Ok((
        elapsed,
        printed.lines().next().unwrap_or_default().to_owned(),
    ))
}

fn micros(v: &[Duration]) -> String {
    v.iter()
        .map(|d| d.as_micros().to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The hidden `statusline-runs` subcommand, inside the keychain session: prints, per
/// binary, what the command printed and the times of `runs` status lines and `runs`
/// `--version` runs.
pub fn runs(
    port: u16,
    data_dir: &Path,
    session: &str,
    cwd: &str,
    runs: usize,
    binaries: &[PathBuf],
) -> anyhow::Result<()> {
    // The token as the command will read it, through the desktop crate's keychain code;
    // then that read alone, timed as each run makes it (a fresh store each time).
    let read = || -> anyhow::Result<()> {
        let keychain = KeyringStore::native().context("the session's keychain")?;
        match keychain.get(SERVICE, LOCAL_TOKEN_ACCOUNT) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => {
                bail!("the local token stored with secret-tool is not found by keyring-core")
            }
            Err(e) => bail!("the local token cannot be read from the session's keychain: {e}"),
        }
    };
    read()?;
    let mut keychain = Vec::with_capacity(20);
    for _ in 0..20 {
        let start = Instant::now();
        read()?;
        keychain.push(start.elapsed());
    }
    let input = serde_json::json!({
        "hook_event_name": "Status",
        "session_id": session,
        "transcript_path": format!("/home/bench/.claude/projects/x/{session}.jsonl"),
        "cwd": cwd,
        "model": {"id": "claude-sonnet-4-5", "display_name": "Sonnet 4.5"},
        "workspace": {"current_dir": cwd, "project_dir": cwd},
        "version": "2.1.337",
        "output_style": {"name": "default"},
    })
    .to_string();
    let base = format!("http://127.0.0.1:{port}");
    let runs = runs.clamp(1, 1_000);
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "keychain_us={}", micros(&keychain))?;
    for bin in binaries {
        writeln!(stdout, "bin={}", bin.display())?;
        let statusline = || {
            let mut c = Command::new(bin);
            c.arg("--data-dir")
                .arg(data_dir)
                .arg("statusline")
                .env("ANTHROPIC_BASE_URL", &base);
            c
        };
        let version = || {
            let mut c = Command::new(bin);
            c.arg("--version");
            c
        };
        let mut line = None;
        let mut failed = None;
        for _ in 0..WARMUP {
            match run_once(statusline(), input.as_bytes()) {
                Ok((_, l)) => line = Some(l),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let line = match (line, failed) {
            (_, Some(e)) => {
                writeln!(stdout, "error=the command failed: {e}")?;
                continue;
            }
            (Some(l), None) => l,
            (None, None) => String::new(),
        };
        writeln!(stdout, "line={line}")?;
        if line == FALLBACK || !line.contains("this session") {
            writeln!(
                stdout,
                "error=the command printed `{line}`, not the session's cost line"
            )?;
            continue;
        }
        let (mut s, mut v) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
        let mut error = None;
        for _ in 0..runs {
            match run_once(statusline(), input.as_bytes()) {
                Ok((d, l)) if l == line || l.contains("this session") => s.push(d),
                Ok((_, l)) => {
                    error = Some(format!("a run printed `{l}`"));
                    break;
                }
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
            match run_once(version(), b"") {
                Ok((d, _)) => v.push(d),
                Err(e) => {
                    error = Some(format!("--version: {e}"));
                    break;
                }
            }
        }
        if let Some(e) = error {
            writeln!(stdout, "error={e}")?;
            continue;
        }
        writeln!(stdout, "statusline_us={}", micros(&s))?;
        writeln!(stdout, "version_us={}", micros(&v))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn session_output_is_read_per_binary() {
        let got = parse(
            "keychain_us=700,900\nbin=/a/gatehouse\nline=$0.42 this session · $3.10 today\nstatusline_us=1000,2000\n\
             version_us=500\nbin=/b/gatehouse\nline=Gatehouse: not running\n\
             error=the command printed `Gatehouse: not running`\n",
        );
        assert_eq!(got.keychain.len(), 2);
        let got = got.binaries;
        assert_eq!(got.len(), 2);
        let a = got[0].as_ref().unwrap();
        assert_eq!(
            a.statusline,
            [Duration::from_millis(1), Duration::from_millis(2)]
        );
        assert_eq!(a.version.len(), 1);
        assert!(a.line.contains("this session"));
        assert!(got[1].as_ref().unwrap_err().contains("not running"));
    }
}
