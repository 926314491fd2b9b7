//! Connection threads: each accepted connection is served start to finish on one of N
//! single-threaded runtimes, one per core, as nginx's workers do.
//!
//! On tokio's work-stealing runtime a request that wakes a second task (the upstream
//! connection's, a body channel's) also wakes an idle worker to steal it, so one request
//! hops between threads several times: a futex wake and a context switch each, which cost
//! more than the request's own work on a small or virtualised machine. On a connection
//! thread the connection's task, the upstream connection it opens and the tasks it spawns
//! run on the one thread. Each thread has its own upstream HTTP client (see
//! `upstream::http_client`), so pooled upstream connections are not lent across threads
//! either; it marks itself with `connection_thread::enter` for that.
//!
//! The accept loop stays on the caller's runtime and hands each socket to the thread with
//! the fewest open connections, re-registered with that thread's reactor. The threads run
//! until the [`Threads`] value is dropped, which the server does after its shutdown has
//! drained every connection and the work they spawned.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

/// How long a stopping thread lets its leftover blocking tasks finish.
const THREAD_SHUTDOWN: Duration = Duration::from_secs(1);

/// The running connection threads (none: serve on the caller's runtime).
pub struct Threads {
    threads: Vec<Thread>,
    stop: CancellationToken,
}

struct Thread {
    handle: Handle,
    open: Arc<AtomicUsize>,
}

/// A connection's claim on its thread, counted until it is dropped.
pub struct Claim {
    pub handle: Handle,
    open: Arc<AtomicUsize>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Threads {
    /// Starts `n` threads (`n == 0`: none, connections are served where they are accepted).
    pub fn start(n: usize) -> std::io::Result<Self> {
        let stop = CancellationToken::new();
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            // The runtime is built and dropped on its own thread (dropping one inside the
            // caller's runtime would panic).
            let (tx, rx) = std::sync::mpsc::channel();
            let stopped = stop.clone();
            std::thread::Builder::new()
                .name(format!("gatehouse-conn-{i}"))
                .spawn(move || {
                    crate::connection_thread::enter(i);
                    let runtime = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(runtime) => runtime,
                        Err(e) => return drop(tx.send(Err(e))),
                    };
                    let _ = tx.send(Ok(runtime.handle().clone()));
                    runtime.block_on(stopped.cancelled());
                    runtime.shutdown_timeout(THREAD_SHUTDOWN);
                })?;
            let handle = rx
                .recv()
                .map_err(|_| std::io::Error::other("a connection thread ended at start"))??;
            threads.push(Thread {
                handle,
                open: Arc::new(AtomicUsize::new(0)),
            });
        }
        Ok(Threads { threads, stop })
    }

    pub fn len(&self) -> usize {
        self.threads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// The thread with the fewest open connections, claimed for one more.
    pub fn claim(&self) -> Option<Claim> {
        let thread = self
            .threads
            .iter()
            .min_by_key(|t| t.open.load(Ordering::Relaxed))?;
        thread.open.fetch_add(1, Ordering::Relaxed);
        Some(Claim {
            handle: thread.handle.clone(),
            open: thread.open.clone(),
        })
    }
}

impl Drop for Threads {
    fn drop(&mut self) {
        // Each thread ends its runtime; tasks still on it are dropped.
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn connections_go_to_the_least_loaded_thread() {
        let threads = Threads::start(2).unwrap();
        let a = threads.claim().unwrap();
        let b = threads.claim().unwrap();
        assert_ne!(a.handle.id(), b.handle.id(), "spread over both threads");
        drop(a);
        let c = threads.claim().unwrap();
        assert_ne!(c.handle.id(), b.handle.id(), "the freed thread is picked");
        assert!(Threads::start(0).unwrap().claim().is_none());
    }

    #[test]
    fn work_runs_on_the_claimed_thread_and_stops_with_it() {
        let threads = Threads::start(1).unwrap();
        let claim = threads.claim().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        claim.handle.spawn(async move {
            let _ = tx.send(std::thread::current().name().map(str::to_owned));
        });
        let name = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(name.as_deref(), Some("gatehouse-conn-0"));
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        claim.handle.spawn(async move {
            let _keep = tx;
            std::future::pending::<()>().await;
        });
        drop(threads);
        // The pending task is dropped with its runtime, closing the channel.
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
        );
    }
}
