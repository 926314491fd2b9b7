//! Child processes of a benchmark run (fake upstream, bare proxy, Gatehouse):
//! spawning, waiting for their `listening on http://…` line, RSS sampling
//! from `/proc`, and a guard that kills every child when dropped (also on
//! error paths), or stops them gracefully with SIGTERM at the end.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::cpu::cpu_ticks;

/// Time a child gets to print its listening line.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Time a child gets to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Stdout lines read while looking for the listening line.
const MAX_STARTUP_LINES: usize = 50;
/// Window over which the children's CPU use is measured by [`Children::settle`].
const QUIET_WINDOW: Duration = Duration::from_millis(200);
/// CPU ticks (usually 10 ms each) the children may use together in a quiet window.
const QUIET_TICKS: u64 = 2;

/// A running child process.
pub struct Proc {
    pub name: &'static str,
    pub pid: u32,
    /// Base URL it printed, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    stderr_path: PathBuf,
    child: Child,
}

/// Owns every child of the run; dropping it kills those still running.
#[derive(Default)]
pub struct Children {
    procs: Vec<Proc>,
}

impl Drop for Children {
    fn drop(&mut self) {
        for p in &mut self.procs {
            let _ = p.child.start_kill();
        }
    }
}

impl Children {
    /// Spawns `program args`, waits for a stdout line containing
    /// `listening on http://` and keeps the child. Its stderr goes to
    /// `<dir>/<name>.stderr`; its stdin stays open (children that watch for
    /// stdin EOF exit with this process).
    pub async fn spawn(
        &mut self,
        name: &'static str,
        program: &Path,
        args: &[String],
        dir: &Path,
    ) -> anyhow::Result<&Proc> {
        let stderr_path = dir.join(format!("{name}.stderr"));
        let stderr = File::create(&stderr_path)
            .with_context(|| format!("cannot create {}", stderr_path.display()))?;
        // The bench's fake upstream listens on loopback, which a gateway file may name
        // only with the reference's switch (as a sidecar or test setup would).
        let mut child = Command::new(program)
            .args(args)
            .env("CLAUDE_GATEWAY_ALLOW_LOOPBACK", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", program.display()))?;
        let pid = child.id().context("child exited immediately")?;
        let stdout = child.stdout.take().context("no stdout pipe")?;
        let mut proc = Proc {
            name,
            pid,
            url: String::new(),
            stderr_path,
            child,
        };
        let mut lines = BufReader::new(stdout).lines();
        let found = tokio::time::timeout(STARTUP_TIMEOUT, async {
            for _ in 0..MAX_STARTUP_LINES {
                let Some(line) = lines.next_line().await? else {
                    break;
                };
                if let Some(i) = line.find("listening on http://") {
                    let url = line[i + "listening on ".len()..].trim().to_owned();
                    return anyhow::Ok(Some(url));
                }
            }
            Ok(None)
        })
        .await;
        let why = match found {
            Ok(Ok(Some(url))) => {
                proc.url = url;
                None
            }
            Err(_) => Some(format!(
                "did not report its address within {STARTUP_TIMEOUT:?}"
            )),
            Ok(Err(e)) => Some(format!("stdout unreadable: {e}")),
            Ok(Ok(None)) => Some("exited or never printed `listening on http://…`".to_owned()),
        };
        if let Some(why) = why {
            let _ = proc.child.start_kill();
            bail!("{name} {why}; stderr:\n{}", proc.stderr_tail());
        }
        // Drain the rest of stdout so the child never blocks on a full pipe;
        // ends at the child's exit (EOF).
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        self.procs.push(proc);
        self.procs.last().context("child list empty")
    }

    /// Spawns `program args` with extra `envs` for a program that prints no
    /// listening line (nginx, the reference gateway, LiteLLM): it is told to
    /// listen on `addr`, and is ready once a TCP connection to `addr` succeeds
    /// (within `startup`). Stdout and stderr go to `<dir>/<name>.stdout|.stderr`.
    #[allow(clippy::too_many_arguments)]
    pub async fn spawn_on(
        &mut self,
        name: &'static str,
        program: &Path,
        args: &[String],
        envs: &[(&str, &str)],
        dir: &Path,
        addr: std::net::SocketAddr,
        startup: Duration,
    ) -> anyhow::Result<&Proc> {
        let stderr_path = dir.join(format!("{name}.stderr"));
        let stdout_path = dir.join(format!("{name}.stdout"));
        let open =
            |p: &Path| File::create(p).with_context(|| format!("cannot create {}", p.display()));
        let mut child = Command::new(program)
            .args(args)
            .envs(envs.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::from(open(&stdout_path)?))
            .stderr(Stdio::from(open(&stderr_path)?))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", program.display()))?;
        let pid = child.id().context("child exited immediately")?;
        let deadline = std::time::Instant::now() + startup;
        let mut why = None;
        // Bounded by the deadline: one attempt every 100 ms.
        while why.is_none() {
            if let Ok(Some(status)) = child.try_wait() {
                why = Some(format!("exited at start-up ({status})"));
            } else if let Ok(Ok(_)) =
                tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(addr))
                    .await
            {
                break;
            } else if std::time::Instant::now() >= deadline {
                why = Some(format!(
                    "did not accept connections on {addr} within {startup:?}"
                ));
            } else {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let proc = Proc {
            name,
            pid,
            url: format!("http://{addr}"),
            stderr_path,
            child,
        };
        if let Some(why) = why {
            let mut proc = proc;
            let _ = proc.child.start_kill();
            bail!("{name} {why}; stderr:\n{}", proc.stderr_tail());
        }
        self.procs.push(proc);
        self.procs.last().context("child list empty")
    }

    /// Stops every child: SIGTERM, then SIGKILL after [`STOP_TIMEOUT`].
    pub async fn stop_all(&mut self) {
        for p in self.procs.iter().rev() {
            p.terminate();
        }
        for p in &mut self.procs {
            p.wait_or_kill().await;
        }
    }

    /// Stops (SIGTERM, then SIGKILL) and forgets the children called `name`.
    pub async fn stop(&mut self, name: &str) {
        let (mut gone, kept) = std::mem::take(&mut self.procs)
            .into_iter()
            .partition::<Vec<Proc>, _>(|p| p.name == name);
        self.procs = kept;
        for p in &mut gone {
            p.terminate();
            p.wait_or_kill().await;
        }
    }

    /// Process id of the child that reported `url` as its address.
    pub fn pid_of_url(&self, url: &str) -> Option<u32> {
        let want = url.trim_end_matches('/');
        self.procs
            .iter()
            .find(|p| p.url.trim_end_matches('/') == want)
            .map(|p| p.pid)
    }

    /// Process ids of the children.
    pub fn pids(&self) -> Vec<u32> {
        self.procs.iter().map(|p| p.pid).collect()
    }

    /// Waits until the children are quiet (together at most [`QUIET_TICKS`]
    /// CPU ticks per [`QUIET_WINDOW`]), e.g. while Gatehouse still writes a
    /// backlog of usage rows after a load phase, for at most `max`.
    /// Returns how long it waited and whether they became quiet.
    pub async fn settle(&self, max: Duration) -> (Duration, bool) {
        let start = std::time::Instant::now();
        let pids = self.pids();
        let total = |pids: &[u32]| -> u64 { pids.iter().filter_map(|p| cpu_ticks(*p).ok()).sum() };
        let mut before = total(&pids);
        while start.elapsed() < max {
            tokio::time::sleep(QUIET_WINDOW).await;
            let now = total(&pids);
            if now.saturating_sub(before) <= QUIET_TICKS {
                return (start.elapsed(), true);
            }
            before = now;
        }
        (start.elapsed(), false)
    }

    /// Fails if any child has exited (with its stderr tail).
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        for p in &mut self.procs {
            if let Ok(Some(status)) = p.child.try_wait() {
                bail!("{} exited ({status}); stderr:\n{}", p.name, p.stderr_tail());
            }
        }
        Ok(())
    }
}

impl Proc {
    /// Sends SIGTERM (graceful stop).
    fn terminate(&self) {
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(self.pid.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// Waits up to [`STOP_TIMEOUT`] for the exit, then kills.
    async fn wait_or_kill(&mut self) {
        if tokio::time::timeout(STOP_TIMEOUT, self.child.wait())
            .await
            .is_err()
        {
            eprintln!(
                "{} did not stop within {STOP_TIMEOUT:?}; killing it",
                self.name
            );
            let _ = self.child.start_kill();
            let _ = tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await;
        }
    }

    /// Last lines of the child's stderr, for error messages.
    pub fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(20);
        lines[from..].join("\n")
    }
}

/// Resident set size of `pid` in KiB (`VmRSS` of `/proc/PID/status`).
pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .with_context(|| format!("no VmRSS in {path}"))?;
    line.trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .with_context(|| format!("bad VmRSS line `{line}`"))
}

/// RSS of `pid` and all its descendants (e.g. nginx's master and worker), in KiB.
pub fn tree_rss_kib(pid: u32) -> anyhow::Result<u64> {
    let mut total = rss_kib(pid)?;
    for p in descendants(pid) {
        total += rss_kib(p).unwrap_or(0);
    }
    Ok(total)
}

/// Every live descendant of `pid` (nginx's worker, a peer's helpers).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    // A process tree of a benchmark peer is small; the bound only guards
    // against a /proc that keeps answering.
    let mut todo = children_of(pid);
    for _ in 0..1000 {
        let Some(p) = todo.pop() else {
            break;
        };
        todo.extend(children_of(p));
        out.push(p);
    }
    out
}

/// Direct children of `pid` (from `/proc/PID/task/*/children`).
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Runs a phase's async `body` on a fresh single-threaded runtime with its own temporary
/// directory (`gatehouse-bench-<name>-<pid>`) and a [`Children`] guard, stops the children
/// at the end, and removes the directory unless the phase failed (its child logs are kept
/// and named).
pub fn in_phase<T>(
    name: &str,
    body: impl AsyncFnOnce(&mut Children, &Path) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let dir = std::env::temp_dir().join(format!("gatehouse-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(async {
        let mut children = Children::default();
        let r = body(&mut children, &dir).await;
        children.stop_all().await;
        r
    });
    match &result {
        Ok(_) => {
            let _ = std::fs::remove_dir_all(&dir);
        }
        Err(_) => eprintln!("  {name}: child logs kept in {}", dir.display()),
    }
    result
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reads_own_rss() {
        assert!(rss_kib(std::process::id()).unwrap() > 0);
    }

    #[test]
    fn tree_rss_counts_children() {
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let (own, tree) = (rss_kib(me).unwrap(), tree_rss_kib(me).unwrap());
        let _ = child.kill();
        let _ = child.wait();
        assert!(tree > own, "tree {tree} KiB, own {own} KiB");
    }
}
