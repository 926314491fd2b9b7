//! The `routing` block: how upstream health steers routing (breaker, cooldown, stalled
//! streams) and when the same upstream is tried again (retry with backoff, within a budget).
//! Everything here is on by default; the block only changes the numbers.
//!
//! ```yaml
//! routing:
//!   health:
//!     enabled: true             # default true; false: no breaker, no cooldown
//!     breaker_failures: 5       # failures within the window that open an upstream's breaker
//!     breaker_window_s: 60
//!     breaker_open_s: 30        # open this long, then one trial request (half-open)
//!     cooldown_default_s: 10    # a 429 without retry-after cools the upstream this long
//!     cooldown_max_s: 600       # a longer retry-after is cut to this
//!     stream_stall_ms: 120000   # a stream silent (pings aside) this long counts as failed
//!     probe: false              # active probe: max_tokens 1 to idle upstreams, metered
//!     probe_interval_s: 300
//!     probe_model: claude-haiku-4-5
//!   retry:
//!     max_retries: 1            # same-upstream retries per request (0: off)
//!     backoff_ms: 250           # first backoff; doubles, with ±50 % jitter
//!     budget_ratio: 0.1         # retries at most this share of the last 10 s of requests
//!     budget_min: 2             # ... but always allow this many per 10 s
//!   strategy: ordered           # default: ordered | weighted | cheapest | fastest | region
//!   models: {claude-haiku-4-5: fastest}   # strategy per requested model id
//!   upstreams:                  # routing attributes per upstream name
//!     bedrock: {priority: 0, weight: 3, cost_weight: 0.8, region: eu}
//!   allow_override: {client_keys: [ci], groups: [platform]}  # x-gatehouse-strategy
//!   region_groups: {emea: eu}   # caller region by IdP group (x-gatehouse-region wins)
//!   random_seed: 7              # reproducible weighted draws (tests)
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::ConfigError;

/// `routing` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRouting {
    /// Upstream health: circuit breaker, cooldown after 429, stalled streams.
    pub health: Option<RawHealth>,
    /// Same-upstream retry of overloaded answers (529) and connection errors.
    pub retry: Option<RawRetry>,
    /// The default strategy (default `ordered`: the `upstreams` order).
    pub strategy: Option<Strategy>,
    /// A strategy per requested model id (overrides `strategy`).
    #[serde(default)]
    pub models: BTreeMap<String, Strategy>,
    /// Routing attributes per upstream name.
    #[serde(default)]
    pub upstreams: BTreeMap<String, RawUpstreamRouting>,
    /// Who may choose a request's strategy with the `x-gatehouse-strategy` header (nobody
    /// by default).
    pub allow_override: Option<RawOverride>,
    /// The caller's region by IdP group, for `region` (an `x-gatehouse-region` header wins).
    #[serde(default)]
    pub region_groups: BTreeMap<String, String>,
    /// Seed of the weighted random draws, for reproducible runs (default: from the OS).
    pub random_seed: Option<u64>,
    /// Request-aware rules, in order: the first whose `when` matches decides.
    #[serde(default)]
    pub rules: Vec<RawRule>,
    /// Conversation affinity: a conversation stays on the upstream that served it
    /// (Gatehouse addition; on by default).
    pub affinity: Option<super::shaping::RawAffinity>,
    /// Where shaping sends requests no candidate can take: images, long inputs.
    pub fallback_models: Option<super::shaping::RawFallbackModels>,
    /// The capability table's operator entries (vision, context window, output limit,
    /// server tools per upstream and model), before the built-in ones.
    #[serde(default)]
    pub capabilities: Vec<super::shaping::RawCapability>,
}

/// One rule as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    /// Named in `route_reason` (default `rules[<index>]`).
    pub name: Option<String>,
    /// Every condition given must hold (none: matches every request).
    #[serde(default)]
    pub when: RawWhen,
    /// Serve the request with this model id instead of the requested one.
    pub model: Option<String>,
    /// Only these upstreams, in this order (by name).
    pub upstreams: Option<Vec<String>>,
    /// The strategy for this request.
    pub strategy: Option<Strategy>,
}

/// A rule's conditions as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWhen {
    /// The requested model id is one of these (case-insensitive, one `*`).
    pub model: Option<Vec<String>>,
    /// The requested model's family is one of these (`opus`, `sonnet`, `haiku`).
    pub family: Option<Vec<String>>,
    /// Extended thinking is on (`thinking.type` `enabled` or `adaptive`) — or off.
    pub thinking: Option<bool>,
    /// The estimated input tokens (body bytes / 4) exceed this.
    pub input_tokens_over: Option<u64>,
    /// A tool whose `type` (or, untyped, `name`) starts with one of these is present
    /// (`*`: any tool).
    pub tools: Option<Vec<String>>,
    /// An image block is present in the messages — or none is.
    pub images: Option<bool>,
    /// A background request: the requested model is of the small, fast family (haiku) —
    /// Claude Code's own titles, summaries and checks — or not.
    pub background: Option<bool>,
    /// The caller is in one of these IdP groups.
    pub groups: Option<Vec<String>>,
    /// The client, from its user-agent: `claude-code`, `desktop`, `sdk`, `other`.
    pub client: Option<Vec<Client>>,
}

/// The client surface a request came from, by its user-agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Client {
    /// `claude-cli/…` or `claude-code/…`.
    ClaudeCode,
    /// A user-agent naming `claude-desktop`, or Electron's with `Claude/`.
    Desktop,
    /// An official SDK: `Anthropic/…` (JS, Python, Go, Java …).
    Sdk,
    /// Anything else.
    Other,
}

impl Client {
    /// Classifies a user-agent.
    pub fn from_user_agent(ua: Option<&str>) -> Self {
        let Some(ua) = ua else {
            return Client::Other;
        };
        let lower = ua.to_ascii_lowercase();
        if lower.starts_with("claude-cli/") || lower.starts_with("claude-code/") {
            Client::ClaudeCode
        } else if lower.contains("claude-desktop")
            || (lower.contains("electron/") && lower.contains("claude/"))
        {
            Client::Desktop
        } else if lower.starts_with("anthropic/") {
            Client::Sdk
        } else {
            Client::Other
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::Desktop => "desktop",
            Client::Sdk => "sdk",
            Client::Other => "other",
        }
    }
}

/// A validated rule.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rule {
    pub name: String,
    pub when: When,
    pub model: Option<String>,
    /// Upstream names, in order (empty: every upstream that serves the model).
    pub upstreams: Vec<String>,
    pub strategy: Option<Strategy>,
}

/// Validated conditions (`None`: not checked).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct When {
    pub model: Option<Vec<String>>,
    pub family: Option<Vec<String>>,
    pub thinking: Option<bool>,
    pub input_tokens_over: Option<u64>,
    pub tools: Option<Vec<String>>,
    pub images: Option<bool>,
    pub background: Option<bool>,
    pub groups: Option<Vec<String>>,
    pub client: Option<Vec<Client>>,
}

/// How the candidates for a model are put in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// The `upstreams` order.
    Ordered,
    /// Lowest `priority` band first; weighted random (`weight`) inside a band.
    Weighted,
    /// Lowest effective price first: the upstream model's input + output price per
    /// million tokens times the upstream's `cost_weight`.
    Cheapest,
    /// Lowest observed p95 time to first byte first; `weighted` until every candidate has
    /// a few samples.
    Fastest,
    /// Upstreams whose `region` is the caller's first, then `weighted`.
    Region,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Ordered => "ordered",
            Strategy::Weighted => "weighted",
            Strategy::Cheapest => "cheapest",
            Strategy::Fastest => "fastest",
            Strategy::Region => "region",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Strategy::Ordered,
            Strategy::Weighted,
            Strategy::Cheapest,
            Strategy::Fastest,
            Strategy::Region,
        ]
        .into_iter()
        .find(|k| k.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

/// `routing.upstreams.<name>` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawUpstreamRouting {
    /// Band for `weighted`: lower is tried first (default 0).
    pub priority: Option<u32>,
    /// Share inside its band for `weighted` (default 1; 0: only after the others).
    pub weight: Option<u32>,
    /// Multiplies the price for `cheapest` (default 1.0; a discount is below 1).
    pub cost_weight: Option<f64>,
    /// Region tag for `region` (e.g. `eu`).
    pub region: Option<String>,
}

/// `routing.allow_override` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawOverride {
    /// Client key ids (`client_keys[].id`) that may choose.
    #[serde(default)]
    pub client_keys: Vec<String>,
    /// IdP groups whose members may choose.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// `routing.health` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHealth {
    /// Skip upstreams whose breaker is open or that are cooling down (default true).
    pub enabled: Option<bool>,
    /// Failures within `breaker_window_s` that open an upstream's breaker (default 5).
    pub breaker_failures: Option<u32>,
    /// The failure-counting window in seconds (default 60).
    pub breaker_window_s: Option<u64>,
    /// Seconds an open breaker skips the upstream before one trial request (default 30).
    pub breaker_open_s: Option<u64>,
    /// Cooldown after a 429 that carries no `retry-after`, in seconds (default 10).
    pub cooldown_default_s: Option<u64>,
    /// The longest cooldown a `retry-after` can ask for, in seconds (default 600).
    pub cooldown_max_s: Option<u64>,
    /// A stream with no byte but pings for this long counts as a failure of its upstream
    /// (default 120000; the stream itself is not cut).
    pub stream_stall_ms: Option<u64>,
    /// Active probe: a tiny real request (`max_tokens: 1`) to each upstream that had no
    /// attempt for `probe_interval_s`, or whose breaker is due its trial; metered like any
    /// request (default false).
    pub probe: Option<bool>,
    /// Seconds between probe rounds (default 300).
    pub probe_interval_s: Option<u64>,
    /// The model the probe asks for (default `claude-haiku-4-5`).
    pub probe_model: Option<String>,
}

/// `routing.retry` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRetry {
    /// Same-upstream retries per request after a 529 or a connection error before any
    /// byte (default 1; 0 turns retries off).
    pub max_retries: Option<u32>,
    /// The first backoff in milliseconds; it doubles per retry, with ±50 % jitter (default 250).
    pub backoff_ms: Option<u64>,
    /// Retries may be at most this share of the requests of the last 10 s (default 0.1).
    pub budget_ratio: Option<f64>,
    /// Retries always allowed per 10 s, whatever the ratio (default 2).
    pub budget_min: Option<u32>,
}

/// Validated `routing`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RoutingConfig {
    pub health: HealthConfig,
    pub retry: RetryConfig,
    pub strategies: Strategies,
    pub affinity: super::shaping::Affinity,
    pub fallback_models: super::shaping::FallbackModels,
    pub capabilities: Vec<super::shaping::CapabilityRule>,
}

/// Validated strategy choices.
#[derive(Debug, Clone, PartialEq)]
pub struct Strategies {
    pub default: Strategy,
    /// By requested model id (exact).
    pub by_model: Vec<(String, Strategy)>,
    /// By upstream name (only those configured).
    pub upstreams: Vec<(String, UpstreamRouting)>,
    pub override_keys: Vec<String>,
    pub override_groups: Vec<String>,
    pub region_groups: Vec<(String, String)>,
    pub seed: Option<u64>,
    pub rules: Vec<Rule>,
}

impl Default for Strategies {
    fn default() -> Self {
        Self {
            default: Strategy::Ordered,
            by_model: Vec::new(),
            upstreams: Vec::new(),
            override_keys: Vec::new(),
            override_groups: Vec::new(),
            region_groups: Vec::new(),
            seed: None,
            rules: Vec::new(),
        }
    }
}

/// One upstream's routing attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamRouting {
    pub priority: u32,
    pub weight: u32,
    pub cost_weight: f64,
    pub region: Option<String>,
}

impl Default for UpstreamRouting {
    fn default() -> Self {
        Self {
            priority: 0,
            weight: 1,
            cost_weight: 1.0,
            region: None,
        }
    }
}

/// Validated `routing.health`.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthConfig {
    pub enabled: bool,
    pub breaker_failures: u32,
    pub breaker_window: Duration,
    pub breaker_open: Duration,
    pub cooldown_default: Duration,
    pub cooldown_max: Duration,
    pub stream_stall: Duration,
    /// The active probe's interval and model, when it is on.
    pub probe: Option<(Duration, String)>,
}

/// Validated `routing.retry`.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryConfig {
    pub max_retries: u32,
    pub backoff: Duration,
    pub budget_ratio: f64,
    pub budget_min: u32,
}

/// The window the retry budget counts requests and retries in.
pub const RETRY_BUDGET_WINDOW: Duration = Duration::from_secs(10);

impl Default for HealthConfig {
    /// What [`validate`] gives for an empty block (a test keeps them equal).
    fn default() -> Self {
        HealthConfig {
            enabled: true,
            breaker_failures: 5,
            breaker_window: Duration::from_secs(60),
            breaker_open: Duration::from_secs(30),
            cooldown_default: Duration::from_secs(10),
            cooldown_max: Duration::from_secs(600),
            stream_stall: Duration::from_millis(120_000),
            probe: None,
        }
    }
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_retries: 1,
            backoff: Duration::from_millis(250),
            budget_ratio: 0.1,
            budget_min: 2,
        }
    }
}

/// `routing`, validated against the upstream names.
pub fn validate(raw: &RawRouting, upstream_names: &[&str]) -> Result<RoutingConfig, ConfigError> {
    let d = RoutingConfig::default();
    let no_health = RawHealth::default();
    let h = raw.health.as_ref().unwrap_or(&no_health);
    let secs = |v: Option<u64>, default: Duration, max: u64, path: &str| {
        range(v, default.as_secs(), 1, max, path).map(Duration::from_secs)
    };
    let health = HealthConfig {
        enabled: h.enabled.unwrap_or(d.health.enabled),
        breaker_failures: range(
            h.breaker_failures.map(u64::from),
            u64::from(d.health.breaker_failures),
            1,
            1000,
            "routing.health.breaker_failures",
        )? as u32,
        breaker_window: secs(
            h.breaker_window_s,
            d.health.breaker_window,
            86_400,
            "routing.health.breaker_window_s",
        )?,
        breaker_open: secs(
            h.breaker_open_s,
            d.health.breaker_open,
            86_400,
            "routing.health.breaker_open_s",
        )?,
        cooldown_default: range(
            h.cooldown_default_s,
            d.health.cooldown_default.as_secs(),
            0,
            86_400,
            "routing.health.cooldown_default_s",
        )
        .map(Duration::from_secs)?,
        cooldown_max: secs(
            h.cooldown_max_s,
            d.health.cooldown_max,
            86_400,
            "routing.health.cooldown_max_s",
        )?,
        stream_stall: range(
            h.stream_stall_ms,
            d.health.stream_stall.as_millis() as u64,
            100,
            3_600_000,
            "routing.health.stream_stall_ms",
        )
        .map(Duration::from_millis)?,
        probe: match h.probe {
            Some(true) => Some((
                secs(
                    h.probe_interval_s,
                    Duration::from_secs(300),
                    86_400,
                    "routing.health.probe_interval_s",
                )?,
                h.probe_model
                    .clone()
                    .filter(|m| !m.trim().is_empty())
                    .unwrap_or_else(|| "claude-haiku-4-5".to_owned()),
            )),
            _ => None,
        },
    };
    let r = raw.retry.as_ref();
    let ratio = r
        .and_then(|r| r.budget_ratio)
        .unwrap_or(d.retry.budget_ratio);
    if !(0.0..=1.0).contains(&ratio) {
        return Err(ConfigError::at(
            "routing.retry.budget_ratio",
            "must be between 0 and 1",
        ));
    }
    let retry = RetryConfig {
        max_retries: range(
            r.and_then(|r| r.max_retries).map(u64::from),
            u64::from(d.retry.max_retries),
            0,
            5,
            "routing.retry.max_retries",
        )? as u32,
        backoff: range(
            r.and_then(|r| r.backoff_ms),
            d.retry.backoff.as_millis() as u64,
            1,
            60_000,
            "routing.retry.backoff_ms",
        )
        .map(Duration::from_millis)?,
        budget_ratio: ratio,
        budget_min: range(
            r.and_then(|r| r.budget_min).map(u64::from),
            u64::from(d.retry.budget_min),
            0,
            10_000,
            "routing.retry.budget_min",
        )? as u32,
    };
    let strategies = strategies(raw, upstream_names)?;
    Ok(RoutingConfig {
        health,
        retry,
        strategies,
        affinity: super::shaping::affinity(raw.affinity.as_ref())?,
        fallback_models: super::shaping::fallback_models(raw.fallback_models.as_ref())?,
        capabilities: super::shaping::capabilities(&raw.capabilities, upstream_names)?,
    })
}

fn strategies(raw: &RawRouting, upstream_names: &[&str]) -> Result<Strategies, ConfigError> {
    let mut upstreams = Vec::new();
    for (name, u) in &raw.upstreams {
        let path = format!("routing.upstreams.{name}");
        if !upstream_names.contains(&name.as_str()) {
            return Err(ConfigError::at(&path, "no upstream has this name"));
        }
        let cost_weight = u.cost_weight.unwrap_or(1.0);
        if !(cost_weight.is_finite() && cost_weight > 0.0 && cost_weight <= 1000.0) {
            return Err(ConfigError::at(
                &format!("{path}.cost_weight"),
                "must be above 0 and at most 1000",
            ));
        }
        let weight = u.weight.unwrap_or(1);
        if weight > 10_000 {
            return Err(ConfigError::at(
                &format!("{path}.weight"),
                "must be at most 10000",
            ));
        }
        if u.region.as_deref().is_some_and(|r| r.trim().is_empty()) {
            return Err(ConfigError::at(
                &format!("{path}.region"),
                "must not be empty",
            ));
        }
        upstreams.push((
            name.clone(),
            UpstreamRouting {
                priority: u.priority.unwrap_or(0),
                weight,
                cost_weight,
                region: u.region.clone(),
            },
        ));
    }
    let o = raw.allow_override.as_ref();
    Ok(Strategies {
        default: raw.strategy.unwrap_or(Strategy::Ordered),
        by_model: raw.models.iter().map(|(m, s)| (m.clone(), *s)).collect(),
        upstreams,
        override_keys: o.map(|o| o.client_keys.clone()).unwrap_or_default(),
        override_groups: o.map(|o| o.groups.clone()).unwrap_or_default(),
        region_groups: raw
            .region_groups
            .iter()
            .map(|(g, r)| (g.clone(), r.clone()))
            .collect(),
        seed: raw.random_seed,
        rules: rules(&raw.rules, upstream_names)?,
    })
}

fn rules(raw: &[RawRule], upstream_names: &[&str]) -> Result<Vec<Rule>, ConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    for (i, r) in raw.iter().enumerate() {
        let path = format!("routing.rules[{i}]");
        if r.model.is_none() && r.upstreams.is_none() && r.strategy.is_none() {
            return Err(ConfigError::at(
                &path,
                "a rule needs `model`, `upstreams` or `strategy`",
            ));
        }
        let upstreams = r.upstreams.clone().unwrap_or_default();
        if r.upstreams.is_some() && upstreams.is_empty() {
            return Err(ConfigError::at(
                &format!("{path}.upstreams"),
                "must not be empty",
            ));
        }
        for (j, u) in upstreams.iter().enumerate() {
            if !upstream_names.contains(&u.as_str()) {
                return Err(ConfigError::at(
                    &format!("{path}.upstreams[{j}]"),
                    format!("no upstream is named `{u}`"),
                ));
            }
        }
        if r.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
            return Err(ConfigError::at(
                &format!("{path}.model"),
                "must not be empty",
            ));
        }
        let w = &r.when;
        for (key, list) in [
            ("model", &w.model),
            ("family", &w.family),
            ("tools", &w.tools),
            ("groups", &w.groups),
        ] {
            if list
                .as_ref()
                .is_some_and(|l| l.is_empty() || l.iter().any(|v| v.trim().is_empty()))
            {
                return Err(ConfigError::at(
                    &format!("{path}.when.{key}"),
                    "must be a non-empty list of non-empty values",
                ));
            }
        }
        out.push(Rule {
            name: r.name.clone().unwrap_or_else(|| format!("rules[{i}]")),
            when: When {
                model: w.model.clone(),
                family: w
                    .family
                    .as_ref()
                    .map(|f| f.iter().map(|v| v.to_ascii_lowercase()).collect()),
                thinking: w.thinking,
                input_tokens_over: w.input_tokens_over,
                tools: w.tools.clone(),
                images: w.images,
                background: w.background,
                groups: w.groups.clone(),
                client: w.client.clone(),
            },
            model: r.model.clone(),
            upstreams,
            strategy: r.strategy,
        });
    }
    Ok(out)
}

fn range(v: Option<u64>, default: u64, min: u64, max: u64, path: &str) -> Result<u64, ConfigError> {
    let v = v.unwrap_or(default);
    if v < min || v > max {
        return Err(ConfigError::at(
            path,
            format!("must be between {min} and {max}"),
        ));
    }
    Ok(v)
}

impl HealthConfig {
    /// The defaults, for tests elsewhere in the crate.
    #[cfg(test)]
    pub(crate) fn default_for_tests() -> Self {
        HealthConfig::default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn empty_block_gives_the_defaults() {
        assert_eq!(
            validate(&RawRouting::default(), &[]).unwrap(),
            RoutingConfig::default()
        );
    }

    #[test]
    fn rules_and_upstreams_are_checked_against_the_upstream_names() {
        let check = |v: serde_json::Value| {
            let raw: RawRouting = serde_json::from_value(v).unwrap();
            validate(&raw, &["anthropic", "bedrock"]).map_err(|e| e.to_string())
        };
        let e = check(serde_json::json!({"rules": [{"when": {"thinking": true}}]})).unwrap_err();
        assert!(e.contains("routing.rules[0]") && e.contains("needs"), "{e}");
        let e = check(serde_json::json!({"rules": [{"upstreams": ["anthropic", "vertex"]}]}))
            .unwrap_err();
        assert!(e.contains("routing.rules[0].upstreams[1]"), "{e}");
        let e = check(serde_json::json!({"upstreams": {"vertex": {"weight": 2}}})).unwrap_err();
        assert!(e.contains("routing.upstreams.vertex"), "{e}");
        let e =
            check(serde_json::json!({"upstreams": {"bedrock": {"cost_weight": 0}}})).unwrap_err();
        assert!(e.contains("routing.upstreams.bedrock.cost_weight"), "{e}");
        let e =
            check(serde_json::json!({"rules": [{"when": {"tools": []}, "strategy": "cheapest"}]}))
                .unwrap_err();
        assert!(e.contains("routing.rules[0].when.tools"), "{e}");
        let ok = check(serde_json::json!({
            "strategy": "weighted",
            "rules": [{"name": "bg", "when": {"background": true, "client": ["claude-code"]},
                       "model": "claude-haiku-4-5", "upstreams": ["bedrock"]}]
        }))
        .unwrap();
        assert_eq!(ok.strategies.default, Strategy::Weighted);
        assert_eq!(ok.strategies.rules[0].name, "bg");
        assert_eq!(
            ok.strategies.rules[0].when.client,
            Some(vec![Client::ClaudeCode])
        );
        assert!(
            serde_json::from_value::<RawRouting>(serde_json::json!({"strategy": "fastest-ish"}))
                .is_err()
        );
    }

    #[test]
    fn errors_name_the_field() {
        let raw: RawRouting =
            serde_json::from_value(serde_json::json!({"retry": {"budget_ratio": 2.0}})).unwrap();
        let e = validate(&raw, &[]).unwrap_err().to_string();
        assert!(e.contains("routing.retry.budget_ratio"), "{e}");
        let raw: RawRouting =
            serde_json::from_value(serde_json::json!({"health": {"breaker_failures": 0}})).unwrap();
        let e = validate(&raw, &[]).unwrap_err().to_string();
        assert!(e.contains("routing.health.breaker_failures"), "{e}");
        assert!(
            serde_json::from_value::<RawRouting>(serde_json::json!({"health": {"nope": 1}}))
                .is_err()
        );
    }
}
