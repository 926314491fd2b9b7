//! Numbered SQL migrations, one set per backend, applied in order inside one transaction.
//!
//! The files live in `migrations/<backend>/NNNN_name.sql`; these lists must name every file
//! (a test checks both), in increasing version order. Every listed migration not yet
//! recorded as applied is applied, in order, so a number that arrives late (two changes
//! landing out of order) still runs. A database whose newest applied version is above the
//! newest known one is refused: an older binary must not write to a newer schema.
//!
//! Several processes may start at once on one database. SQLite takes the write lock first
//! (`BEGIN IMMEDIATE`); PostgreSQL takes a transaction-scoped advisory lock
//! ([`POSTGRES_MIGRATION_LOCK`]) before it even creates the bookkeeping table, so the
//! second replica waits, then finds the schema current.

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
    Migration {
        version: 4,
        name: "0004_limits.sql",
        sql: include_str!("../../../../migrations/sqlite/0004_limits.sql"),
    },
    Migration {
        version: 5,
        name: "0005_usage_principal_index.sql",
        sql: include_str!("../../../../migrations/sqlite/0005_usage_principal_index.sql"),
    },
    Migration {
        version: 6,
        name: "0006_pooled_budgets.sql",
        sql: include_str!("../../../../migrations/sqlite/0006_pooled_budgets.sql"),
    },
    Migration {
        version: 7,
        name: "0007_usage_row_key.sql",
        sql: include_str!("../../../../migrations/sqlite/0007_usage_row_key.sql"),
    },
    Migration {
        version: 8,
        name: "0008_usage_sessions.sql",
        sql: include_str!("../../../../migrations/sqlite/0008_usage_sessions.sql"),
    },
    Migration {
        version: 9,
        name: "0009_reserve_saturates.sql",
        sql: include_str!("../../../../migrations/sqlite/0009_reserve_saturates.sql"),
    },
    Migration {
        version: 10,
        name: "0010_model_caps.sql",
        sql: include_str!("../../../../migrations/sqlite/0010_model_caps.sql"),
    },
];

pub const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_init.sql",
        sql: include_str!("../../../../migrations/postgres/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "0002_spend.sql",
        sql: include_str!("../../../../migrations/postgres/0002_spend.sql"),
    },
    Migration {
        version: 3,
        name: "0003_principals.sql",
        sql: include_str!("../../../../migrations/postgres/0003_principals.sql"),
    },
    Migration {
        version: 4,
        name: "0004_limits.sql",
        sql: include_str!("../../../../migrations/postgres/0004_limits.sql"),
    },
    Migration {
        version: 5,
        name: "0005_usage_principal_index.sql",
        sql: include_str!("../../../../migrations/postgres/0005_usage_principal_index.sql"),
    },
    Migration {
        version: 6,
        name: "0006_pooled_budgets.sql",
        sql: include_str!("../../../../migrations/postgres/0006_pooled_budgets.sql"),
    },
    Migration {
        version: 7,
        name: "0007_usage_row_key.sql",
        sql: include_str!("../../../../migrations/postgres/0007_usage_row_key.sql"),
    },
    Migration {
        version: 8,
        name: "0008_usage_sessions.sql",
        sql: include_str!("../../../../migrations/postgres/0008_usage_sessions.sql"),
    },
    Migration {
        version: 9,
        name: "0009_reserve_saturates.sql",
        sql: include_str!("../../../../migrations/postgres/0009_reserve_saturates.sql"),
    },
    Migration {
        version: 10,
        name: "0010_model_caps.sql",
        sql: include_str!("../../../../migrations/postgres/0010_model_caps.sql"),
    },
];

/// `pg_advisory_xact_lock` key held while PostgreSQL migrations run ("gatehous" in ASCII).
pub const POSTGRES_MIGRATION_LOCK: i64 = 0x6761_7465_686f_7573;

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
    let applied: Vec<i64> = tx
        .prepare("SELECT version FROM _migrations")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let current = applied.iter().copied().max().unwrap_or(0);
    let supported = latest(SQLITE);
    if current > supported {
        return Err(StoreError::TooNew {
            found: current,
            supported,
        });
    }
    for m in SQLITE.iter().filter(|m| !applied.contains(&m.version)) {
        tx.execute_batch(m.sql)?;
        tx.execute(
            "INSERT INTO _migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
            params![m.version, m.name, clock_ms],
        )?;
    }
    tx.commit()?;
    Ok(supported)
}

/// Applies pending PostgreSQL migrations under the migration lock; returns the schema
/// version now in force.
pub async fn apply_postgres(
    client: &mut tokio_postgres::Client,
    clock_ms: i64,
) -> Result<i64, StoreError> {
    let tx = client.transaction().await?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&POSTGRES_MIGRATION_LOCK],
    )
    .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS _migrations (
             version    BIGINT PRIMARY KEY,
             name       TEXT   NOT NULL,
             applied_at BIGINT NOT NULL
         );",
    )
    .await?;
    let applied: Vec<i64> = tx
        .query("SELECT version FROM _migrations", &[])
        .await?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    let current = applied.iter().copied().max().unwrap_or(0);
    let supported = latest(POSTGRES);
    if current > supported {
        return Err(StoreError::TooNew {
            found: current,
            supported,
        });
    }
    for m in POSTGRES.iter().filter(|m| !applied.contains(&m.version)) {
        tx.batch_execute(m.sql).await?;
        tx.execute(
            "INSERT INTO _migrations (version, name, applied_at) VALUES ($1, $2, $3)",
            &[&m.version, &m.name, &clock_ms],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(supported)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn lists_name_every_file_in_order() {
        for (backend, list) in [("sqlite", SQLITE), ("postgres", POSTGRES)] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../migrations")
                .join(backend);
            let mut files: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".sql"))
                .collect();
            files.sort();
            let listed: Vec<&str> = list.iter().map(|m| m.name).collect();
            assert_eq!(files, listed, "{backend}");
            for (i, m) in list.iter().enumerate() {
                // Increasing; a number another change holds (0010) may be skipped.
                assert!(i == 0 || m.version > list[i - 1].version, "{backend}");
                assert!(m.name.starts_with(&format!("{:04}_", m.version)));
            }
        }
    }

    #[test]
    fn both_backends_have_the_same_tables() {
        let tables = |list: &[Migration]| {
            let mut names: Vec<String> = list
                .iter()
                .flat_map(|m| m.sql.lines())
                .filter_map(|l| l.trim().strip_prefix("CREATE TABLE "))
                .map(|rest| rest.split_whitespace().next().unwrap_or("").to_owned())
                .collect();
            names.sort();
            // A table rebuilt under its own name (SQLite cannot alter a constraint) counts once.
            names.dedup();
            names
        };
        assert_eq!(tables(SQLITE), tables(POSTGRES));
        assert_eq!(latest(SQLITE), latest(POSTGRES));
    }

    #[test]
    fn a_skipped_number_is_applied_when_it_arrives() {
        let mut conn = Connection::open_in_memory().unwrap();
        apply_sqlite(&mut conn, 0).unwrap();
        // As if 0009 had arrived after 0010: it is applied though 10 is newer.
        conn.execute("DELETE FROM _migrations WHERE version = 9", [])
            .unwrap();
        assert_eq!(apply_sqlite(&mut conn, 0).unwrap(), latest(SQLITE));
        let nine: i64 = conn
            .query_row(
                "SELECT count(*) FROM _migrations WHERE version = 9",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(nine, 1);
    }

    #[test]
    fn model_caps_keep_the_limits_and_seed_lifetime_spend() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE _migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
                 applied_at INTEGER NOT NULL);",
        )
        .unwrap();
        for m in SQLITE.iter().filter(|m| m.version <= 9) {
            conn.execute_batch(m.sql).unwrap();
            conn.execute(
                "INSERT INTO _migrations VALUES (?1, ?2, 0)",
                params![m.version, m.name],
            )
            .unwrap();
        }
        conn.execute_batch(
            "INSERT INTO spend_limits (id, scope_type, scope_id, period, amount_cents, created_at,
                 updated_at, pooled_amount_cents, pooled_enabled)
                 VALUES ('spl_1', 'rbac_group', 'eng', 'monthly', 5, 1, 2, 50, 1);
             INSERT INTO spend VALUES ('alice', 'monthly', 100, 7, 0, 1),
                 ('alice', 'monthly', 200, 5, 3, 2), ('alice', 'daily', 200, 5, 3, 2);
             INSERT INTO reservations (id, principal, request_id, created_at, amount_micro,
                 daily_start, weekly_start, monthly_start, state)
                 VALUES ('rsv_1', 'alice', 'r', 3, 3, 200, 200, 200, 'open');",
        )
        .unwrap();
        // Usage rows: alice's Opus twice and an older Sonnet id, a model of no family, and
        // someone whose spend is not kept.
        let at = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 12, 31, 23, 59, 0)
            .single()
            .unwrap();
        let ms = at.timestamp_millis();
        for (who, model, cost) in [
            ("user:alice", "claude-opus-4-6", 40),
            ("user:alice", "Claude-Opus-4-6-20260101", 2),
            ("user:alice", "claude-3-5-sonnet-20241022", 9),
            ("user:alice", "gpt-4o", 100),
            ("user:nobody", "claude-opus-4-6", 1000),
        ] {
            conn.execute(
                "INSERT INTO usage_events (request_id, created_at, principal, endpoint, model,
                     status, route_reason, stream, cost_micro_usd, usage_source, latency_ms)
                 VALUES ('r', ?1, ?2, 'messages', ?3, 200, 'x', 0, ?4, 'reported', 1)",
                params![ms, who, model, cost],
            )
            .unwrap();
        }
        apply_sqlite(&mut conn, 0).unwrap();
        let mut rows: Vec<(String, String, String, i64, i64)> = conn
            .prepare(
                "SELECT principal, family, period, period_start, spent_micro FROM family_spend
                 ORDER BY family, period",
            )
            .unwrap()
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let start = |p: crate::spend::Period| p.window(at).start.timestamp_millis();
        let want = |family: &str, cost: i64| {
            [
                ("daily", start(crate::spend::Period::Daily)),
                ("monthly", start(crate::spend::Period::Monthly)),
                ("total", 0),
                ("weekly", start(crate::spend::Period::Weekly)),
            ]
            .map(|(p, s)| ("alice".to_owned(), family.to_owned(), p.to_owned(), s, cost))
        };
        let mut expected = want("opus", 42).to_vec();
        expected.extend(want("sonnet", 9));
        rows.sort();
        expected.sort();
        assert_eq!(rows, expected);
        let total: (i64, i64) = conn
            .query_row(
                "SELECT spent_micro, reserved_micro FROM spend
                 WHERE principal = 'alice' AND period = 'total' AND period_start = 0",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(
            total,
            (12, 3),
            "every kept month, and what open reservations hold"
        );
        let kept: (String, i64, String) = conn
            .query_row(
                "SELECT id, pooled_amount_cents, model FROM spend_limits",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(kept, ("spl_1".into(), 50, String::new()));
        // A family's limit beside the limit of every model of the same scope and period.
        conn.execute(
            "INSERT INTO spend_limits (id, scope_type, scope_id, period, created_at, updated_at, model)
             VALUES ('spl_2', 'rbac_group', 'eng', 'monthly', 1, 1, 'opus')",
            [],
        )
        .unwrap();
    }

    #[test]
    fn applies_once_and_refuses_newer_schema() {
        let mut conn = Connection::open_in_memory().unwrap();
        assert_eq!(apply_sqlite(&mut conn, 0).unwrap(), latest(SQLITE));
        assert_eq!(apply_sqlite(&mut conn, 0).unwrap(), latest(SQLITE));
        conn.execute(
            "INSERT INTO _migrations (version, name, applied_at) VALUES (99, 'future', 0)",
            [],
        )
        .unwrap();
        assert!(matches!(
            apply_sqlite(&mut conn, 0),
            Err(StoreError::TooNew {
                found: 99,
                supported
            }) if supported == latest(SQLITE)
        ));
    }
}
