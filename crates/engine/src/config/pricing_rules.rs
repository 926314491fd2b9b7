//! `pricing`, checked as the reference (Claude Code 2.1.334 and later) checks it.
//!
//! Numbers: every `pricing` number is read as JavaScript's `Number()` reads it (the
//! reference's coercing number type): `"3.5"`, `" 3 "`, `"1e3"`, `"0x10"`, `true` (1) and a
//! one-item list `[5]` are numbers; `""`, `null` and `false` are 0; `"abc"`, `"1_000"` and
//! a mapping are not numbers. Then:
//! - `multiplier` in (0, 10] (above 1 is a markup, warned about in `warnings`);
//! - each override rate (`input`, `output`, `cache_read`, `cache_write`, `cache_write_5m`,
//!   `cache_write_1h`, and the `long_prompt` rates) in (0, 10000] USD per million tokens;
//!   `long_prompt.above_prompt_tokens` an integer above 0;
//! - an override's 5-minute cache-write price is `cache_write_5m` else `cache_write`, its
//!   1-hour one `cache_write_1h` else `cache_write`: when either resolves to nothing, an
//!   issue at the override (`pricing.overrides[N]`);
//! - no two overrides for the same upstream and model (ids compared ignoring case here;
//!   the same built-in model under two spellings is `metering::price_warnings`' check, as
//!   the config module does not know the model table);
//! - a `pricing` key (even `pricing: {}`) needs `admin` or a `managed` block with a
//!   policy (or `settings`) — the two places prices act.
//!
//! Gatehouse's own keys, which no reference file has: an override without `upstream`
//! (any upstream), without `cache_read` (a tenth of `input`), with `web_search` (USD per
//! search, 0 or more); `pricing.default` (its omitted cache prices derive from `input`).
//! Gatehouse also meters for its own extensions (`client_keys`, the SQLite store), so a
//! file using one of those may price without `admin` or `managed`.

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_yaml_ng::Value;

use super::lenient::js_string_number;
use super::raw::{RawConfig, RawLongPrompt, RawPrice, RawPriceOverride, RawPricing};
use super::{
    ConfigError, ConfigIssue, LongPromptPrices, PriceOverride, Prices, PricingConfig,
    UpstreamConfig,
};

/// The highest rate, USD per million tokens.
const MAX_RATE: f64 = 10_000.0;
/// The highest `multiplier`.
const MAX_MULTIPLIER: f64 = 10.0;
/// The highest `web_search` price, USD per search (Gatehouse's key).
const MAX_SEARCH_PRICE: f64 = 1_000.0;
/// A search's price when nothing sets it: $10 per thousand.
const DEFAULT_SEARCH_NANO: u64 = 10_000_000;

/// The reference's message when an override's cache-write prices do not resolve.
pub const CACHE_WRITE_UNRESOLVED: &str = "set cache_write_5m and cache_write_1h, or cache_write as the price for whichever of them is not set";

/// A `pricing` number (`#[serde(default, deserialize_with)]`): absent is `None`; present,
/// even `null`, is a number, NaN when it is not one (refused, with a missing required
/// one, by the checks below, so that every bad key is named).
pub fn opt_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Ok(Some(js_number(&Value::deserialize(d)?)))
}

/// A mapping where the reference wants an object: `null` is refused, not a default.
pub fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(Shaped(PhantomData, "object"))
}

/// The `pricing` block: a mapping, marked as written.
pub fn block<'de, D: Deserializer<'de>>(d: D) -> Result<RawPricing, D::Error> {
    let mut pricing: RawPricing = object(d)?;
    pricing.written = true;
    Ok(pricing)
}

/// [`object`] for an optional key (`#[serde(default, deserialize_with)]`).
pub fn opt_object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    object(d).map(Some)
}

/// A list where the reference wants an array: `null` is refused, not an empty list.
pub fn list<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    d.deserialize_any(Shaped(PhantomData, "array"))
}

/// Hands a mapping (or a list) on to `T`'s own deserializer, so the paths of the errors
/// inside are kept; `null` is refused with the reference's words (`object`, `array`).
struct Shaped<T>(PhantomData<T>, &'static str);

impl<'de, T: Deserialize<'de>> Visitor<'de> for Shaped<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an {}", self.1)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        T::deserialize(SeqAccessDeserializer::new(seq))
    }

    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Err(E::custom(format!("Expected {}, received null", self.1)))
    }
}

/// JavaScript's `Number(v)` for a YAML value.
pub fn js_number(v: &Value) -> f64 {
    match v {
        Value::Null => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::String(s) => js_string_number(s),
        // A list is its items joined with commas, then read as text.
        Value::Sequence(items) => js_list_text(items).map_or(f64::NAN, |t| js_string_number(&t)),
        Value::Tagged(t) => js_number(&t.value),
        Value::Mapping(_) => f64::NAN,
    }
}

/// `String(list)` as JavaScript writes it, when it could be a number's text at all.
fn js_list_text(items: &[Value]) -> Option<String> {
    let mut parts = Vec::with_capacity(items.len());
    for item in items {
        parts.push(match item {
            Value::Null => String::new(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.as_f64()?.to_string(),
            Value::String(s) => s.clone(),
            Value::Sequence(inner) => js_list_text(inner)?,
            Value::Tagged(_) | Value::Mapping(_) => return None,
        });
    }
    Some(parts.join(","))
}

/// `v` checked against (0, `max`], with the reference's messages.
fn positive_at_most(v: f64, max: f64) -> Result<f64, String> {
    if v.is_nan() {
        Err("Expected number, received nan".to_owned())
    } else if v <= 0.0 {
        Err("Number must be greater than 0".to_owned())
    } else if v > max {
        Err(format!("Number must be less than or equal to {max}"))
    } else {
        Ok(v)
    }
}

pub fn multiplier(raw: &RawConfig) -> Result<f64, ConfigError> {
    match raw.pricing.multiplier {
        None => Ok(1.0),
        Some(m) => positive_at_most(m, MAX_MULTIPLIER)
            .map_err(|message| ConfigError::at("pricing.multiplier", message)),
    }
}

pub fn needs_a_consumer(raw: &RawConfig) -> Result<(), ConfigError> {
    let managed = raw.managed.as_ref().is_some_and(|m| {
        m.policies
            .as_ref()
            .map_or(m.settings.is_some(), |p| !p.is_empty())
    });
    let gatehouse_metering = !raw.client_keys.is_empty() || raw.store.postgres_url.is_none();
    if raw.pricing.written && raw.admin.is_none() && !managed && !gatehouse_metering {
        return Err(ConfigError::at(
            "pricing",
            "prices act only on spend limits (admin) and on the modelPricing pushed in managed settings: add an admin block or a managed policy, or remove pricing",
        ));
    }
    Ok(())
}

/// The issues of one section, collected so every one is reported.
#[derive(Default)]
struct Found(Vec<ConfigIssue>);

impl Found {
    fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigIssue {
            path: path.into(),
            message: message.into(),
        });
    }

    /// A rate in nano-USD per token (USD per million tokens x 1000), 0 after an issue.
    fn rate(&mut self, v: f64, path: &str) -> u64 {
        match positive_at_most(v, MAX_RATE) {
            Ok(v) => (v * 1000.0).round() as u64,
            Err(message) => {
                self.add(path, message);
                0
            }
        }
    }

    /// An optional rate.
    fn opt_rate(&mut self, v: Option<f64>, path: &str) -> Option<u64> {
        v.map(|v| self.rate(v, path))
    }

    /// A required rate.
    fn required(&mut self, v: Option<f64>, path: &str) -> u64 {
        match v {
            Some(v) => self.rate(v, path),
            None => {
                self.add(path, "Required: a number");
                0
            }
        }
    }

    /// `web_search` (Gatehouse's key) in nano-USD per search.
    fn search_price(&mut self, v: Option<f64>, at: &str) -> u64 {
        match v {
            None => DEFAULT_SEARCH_NANO,
            Some(v) if (0.0..=MAX_SEARCH_PRICE).contains(&v) => (v * 1e9).round() as u64,
            Some(_) => {
                self.add(
                    format!("{at}.web_search"),
                    format!("must be a price in USD per search, from 0 to {MAX_SEARCH_PRICE}"),
                );
                0
            }
        }
    }
}

/// The whole `pricing` block.
pub fn pricing(
    raw: &RawConfig,
    upstreams: &[UpstreamConfig],
) -> Result<PricingConfig, ConfigError> {
    let mut found = Found::default();
    let multiplier = multiplier(raw).unwrap_or_else(|e| {
        found.0.extend(e.issues());
        1.0
    });
    if let Err(e) = needs_a_consumer(raw) {
        found.0.extend(e.issues());
    }
    // (upstream, model ignoring case) -> the first override's model, as written.
    let mut seen: HashMap<(Option<&str>, String), &str> = HashMap::new();
    let mut overrides = Vec::with_capacity(raw.pricing.overrides.len());
    for (i, o) in raw.pricing.overrides.iter().enumerate() {
        let at = format!("pricing.overrides[{i}]");
        scope(o, &at, upstreams, &mut found);
        let key = (o.upstream.as_deref(), o.model.to_lowercase());
        if let Some(first) = seen.get(&key) {
            found.add(
                &at,
                format!(
                    "duplicates the pricing override for '{first}' on upstream '{}'",
                    o.upstream.as_deref().unwrap_or("(any)")
                ),
            );
        } else {
            seen.insert(key, &o.model);
        }
        let price = override_prices(o, &at, &mut found);
        overrides.push(PriceOverride {
            upstream: o.upstream.clone(),
            model: o.model.clone(),
            price,
        });
    }
    let default = raw
        .pricing
        .default
        .as_ref()
        .map(|p| default_prices(p, "pricing.default", &mut found));
    match ConfigError::from_issues(found.0) {
        Some(e) => Err(e),
        None => Ok(PricingConfig {
            multiplier,
            overrides,
            default,
        }),
    }
}

/// An override's `model` and `upstream`.
fn scope(o: &RawPriceOverride, at: &str, upstreams: &[UpstreamConfig], found: &mut Found) {
    if o.model.is_empty() {
        found.add(
            format!("{at}.model"),
            "String must contain at least 1 character(s)",
        );
    }
    match o.upstream.as_deref() {
        Some("") => found.add(
            format!("{at}.upstream"),
            "String must contain at least 1 character(s)",
        ),
        Some(name) if !upstreams.iter().any(|u| u.name == name) => found.add(
            format!("{at}.upstream"),
            format!("no upstream is named `{name}`"),
        ),
        _ => {}
    }
}

/// An override's prices: cache writes resolved as the module doc says.
fn override_prices(o: &RawPriceOverride, at: &str, found: &mut Found) -> Prices {
    let input = found.required(o.input, &format!("{at}.input"));
    let output = found.required(o.output, &format!("{at}.output"));
    let cache_read = found
        .opt_rate(o.cache_read, &format!("{at}.cache_read"))
        .unwrap_or(input / 10);
    let both = found.opt_rate(o.cache_write, &format!("{at}.cache_write"));
    let cw5 = found.opt_rate(o.cache_write_5m, &format!("{at}.cache_write_5m"));
    let cw1 = found.opt_rate(o.cache_write_1h, &format!("{at}.cache_write_1h"));
    let (cache_write_5m, cache_write_1h) = match (cw5.or(both), cw1.or(both)) {
        (Some(a), Some(b)) => (a, b),
        _ => {
            found.add(at, CACHE_WRITE_UNRESOLVED);
            (0, 0)
        }
    };
    Prices {
        input,
        output,
        cache_read,
        cache_write_5m,
        cache_write_1h,
        web_search: found.search_price(o.web_search, at),
        long_prompt: o
            .long_prompt
            .as_ref()
            .map(|l| long_prompt(l, &format!("{at}.long_prompt"), found)),
    }
}

fn long_prompt(l: &RawLongPrompt, at: &str, found: &mut Found) -> LongPromptPrices {
    let above = &format!("{at}.above_prompt_tokens");
    let Some(threshold) = l.above_prompt_tokens else {
        found.add(above, "Required: a number");
        return long_prompt_rates(l, at, 0, found);
    };
    let above_prompt_tokens = match positive_at_most(threshold, f64::INFINITY) {
        Err(message) => {
            found.add(above, message);
            0
        }
        Ok(v) if v.fract() != 0.0 => {
            found.add(above, "Expected integer, received float");
            0
        }
        // Saturates: a threshold past u64 is never crossed.
        Ok(v) => v as u64,
    };
    long_prompt_rates(l, at, above_prompt_tokens, found)
}

/// The five rates of a `long_prompt`, all required.
fn long_prompt_rates(
    l: &RawLongPrompt,
    at: &str,
    above_prompt_tokens: u64,
    found: &mut Found,
) -> LongPromptPrices {
    LongPromptPrices {
        above_prompt_tokens,
        input: found.required(l.input, &format!("{at}.input")),
        output: found.required(l.output, &format!("{at}.output")),
        cache_read: found.required(l.cache_read, &format!("{at}.cache_read")),
        cache_write_5m: found.required(l.cache_write_5m, &format!("{at}.cache_write_5m")),
        cache_write_1h: found.required(l.cache_write_1h, &format!("{at}.cache_write_1h")),
    }
}

/// `pricing.default` (Gatehouse's key): omitted cache prices derive from `input`.
fn default_prices(p: &RawPrice, at: &str, found: &mut Found) -> Prices {
    let input = found.required(p.input, &format!("{at}.input"));
    Prices {
        input,
        output: found.required(p.output, &format!("{at}.output")),
        cache_read: found
            .opt_rate(p.cache_read, &format!("{at}.cache_read"))
            .unwrap_or(input / 10),
        cache_write_5m: found
            .opt_rate(p.cache_write_5m, &format!("{at}.cache_write_5m"))
            .unwrap_or(input * 5 / 4),
        cache_write_1h: found
            .opt_rate(p.cache_write_1h, &format!("{at}.cache_write_1h"))
            .unwrap_or(input * 2),
        web_search: found.search_price(p.web_search, at),
        long_prompt: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn yaml(text: &str) -> f64 {
        js_number(&serde_yaml_ng::from_str::<Value>(text).unwrap())
    }

    /// Each case was run through the reference's `--check config` as an `input` value.
    #[test]
    fn numbers_as_javascript_reads_them() {
        for (text, want) in [
            ("3.5", 3.5),
            ("'3.5'", 3.5),
            ("' 3 '", 3.0),
            ("'1e3'", 1000.0),
            ("'0x10'", 16.0),
            ("'0b101'", 5.0),
            ("true", 1.0),
            ("false", 0.0),
            ("null", 0.0),
            ("''", 0.0),
            ("'  '", 0.0),
            ("'-0'", 0.0),
            ("[5]", 5.0),
            ("[[7]]", 7.0),
            ("[]", 0.0),
            ("'.5'", 0.5),
            ("'5.'", 5.0),
            ("'+2'", 2.0),
        ] {
            assert_eq!(yaml(text), want, "{text}");
        }
        assert_eq!(yaml(".inf"), f64::INFINITY);
        assert_eq!(yaml("'Infinity'"), f64::INFINITY);
        for text in [
            "'abc'",
            "'1_000'",
            "'inf'",
            "'NaN'",
            "'infinity'",
            "'0x'",
            "'-0x10'",
            "'1e'",
            "'.'",
            "'e5'",
            "{a: 1}",
            "[1, 2]",
            "[true]",
            "'3 5'",
        ] {
            assert!(yaml(text).is_nan(), "{text}");
        }
    }

    fn load(pricing: &str) -> Result<super::super::Config, ConfigError> {
        let yaml = format!(
            "listen: {{host: 127.0.0.1}}\nupstreams: [{{name: a, provider: anthropic, auth: {{api_key: k}}}}]\npricing:\n{pricing}\n"
        );
        super::super::Config::from_yaml(
            &yaml,
            &super::super::LoadContext {
                env: &crate::deps::MapEnvironment::default(),
                credentials: &crate::deps::NoCredentialStore,
                default_data_dir: "/data".into(),
            },
        )
    }

    fn prices(entry: &str) -> Prices {
        let c = load(&format!(
            "  overrides:\n    - {{upstream: a, model: m, {entry}}}"
        ))
        .unwrap_or_else(|e| panic!("{entry}: {e}"));
        c.pricing.overrides[0].price
    }

    fn refused(pricing: &str) -> Vec<ConfigIssue> {
        load(pricing).unwrap_err().issues()
    }

    #[test]
    fn cache_writes_resolve_from_their_own_key_then_cache_write() {
        let p = prices("input: 3, output: 15, cache_read: 0.3, cache_write: 3.75");
        assert_eq!((p.cache_write_5m, p.cache_write_1h), (3_750, 3_750));
        let p = prices(
            "input: 3, output: 15, cache_read: 0.3, cache_write_5m: 3.75, cache_write_1h: 6",
        );
        assert_eq!((p.cache_write_5m, p.cache_write_1h), (3_750, 6_000));
        let p =
            prices("input: 3, output: 15, cache_read: 0.3, cache_write: 3.75, cache_write_1h: 6");
        assert_eq!((p.cache_write_5m, p.cache_write_1h), (3_750, 6_000));
        let p =
            prices("input: 3, output: 15, cache_read: 0.3, cache_write: 6, cache_write_5m: 3.75");
        assert_eq!((p.cache_write_5m, p.cache_write_1h), (3_750, 6_000));
        // Gatehouse's own default for a missing cache_read: a tenth of input.
        assert_eq!(
            prices("input: 3, output: 15, cache_write: 3.75").cache_read,
            300
        );
        for entry in [
            "input: 3, output: 15, cache_read: 0.3",
            "input: 3, output: 15, cache_read: 0.3, cache_write_5m: 3.75",
            "input: 3, output: 15, cache_read: 0.3, cache_write_1h: 6",
        ] {
            let issues = refused(&format!(
                "  overrides:\n    - {{upstream: a, model: m, {entry}}}"
            ));
            assert_eq!(
                issues,
                [ConfigIssue {
                    path: "pricing.overrides[0]".into(),
                    message: CACHE_WRITE_UNRESOLVED.into()
                }],
                "{entry}"
            );
        }
    }

    #[test]
    fn long_prompt_prices_and_strings_of_numbers() {
        let p = prices(
            "input: '3', output: \"15\", cache_read: 0.3, cache_write: ' 3.75 ', long_prompt: {above_prompt_tokens: '200000', input: 6, output: 22.5, cache_read: 0.6, cache_write_5m: 7.5, cache_write_1h: 12}",
        );
        assert_eq!(
            (p.input, p.output, p.cache_write_5m),
            (3_000, 15_000, 3_750)
        );
        assert_eq!(
            p.long_prompt,
            Some(LongPromptPrices {
                above_prompt_tokens: 200_000,
                input: 6_000,
                output: 22_500,
                cache_read: 600,
                cache_write_5m: 7_500,
                cache_write_1h: 12_000,
            })
        );
        // Missing required numbers are named with the rest, as the reference names them.
        let issues = refused(
            "  overrides:\n    - {upstream: a, model: m, output: 10001, cache_write: 1, long_prompt: {input: 1, output: 1, cache_read: 1, cache_write_5m: 1}}",
        );
        let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "pricing.overrides[0].input",
                "pricing.overrides[0].output",
                "pricing.overrides[0].long_prompt.above_prompt_tokens",
                "pricing.overrides[0].long_prompt.cache_write_1h"
            ]
        );
        assert_eq!(issues[0].message, "Required: a number");
        let issues = refused(
            "  overrides:\n    - {upstream: a, model: m, input: 0, output: 10001, cache_read: abc, cache_write: '', long_prompt: {above_prompt_tokens: 2.5, input: 1, output: 1, cache_read: 1, cache_write_5m: 1, cache_write_1h: -1}}",
        );
        let found: Vec<(&str, &str)> = issues
            .iter()
            .map(|i| (i.path.as_str(), i.message.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "pricing.overrides[0].input",
                    "Number must be greater than 0"
                ),
                (
                    "pricing.overrides[0].output",
                    "Number must be less than or equal to 10000"
                ),
                (
                    "pricing.overrides[0].cache_read",
                    "Expected number, received nan"
                ),
                (
                    "pricing.overrides[0].cache_write",
                    "Number must be greater than 0"
                ),
                (
                    "pricing.overrides[0].long_prompt.above_prompt_tokens",
                    "Expected integer, received float"
                ),
                (
                    "pricing.overrides[0].long_prompt.cache_write_1h",
                    "Number must be greater than 0"
                ),
            ]
        );
    }

    #[test]
    fn null_is_refused_where_a_mapping_or_a_list_belongs() {
        let issue = |pricing: &str| {
            let e = load(pricing).unwrap_err();
            (e.path, e.message)
        };
        let expected =
            |path: &str, what: &str| (path.to_owned(), format!("Expected {what}, received null"));
        assert_eq!(issue("  null"), expected("pricing", "object"));
        assert_eq!(
            issue("  overrides: null"),
            expected("pricing.overrides", "array")
        );
        assert_eq!(
            issue(
                "  overrides: [{upstream: a, model: m, input: 1, output: 1, cache_write: 1, long_prompt: null}]"
            ),
            expected("pricing.overrides[0].long_prompt", "object")
        );
        assert_eq!(
            issue("  default: null"),
            expected("pricing.default", "object")
        );
        // Errors inside keep their paths.
        assert_eq!(
            issue("  overrides: [{upstream: a, model: m, input: 1, output: 1, cache_write: 1, extra: 1}]").0,
            "pricing.overrides[0].extra"
        );
    }

    #[test]
    fn multiplier_null_is_zero_and_true_is_one() {
        let m = |v: &str| load(&format!("  multiplier: {v}")).map(|c| c.pricing.multiplier);
        assert_eq!(m("'0.5'").unwrap(), 0.5);
        assert_eq!(m("true").unwrap(), 1.0);
        assert_eq!(m("10").unwrap(), 10.0);
        for (v, message) in [
            ("null", "Number must be greater than 0"),
            ("''", "Number must be greater than 0"),
            ("abc", "Expected number, received nan"),
            ("10.01", "Number must be less than or equal to 10"),
        ] {
            let e = m(v).unwrap_err();
            assert_eq!(
                (e.path.as_str(), e.message.as_str()),
                ("pricing.multiplier", message),
                "{v}"
            );
        }
    }

    #[test]
    fn duplicates_ignore_case_and_an_empty_model_is_refused() {
        let issues = refused(
            "  overrides:\n    - {upstream: a, model: M, input: 1, output: 1, cache_write: 1}\n    - {upstream: a, model: m, input: 1, output: 1, cache_write: 1}\n    - {upstream: a, model: '', input: 1, output: 1, cache_write: 1}",
        );
        let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            ["pricing.overrides[1]", "pricing.overrides[2].model"]
        );
        // The earlier override's model, as the reference names it.
        assert_eq!(
            issues[0].message,
            "duplicates the pricing override for 'M' on upstream 'a'"
        );
        // Blank but not empty: the reference takes it (and warns it never applies).
        assert_eq!(prices("input: 1, output: 1, cache_write: 1").input, 1_000);
        load("  overrides:\n    - {upstream: a, model: ' ', input: 1, output: 1, cache_write: 1}")
            .unwrap();
    }

    #[test]
    fn bounds_and_messages() {
        assert_eq!(positive_at_most(10_000.0, MAX_RATE), Ok(10_000.0));
        assert_eq!(
            positive_at_most(10_000.01, MAX_RATE).unwrap_err(),
            "Number must be less than or equal to 10000"
        );
        assert_eq!(
            positive_at_most(0.0, MAX_RATE).unwrap_err(),
            "Number must be greater than 0"
        );
        assert_eq!(
            positive_at_most(f64::NAN, MAX_RATE).unwrap_err(),
            "Expected number, received nan"
        );
        assert_eq!(
            positive_at_most(f64::INFINITY, MAX_MULTIPLIER).unwrap_err(),
            "Number must be less than or equal to 10"
        );
    }
}
