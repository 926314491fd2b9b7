//! `managed.policies[].desktop`: the Claude Desktop overlay, checked as the reference
//! gateway checks it. Every gateway-servable Desktop key is accepted when its value can be
//! read; keys the gateway writes itself, keys that only device management can deliver and
//! keys that run sessions off the device are refused; a near-miss of a known key gets "did
//! you mean"; a gateway.yaml key pasted one level too deep is called out; any other key is
//! unknown to this schema (it may be newer), so it passes with a warning.
//!
//! The key list is data (`desktop_keys.json`), taken from the pinned reference.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::{Map, Value};

#[path = "desktop_overlay_entries.rs"]
mod entries;

use entries::Entries;

const DATA: &str = include_str!("desktop_keys.json");

#[derive(Deserialize)]
struct Data {
    servable: BTreeMap<String, Spec>,
    refused: BTreeMap<String, Refusal>,
    builtin_tools: Vec<String>,
    gateway_yaml_keys: Vec<String>,
}

/// How one servable key's value must read.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    value: Kind,
    #[serde(default)]
    values: Vec<String>,
    #[serde(default)]
    integer: bool,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: Option<f64>,
    min_length: Option<usize>,
    max_length: Option<usize>,
    #[serde(default)]
    required: Vec<String>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Boolean,
    String,
    Enum,
    Number,
    CoercedNumber,
    StringList,
    List,
    HostList,
    MarketplaceList,
    RepositoryList,
    Object,
    ListOrObject,
    ToolPolicy,
    AbsolutePath,
    Version,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Refusal {
    BootstrapOnly,
    SetByGateway,
    OtlpRelay,
    OffDevice,
}

/// What the check found: refusals (each a path and what to do) and warnings.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    pub errors: Vec<(String, String)>,
    pub warnings: Vec<(String, String)>,
}

fn data() -> Option<&'static Data> {
    static CELL: OnceLock<Option<Data>> = OnceLock::new();
    CELL.get_or_init(|| serde_json::from_str(DATA).ok())
        .as_ref()
}

const OFF_DEVICE: &str = "this gateway does not serve settings that run Claude Desktop sessions off the device (such as a self-hosted session host): they make Claude Desktop ignore the gateway as its inference provider and stop applying its on-device settings (disabledBuiltinTools and coworkEgressAllowedHosts among them); remove the key";

fn refusal_message(r: Refusal) -> &'static str {
    match r {
        Refusal::BootstrapOnly => {
            "not deliverable via bootstrap; set it through MDM or the device's local managed configuration instead"
        }
        Refusal::SetByGateway => {
            "set by the gateway from its own configuration; configure `upstreams:`/`models:` instead"
        }
        Refusal::OtlpRelay => {
            "set by the gateway, which relays OTLP itself; configure `telemetry.forward_to` instead"
        }
        Refusal::OffDevice => OFF_DEVICE,
    }
}

/// Checks one overlay; `path` names it (`managed.policies[0].desktop`).
pub fn check(overlay: &Map<String, Value>, path: &str) -> Findings {
    let mut out = Findings::default();
    let Some(data) = data() else {
        out.errors.push((
            path.to_owned(),
            "the bundled Claude Desktop key list cannot be read".into(),
        ));
        return out;
    };
    for (key, value) in overlay {
        let at = format!("{path}.{key}");
        if let Some(spec) = data.servable.get(key) {
            let entries = match spec.value {
                Kind::MarketplaceList => Some(Entries::Marketplaces),
                Kind::RepositoryList => Some(Entries::Repositories),
                _ => None,
            };
            if let Some(kind) = entries {
                for (i, why) in entries::unreadable(kind, value) {
                    out.errors
                        .push((i.map_or_else(|| at.clone(), |i| format!("{at}[{i}]")), why));
                }
            } else if let Some(why) = unreadable(spec, value, data) {
                out.errors.push((at, why));
            }
        } else if let Some(r) = data.refused.get(key) {
            out.errors.push((at, refusal_message(*r).into()));
        } else if data.gateway_yaml_keys.iter().any(|k| k == key) {
            out.errors.push((
                at,
                "one of gateway.yaml's own keys, not a desktop setting; check the indentation"
                    .into(),
            ));
        } else if let Some(why) = unknown(key, data) {
            out.errors.push((at, why));
        } else {
            out.warnings.push((
                at,
                "unknown to the gateway's bundled Claude Desktop schema (it may be newer); sent to Claude Desktop as written".into(),
            ));
        }
    }
    out
}

/// An unknown key the reference refuses: a near-miss of a servable or off-device key, or a
/// name in the connection (`inference*`), telemetry (`otlp*`) or self-hosted families.
fn unknown(key: &str, data: &Data) -> Option<String> {
    let lower = key.to_lowercase();
    let nearest = data
        .servable
        .keys()
        .chain(
            data.refused
                .iter()
                .filter(|(_, r)| **r == Refusal::OffDevice)
                .map(|(k, _)| k),
        )
        .map(|k| (distance(&lower, &k.to_lowercase()), k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k);
    if let Some(k) = nearest {
        return Some(if data.refused.get(k) == Some(&Refusal::OffDevice) {
            format!(
                "unknown desktop key, and the nearest one, {k}, runs Claude Desktop sessions off the device, which this gateway does not serve; remove the key"
            )
        } else {
            format!("unknown desktop key; did you mean {k}?")
        });
    }
    if lower.starts_with("selfhosted") {
        return Some(OFF_DEVICE.into());
    }
    if lower.starts_with("inference") || lower.starts_with("otlp") {
        return Some("unknown desktop key; fix the typo, or upgrade the gateway if this key was added in a newer Claude Desktop release".into());
    }
    None
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

/// Why a servable key's value cannot be read, if it cannot.
fn unreadable(spec: &Spec, v: &Value, data: &Data) -> Option<String> {
    let bad = |what: &str| Some(format!("cannot be read: expected {what}"));
    match spec.value {
        Kind::Boolean => (!is_boolean(v)).then(|| "cannot be read: expected true or false".into()),
        Kind::String => match v.as_str() {
            Some(s) => length(spec, s.trim()),
            None => bad("a string"),
        },
        Kind::Enum => match v.as_str() {
            Some(s) if spec.values.iter().any(|x| x == s) => None,
            _ => bad(&format!("one of {}", spec.values.join(", "))),
        },
        Kind::Number | Kind::CoercedNumber => number(spec, v),
        Kind::StringList => match v.as_array() {
            Some(a)
                if a.iter()
                    .all(|x| x.as_str().is_some_and(|s| !s.trim().is_empty())) =>
            {
                None
            }
            _ => bad("a list of non-empty strings"),
        },
        Kind::List => v.as_array().map_or_else(|| bad("a list"), |_| None),
        Kind::HostList => hosts(v),
        // Read entry by entry in `check`.
        Kind::MarketplaceList | Kind::RepositoryList => None,
        Kind::Object => match v.as_object() {
            Some(m) => spec
                .required
                .iter()
                .find(|r| !m.contains_key(*r))
                .map(|r| format!("cannot be read: {r} is required")),
            None => bad("a mapping"),
        },
        Kind::ListOrObject => match v {
            Value::Array(_) | Value::Object(_) => None,
            _ => bad("a list or a mapping"),
        },
        Kind::ToolPolicy => tool_policy(v, &data.builtin_tools),
        Kind::AbsolutePath => match v.as_str() {
            Some(s) if s.starts_with('/') || s.get(1..3) == Some(":\\") => None,
            _ => bad("an absolute path"),
        },
        Kind::Version => match v.as_str() {
            Some(s) if is_version(s) => None,
            _ => bad("a version such as 1.2.3"),
        },
    }
}

/// A Desktop boolean: true/false, 1/0, or a string holding one of them (any case, trimmed).
fn is_boolean(v: &Value) -> bool {
    match v {
        Value::Bool(_) => true,
        Value::Number(n) => n.as_f64().is_some_and(|n| n == 0.0 || n == 1.0),
        Value::String(s) => {
            let s = s.trim().to_ascii_lowercase();
            matches!(s.as_str(), "true" | "false" | "1" | "0")
        }
        _ => false,
    }
}

fn length(spec: &Spec, s: &str) -> Option<String> {
    let n = s.chars().count();
    if spec.min_length.is_some_and(|m| n < m) || spec.max_length.is_some_and(|m| n > m) {
        return Some(format!(
            "cannot be read: expected {} to {} characters",
            spec.min_length.unwrap_or(0),
            spec.max_length.unwrap_or(usize::MAX)
        ));
    }
    None
}

fn number(spec: &Spec, v: &Value) -> Option<String> {
    let n = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) if !s.trim().is_empty() => s.trim().parse::<f64>().ok(),
        Value::Bool(b) if matches!(spec.value, Kind::CoercedNumber) => {
            Some(f64::from(u8::from(*b)))
        }
        _ => None,
    };
    let Some(n) = n.filter(|n| n.is_finite()) else {
        return Some("cannot be read: expected a number".into());
    };
    let out_of_range = (spec.integer && n.fract() != 0.0)
        || spec.minimum.is_some_and(|m| n < m)
        || spec.maximum.is_some_and(|m| n > m)
        || spec.exclusive_minimum.is_some_and(|m| n <= m);
    out_of_range.then(|| {
        let mut want = String::from(if spec.integer {
            "a whole number"
        } else {
            "a number"
        });
        if let Some(m) = spec.minimum {
            want.push_str(&format!(" of at least {m}"));
        }
        if let Some(m) = spec.exclusive_minimum {
            want.push_str(&format!(" above {m}"));
        }
        if let Some(m) = spec.maximum {
            want.push_str(&format!(" of at most {m}"));
        }
        format!("cannot be read: expected {want}")
    })
}

/// `coworkEgressAllowedHosts`: a list; unusable entries are dropped by Claude Desktop, but a
/// list none of whose entries is a host name cannot be read at all.
fn hosts(v: &Value) -> Option<String> {
    let Some(a) = v.as_array() else {
        return Some("cannot be read: expected a list of host names".into());
    };
    let usable = a.iter().filter_map(Value::as_str).any(is_host_entry);
    (!a.is_empty() && !usable)
        .then(|| "cannot be read: none of its entries is a host name such as example.com or *.example.com".into())
}

fn is_host_entry(s: &str) -> bool {
    let host = s.strip_prefix("*.").unwrap_or(s);
    let host =
        host.rsplit_once(':').map_or(
            host,
            |(h, port)| {
                if port.parse::<u16>().is_ok() { h } else { host }
            },
        );
    host.contains('.')
        && host
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
}

fn is_version(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    (2..=4).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

/// `builtinToolPolicy`: a map of built-in tool to policy; entries naming no built-in tool are
/// dropped, and a map with entries none of which can be read is refused.
fn tool_policy(v: &Value, tools: &[String]) -> Option<String> {
    let Some(m) = v.as_object() else {
        return Some(
            "cannot be read: expected a mapping of built-in tool name to allow or ask".into(),
        );
    };
    let bare = |k: &str| k.split('(').next().unwrap_or(k).trim().to_owned();
    let readable = m.keys().any(|k| tools.contains(&bare(k)));
    (!m.is_empty() && !readable).then(|| {
        format!(
            "cannot be read: none of its entries names a built-in tool ({})",
            tools.join(", ")
        )
    })
}

/// Every key a gateway serves in a Desktop overlay.
#[cfg(test)]
fn servable_keys() -> Vec<&'static str> {
    data().map_or_else(Vec::new, |d| {
        d.servable.keys().map(String::as_str).collect()
    })
}

#[cfg(test)]
#[path = "desktop_overlay_tests.rs"]
mod tests;
