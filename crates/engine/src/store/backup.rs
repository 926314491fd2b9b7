//! Backups of the SQLite store, for `gatehouse backup` and `gatehouse restore`.
//!
//! [`backup`] copies a live database with SQLite's online backup API in one step, which
//! reads inside one read transaction: in WAL mode a gateway keeps writing meanwhile, and
//! the copy is the consistent state of one moment. The copy goes to a temporary file next
//! to the destination, is checked, and is renamed into place (an existing file is never
//! overwritten). [`restore`] refuses while anything has the live database open (a running
//! gateway or tray holds connections: an exclusive lock cannot be taken), checks that the
//! file is a Gatehouse database this binary can open (integrity, migration names, a schema
//! version not newer than this binary's), keeps the live file as `<name>.bak` and puts a
//! fresh copy of the backup in its place. PostgreSQL is backed up with `pg_dump` instead.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

use super::migrations;

/// Why a backup or restore did not happen.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{path} already exists; choose a new file name")]
    Exists { path: String },
    #[error("{path} is in use (a gateway or the tray has it open); stop it first, then restore")]
    InUse { path: String },
    #[error("{path} is not a Gatehouse database: {reason}")]
    NotGatehouse { path: String, reason: String },
    #[error(
        "{path} has schema version {found}, newer than this binary supports ({supported}); use a newer gatehouse"
    )]
    TooNew {
        path: String,
        found: i64,
        supported: i64,
    },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
}

/// What a backup or restore copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub schema_version: i64,
    pub usage_rows: i64,
    pub spend_limits: i64,
    pub audit_rows: i64,
    pub bytes: u64,
}

fn io(path: &Path) -> impl Fn(String) -> BackupError + '_ {
    move |message| BackupError::Io {
        path: path.display().to_string(),
        message,
    }
}

/// Copies the live database `live` to the new file `dest` while a gateway may be using it.
pub fn backup(live: &Path, dest: &Path) -> Result<Summary, BackupError> {
    if dest.exists() {
        return Err(BackupError::Exists {
            path: dest.display().to_string(),
        });
    }
    if !live.exists() {
        return Err(io(live)(
            "no database here (has the gateway ever run with this configuration?)".into(),
        ));
    }
    let src = Connection::open_with_flags(live, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| io(live)(e.to_string()))?;
    src.busy_timeout(Duration::from_secs(5))
        .map_err(|e| io(live)(e.to_string()))?;
    let tmp = temp_next_to(dest);
    let copied = copy(&src, &tmp).and_then(|()| check(&tmp));
    match copied {
        Ok(summary) => {
            std::fs::rename(&tmp, dest).map_err(|e| io(dest)(e.to_string()))?;
            Ok(summary)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Replaces the (stopped) live database `live` with a copy of the backup `src`; the old
/// file is kept as `<live>.bak`.
pub fn restore(src: &Path, live: &Path) -> Result<Summary, BackupError> {
    let summary = check(src)?;
    let bak = with_suffix(live, ".bak");
    if live.exists() {
        ensure_unused(live)?;
        // The old database with whatever its WAL holds, as one clean file.
        let _ = std::fs::remove_file(&bak);
        let old = Connection::open(live).map_err(|e| io(live)(e.to_string()))?;
        copy(&old, &bak)?;
        drop(old);
    }
    let tmp = temp_next_to(live);
    let from = Connection::open_with_flags(src, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| io(src)(e.to_string()))?;
    if let Err(e) = copy(&from, &tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    for stale in [with_suffix(live, "-wal"), with_suffix(live, "-shm")] {
        match std::fs::remove_file(&stale) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io(&stale)(e.to_string()));
            }
            _ => {}
        }
    }
    std::fs::rename(&tmp, live).map_err(|e| io(live)(e.to_string()))?;
    Ok(summary)
}

/// Refuses when another connection has `live` open: an exclusive lock needs it alone.
fn ensure_unused(live: &Path) -> Result<(), BackupError> {
    let conn = Connection::open(live).map_err(|e| io(live)(e.to_string()))?;
    conn.busy_timeout(Duration::from_millis(500))
        .map_err(|e| io(live)(e.to_string()))?;
    let probe = conn
        .pragma_update(None, "locking_mode", "EXCLUSIVE")
        .and_then(|()| {
            conn.execute_batch("BEGIN EXCLUSIVE; SELECT count(*) FROM sqlite_master; COMMIT;")
        });
    match probe {
        Ok(()) => Ok(()),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            Err(BackupError::InUse {
                path: live.display().to_string(),
            })
        }
        Err(e) => Err(io(live)(e.to_string())),
    }
}

/// The whole of `src` into the new file `dest` in one backup step (one read transaction).
fn copy(src: &Connection, dest: &Path) -> Result<(), BackupError> {
    let mut to = Connection::open(dest).map_err(|e| io(dest)(e.to_string()))?;
    restrict(dest).map_err(|e| io(dest)(e.to_string()))?;
    let backup = Backup::new(src, &mut to).map_err(|e| io(dest)(e.to_string()))?;
    for _ in 0..100 {
        match backup.step(-1).map_err(|e| io(dest)(e.to_string()))? {
            StepResult::Done => return Ok(()),
            // A checkpoint or a writer's lock for a moment: try again shortly.
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    Err(io(dest)("the database stayed locked for 5 s".into()))
}

/// The copy holds usage and identities: owner-only, like the live database.
fn restrict(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Checks that `path` is an intact Gatehouse database this binary can open.
pub fn check(path: &Path) -> Result<Summary, BackupError> {
    let not = |reason: String| BackupError::NotGatehouse {
        path: path.display().to_string(),
        reason,
    };
    if !path.is_file() {
        return Err(io(path)("no such file".into()));
    }
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| not(e.to_string()))?;
    let integrity: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| not(e.to_string()))?;
    if integrity != "ok" {
        return Err(not(format!("integrity check: {integrity}")));
    }
    let applied: Vec<(i64, String)> = conn
        .prepare("SELECT version, name FROM _migrations ORDER BY version")
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()
        })
        .map_err(|_| not("it has no migration history (_migrations)".into()))?;
    let found = applied.last().map_or(0, |(v, _)| *v);
    let supported = migrations::latest(migrations::SQLITE);
    if found > supported {
        return Err(BackupError::TooNew {
            path: path.display().to_string(),
            found,
            supported,
        });
    }
    for (version, name) in &applied {
        let known = migrations::SQLITE.iter().find(|m| m.version == *version);
        if known.is_none_or(|m| m.name != name) {
            return Err(not(format!("unknown migration {version} `{name}`")));
        }
    }
    if found == 0 {
        return Err(not("no migration applied".into()));
    }
    let count = |table: &str| -> Result<i64, BackupError> {
        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .or_else(|e| match e {
                // Tables of later migrations are missing from an older database.
                rusqlite::Error::SqliteFailure(_, Some(m)) if m.contains("no such table") => Ok(0),
                e => Err(not(e.to_string())),
            })
    };
    Ok(Summary {
        schema_version: found,
        usage_rows: count("usage_events")?,
        spend_limits: count("spend_limits")?,
        audit_rows: count("admin_audit")?,
        bytes: std::fs::metadata(path).map_or(0, |m| m.len()),
    })
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn temp_next_to(path: &Path) -> PathBuf {
    with_suffix(path, &format!(".tmp-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn gatehouse_db(path: &Path) -> Connection {
        let mut conn = Connection::open(path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        migrations::apply_sqlite(&mut conn, 0).unwrap();
        conn
    }

    #[test]
    fn backup_copies_a_database_in_use_and_restore_refuses_while_it_is_open() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("live.db");
        let conn = gatehouse_db(&live);
        conn.execute_batch(
            "INSERT INTO kv (key, value) VALUES ('a', X'01');
             INSERT INTO spend_limits (id, scope_type, scope_id, period, amount_cents, created_at, updated_at)
                 VALUES ('l1', 'organization', '', 'daily', 5, 0, 0);",
        )
        .unwrap();
        let copy = dir.path().join("copy.db");
        let summary = backup(&live, &copy).unwrap();
        assert_eq!(summary.spend_limits, 1);
        assert_eq!(
            summary.schema_version,
            migrations::latest(migrations::SQLITE)
        );
        assert!(matches!(
            backup(&live, &copy),
            Err(BackupError::Exists { .. })
        ));
        let e = restore(&copy, &live).unwrap_err();
        assert!(matches!(e, BackupError::InUse { .. }), "{e}");
        drop(conn);
        restore(&copy, &live).unwrap();
        assert!(with_suffix(&live, ".bak").exists());
    }

    #[test]
    fn restore_refuses_files_that_are_not_gatehouse_databases() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("live.db");
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, "hello").unwrap();
        assert!(matches!(
            restore(&text, &live),
            Err(BackupError::NotGatehouse { .. })
        ));
        let other = dir.path().join("other.db");
        Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE t (x);")
            .unwrap();
        let e = restore(&other, &live).unwrap_err();
        assert!(e.to_string().contains("no migration history"), "{e}");
        let newer = dir.path().join("newer.db");
        let conn = gatehouse_db(&newer);
        conn.execute_batch("INSERT INTO _migrations VALUES (999, '0999_x.sql', 0);")
            .unwrap();
        drop(conn);
        let e = restore(&newer, &live).unwrap_err();
        assert!(
            e.to_string()
                .contains("schema version 999, newer than this binary supports"),
            "{e}"
        );
        assert!(!live.exists(), "nothing was written");
    }
}
