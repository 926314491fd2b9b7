//! The tray's handle on its dashboard window, which runs in a child process of the same
//! binary (`gatehouse tray-window`, [`super::window`]).
//!
//! Why a process: a web view in the tray process leaves WebKitGTK initialised there after
//! the window closes (JavaScriptCore heaps, caches, its threads) and keeps WebKit's network
//! process alive, about 150 MB for a window nobody looks at. A window process takes WebKit
//! and all its helper processes with it when it exits, and the tray never creates a web
//! view.
//!
//! The protocol is the child's stdin, so the launch's app token never appears on a command
//! line (`/proc/PID/cmdline` is readable by other users): the first line is the dashboard
//! URL (with `#token=`), each later `show` line shows and focuses the window, and end of
//! file (the tray quit or died) closes it. The child says `closed` on its stdout when its
//! window closed and then exits: from that line on, Open starts a new window process (the
//! old one may take a while to tear WebKit down; it is killed if it takes longer than
//! [`CLOSE_GRACE`]). The tray reaps every child, and after a crash the next Open starts a
//! new one. An Open that reaches a window process between its window closing and its
//! `closed` line is lost; the next one works.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// The window process of this launch, if one is running.
pub struct Dashboard {
    exe: PathBuf,
    data_dir: PathBuf,
    rt: tokio::runtime::Handle,
    running: Arc<Mutex<Option<Running>>>,
    next_id: AtomicU64,
}

struct Running {
    id: u64,
    /// Lines for the child's stdin; dropping it closes stdin.
    lines: mpsc::UnboundedSender<Vec<u8>>,
    /// Dropping it (or sending) asks the supervisor to end the child.
    stop: oneshot::Sender<()>,
    /// Resolves once the child has exited and was reaped.
    exited: oneshot::Receiver<()>,
}

/// How long a window process may take to close after its stdin closed, before it is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

impl Dashboard {
    pub fn new(exe: PathBuf, data_dir: PathBuf, rt: tokio::runtime::Handle) -> Self {
        Self {
            exe,
            data_dir,
            rt,
            running: Arc::new(Mutex::new(None)),
            next_id: AtomicU64::new(1),
        }
    }

    /// Shows and focuses the window: a `show` line to the running window process, else a
    /// new window process opening `url`.
    pub fn show(&self, url: &str) -> Result<(), String> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = running.as_ref()
            && r.lines.send(b"show\n".to_vec()).is_ok()
        {
            return Ok(());
        }
        *running = Some(self.spawn(url)?);
        Ok(())
    }

    /// Ends the window process (the tray is quitting): its stdin closes, which closes the
    /// window; after [`CLOSE_GRACE`] it is killed. Returns once it was reaped (bounded).
    pub async fn close(&self) {
        let running = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(Running {
            lines,
            stop,
            exited,
            ..
        }) = running
        else {
            return;
        };
        drop(lines);
        let _ = stop.send(());
        let _ = tokio::time::timeout(CLOSE_GRACE + Duration::from_secs(1), exited).await;
    }

    fn spawn(&self, url: &str) -> Result<Running, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // tokio's child reaper needs its runtime.
        let _rt = self.rt.enter();
        let mut child = tokio::process::Command::new(&self.exe)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("tray-window")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the dashboard window: {e}"))?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or("the dashboard window has no stdin")?;
        let (lines, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let _ = lines.send(format!("{url}\n").into_bytes());
        // The writer: lines in order; when every sender is gone, stdin closes.
        self.rt.spawn(async move {
            while let Some(line) = rx.recv().await {
                if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
        });
        // The reader: once the window closed, this process is no longer the one to show.
        if let Some(stdout) = child.stdout.take() {
            let slot = Arc::clone(&self.running);
            self.rt.spawn(async move {
                let mut said = tokio::io::BufReader::new(stdout).lines();
                while let Ok(Some(line)) = said.next_line().await {
                    if line.trim() == "closed" {
                        let mut running = slot.lock().unwrap_or_else(PoisonError::into_inner);
                        if running.as_ref().is_some_and(|r| r.id == id) {
                            // Dropping it closes stdin and lets the supervisor end it.
                            *running = None;
                        }
                    }
                }
            });
        }
        let (stop, stop_rx) = oneshot::channel::<()>();
        let (exited_tx, exited) = oneshot::channel::<()>();
        let slot = Arc::clone(&self.running);
        // The supervisor: reaps the child whenever it exits (window closed, crash), ends
        // it when asked, and frees the slot so the next Open starts a new one.
        self.rt.spawn(async move {
            tokio::select! {
                status = child.wait() => match status {
                    Ok(s) if s.success() => {}
                    Ok(s) => tracing::warn!(status = %s, "the dashboard window process ended"),
                    Err(e) => tracing::warn!(error = %e, "cannot wait for the dashboard window"),
                },
                _ = stop_rx => {
                    if tokio::time::timeout(CLOSE_GRACE, child.wait()).await.is_err() {
                        let _ = child.kill().await;
                    }
                }
            }
            let mut running = slot.lock().unwrap_or_else(PoisonError::into_inner);
            if running.as_ref().is_some_and(|r| r.id == id) {
                *running = None;
            }
            drop(running);
            let _ = exited_tx.send(());
        });
        Ok(Running {
            id,
            lines,
            stop,
            exited,
        })
    }
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    use super::*;

    impl Dashboard {
        fn is_running(&self) -> bool {
            self.running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
        }
    }

    /// A stand-in for `gatehouse tray-window`: logs its start, its stdin and its end.
    fn fake_window(dir: &Path) -> PathBuf {
        let exe = dir.join("fake-window");
        let log = dir.join("log");
        // It says `closed` (its window closed) on reading a URL with "closing", and keeps
        // running until its stdin closes, as a window process slow to tear WebKit down.
        let script = format!(
            "#!/bin/sh\necho \"args $*\" >>'{l}'\necho $$ >'{p}'\n\
             while IFS= read -r line; do\n  echo \"$line\" >>'{l}'\n  \
             case \"$line\" in *closing*) echo closed;; esac\ndone\necho end >>'{l}'\n",
            l = log.display(),
            p = dir.join("pid").display()
        );
        std::fs::write(&exe, script).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        exe
    }

    /// Waits (at most 5 s) until `d` has no window process running.
    async fn stopped(d: &Dashboard) {
        for _ in 0..200 {
            if !d.is_running() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The fake's log once `want` occurs in it `times` times (bounded wait).
    async fn log_until(dir: &Path, want: &str, times: usize) -> String {
        let mut log = String::new();
        for _ in 0..200 {
            log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
            if log.matches(want).count() >= times {
                return log;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{want:?} did not reach the log {times} times: {log:?}");
    }

    #[test]
    fn the_window_process_gets_its_url_on_stdin_and_one_process_at_a_time() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let d = Dashboard::new(
            fake_window(dir.path()),
            dir.path().join("data"),
            rt.handle().clone(),
        );
        rt.block_on(async {
            let url = "http://127.0.0.1:1/#token=secret";
            d.show(url).unwrap();
            let log = log_until(dir.path(), url, 1).await;
            // The token is on stdin, never among the arguments.
            let args = log.lines().next().unwrap();
            assert!(
                args.ends_with("tray-window") && !args.contains("secret"),
                "{args}"
            );
            // Open again: a `show` line to the same process, not a second one.
            d.show(url).unwrap();
            let log = log_until(dir.path(), "show", 1).await;
            assert_eq!(log.matches("args").count(), 1, "{log}");
            // Quit: stdin closes and the process ends.
            d.close().await;
            log_until(dir.path(), "end", 1).await;
            assert!(!d.is_running());

            // A crashed window process is reaped, and the next Open starts a new one.
            std::fs::remove_file(dir.path().join("pid")).unwrap();
            d.show(url).unwrap();
            let pid = loop {
                match std::fs::read_to_string(dir.path().join("pid")) {
                    Ok(p) if p.ends_with('\n') => break p.trim().to_owned(),
                    _ => tokio::time::sleep(Duration::from_millis(25)).await,
                }
            };
            log_until(dir.path(), url, 2).await;
            let killed = std::process::Command::new("kill")
                .args(["-9", &pid])
                .status()
                .unwrap();
            assert!(killed.success());
            stopped(&d).await;
            assert!(!d.is_running(), "the crashed window process was not reaped");
            d.show(url).unwrap();
            let log = log_until(dir.path(), url, 3).await;
            assert_eq!(log.matches("args").count(), 3, "{log}");
            d.close().await;

            // A window process whose window closed is not shown again, even while it is
            // still ending: Open starts a new one.
            d.show("http://127.0.0.1:1/#token=closing").unwrap();
            log_until(dir.path(), "closing", 1).await;
            stopped(&d).await;
            assert!(!d.is_running(), "`closed` did not free the slot");
            d.show(url).unwrap();
            let log = log_until(dir.path(), "args", 5).await;
            assert!(!log.contains("show\nshow"), "{log}");
            d.close().await;
        });
    }
}
