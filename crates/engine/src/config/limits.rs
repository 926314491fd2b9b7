//! `rate_limits.inference` (traffic limits per group, person, client key or workload),
//! `idempotency` and `metrics`: raw forms and their validation.

use std::net::SocketAddr;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::ConfigError;

/// Concurrent inference requests per client key when no rule sets `concurrent` (as the
/// reference's per-key default).
pub const DEFAULT_CLIENT_KEY_CONCURRENCY: u32 = 50;
/// How long an `Idempotency-Key` is remembered by default (24 h).
pub const DEFAULT_IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 3600);
/// How much of an answer is recorded for a replay by default (1 MiB).
pub const DEFAULT_IDEMPOTENCY_MAX_BODY: usize = 1024 * 1024;
/// How long a duplicate waits for the first request by default.
pub const DEFAULT_IDEMPOTENCY_WAIT: Duration = Duration::from_secs(30);

/// One entry of `rate_limits.inference`: who it applies to and their limits.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawInferenceLimit {
    /// Who the entry applies to; absent or empty matches every caller (a catch-all).
    #[serde(rename = "match", default)]
    pub matcher: RawLimitMatch,
    /// Requests per minute (a token bucket refilled at rpm/60 per second).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub rpm: Option<u32>,
    /// Tokens per minute (input + cache writes + output; charged at admission from the
    /// estimate, corrected to the usage row's tokens at settlement).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub tpm: Option<u64>,
    /// Tokens per UTC day.
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub daily_tokens: Option<u64>,
    /// Requests in flight at once (a slot held until the response ends).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub concurrent: Option<u32>,
    /// Size of the rpm bucket (default: rpm).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub burst: Option<u32>,
}

/// `match` of a limit: a caller matches when any listed criterion fits it.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLimitMatch {
    /// Signed-in people in any of these groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Signed-in people by email or subject (case-insensitive).
    #[serde(default)]
    pub users: Vec<String>,
    /// Client keys by id (`local` is the per-install key).
    #[serde(default)]
    pub client_keys: Vec<String>,
    /// Workload callers by subject; `*` matches every workload caller.
    #[serde(default)]
    pub workload: Vec<String>,
}

/// `idempotency`: replays of POSTs carrying `Idempotency-Key` (Gatehouse addition).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawIdempotency {
    /// Honour `Idempotency-Key` (default true).
    pub enabled: Option<bool>,
    /// How long a key and its recorded answer are kept (default 86400).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub ttl_seconds: Option<u64>,
    /// The most of an answer recorded for replay (default 1048576); a longer answer is not
    /// replayed (its key answers 409 until it expires).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub max_body_bytes: Option<u64>,
    /// How long a duplicate waits for the first request to finish before 409 (default 30).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub wait_seconds: Option<u64>,
}

/// `metrics`: an optional listener serving only `GET /metrics` (Gatehouse addition).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    /// `host:port` of a separate listener that serves `GET /metrics` without a key (keep it
    /// on loopback or a private network).
    pub listen: Option<String>,
}

/// Who a limit applies to (validated: names trimmed, users lower-case).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitMatch {
    pub groups: Vec<String>,
    pub users: Vec<String>,
    pub client_keys: Vec<String>,
    pub workload: Vec<String>,
}

impl LimitMatch {
    /// Matches every caller.
    pub fn is_catch_all(&self) -> bool {
        self.groups.is_empty()
            && self.users.is_empty()
            && self.client_keys.is_empty()
            && self.workload.is_empty()
    }
}

/// One validated inference limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRule {
    pub matcher: LimitMatch,
    pub rpm: Option<u32>,
    /// The rpm bucket's size (rpm when not set).
    pub burst: u32,
    pub tpm: Option<u64>,
    pub daily_tokens: Option<u64>,
    pub concurrent: Option<u32>,
}

/// `rate_limits.inference` and the per-key default concurrency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InferenceLimits {
    pub rules: Vec<LimitRule>,
    /// Concurrency of a client key no rule limits (`None`: unlimited).
    pub client_key_concurrency: Option<u32>,
    /// Refuse when the store cannot answer (`rate_limits.fail_closed`).
    pub fail_closed: bool,
}

impl Default for InferenceLimits {
    fn default() -> Self {
        Self {
            rules: Vec::new(),
            client_key_concurrency: Some(DEFAULT_CLIENT_KEY_CONCURRENCY),
            fail_closed: false,
        }
    }
}

/// `idempotency`, validated (`None` in the config when disabled).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyConfig {
    pub ttl: Duration,
    pub max_body_bytes: usize,
    pub wait: Duration,
}

impl Default for IdempotencyConfig {
    fn default() -> Self {
        Self {
            ttl: DEFAULT_IDEMPOTENCY_TTL,
            max_body_bytes: DEFAULT_IDEMPOTENCY_MAX_BODY,
            wait: DEFAULT_IDEMPOTENCY_WAIT,
        }
    }
}

fn names(list: &[String], path: &str, lower: bool) -> Result<Vec<String>, ConfigError> {
    list.iter()
        .enumerate()
        .map(|(i, n)| {
            let n = n.trim();
            if n.is_empty() {
                return Err(ConfigError::at(
                    &format!("{path}[{i}]"),
                    "must not be empty",
                ));
            }
            Ok(if lower {
                n.to_lowercase()
            } else {
                n.to_owned()
            })
        })
        .collect()
}

fn positive<T: PartialEq + Default>(v: Option<T>, path: &str) -> Result<Option<T>, ConfigError> {
    match v {
        Some(n) if n == T::default() => Err(ConfigError::at(path, "must be greater than 0")),
        v => Ok(v),
    }
}

fn rule(raw: &RawInferenceLimit, path: &str) -> Result<LimitRule, ConfigError> {
    let m = &raw.matcher;
    let matcher = LimitMatch {
        groups: names(&m.groups, &format!("{path}.match.groups"), false)?,
        users: names(&m.users, &format!("{path}.match.users"), true)?,
        client_keys: names(&m.client_keys, &format!("{path}.match.client_keys"), false)?,
        workload: names(&m.workload, &format!("{path}.match.workload"), false)?,
    };
    let rpm = positive(raw.rpm, &format!("{path}.rpm"))?;
    let burst = positive(raw.burst, &format!("{path}.burst"))?;
    let tpm = positive(raw.tpm, &format!("{path}.tpm"))?;
    let daily_tokens = positive(raw.daily_tokens, &format!("{path}.daily_tokens"))?;
    let concurrent = positive(raw.concurrent, &format!("{path}.concurrent"))?;
    let burst = match (rpm, burst) {
        (None, Some(_)) => {
            return Err(ConfigError::at(
                &format!("{path}.burst"),
                "only applies with `rpm` (it is the size of the rpm bucket)",
            ));
        }
        (Some(r), b) => b.unwrap_or(r),
        (None, None) => 0,
    };
    if rpm.is_none() && tpm.is_none() && daily_tokens.is_none() && concurrent.is_none() {
        return Err(ConfigError::at(
            path,
            "sets no limit (give rpm, tpm, daily_tokens or concurrent)",
        ));
    }
    Ok(LimitRule {
        matcher,
        rpm,
        burst,
        tpm,
        daily_tokens,
        concurrent,
    })
}

/// `rate_limits.inference` and `rate_limits.client_key_concurrency`.
pub fn validate(
    raw: &[RawInferenceLimit],
    client_key_concurrency: Option<u32>,
    fail_closed: Option<bool>,
) -> Result<InferenceLimits, ConfigError> {
    let mut rules = Vec::with_capacity(raw.len());
    let mut catch_all: Option<usize> = None;
    for (i, r) in raw.iter().enumerate() {
        let path = format!("rate_limits.inference[{i}]");
        if let Some(c) = catch_all {
            return Err(ConfigError::at(
                &path,
                format!("is never reached: rate_limits.inference[{c}] matches every caller"),
            ));
        }
        let rule = rule(r, &path)?;
        if rule.matcher.is_catch_all() {
            catch_all = Some(i);
        }
        rules.push(rule);
    }
    Ok(InferenceLimits {
        rules,
        client_key_concurrency: match client_key_concurrency {
            None => Some(DEFAULT_CLIENT_KEY_CONCURRENCY),
            Some(0) => None,
            Some(n) => Some(n),
        },
        fail_closed: fail_closed.unwrap_or(false),
    })
}

/// `idempotency`: `None` when switched off.
pub fn validate_idempotency(
    raw: Option<&RawIdempotency>,
) -> Result<Option<IdempotencyConfig>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(Some(IdempotencyConfig::default()));
    };
    if raw.enabled == Some(false) {
        return Ok(None);
    }
    let d = IdempotencyConfig::default();
    let ttl = positive(raw.ttl_seconds, "idempotency.ttl_seconds")?;
    if ttl.is_some_and(|t| t > 30 * 24 * 3600) {
        return Err(ConfigError::at(
            "idempotency.ttl_seconds",
            "must be at most 2592000 (30 days)",
        ));
    }
    let max = positive(raw.max_body_bytes, "idempotency.max_body_bytes")?;
    if max.is_some_and(|m| m > 64 * 1024 * 1024) {
        return Err(ConfigError::at(
            "idempotency.max_body_bytes",
            "must be at most 67108864 (64 MiB)",
        ));
    }
    let wait = raw.wait_seconds.unwrap_or(d.wait.as_secs());
    if wait > 600 {
        return Err(ConfigError::at(
            "idempotency.wait_seconds",
            "must be at most 600",
        ));
    }
    Ok(Some(IdempotencyConfig {
        ttl: ttl.map_or(d.ttl, Duration::from_secs),
        max_body_bytes: max.map_or(d.max_body_bytes, |m| {
            usize::try_from(m).unwrap_or(d.max_body_bytes)
        }),
        wait: Duration::from_secs(wait),
    }))
}

/// `metrics.listen`: the separate metrics listener's address, if any.
pub fn validate_metrics(raw: Option<&RawMetrics>) -> Result<Option<SocketAddr>, ConfigError> {
    let Some(listen) = raw.and_then(|m| m.listen.as_deref()) else {
        return Ok(None);
    };
    listen.trim().parse().map(Some).map_err(|_| {
        ConfigError::at(
            "metrics.listen",
            format!("`{listen}` is not a host:port address (e.g. 127.0.0.1:9464)"),
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn limit(matcher: RawLimitMatch, rpm: Option<u32>) -> RawInferenceLimit {
        RawInferenceLimit {
            matcher,
            rpm,
            ..Default::default()
        }
    }

    #[test]
    fn rules_after_a_catch_all_are_refused() {
        let raw = [
            limit(Default::default(), Some(5)),
            limit(Default::default(), Some(1)),
        ];
        let e = validate(&raw, None, None).unwrap_err();
        assert_eq!(e.path, "rate_limits.inference[1]");
    }

    #[test]
    fn zero_limits_and_lone_burst_name_their_path() {
        let e = validate(&[limit(Default::default(), Some(0))], None, None).unwrap_err();
        assert_eq!(e.path, "rate_limits.inference[0].rpm");
        let raw = RawInferenceLimit {
            burst: Some(3),
            tpm: Some(10),
            ..Default::default()
        };
        assert_eq!(
            validate(&[raw], None, None).unwrap_err().path,
            "rate_limits.inference[0].burst"
        );
        let e = validate(&[RawInferenceLimit::default()], None, None).unwrap_err();
        assert_eq!(e.path, "rate_limits.inference[0]");
    }

    #[test]
    fn defaults_and_zero_key_concurrency() {
        let v = validate(&[], None, None).unwrap();
        assert_eq!(v.client_key_concurrency, Some(50));
        assert_eq!(
            validate(&[], Some(0), None).unwrap().client_key_concurrency,
            None
        );
        let m = RawLimitMatch {
            users: vec![" Ada@Example.com ".into()],
            ..Default::default()
        };
        let v = validate(&[limit(m, Some(4))], None, None).unwrap();
        assert_eq!(v.rules[0].matcher.users, ["ada@example.com"]);
        assert_eq!(v.rules[0].burst, 4);
    }
}
