//! `gatehouse backup PATH` and `gatehouse restore PATH`: the SQLite store of the instance
//! that `--config` (or, without it, the embedded default in the data directory, which the
//! tray uses too) describes. The work is in [`gatehouse_engine::store::backup`]; a
//! PostgreSQL store is refused with a pointer to `pg_dump`.

use std::path::{Path, PathBuf};

use gatehouse_engine::config::{self, StoreConfig};
use gatehouse_engine::deps::ProcessEnvironment;
use gatehouse_engine::store::backup::{self, Summary};

const POSTGRES: &str = "this configuration keeps its state in PostgreSQL: back it up with \
    `pg_dump --format=custom` and restore with `pg_restore` (see docs/server/operations.md, Backups)";

/// The SQLite file of the instance `file` (or the embedded default) describes.
fn live_database(file: Option<&Path>, data: PathBuf) -> Result<PathBuf, String> {
    let config = match file {
        Some(f) => crate::load(f, data)?.0,
        None => {
            config::embedded_default(&ProcessEnvironment, &data, None).map_err(|e| e.to_string())?
        }
    };
    match config.store {
        StoreConfig::Sqlite { path } => Ok(path),
        StoreConfig::Postgres(_) => Err(POSTGRES.into()),
    }
}

fn describe(s: &Summary) -> String {
    format!(
        "schema version {}, {} usage rows, {} spend limits, {} audit rows, {} bytes",
        s.schema_version, s.usage_rows, s.spend_limits, s.audit_rows, s.bytes
    )
}

pub fn backup(dest: &Path, file: Option<&Path>, data: PathBuf) -> Result<(), String> {
    let live = live_database(file, data)?;
    let summary = backup::backup(&live, dest).map_err(|e| e.to_string())?;
    println!(
        "gatehouse: backed up {} to {} ({})",
        live.display(),
        dest.display(),
        describe(&summary)
    );
    Ok(())
}

pub fn restore(src: &Path, file: Option<&Path>, data: PathBuf) -> Result<(), String> {
    let live = live_database(file, data)?;
    let summary = backup::restore(src, &live).map_err(|e| e.to_string())?;
    println!(
        "gatehouse: restored {} from {} ({}); the previous database is {}.bak",
        live.display(),
        src.display(),
        describe(&summary),
        live.display()
    );
    Ok(())
}
