//! Model catalog: which model ids the gateway serves, what each upstream calls them, and
//! the built-in table of current Claude models (ids, names, prices, output limits).
//!
//! Resolution, per upstream and in order: the operator's `models[]` row (by full id or by
//! the id without its date suffix) -> that row's `upstream_model.<upstream>` -> for a known
//! Claude family (when `auto_include_builtin_models` allows) the id as that upstream names
//! it ([`provider_ids`], from the reference's table in [`reference_ids`]: the dated
//! first-party id for Anthropic) -> "not
//! configured for this upstream". A model with no row that is not a known Claude model is
//! "not in the operator's model allowlist". The two refusals are worded differently so an
//! operator can tell which list said no.

pub mod provider_ids;
pub mod reference_ids;
pub mod warnings;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::config::{ModelsConfig, UpstreamConfig};
pub use provider_ids::IdStyle;

/// Prices in nano-USD per token (USD per million tokens x 1000); web search per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    pub input: u64,
    pub output: u64,
    pub cache_write_5m: u64,
    pub cache_write_1h: u64,
    pub cache_read: u64,
    pub web_search: u64,
    /// Above this many prompt tokens the `long` prices apply to the whole request.
    pub long_prompt: Option<(u64, LongPrompt)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongPrompt {
    pub input: u64,
    pub output: u64,
    pub cache_write_5m: u64,
    pub cache_write_1h: u64,
    pub cache_read: u64,
}

/// $10 per thousand searches.
const WEB_SEARCH: u64 = 10_000_000;

/// A tier from USD-per-million prices, with the usual cache multipliers
/// (5-minute write 1.25x input, 1-hour write 2x input).
const fn tier(input_milli: u64, output_milli: u64, cache_read_milli: u64) -> Tier {
    Tier {
        input: input_milli,
        output: output_milli,
        cache_write_5m: input_milli * 5 / 4,
        cache_write_1h: input_milli * 2,
        cache_read: cache_read_milli,
        web_search: WEB_SEARCH,
        long_prompt: None,
    }
}

pub const TIER_2_10: Tier = tier(2_000, 10_000, 200);
pub const TIER_2_10_CR_010: Tier = tier(2_000, 10_000, 100);
pub const TIER_3_15: Tier = tier(3_000, 15_000, 300);
pub const TIER_4_20_CR_020: Tier = tier(4_000, 20_000, 200);
pub const TIER_5_25: Tier = tier(5_000, 25_000, 500);
pub const TIER_8_40_CR_020: Tier = tier(8_000, 40_000, 200);
pub const TIER_10_50: Tier = tier(10_000, 50_000, 1_000);
pub const TIER_10_50_CR_025: Tier = tier(10_000, 50_000, 250);
pub const TIER_15_75: Tier = tier(15_000, 75_000, 1_500);
pub const HAIKU_35: Tier = tier(800, 4_000, 80);
pub const HAIKU_45: Tier = tier(1_000, 5_000, 100);
pub const HAIKU_55: Tier = Tier {
    long_prompt: Some((
        100_000,
        LongPrompt {
            input: 500,
            output: 2_500,
            cache_write_5m: 625,
            cache_write_1h: 1_000,
            cache_read: 50,
        },
    )),
    ..tier(100, 500, 10)
};
/// Price used for a model nobody priced: $5 / $25 per million tokens.
pub const DEFAULT_TIER: Tier = TIER_5_25;

/// One built-in Claude model.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinModel {
    pub id: &'static str,
    pub family: &'static str,
    pub display_name: &'static str,
    /// Other first-party spellings (dated ids, short forms).
    pub aliases: &'static [&'static str],
    pub tier: Tier,
    /// Default and largest `max_tokens`.
    pub max_output: (u32, u32),
    /// Listed in `/v1/models` (older models are served but not advertised).
    pub listed: bool,
}

const fn m(
    id: &'static str,
    family: &'static str,
    display_name: &'static str,
    aliases: &'static [&'static str],
    tier: Tier,
    max_output: (u32, u32),
    listed: bool,
) -> BuiltinModel {
    BuiltinModel {
        id,
        family,
        display_name,
        aliases,
        tier,
        max_output,
        listed,
    }
}

/// Current Claude models, newest first within each family (as Claude Code 2.1.332 knows them).
pub const BUILTIN: &[BuiltinModel] = &[
    m(
        "claude-opus-5-5",
        "opus",
        "Opus 5.5",
        &[],
        TIER_4_20_CR_020,
        (128_000, 128_000),
        true,
    ),
    m(
        "claude-opus-5",
        "opus",
        "Opus 5",
        &[],
        TIER_5_25,
        (64_000, 128_000),
        true,
    ),
    m(
        "claude-opus-4-8",
        "opus",
        "Opus 4.8",
        &[],
        TIER_5_25,
        (64_000, 128_000),
        true,
    ),
    m(
        "claude-opus-4-7",
        "opus",
        "Opus 4.7",
        &[],
        TIER_5_25,
        (64_000, 128_000),
        true,
    ),
    m(
        "claude-opus-4-6",
        "opus",
        "Opus 4.6",
        &[],
        TIER_5_25,
        (64_000, 128_000),
        true,
    ),
    m(
        "claude-opus-4-5",
        "opus",
        "Opus 4.5",
        &["claude-opus-4-5-20251101"],
        TIER_5_25,
        (32_000, 64_000),
        true,
    ),
    m(
        "claude-opus-4-1",
        "opus",
        "Opus 4.1",
        &["claude-opus-4-1-20250805"],
        TIER_15_75,
        (32_000, 32_000),
        false,
    ),
    m(
        "claude-opus-4-0",
        "opus",
        "Opus 4",
        &["claude-opus-4", "claude-opus-4-20250514"],
        TIER_15_75,
        (32_000, 32_000),
        false,
    ),
    m(
        "claude-sonnet-5-5",
        "sonnet",
        "Sonnet 5.5",
        &[],
        TIER_2_10_CR_010,
        (128_000, 128_000),
        true,
    ),
    m(
        "claude-sonnet-5",
        "sonnet",
        "Sonnet 5",
        &[],
        TIER_2_10,
        (64_000, 128_000),
        true,
    ),
    m(
        "claude-sonnet-4-6",
        "sonnet",
        "Sonnet 4.6",
        &[],
        TIER_3_15,
        (32_000, 128_000),
        true,
    ),
    m(
        "claude-sonnet-4-5",
        "sonnet",
        "Sonnet 4.5",
        &["claude-sonnet-4-5-20250929"],
        TIER_3_15,
        (32_000, 64_000),
        true,
    ),
    m(
        "claude-sonnet-4-0",
        "sonnet",
        "Sonnet 4",
        &["claude-sonnet-4", "claude-sonnet-4-20250514"],
        TIER_3_15,
        (32_000, 64_000),
        false,
    ),
    m(
        "claude-3-7-sonnet",
        "sonnet",
        "Sonnet 3.7",
        &["claude-3-7-sonnet-20250219"],
        TIER_3_15,
        (32_000, 64_000),
        false,
    ),
    m(
        "claude-3-5-sonnet",
        "sonnet",
        "Sonnet 3.5",
        &["claude-3-5-sonnet-20241022"],
        TIER_3_15,
        (8_192, 8_192),
        false,
    ),
    m(
        "claude-haiku-5-5",
        "haiku",
        "Haiku 5.5",
        &[],
        HAIKU_55,
        (128_000, 128_000),
        true,
    ),
    m(
        "claude-haiku-4-5",
        "haiku",
        "Haiku 4.5",
        &["claude-haiku-4-5-20251001"],
        HAIKU_45,
        (32_000, 64_000),
        true,
    ),
    m(
        "claude-3-5-haiku",
        "haiku",
        "Haiku 3.5",
        &["claude-3-5-haiku-20241022"],
        HAIKU_35,
        (8_192, 8_192),
        false,
    ),
    m(
        "claude-fable-5-2",
        "fable",
        "Fable 5.2",
        &[],
        TIER_8_40_CR_020,
        (128_000, 128_000),
        true,
    ),
    m(
        "claude-fable-5-1",
        "fable",
        "Fable 5.1",
        &[],
        TIER_10_50_CR_025,
        (64_000, 128_000),
        true,
    ),
    m(
        "claude-fable-5",
        "fable",
        "Fable 5",
        &[],
        TIER_10_50,
        (64_000, 128_000),
        true,
    ),
    m(
        "claude-mythos-5-2",
        "mythos",
        "Mythos 5.2",
        &[],
        TIER_8_40_CR_020,
        (128_000, 128_000),
        true,
    ),
    m(
        "claude-mythos-5-1",
        "mythos",
        "Mythos 5.1",
        &[],
        TIER_10_50_CR_025,
        (64_000, 128_000),
        true,
    ),
    m(
        "claude-mythos-5",
        "mythos",
        "Mythos 5",
        &[],
        TIER_10_50,
        (64_000, 128_000),
        true,
    ),
];

use crate::config::CLAUDE_FAMILIES as FAMILIES;

/// Lower-case, without a `[1m]`-style suffix or a trailing `-YYYYMMDD` date.
pub fn normalize(id: &str) -> String {
    let mut s = id.trim().to_ascii_lowercase();
    if let Some(i) = s.find('[') {
        s.truncate(i);
    }
    if let Some((head, tail)) = s.rsplit_once('-')
        && tail.len() == 8
        && tail.bytes().all(|b| b.is_ascii_digit())
    {
        s.truncate(head.len());
    }
    s
}

/// The built-in model an id names, if any.
pub fn builtin(id: &str) -> Option<&'static BuiltinModel> {
    let lower = id.trim().to_ascii_lowercase();
    let norm = normalize(id);
    BUILTIN
        .iter()
        .find(|b| b.id == norm || b.aliases.iter().any(|a| *a == lower || *a == norm))
}

/// The Claude family an id belongs to (`claude-opus-9` -> `opus`), known model or not.
pub fn family(id: &str) -> Option<&'static str> {
    if let Some(b) = builtin(id) {
        return Some(b.family);
    }
    let norm = normalize(id);
    let rest = norm.strip_prefix("claude-")?;
    let (fam, version) = rest.split_once('-')?;
    let fam = FAMILIES.iter().find(|f| **f == fam)?;
    let version_ok = !version.is_empty()
        && version
            .split('-')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    version_ok.then_some(*fam)
}

/// Why no upstream can take a model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error(
        "model `{0}` is not in the operator's model allowlist (gateway config `models`); ask the operator to add it"
    )]
    NotInOperatorAllowlist(String),
    #[error(
        "model `{0}` is not configured for any upstream (gateway config `models[].upstream_model`)"
    )]
    NotConfigured(String),
    #[error("you aren't in a group that can use this gateway")]
    NoGroup,
}

/// Where a request for a model can go: `(upstream index, model id for that upstream)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    pub targets: Vec<(usize, String)>,
    /// Upstreams skipped because the model has no id there.
    pub not_configured: Vec<String>,
}

/// The operator's catalog, checked against the upstream list.
#[derive(Debug, Clone)]
pub struct Catalog {
    config: ModelsConfig,
    /// Per upstream, in order.
    upstreams: Vec<Route>,
}

/// What the catalog knows of one upstream.
#[derive(Debug, Clone)]
struct Route {
    name: String,
    style: IdStyle,
    /// `upstreams[].groups`: only people in one of these reach it.
    groups: Option<Vec<String>>,
    /// `upstreams[].models`: only these ids are sent to it.
    models: Option<Vec<String>>,
    /// `upstreams[].model_map`: the id sent for a Claude family.
    model_map: BTreeMap<String, String>,
}

/// Whether `requested` is on an upstream's `models` list: case-insensitive, one `*`
/// wildcard, and a built-in alias matches its model.
pub fn listed(patterns: &[String], requested: &str) -> bool {
    let req = requested.to_ascii_lowercase();
    let norm = normalize(requested);
    patterns.iter().any(|p| {
        let p = p.to_ascii_lowercase();
        match p.split_once('*') {
            Some((head, tail)) => {
                req.len() >= head.len() + tail.len() && req.starts_with(head) && req.ends_with(tail)
            }
            None => p == req || normalize(&p) == norm,
        }
    })
}

impl Catalog {
    pub fn new(config: &ModelsConfig, upstreams: &[UpstreamConfig]) -> Self {
        Self {
            config: config.clone(),
            upstreams: upstreams
                .iter()
                .map(|u| Route {
                    name: u.name.clone(),
                    style: IdStyle::of(&u.provider),
                    groups: u.groups.clone(),
                    models: u.models.clone(),
                    model_map: u.model_map.clone(),
                })
                .collect(),
        }
    }

    /// Where `requested` can go for a caller without groups (a key or a workload).
    pub fn resolve(&self, requested: &str) -> Result<Resolution, ModelError> {
        self.resolve_for(requested, &[])
    }

    /// Where `requested` can go for a caller in `groups`: upstreams restricted to other
    /// groups, or whose `models` list leaves the model out, are skipped.
    pub fn resolve_for(
        &self,
        requested: &str,
        groups: &[String],
    ) -> Result<Resolution, ModelError> {
        let norm = normalize(requested);
        let row = self
            .config
            .rows
            .iter()
            .find(|r| r.id == requested)
            .or_else(|| self.config.rows.iter().find(|r| normalize(&r.id) == norm));
        // Read once: it normalises the id and scans the built-in table.
        let fam = family(requested);
        let builtin_ok = self.config.auto_include_builtin && fam.is_some();
        if row.is_none() && !builtin_ok {
            return Err(ModelError::NotInOperatorAllowlist(requested.to_owned()));
        }
        let mut res = Resolution {
            targets: Vec::new(),
            not_configured: Vec::new(),
        };
        let mut group_barred = false;
        for (i, up) in self.upstreams.iter().enumerate() {
            if up
                .groups
                .as_ref()
                .is_some_and(|g| !g.iter().any(|g| groups.contains(g)))
            {
                group_barred = true;
                continue;
            }
            if up.models.as_ref().is_some_and(|m| !listed(m, requested)) {
                res.not_configured.push(up.name.clone());
                continue;
            }
            let mapped = fam.and_then(|f| up.model_map.get(f).or_else(|| up.model_map.get("*")));
            if let Some(target) = row.and_then(|r| r.upstream_model.get(&up.name)) {
                res.targets.push((i, target.clone()));
            } else if let Some(target) = mapped {
                res.targets.push((i, target.clone()));
            } else if (builtin_ok || row.is_some() && fam.is_some()) && up.style.serves(requested) {
                res.targets.push((i, up.style.id_for(requested)));
            } else {
                res.not_configured.push(up.name.clone());
            }
        }
        if res.targets.is_empty() {
            if group_barred && res.not_configured.is_empty() {
                return Err(ModelError::NoGroup);
            }
            return Err(ModelError::NotConfigured(requested.to_owned()));
        }
        Ok(res)
    }

    /// `/v1/models` body, read by Claude Code's model discovery and by OpenAI clients alike:
    /// each entry carries both shapes' fields ([`entry`]), and the list `object: "list"`.
    pub fn list(&self) -> Value {
        let mut data: Vec<Value> = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        for r in &self.config.rows {
            let display = r
                .label
                .clone()
                .or_else(|| builtin(&r.id).map(|b| format!("Claude {}", b.display_name)))
                .unwrap_or_else(|| r.id.clone());
            let mut e = entry(&r.id, &display);
            if let Some(d) = &r.description {
                e["description"] = Value::String(d.clone());
            }
            seen.push(normalize(&r.id));
            data.push(e);
        }
        if self.config.auto_include_builtin {
            for b in BUILTIN.iter().filter(|b| b.listed) {
                if !seen.iter().any(|s| s == b.id) {
                    data.push(entry(b.id, &format!("Claude {}", b.display_name)));
                }
            }
        }
        list_body(data)
    }
}

/// The `/v1/models` list around `data`: Anthropic's paging fields and OpenAI's `object`.
pub fn list_body(data: Vec<Value>) -> Value {
    let first = data.first().map(|d| d["id"].clone()).unwrap_or(Value::Null);
    let last = data.last().map(|d| d["id"].clone()).unwrap_or(Value::Null);
    json!({"object": "list", "data": data, "has_more": false, "first_id": first, "last_id": last})
}

/// One model in both shapes: Anthropic's `type`, `id`, `display_name`, `created_at` (RFC
/// 3339) and OpenAI's `object`, `created` (unix seconds), `owned_by`. The date is the one
/// in the model's dated id (`claude-sonnet-4-5-20250929`); a model without one (an
/// operator's own id, or a built-in model known only by its alias) gets the Unix epoch,
/// which says "unknown" rather than inventing a release date.
pub fn entry(id: &str, display_name: &str) -> Value {
    let known = builtin(id);
    let date = std::iter::once(id)
        .chain(known.map(|b| b.aliases).unwrap_or_default().iter().copied())
        .find_map(release_date)
        .unwrap_or_default();
    let created = date
        .and_hms_opt(0, 0, 0)
        .map_or(0, |t| t.and_utc().timestamp());
    json!({
        "type": "model",
        "object": "model",
        "id": id,
        "display_name": display_name,
        "created_at": format!("{}T00:00:00Z", date.format("%Y-%m-%d")),
        "created": created,
        "owned_by": if known.is_some() { "anthropic" } else { "gatehouse" },
    })
}

/// The date of a dated model id's `-YYYYMMDD` suffix.
fn release_date(id: &str) -> Option<chrono::NaiveDate> {
    let (_, tail) = id.rsplit_once('-')?;
    if tail.len() != 8 {
        return None;
    }
    chrono::NaiveDate::parse_from_str(tail, "%Y%m%d").ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeMap;

    use super::*;
    use crate::config::{ModelRow, Provider};

    fn upstream(name: &str) -> UpstreamConfig {
        UpstreamConfig {
            name: name.into(),
            provider: Provider::Anthropic,
            base_url: "http://127.0.0.1:1/".parse().unwrap(),
            credential: None,
            headers: Vec::new(),
            groups: None,
            models: None,
            model_map: Default::default(),
            forward_user_identity: false,
        }
    }

    fn catalog(rows: Vec<ModelRow>, auto: bool) -> Catalog {
        Catalog::new(
            &ModelsConfig {
                rows,
                auto_include_builtin: auto,
            },
            &[upstream("a"), upstream("b")],
        )
    }

    #[test]
    fn normalize_and_family() {
        assert_eq!(normalize("claude-sonnet-4-5-20250929"), "claude-sonnet-4-5");
        assert_eq!(normalize("Claude-Opus-4-8[1m]"), "claude-opus-4-8");
        assert_eq!(
            builtin("claude-sonnet-4-20250514").unwrap().id,
            "claude-sonnet-4-0"
        );
        assert_eq!(family("claude-opus-9-1"), Some("opus"));
        assert_eq!(family("claude-opus-"), None);
        assert_eq!(family("gpt-4o"), None);
        assert_eq!(family("claude-opus-x"), None);
    }

    #[test]
    fn builtin_models_pass_through_unchanged() {
        let c = catalog(vec![], true);
        let r = c.resolve("claude-sonnet-4-6").unwrap();
        assert_eq!(
            r.targets,
            vec![
                (0, "claude-sonnet-4-6".into()),
                (1, "claude-sonnet-4-6".into())
            ]
        );
    }

    #[test]
    fn operator_row_maps_per_upstream_and_refusals_differ() {
        let mut map = BTreeMap::new();
        map.insert("b".to_owned(), "corp-sonnet".to_owned());
        let rows = vec![
            ModelRow {
                id: "claude-sonnet-4-6".into(),
                label: Some("Sonnet".into()),
                description: None,
                upstream_model: map.clone(),
            },
            ModelRow {
                id: "corp-model".into(),
                label: None,
                description: Some("in-house".into()),
                upstream_model: map,
            },
        ];
        let c = catalog(rows, false);
        let r = c.resolve("claude-sonnet-4-6-20260101").unwrap();
        assert_eq!(
            r.targets,
            vec![
                (0, "claude-sonnet-4-6-20260101".into()),
                (1, "corp-sonnet".into())
            ]
        );
        let r = c.resolve("corp-model").unwrap();
        assert_eq!(r.targets, vec![(1, "corp-sonnet".into())]);
        assert_eq!(r.not_configured, vec!["a".to_owned()]);
        let e = c.resolve("claude-opus-4-8").unwrap_err();
        assert!(matches!(e, ModelError::NotInOperatorAllowlist(_)));
        assert!(e.to_string().contains("operator's model allowlist"));
        let list = c.list();
        assert_eq!(list["data"].as_array().unwrap().len(), 2);
        assert_eq!(list["data"][1]["description"], "in-house");
    }

    #[test]
    fn listing_includes_current_builtins() {
        let list = catalog(vec![], true).list();
        let ids: Vec<&str> = list["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap())
            .collect();
        assert!(ids.contains(&"claude-sonnet-4-6"));
        assert!(!ids.contains(&"claude-3-5-haiku"));
        assert!(
            list["data"][0]["display_name"]
                .as_str()
                .unwrap()
                .starts_with("Claude ")
        );
    }
}

#[cfg(test)]
mod route_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::Provider;

    fn up(name: &str, groups: Option<&[&str]>, models: Option<&[&str]>) -> UpstreamConfig {
        let v = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect();
        UpstreamConfig {
            name: name.into(),
            provider: Provider::Anthropic,
            base_url: "http://127.0.0.1:1/".parse().unwrap(),
            credential: None,
            headers: Vec::new(),
            groups: groups.map(v),
            models: models.map(v),
            model_map: BTreeMap::new(),
            forward_user_identity: false,
        }
    }

    #[test]
    fn a_model_map_names_what_an_upstream_serves_per_family() {
        let mut mapped = up("deepseek", None, None);
        mapped.model_map = [("sonnet", "deepseek-chat"), ("*", "deepseek-reasoner")]
            .iter()
            .map(|(f, m)| ((*f).to_owned(), (*m).to_owned()))
            .collect();
        let rows = vec![crate::config::ModelRow {
            id: "claude-haiku-4-5".into(),
            label: None,
            description: None,
            upstream_model: [("deepseek".to_owned(), "deepseek-lite".to_owned())].into(),
        }];
        let c = Catalog::new(
            &ModelsConfig {
                rows,
                auto_include_builtin: true,
            },
            &[up("anthropic", None, None), mapped],
        );
        let targets = |m: &str| c.resolve(m).unwrap().targets;
        assert_eq!(
            targets("claude-sonnet-4-5-20250929"),
            [
                (0, "claude-sonnet-4-5-20250929".to_owned()),
                (1, "deepseek-chat".to_owned())
            ]
        );
        assert_eq!(targets("claude-opus-4-8")[1].1, "deepseek-reasoner");
        // An operator's row still wins.
        assert_eq!(targets("claude-haiku-4-5")[1].1, "deepseek-lite");
    }

    #[test]
    fn groups_and_model_lists_narrow_the_upstreams() {
        let c = Catalog::new(
            &ModelsConfig {
                rows: vec![],
                auto_include_builtin: true,
            },
            &[
                up("research", Some(&["research"]), None),
                up("haiku-only", None, Some(&["claude-haiku-*"])),
                up("opus", None, Some(&["CLAUDE-OPUS-4-8"])),
            ],
        );
        let r = c
            .resolve_for("claude-opus-4-8", &["research".into()])
            .unwrap();
        assert_eq!(
            r.targets.iter().map(|t| t.0).collect::<Vec<_>>(),
            vec![0, 2]
        );
        assert_eq!(r.not_configured, vec!["haiku-only".to_owned()]);
        let r = c.resolve("claude-haiku-4-5").unwrap();
        assert_eq!(r.targets.iter().map(|t| t.0).collect::<Vec<_>>(), vec![1]);
        let only_group = Catalog::new(
            &ModelsConfig {
                rows: vec![],
                auto_include_builtin: true,
            },
            &[up("research", Some(&["research"]), None)],
        );
        assert_eq!(
            only_group.resolve("claude-opus-4-8").unwrap_err(),
            ModelError::NoGroup
        );
    }
}
