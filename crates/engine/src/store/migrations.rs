//! Numbered SQL migrations, applied in order inside one transaction each.
//!
//! The files live in `migrations/<backend>/NNNN_name.sql`; this list must name every file
//! (a test checks it). A database whose newest applied version is above the newest known
//! one is refused: an older binary must not write to a newer schema.

use rusqlite::{Connection, TransactionBehavior, params};

use super::StoreError;

pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

pub const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_init.sql",
        sql: include_str!("../../../../migrations/sqlite/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "0002_spend.sql",
        sql: include_str!("../../../../migrations/sqlite/0002_spend.sql"),
    },
    Migration {
        version: 3,
        name: "0003_principals.sql",
        sql: include_str!("../../../../migrations/sqlite/0003_principals.sql"),
    },
];

pub fn latest(list: &[Migration]) -> i64 {
    list.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Applies pending migrations; returns the schema version now in force.
pub fn apply_sqlite(conn: &mut Connection, clock_ms: i64) -> Result<i64, StoreError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS _migrations (
             version    INTEGER PRIMARY KEY,
             name       TEXT    NOT NULL,
             applied_at INTEGER NOT NULL
         );",
    )?;
    // BEGIN IMMEDIATE takes the write lock first, so two processes opening the same file
    // cannot both apply the same migration.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let current: i64 = tx.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM _migrations",
        [],
        |r| r.get(0),
    )?;
    let supported = latest(SQLITE);
    if current > supported {
        return Err(StoreError::TooNew {
            found: current,
            supported,
        });
    }
    for m in SQLITE.iter().filter(|m| m.version > current) {
        tx.execute_batch(m.sql)?;
        tx.execute(
            "INSERT INTO _migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
            params![m.version, m.name, clock_ms],
        )?;
    }
    tx.commit()?;
    Ok(supported)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn list_names_every_file_in_order() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations/sqlite");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        files.sort();
        let listed: Vec<&str> = SQLITE.iter().map(|m| m.name).collect();
        assert_eq!(files, listed);
        for (i, m) in SQLITE.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1);
            assert!(m.name.starts_with(&format!("{:04}_", m.version)));
        }
    }

    #[test]
    fn applies_once_and_refuses_newer_schema() {
        let mut conn = Connection::open_in_memory().unwrap();
        assert_eq!(apply_sqlite(&mut conn, 0).unwrap(), 3);
        assert_eq!(apply_sqlite(&mut conn, 0).unwrap(), 3);
        conn.execute(
            "INSERT INTO _migrations (version, name, applied_at) VALUES (99, 'future', 0)",
            [],
        )
        .unwrap();
        assert!(matches!(
            apply_sqlite(&mut conn, 0),
            Err(StoreError::TooNew {
                found: 99,
                supported: 3
            })
        ));
    }
}
