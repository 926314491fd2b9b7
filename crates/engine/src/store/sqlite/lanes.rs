//! The SQLite store's threads, so no SQLite call ever runs on an async worker and nobody
//! outside can turn the store into one long queue.
//!
//! - **Writer**: one thread owns the only writing connection. It takes every write that is
//!   waiting (up to [`MAX_BATCH`]) and runs them in one `BEGIN IMMEDIATE` transaction, each
//!   in its own savepoint, then commits once and only then answers each caller (group
//!   commit): a reservation is in the WAL before its request leaves for the upstream, and
//!   sixteen concurrent reservations cost one commit instead of sixteen.
//! - **Point reads** (keyed lookups: sessions, revocations, standings, readiness) and
//!   **reports** (aggregates and lists for the dashboard and the admin API) each have their
//!   own connection and thread, so a flood of reports never delays a reservation, a
//!   settlement or a session check.
//!
//! Every lane has a bounded queue: when it is full the call fails at once with
//! [`StoreError::Busy`] instead of waiting. A job whose caller has stopped waiting is
//! skipped; a report that runs past [`REPORT_BUDGET`] is interrupted. A reservation
//! committed for a caller that left meanwhile is released by the writer itself, so it can
//! never stay open with nothing in flight.

use std::path::Path;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::oneshot;

use crate::store::StoreError;

/// Writes run together in one transaction at most this many at a time.
const MAX_BATCH: usize = 128;
/// Queue bounds: past them a call is refused with `Busy` rather than queued.
const WRITE_QUEUE: usize = 4096;
const POINT_QUEUE: usize = 1024;
const REPORT_QUEUE: usize = 16;
/// A report still running after this long is interrupted (its caller has given up).
pub const REPORT_BUDGET: Duration = Duration::from_secs(3);

/// Which reading connection serves a call.
#[derive(Debug, Clone, Copy)]
pub enum Read {
    /// Keyed lookups on the request path.
    Point,
    /// Aggregates and lists; shed first under load.
    Report,
}

/// One write queued for the writer.
trait Job: Send {
    /// The caller stopped waiting before the job ran: skip it.
    fn abandoned(&self) -> bool;
    /// Does the work inside the batch's transaction; an error rolls back this job only.
    fn run(&mut self, conn: &Connection) -> Result<(), ()>;
    /// Answers the caller once the batch is committed (or failed). Returns follow-up work
    /// when the caller left with a result that must not be dropped.
    fn answer(self: Box<Self>, batch: &Result<(), String>) -> Option<Box<dyn Job>>;
}

/// What to do with a committed result nobody received (e.g. release a reservation).
pub type Orphan<T> = Box<dyn FnOnce(T) -> Option<Detached> + Send>;

struct Call<T, F> {
    work: Option<F>,
    result: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
    orphan: Option<Orphan<T>>,
}

impl<T, F> Job for Call<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> Result<T, StoreError> + Send,
{
    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }

    fn run(&mut self, conn: &Connection) -> Result<(), ()> {
        let Some(work) = self.work.take() else {
            return Err(());
        };
        let result = work(conn);
        let ok = result.is_ok();
        self.result = Some(result);
        if ok { Ok(()) } else { Err(()) }
    }

    fn answer(self: Box<Self>, batch: &Result<(), String>) -> Option<Box<dyn Job>> {
        let result = match (batch, self.result) {
            (Err(e), _) => Err(StoreError::Database(e.clone())),
            (Ok(()), Some(r)) => r,
            (Ok(()), None) => Err(StoreError::Database("write was not run".into())),
        };
        match self.reply.send(result) {
            Ok(()) => None,
            Err(Ok(value)) => self.orphan.and_then(|o| o(value)).map(|d| Box::new(d) as _),
            Err(Err(_)) => None,
        }
    }
}

type Work = Box<dyn FnOnce(&Connection) -> Result<(), StoreError> + Send>;

/// A write the writer runs for itself (no caller waits for it).
pub struct Detached {
    what: &'static str,
    work: Option<Work>,
}

impl Detached {
    pub fn new(
        what: &'static str,
        work: impl FnOnce(&Connection) -> Result<(), StoreError> + Send + 'static,
    ) -> Self {
        Self {
            what,
            work: Some(Box::new(work)),
        }
    }
}

impl Job for Detached {
    fn abandoned(&self) -> bool {
        false
    }

    fn run(&mut self, conn: &Connection) -> Result<(), ()> {
        let work = self.work.take().ok_or(())?;
        work(conn).map_err(|e| tracing::warn!(error = %e, what = self.what, "store: write failed"))
    }

    fn answer(self: Box<Self>, batch: &Result<(), String>) -> Option<Box<dyn Job>> {
        if let Err(e) = batch {
            tracing::warn!(error = %e, what = self.what, "store: write not committed");
        }
        None
    }
}

type ReadJob = Box<dyn FnOnce(&mut Connection) + Send>;

pub struct Lanes {
    write: SyncSender<Box<dyn Job>>,
    point: SyncSender<ReadJob>,
    report: SyncSender<ReadJob>,
}

impl Lanes {
    /// Starts the threads; `writer` is the migrated connection, readers open `path`.
    pub fn start(writer: Connection, path: &Path) -> Result<Self, String> {
        let (write, jobs) = mpsc::sync_channel(WRITE_QUEUE);
        spawn("gatehouse-sqlite-write", move || write_loop(writer, jobs))?;
        let point = start_reader(path, "gatehouse-sqlite-read", POINT_QUEUE, None)?;
        let report = start_reader(
            path,
            "gatehouse-sqlite-report",
            REPORT_QUEUE,
            Some(REPORT_BUDGET),
        )?;
        Ok(Self {
            write,
            point,
            report,
        })
    }

    /// Runs `f` in the writer's next batch; answered after the batch commits.
    pub async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.write_or(f, None).await
    }

    /// As [`Self::write`]; `orphan` receives a committed result whose caller left.
    pub async fn write_or<T, F>(&self, f: F, orphan: Option<Orphan<T>>) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let call = Call {
            work: Some(f),
            result: None,
            reply,
            orphan,
        };
        offer(&self.write, Box::new(call))?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Runs `f` on a reading connection of the given lane.
    pub async fn read<T, F>(&self, lane: Read, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let job: ReadJob = Box::new(move |conn| {
            if !reply.is_closed() {
                let _ = reply.send(f(conn));
            }
        });
        let queue = match lane {
            Read::Point => &self.point,
            Read::Report => &self.report,
        };
        offer(queue, job)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

fn offer<J>(queue: &SyncSender<J>, job: J) -> Result<(), StoreError> {
    queue.try_send(job).map_err(|e| match e {
        TrySendError::Full(_) => StoreError::Busy,
        TrySendError::Disconnected(_) => StoreError::Closed,
    })
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<(), String> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map(drop)
        .map_err(|e| format!("cannot start the {name} thread: {e}"))
}

fn write_loop(mut conn: Connection, jobs: Receiver<Box<dyn Job>>) {
    let mut pending: Vec<Box<dyn Job>> = Vec::new();
    loop {
        if pending.is_empty() {
            match jobs.recv() {
                Ok(job) => pending.push(job),
                Err(_) => return,
            }
        }
        while pending.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => pending.push(job),
                Err(_) => break,
            }
        }
        let mut batch: Vec<Box<dyn Job>> = pending.drain(..).filter(|j| !j.abandoned()).collect();
        if batch.is_empty() {
            continue;
        }
        let outcome = run_batch(&mut conn, &mut batch).map_err(|e| e.to_string());
        if let Err(e) = &outcome {
            tracing::error!(error = %e, writes = batch.len(), "store: a write batch failed");
        }
        pending.extend(batch.into_iter().filter_map(|job| job.answer(&outcome)));
    }
}

/// One transaction for the whole batch; a job that fails is rolled back to its savepoint
/// and the others still commit.
fn run_batch(conn: &mut Connection, batch: &mut [Box<dyn Job>]) -> Result<(), rusqlite::Error> {
    let mut tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    for job in batch.iter_mut() {
        // Checked again here: a caller may leave while earlier jobs of the batch run.
        if job.abandoned() {
            continue;
        }
        let sp = tx.savepoint()?;
        if job.run(&sp).is_ok() {
            sp.commit()?;
            continue;
        }
        // A failed job's savepoint rolls back when dropped.
        drop(sp);
        if tx.is_autocommit() {
            // SQLite rolled the whole transaction back (a full disk, an I/O error): what
            // the batch wrote so far is gone, and a later savepoint would start a new
            // transaction that commits on its own. The whole batch fails.
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                Some("the batch's transaction was rolled back by SQLite".into()),
            ));
        }
    }
    tx.commit()
}

fn start_reader(
    path: &Path,
    name: &str,
    bound: usize,
    budget: Option<Duration>,
) -> Result<SyncSender<ReadJob>, String> {
    let mut conn = Connection::open(path).map_err(|e| e.to_string())?;
    conn.busy_timeout(Duration::from_secs(5))
        .and_then(|()| conn.pragma_update(None, "query_only", "ON"))
        .map_err(|e| e.to_string())?;
    let (tx, rx) = mpsc::sync_channel::<ReadJob>(bound);
    spawn(name, move || {
        while let Ok(job) = rx.recv() {
            if let Some(budget) = budget {
                let deadline = Instant::now() + budget;
                if let Err(e) =
                    conn.progress_handler(10_000, Some(move || Instant::now() > deadline))
                {
                    tracing::debug!(error = %e, "store: report budget not set");
                }
            }
            job(&mut conn);
        }
    })?;
    Ok(tx)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    fn lanes(dir: &Path) -> Lanes {
        let path = dir.join("l.db");
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch("CREATE TABLE t (v INTEGER)").unwrap();
        Lanes::start(conn, &path).unwrap()
    }

    async fn count(l: &Lanes) -> i64 {
        l.read(Read::Point, |c| {
            Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?)
        })
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn a_result_committed_after_its_caller_left_goes_to_the_orphan_handler() {
        let dir = tempfile::tempdir().unwrap();
        let l = lanes(dir.path());
        let orphaned = Arc::new(AtomicBool::new(false));
        let seen = orphaned.clone();
        let orphan: Orphan<i64> = Box::new(move |v| {
            seen.store(v == 7, Ordering::SeqCst);
            Some(Detached::new("undo", |c| {
                c.execute("DELETE FROM t", [])?;
                Ok(())
            }))
        });
        // The caller stops waiting while the write runs.
        let slow = l.write_or(
            |c| {
                std::thread::sleep(Duration::from_millis(300));
                c.execute("INSERT INTO t VALUES (1)", [])?;
                Ok(7)
            },
            Some(orphan),
        );
        assert!(
            tokio::time::timeout(Duration::from_millis(50), slow)
                .await
                .is_err()
        );
        // The next write is in a later batch, after the orphan's follow-up.
        l.write(|_| Ok(())).await.unwrap();
        l.write(|_| Ok(())).await.unwrap();
        assert!(orphaned.load(Ordering::SeqCst));
        assert_eq!(count(&l).await, 0, "the follow-up undid the orphaned write");
    }

    #[tokio::test]
    async fn a_write_whose_caller_left_before_it_ran_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let l = lanes(dir.path());
        let blocker = l.write(|_| {
            std::thread::sleep(Duration::from_millis(200));
            Ok(())
        });
        let skipped = l.write(|c| {
            c.execute("INSERT INTO t VALUES (1)", [])?;
            Ok(())
        });
        let (a, b) = tokio::join!(blocker, async {
            tokio::time::timeout(Duration::from_millis(20), skipped).await
        });
        a.unwrap();
        assert!(b.is_err());
        l.write(|_| Ok(())).await.unwrap();
        assert_eq!(count(&l).await, 0);
    }

    #[tokio::test]
    async fn a_failing_write_does_not_undo_the_others_in_its_batch() {
        let dir = tempfile::tempdir().unwrap();
        let l = Arc::new(lanes(dir.path()));
        let writes = (0..20).map(|i| {
            let l = l.clone();
            tokio::spawn(async move {
                l.write(move |c| {
                    c.execute("INSERT INTO t VALUES (?1)", [i])?;
                    if i % 2 == 0 {
                        c.execute("INSERT INTO missing VALUES (1)", [])?;
                    }
                    Ok(())
                })
                .await
                .is_ok()
            })
        });
        let writes: Vec<_> = writes.collect();
        let mut ok = 0;
        for w in writes {
            ok += i32::from(w.await.unwrap());
        }
        assert_eq!(ok, 10);
        assert_eq!(count(&l).await, 10, "each failed write rolled back alone");
    }

    #[tokio::test]
    async fn a_full_report_queue_refuses_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let l = Arc::new(lanes(dir.path()));
        let slow = (0..REPORT_QUEUE + 8).map(|_| {
            let l = l.clone();
            tokio::spawn(async move {
                l.read(Read::Report, |_| {
                    std::thread::sleep(Duration::from_millis(50));
                    Ok(())
                })
                .await
            })
        });
        let slow: Vec<_> = slow.collect();
        let mut busy = 0;
        for r in slow {
            busy += usize::from(matches!(r.await.unwrap(), Err(StoreError::Busy)));
        }
        assert!(busy > 0, "some reports were shed");
        // Point reads and writes are not behind the reports.
        assert_eq!(count(&l).await, 0);
    }
}
