//! `pricing` rules the reference applies at start: `multiplier` in (0, 10] (above 1 is a
//! markup, warned about in `warnings`), and a `pricing` block needs `admin` or a `managed` block with a
//! policy (or `settings`) — the two places prices act. Gatehouse also meters for its own
//! extensions (`client_keys`, the SQLite store), so a file using one of those may price
//! without either; no reference file can use them (the reference needs `postgres_url`).

use super::ConfigError;
use super::raw::RawConfig;

pub fn multiplier(raw: &RawConfig) -> Result<f64, ConfigError> {
    let m = raw.pricing.multiplier.unwrap_or(1.0);
    if !(m.is_finite() && m > 0.0 && m <= 10.0) {
        return Err(ConfigError::at(
            "pricing.multiplier",
            "must be greater than 0 and at most 10",
        ));
    }
    Ok(m)
}

/// Whether the file has a `pricing` block with content.
fn has_pricing(raw: &RawConfig) -> bool {
    let p = &raw.pricing;
    p.multiplier.is_some() || !p.overrides.is_empty() || p.default.is_some()
}

pub fn needs_a_consumer(raw: &RawConfig) -> Result<(), ConfigError> {
    let managed = raw.managed.as_ref().is_some_and(|m| {
        m.policies
            .as_ref()
            .map_or(m.settings.is_some(), |p| !p.is_empty())
    });
    let gatehouse_metering = !raw.client_keys.is_empty() || raw.store.postgres_url.is_none();
    if has_pricing(raw) && raw.admin.is_none() && !managed && !gatehouse_metering {
        return Err(ConfigError::at(
            "pricing",
            "prices act only on spend limits (admin) and on the modelPricing pushed in managed settings: add an admin block or a managed policy, or remove pricing",
        ));
    }
    Ok(())
}
