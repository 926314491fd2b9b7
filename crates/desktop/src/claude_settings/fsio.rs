//! File helpers for the settings merge: optional reads, removals, atomic writes that keep
//! permissions.

use std::io::Write;
use std::path::Path;

use super::SettingsError;

pub fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, SettingsError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SettingsError::Read {
            path: path.to_owned(),
            reason: e.to_string(),
        }),
    }
}

pub fn remove_optional(path: &Path) -> Result<(), SettingsError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(SettingsError::Write {
            path: path.to_owned(),
            reason: format!("cannot remove: {e}"),
        }),
    }
}

/// The permissions of an existing file.
pub fn mode_of(path: &Path) -> Option<std::fs::Permissions> {
    std::fs::metadata(path).ok().map(|m| m.permissions())
}

/// Writes `bytes` to a temp file beside `path` with `perms` (0600 when `None`), syncs
/// it and renames it over `path`. Creates the directory when missing.
pub fn write_atomic(
    path: &Path,
    bytes: &[u8],
    perms: Option<std::fs::Permissions>,
) -> Result<(), SettingsError> {
    let fail = |reason: String| SettingsError::Write {
        path: path.to_owned(),
        reason,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.gatehouse-tmp-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let result = (|| {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut file = opts.open(&tmp)?;
        file.write_all(bytes)?;
        if let Some(p) = perms {
            file.set_permissions(p)?;
        }
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e.to_string())
    })
}
