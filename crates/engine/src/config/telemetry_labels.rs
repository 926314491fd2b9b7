//! `telemetry.resource_attributes`: label names and values as the reference accepts them,
//! so `OTEL_RESOURCE_ATTRIBUTES` (`name=value,...`) parses the same on every client.

/// Set by the gateway or by Claude Code itself.
const RESERVED: &[&str] = &[
    "service.name",
    "service.version",
    "claude.deployment_mode",
    "host.arch",
    "os.type",
    "os.version",
    "wsl.version",
];
const RESERVED_PREFIXES: &[&str] = &["enduser.", "user.", "identity."];

/// Length of `encodeURIComponent(value)`: unreserved characters count one, others three.
fn encoded_len(value: &str) -> usize {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
                1
            } else {
                3
            }
        })
        .sum()
}

pub fn check(name: &str, value: &str) -> Result<(), String> {
    let name_ok = (1..=255).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !name_ok {
        return Err(format!(
            "label name '{name}' may use only letters, digits, \".\", \"_\" and \"-\", 255 characters at most"
        ));
    }
    let lower = name.to_ascii_lowercase();
    if RESERVED.contains(&lower.as_str()) || RESERVED_PREFIXES.iter().any(|p| lower.starts_with(p))
    {
        return Err(format!(
            "label '{name}' is reserved: the gateway or Claude sets it. Use another name"
        ));
    }
    let bad = |c: char| !('\x21'..='\x7e').contains(&c) || ",;=\\\"%".contains(c);
    if value.is_empty() || value.chars().any(bad) {
        return Err(format!(
            "label '{name}' needs a non-empty value of printable ASCII with no space and none of , ; = \\ \" %"
        ));
    }
    if encoded_len(value) > 255 {
        return Err(format!(
            "label '{name}' has too long a value: the limit is 255 characters, and characters such as / : @ count as three"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::check;

    #[test]
    fn names_and_values() {
        assert!(check("department", "eng").is_ok());
        assert!(check("cost_center.id-2", "a/b:c").is_ok());
        assert!(check("bad name", "x").is_err());
        assert!(check("user.team", "x").unwrap_err().contains("reserved"));
        assert!(check("Service.Name", "x").unwrap_err().contains("reserved"));
        assert!(check("d", "a b").is_err());
        assert!(check("d", "a,b").is_err());
        assert!(check("d", "").is_err());
        assert!(
            check("d", &"/".repeat(86))
                .unwrap_err()
                .contains("too long")
        );
        assert!(check("d", &"a".repeat(255)).is_ok());
    }
}
