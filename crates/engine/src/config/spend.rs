//! Validation of `admin` (caps and their API) and `enforcement`.

use std::collections::HashSet;

use sha2::{Digest, Sha256};

use super::raw::{RawClientKey, RawConfig};
use super::{ClientKeyConfig, ConfigError, GroupMode, PoolRule, Retention, SpendConfig};

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
            // At least 32 characters, as the reference; spaces are allowed there, and
            // control characters could never arrive in an `x-api-key` header.
            if k.key.chars().count() < super::MIN_CLIENT_KEY_LEN
                || k.key.chars().any(char::is_control)
            {
                return Err(ConfigError::at(
                    &format!("{path}[{i}].key"),
                    format!(
                        "must be at least {} characters, without control characters",
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

/// A retention period: a whole number above 0 (at most 100 000, so the cut-off is a date).
fn positive(v: Option<i64>, path: &str) -> Result<Option<u32>, ConfigError> {
    match v {
        None => Ok(None),
        Some(n) if (1..=100_000).contains(&n) => Ok(u32::try_from(n).ok()),
        Some(_) => Err(ConfigError::at(
            path,
            "must be a whole number greater than 0",
        )),
    }
}

/// `admin.pooled_conflict_rule` and `admin.pooled_priority_order`, checked as the reference
/// checks them. An order without `priority_list` is kept and unused (the reference warns).
fn pool_rule(admin: &super::raw::RawAdmin) -> Result<PoolRule, ConfigError> {
    let rule = admin.pooled_conflict_rule.as_deref();
    if rule.is_some_and(|r| r != "default_order" && r != "priority_list") {
        return Err(ConfigError::at(
            "admin.pooled_conflict_rule",
            "must be default_order or priority_list",
        ));
    }
    let order = admin.pooled_priority_order.as_deref().unwrap_or_default();
    let mut seen = HashSet::new();
    if order.len() > 50 || order.iter().any(|g| g.trim().is_empty() || !seen.insert(g)) {
        return Err(ConfigError::at(
            "admin.pooled_priority_order",
            "at most 50 unique, non-empty group names",
        ));
    }
    if rule == Some("priority_list") && order.is_empty() {
        return Err(ConfigError::at(
            "admin.pooled_priority_order",
            "priority_list needs at least one group here",
        ));
    }
    Ok(match rule {
        Some("priority_list") => PoolRule::PriorityList(order.to_vec().into()),
        _ => PoolRule::DefaultOrder,
    })
}

/// `admin.pooled_*` and `admin.billing_group_tag`, checked as the reference checks them
/// (so a mistake names the same path).
fn admin_rules(raw: &RawConfig) -> Result<(), ConfigError> {
    if let Some(admin) = &raw.admin {
        pool_rule(admin)?;
        if let Some(tag) = &admin.billing_group_tag
            && (tag.is_empty()
                || tag.len() > 64
                || tag.to_ascii_lowercase().starts_with("anthropic")
                || !tag
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.:/=+-@".contains(&b)))
        {
            return Err(ConfigError::at(
                "admin.billing_group_tag",
                "must be 1 to 64 characters, each an ASCII letter, a digit or one of _ . : / = + \
                 - @, and must not start with \"anthropic\" in any letter case",
            ));
        }
    }
    Ok(())
}

pub fn validate(raw: &RawConfig) -> Result<Option<SpendConfig>, ConfigError> {
    admin_rules(raw)?;
    let Some(admin) = &raw.admin else {
        // As the reference: the block is inert without caps, and only `true` is a mistake.
        if raw
            .enforcement
            .as_ref()
            .is_some_and(|e| e.fail_closed_on_error == Some(true))
        {
            return Err(ConfigError::at(
                "enforcement.fail_closed_on_error",
                "has no effect without an `admin:` block (spend caps are enforced only with \
                 admin); add admin or remove it",
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
    for (path, groups) in [
        ("admin.admin_groups", &admin.admin_groups),
        ("admin.viewer_groups", &admin.viewer_groups),
    ] {
        if groups.iter().any(|g| g.trim().is_empty()) {
            return Err(ConfigError::at(path, "must not contain empty names"));
        }
    }
    let defaults = Retention::default();
    let retention = Retention {
        audit_days: positive(admin.audit_retention_days, "admin.audit_retention_days")?
            .unwrap_or(defaults.audit_days),
        spend_months: positive(admin.spend_retention_months, "admin.spend_retention_months")?
            .unwrap_or(defaults.spend_months),
        identity_days: positive(
            admin.identity_retention_days,
            "admin.identity_retention_days",
        )?
        .unwrap_or(defaults.identity_days),
    };
    Ok(Some(SpendConfig {
        retention,
        write_keys,
        read_keys,
        admin_groups: admin.admin_groups.clone(),
        viewer_groups: admin.viewer_groups.clone(),
        blocked_message: admin.blocked_message.clone(),
        group_mode,
        pool_rule: pool_rule(admin)?,
        fail_closed: raw
            .enforcement
            .as_ref()
            .and_then(|e| e.fail_closed_on_error)
            // Caps are configured here (this block exists only with `admin`): when they
            // cannot be read, refusing is the default, so no outage lifts them.
            .unwrap_or(true),
    }))
}
