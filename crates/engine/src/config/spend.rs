//! Validation of `admin` (caps and their API) and `enforcement`.

use std::collections::HashSet;

use sha2::{Digest, Sha256};

use super::raw::{RawClientKey, RawConfig};
use super::{ClientKeyConfig, ConfigError, GroupMode, SpendConfig};

fn keys(
    raw: &[RawClientKey],
    path: &str,
    seen: &mut HashSet<String>,
) -> Result<Vec<ClientKeyConfig>, ConfigError> {
    raw.iter()
        .enumerate()
        .map(|(i, k)| {
            if k.id.trim().is_empty() || !seen.insert(k.id.clone()) {
                return Err(ConfigError::at(
                    &format!("{path}[{i}].id"),
                    "must be a unique, non-empty id",
                ));
            }
            if k.key.len() < super::MIN_CLIENT_KEY_LEN
                || !k.key.bytes().all(|b| b.is_ascii_graphic())
            {
                return Err(ConfigError::at(
                    &format!("{path}[{i}].key"),
                    format!(
                        "must be at least {} printable characters without spaces",
                        super::MIN_CLIENT_KEY_LEN
                    ),
                ));
            }
            Ok(ClientKeyConfig {
                id: k.id.clone(),
                hash: Sha256::digest(k.key.as_bytes()).into(),
            })
        })
        .collect()
}

pub fn validate(raw: &RawConfig) -> Result<Option<SpendConfig>, ConfigError> {
    let Some(admin) = &raw.admin else {
        if raw.enforcement.is_some() {
            return Err(ConfigError::at(
                "enforcement",
                "only applies with `admin` (spend caps)",
            ));
        }
        return Ok(None);
    };
    let mut seen = HashSet::new();
    let write_keys = keys(&admin.write_keys, "admin.write_keys", &mut seen)?;
    let read_keys = keys(&admin.read_keys, "admin.read_keys", &mut seen)?;
    let group_mode = match admin.group_limit_mode.as_deref() {
        None | Some("min") => GroupMode::Min,
        Some("max") => GroupMode::Max,
        Some(other) => {
            return Err(ConfigError::at(
                "admin.group_limit_mode",
                format!("`{other}` is not `min` or `max`"),
            ));
        }
    };
    if admin.admin_groups.iter().any(|g| g.trim().is_empty()) {
        return Err(ConfigError::at(
            "admin.admin_groups",
            "must not contain empty names",
        ));
    }
    if let Some(m) = &admin.blocked_message
        && m.chars().count() > 500
    {
        return Err(ConfigError::at(
            "admin.blocked_message",
            "must be at most 500 characters",
        ));
    }
    Ok(Some(SpendConfig {
        write_keys,
        read_keys,
        admin_groups: admin.admin_groups.clone(),
        blocked_message: admin.blocked_message.clone(),
        group_mode,
        fail_closed: raw
            .enforcement
            .as_ref()
            .and_then(|e| e.fail_closed_on_error)
            // Caps are configured here (this block exists only with `admin`): when they
            // cannot be read, refusing is the default, so no outage lifts them.
            .unwrap_or(true),
    }))
}
