//! Claude Code's status line command timed as Claude Code runs it: a new process per footer
//! refresh, Claude Code's status JSON on stdin, one line out.
//!
//! The app service the insight phase started in this process has written `statusline.json`
//! in its data dir (its loopback URL and this launch's status token), as the tray does each
//! time its engine starts. The command reads that file and asks the app's status line
//! route: no keychain, no database. Timed, over the same data dir:
//! - `gatehouse-statusline --data-dir <dir>`: the small binary (no GUI libraries) that
//!   "Configure Claude Code" writes as `statusLine.command` when it sits beside `gatehouse`,
//!   looked for beside the `--gatehouse` binary the bench was given;
//! - for comparison, `gatehouse --data-dir <dir> statusline` for each `gatehouse` binary
//!   (the configured command when the small one is missing), with `gatehouse --version`
//!   (its process start and exit alone).
//!
//! The runs go round by round, one of each command per round, so a disturbance of the
//! machine falls on all of them alike. Every run is a fresh process, timed from spawn to
//! exit, bounded in time, and must print the session's cost line, not the fallback.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// The small status line binary, beside `gatehouse` in a build or an install.
pub const SMALL: &str = "gatehouse-statusline";
/// The file the app writes in its data dir for the command (`gatehouse_statusline::FILE`).
pub const FILE: &str = "statusline.json";
/// What the command prints when it cannot ask the app.
const FALLBACK: &str = "Gatehouse: not running";
/// One process's longest run before it is killed.
const RUN_LIMIT: Duration = Duration::from_secs(10);
/// All the runs' longest time together.
const ALL_LIMIT: Duration = Duration::from_secs(600);
/// Runs of each command before the measured ones (page cache, the app's first answers).
const WARMUP: usize = 3;

/// Which command a binary is timed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `gatehouse-statusline --data-dir <dir>`.
    Small,
    /// `gatehouse --data-dir <dir> statusline`, and `gatehouse --version`.
    Gatehouse,
}

/// One binary's runs.
#[derive(Debug, Clone)]
pub struct CommandTimes {
    pub binary: PathBuf,
    pub kind: Kind,
    /// What the first run printed.
    pub line: String,
    /// The status line command, spawn to exit.
    pub statusline: Vec<Duration>,
    /// `gatehouse --version` (process start and exit alone), interleaved with the above;
    /// empty for the small binary, which has no `--version`.
    pub version: Vec<Duration>,
}

/// What was measured: per binary its times, or why none.
#[derive(Debug, Clone)]
pub struct Measured {
    /// `gatehouse-statusline`, the command Claude Code is configured with.
    pub small: Result<CommandTimes, String>,
    /// `gatehouse … statusline` per `gatehouse` binary, for comparison.
    pub gatehouse: Vec<Result<CommandTimes, String>>,
}

/// Where the commands are pointed.
pub struct Target {
    pub data_dir: PathBuf,
    pub session_id: String,
    pub cwd: String,
    pub runs: usize,
}

/// The app's `statusline.json`: its port and the status token.
#[derive(Debug, Clone)]
pub struct StatusFile {
    pub port: u16,
    pub token: String,
}

/// Reads the `statusline.json` the app wrote in `data_dir`.
pub fn status_file(data_dir: &Path) -> anyhow::Result<StatusFile> {
    let path = data_dir.join(FILE);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("the app wrote no {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let url = v["url"]
        .as_str()
        .and_then(|u| url::Url::parse(u).ok())
        .with_context(|| format!("{} has no URL", path.display()))?;
    let token = v["token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .with_context(|| format!("{} has no token", path.display()))?;
    let Some(port) = url.port() else {
        bail!("{} names no port: {url}", path.display());
    };
    Ok(StatusFile {
        port,
        token: token.to_owned(),
    })
}

/// The small binary beside a `gatehouse` binary.
pub fn beside(gatehouse: &Path) -> PathBuf {
    gatehouse.with_file_name(SMALL)
}

/// Claude Code's status JSON for the session (the fields it sends).
fn status_json(target: &Target) -> String {
    let (session, cwd) = (&target.session_id, &target.cwd);
    serde_json::json!({
        "hook_event_name": "Status",
        "session_id": session,
        "transcript_path": format!("/home/bench/.claude/projects/x/{session}.jsonl"),
        "cwd": cwd,
        "model": {"id": "claude-sonnet-4-5", "display_name": "Sonnet 4.5"},
        "workspace": {"current_dir": cwd, "project_dir": cwd},
        "version": "2.1.337",
        "output_style": {"name": "default"},
    })
    .to_string()
}

/// A line with the session's cost, not the fallback.
fn is_cost_line(line: &str) -> bool {
    line != FALLBACK && line.contains("this session")
}

/// One binary on its way through the runs.
struct Job {
    times: CommandTimes,
    error: Option<String>,
}

impl Job {
    fn statusline(&self, data_dir: &Path) -> Command {
        let mut c = Command::new(&self.times.binary);
        c.arg("--data-dir").arg(data_dir);
        if self.times.kind == Kind::Gatehouse {
            c.arg("statusline");
        }
        c
    }

    fn version(&self) -> Option<Command> {
        (self.times.kind == Kind::Gatehouse).then(|| {
            let mut c = Command::new(&self.times.binary);
            c.arg("--version");
            c
        })
    }

    fn into_result(self) -> Result<CommandTimes, String> {
        match self.error {
            Some(e) => Err(format!("{}: {e}", self.times.binary.display())),
            None => Ok(self.times),
        }
    }
}

/// Times the small binary at `small` and each of `gatehouse`, `target.runs` rounds after
/// the warm-up. Blocking (processes): call it off an async runtime's workers.
pub fn measure(small: &Path, gatehouse: &[PathBuf], target: &Target) -> Measured {
    let input = status_json(target);
    let runs = target.runs.clamp(1, 1_000);
    let deadline = Instant::now() + ALL_LIMIT;
    let mut jobs: Vec<Job> = std::iter::once((small, Kind::Small))
        .chain(gatehouse.iter().map(|b| (b.as_path(), Kind::Gatehouse)))
        .map(|(binary, kind)| Job {
            times: CommandTimes {
                binary: binary.to_owned(),
                kind,
                line: String::new(),
                statusline: Vec::with_capacity(runs),
                version: Vec::with_capacity(runs),
            },
            error: (!binary.is_file()).then(|| "not found".to_owned()),
        })
        .collect();

    for job in jobs.iter_mut().filter(|j| j.error.is_none()) {
        for _ in 0..WARMUP {
            match run_once(job.statusline(&target.data_dir), input.as_bytes()) {
                Ok((_, l)) if is_cost_line(&l) => job.times.line = l,
                Ok((_, l)) => {
                    job.error = Some(format!("printed `{l}`, not the session's cost line"));
                    break;
                }
                Err(e) => {
                    job.error = Some(e);
                    break;
                }
            }
        }
        if let Some(v) = job.version()
            && let Err(e) = run_once(v, b"")
        {
            job.error = Some(format!("--version: {e}"));
        }
    }

    for round in 0..runs {
        if Instant::now() > deadline {
            for job in jobs.iter_mut().filter(|j| j.error.is_none()) {
                job.error = Some(format!("cut short after {round} runs ({ALL_LIMIT:?})"));
            }
            break;
        }
        for job in jobs.iter_mut().filter(|j| j.error.is_none()) {
            match run_once(job.statusline(&target.data_dir), input.as_bytes()) {
                Ok((d, l)) if is_cost_line(&l) => job.times.statusline.push(d),
                Ok((_, l)) => {
                    job.error = Some(format!("a run printed `{l}`"));
                    continue;
                }
                Err(e) => {
                    job.error = Some(e);
                    continue;
                }
            }
            if let Some(v) = job.version() {
                match run_once(v, b"") {
                    Ok((d, _)) => job.times.version.push(d),
                    Err(e) => job.error = Some(format!("--version: {e}")),
                }
            }
        }
    }

    let mut results = jobs.into_iter().map(Job::into_result);
    let small = results
        .next()
        .unwrap_or_else(|| Err(format!("{}: not timed", small.display())));
    Measured {
        small,
        gatehouse: results.collect(),
    }
}

/// One process run, bounded: spawn to exit, with the first line it printed.
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Stand-ins for the two binaries (shell scripts), timed as the real ones are.
    #[test]
    fn each_binary_is_timed_with_its_own_command_and_checked() {
        let dir =
            std::env::temp_dir().join(format!("gatehouse-bench-statusline-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let script = |name: &str, body: &str| {
            let p = dir.join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p
        };
        // The small one prints the line only for `--data-dir <dir>` and a session on stdin.
        let d = dir.display();
        let small = script(
            SMALL,
            &format!(
                r#"[ "$1 $2" = "--data-dir {d}" ] && [ $# -eq 2 ] && grep -q '"session_id":"s1"' && echo '$0.42 this session · $1.00 today' || echo 'Gatehouse: not running'"#
            ),
        );
        let gatehouse = script(
            "gatehouse",
            &format!(
                r#"case "$*" in "--version") echo 'gatehouse 0.1' ;; "--data-dir {d} statusline") cat >/dev/null; echo '$0.42 this session · $1.00 today' ;; *) echo 'Gatehouse: not running' ;; esac"#
            ),
        );
        let stopped = script("stopped", "echo 'Gatehouse: not running'");
        assert_eq!(beside(&gatehouse), small);
        let target = Target {
            data_dir: dir.clone(),
            session_id: "s1".into(),
            cwd: "/home/bench/shop".into(),
            runs: 4,
        };
        let got = measure(
            &small,
            &[gatehouse.clone(), stopped, dir.join("missing")],
            &target,
        );
        let s = got.small.as_ref().unwrap();
        assert_eq!(
            (s.kind, s.statusline.len(), s.version.len()),
            (Kind::Small, 4, 0)
        );
        assert!(s.line.starts_with("$0.42 this session"), "{}", s.line);
        let g = got.gatehouse[0].as_ref().unwrap();
        assert_eq!((g.statusline.len(), g.version.len()), (4, 4));
        assert!(
            got.gatehouse[1]
                .as_ref()
                .unwrap_err()
                .contains("Gatehouse: not running")
        );
        assert!(
            got.gatehouse[2]
                .as_ref()
                .unwrap_err()
                .ends_with("missing: not found")
        );

        let got = measure(
            &dir.join(SMALL).with_extension("none"),
            &[gatehouse],
            &target,
        );
        assert!(got.small.unwrap_err().ends_with("not found"));
        assert!(got.gatehouse[0].is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_status_file_names_port_and_token() {
        let dir = std::env::temp_dir().join(format!(
            "gatehouse-bench-status-file-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert!(status_file(&dir).is_err());
        std::fs::write(
            dir.join(FILE),
            r#"{"url":"http://127.0.0.1:43121","token":"gst_abc"}"#,
        )
        .unwrap();
        let f = status_file(&dir).unwrap();
        assert_eq!((f.port, f.token.as_str()), (43121, "gst_abc"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
