//! Prices a request's usage in integer micro-USD.
//!
//! Which id is priced ([`Pricing::priced_as`]): the upstream's model id when an operator
//! priced it or when it is not a Claude model (`deepseek-chat` behind a `claude-sonnet-…`
//! request costs what DeepSeek charges); otherwise the requested id, or the upstream's when
//! the requested one is unknown. Lookup order for that id: an operator override for the
//! upstream that served it, then one for any upstream (full id, then the id without its
//! date suffix) -> the built-in table -> the newest built-in price of the model's Claude
//! family -> `pricing.default` (else [`crate::models::DEFAULT_TIER`]), flagged once per
//! model so the operator can price it. `pricing.multiplier` (in (0, 10]; above 1 a markup) scales the result.
//!
//! Each kind of token at its own price: 5-minute cache writes at the 5-minute rate,
//! 1-hour writes at the 1-hour rate. Above a tier's long-prompt threshold (input +
//! cache-read + cache-write tokens; the built-in table's, or an override's
//! `long_prompt.above_prompt_tokens`) the long-prompt prices apply to the whole request.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::config::{PriceOverride, Prices, PricingConfig};
use crate::models::{self, BUILTIN, DEFAULT_TIER, LongPrompt, Tier};

use super::usage::Usage;

/// Where a price came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceSource {
    Override,
    Builtin,
    /// Unknown id of a known family: priced like its newest sibling.
    Family,
    /// Nothing known: `pricing.default` or the default tier.
    Default,
}

/// The id a request is priced as, and the upstream that served it (for overrides scoped
/// to one upstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PricedAs<'a> {
    pub model: &'a str,
    pub upstream: Option<&'a str>,
}

impl<'a> PricedAs<'a> {
    /// A model id under no particular upstream.
    pub fn model(model: &'a str) -> Self {
        Self {
            model,
            upstream: None,
        }
    }
}

/// At most this many unpriced model ids are remembered as already flagged.
const FLAGGED_LIMIT: usize = 1024;

#[derive(Debug)]
pub struct Pricing {
    config: PricingConfig,
    /// Unpriced ids already reported (`pricing.unknown_model` once per id).
    flagged: Mutex<HashSet<String>>,
}

impl Pricing {
    pub fn new(config: PricingConfig) -> Self {
        Self {
            config,
            flagged: Mutex::new(HashSet::new()),
        }
    }

    /// Which id a request for `requested`, served by `upstream` as `upstream_model`, is
    /// priced as (see the module doc).
    pub fn priced_as<'a>(
        &self,
        requested: &'a str,
        upstream: Option<&'a str>,
        upstream_model: Option<&'a str>,
    ) -> PricedAs<'a> {
        let as_requested = PricedAs {
            model: requested,
            upstream,
        };
        let Some(served) = upstream_model.filter(|m| *m != requested) else {
            return as_requested;
        };
        let as_served = PricedAs {
            model: served,
            upstream,
        };
        if self.find_override(&as_served).is_some() {
            return as_served;
        }
        if self.find_override(&as_requested).is_some() {
            return as_requested;
        }
        if !looks_like_claude(served) {
            return as_served;
        }
        if self.tier_of(&as_requested).1 == PriceSource::Default {
            return as_served;
        }
        as_requested
    }

    /// The index in `pricing.overrides` of the override that prices `at`, if any.
    pub fn override_index(&self, at: &PricedAs<'_>) -> Option<usize> {
        let found = self.find_override(at)?;
        self.config
            .overrides
            .iter()
            .position(|o| std::ptr::eq(o, found))
    }

    fn find_override(&self, at: &PricedAs<'_>) -> Option<&PriceOverride> {
        let norm = models::normalize(at.model);
        let scoped =
            |o: &&PriceOverride| o.upstream.is_none() || o.upstream.as_deref() == at.upstream;
        // The upstream's own price first, then any upstream's; exact ids before normalised.
        let ranked = |o: &&PriceOverride| (o.upstream.is_none(), o.model != at.model);
        self.config
            .overrides
            .iter()
            .filter(scoped)
            .filter(|o| o.model == at.model || models::normalize(&o.model) == norm)
            .min_by_key(ranked)
    }

    /// The prices of `model` under no particular upstream.
    pub fn tier(&self, model: &str) -> (Tier, PriceSource) {
        self.tier_of(&PricedAs::model(model))
    }

    pub fn tier_of(&self, at: &PricedAs<'_>) -> (Tier, PriceSource) {
        if let Some(o) = self.find_override(at) {
            return (tier(&o.price), PriceSource::Override);
        }
        if let Some(b) = models::builtin(at.model) {
            return (b.tier, PriceSource::Builtin);
        }
        if let Some(fam) = models::family(at.model)
            && let Some(b) = BUILTIN.iter().find(|b| b.family == fam)
        {
            return (b.tier, PriceSource::Family);
        }
        let default = self.config.default.as_ref().map_or(DEFAULT_TIER, tier);
        (default, PriceSource::Default)
    }

    /// Cost in micro-USD (rounded up, so a non-zero usage never costs 0), at most
    /// [`MAX_MICRO_USD`].
    pub fn cost_micro_usd(&self, model: &str, usage: &Usage) -> (u64, PriceSource) {
        self.cost_of(&PricedAs::model(model), usage)
    }

    pub fn cost_of(&self, at: &PricedAs<'_>, usage: &Usage) -> (u64, PriceSource) {
        let (tier, source) = self.tier_of(at);
        (cost_with(&tier, usage, self.config.multiplier), source)
    }

    /// [`Pricing::cost_of`], with each web search at `search_price` (nano-USD) when it is
    /// given: the searches the gateway ran itself (`server_tools`), priced as configured.
    pub fn cost_with_search_price(
        &self,
        at: &PricedAs<'_>,
        usage: &Usage,
        search_price: Option<u64>,
    ) -> (u64, PriceSource) {
        let (mut tier, source) = self.tier_of(at);
        if let Some(p) = search_price {
            tier.web_search = p;
        }
        (cost_with(&tier, usage, self.config.multiplier), source)
    }

    /// True the first time an unpriced `model` is seen (so it is flagged once).
    pub fn first_unpriced(&self, model: &str) -> bool {
        let Ok(mut flagged) = self.flagged.lock() else {
            return false;
        };
        if flagged.contains(model) || flagged.len() >= FLAGGED_LIMIT {
            return false;
        }
        flagged.insert(model.to_owned())
    }
}

/// A Claude model under any provider's spelling (`claude-…`, Bedrock's
/// `us.anthropic.claude-…-v1:0`, Vertex's `claude-…@date`).
pub(crate) fn looks_like_claude(id: &str) -> bool {
    models::family(id).is_some() || id.to_ascii_lowercase().contains("claude")
}

/// An operator's prices as a tier, with the override's `long_prompt` prices if it has them.
fn tier(p: &Prices) -> Tier {
    Tier {
        input: p.input,
        output: p.output,
        cache_write_5m: p.cache_write_5m,
        cache_write_1h: p.cache_write_1h,
        cache_read: p.cache_read,
        web_search: p.web_search,
        long_prompt: p.long_prompt.map(|l| {
            let long = LongPrompt {
                input: l.input,
                output: l.output,
                cache_write_5m: l.cache_write_5m,
                cache_write_1h: l.cache_write_1h,
                cache_read: l.cache_read,
            };
            (l.above_prompt_tokens, long)
        }),
    }
}

/// The largest amount any price or reservation comes to: 2^53 - 1 micro-USD (about nine
/// billion dollars), exact in every JSON reader, and far enough below `i64::MAX` that the
/// stores' sums of such amounts stay integers.
pub const MAX_MICRO_USD: u64 = (1 << 53) - 1;

fn cost_with(tier: &Tier, u: &Usage, multiplier: f64) -> u64 {
    // Counts come from the upstream: saturate rather than overflow (a wrapped sum would pick
    // the short-prompt prices for an enormous prompt). Prices are bounded by config, so the
    // u128 products and their sum below cannot overflow.
    let prompt = u
        .input_tokens
        .saturating_add(u.cache_read_tokens)
        .saturating_add(u.cache_write_5m_tokens)
        .saturating_add(u.cache_write_1h_tokens);
    let (input, output, cw5, cw1, cr) = match tier.long_prompt {
        Some((above, long)) if prompt > above => (
            long.input,
            long.output,
            long.cache_write_5m,
            long.cache_write_1h,
            long.cache_read,
        ),
        _ => (
            tier.input,
            tier.output,
            tier.cache_write_5m,
            tier.cache_write_1h,
            tier.cache_read,
        ),
    };
    let nano: u128 = u128::from(u.input_tokens) * u128::from(input)
        + u128::from(u.output_tokens) * u128::from(output)
        + u128::from(u.cache_write_5m_tokens) * u128::from(cw5)
        + u128::from(u.cache_write_1h_tokens) * u128::from(cw1)
        + u128::from(u.cache_read_tokens) * u128::from(cr)
        + u128::from(u.web_search_requests) * u128::from(tier.web_search);
    let scaled = if multiplier == 1.0 {
        nano
    } else {
        (nano as f64 * multiplier).ceil() as u128
    };
    u64::try_from(scaled.div_ceil(1000)).map_or(MAX_MICRO_USD, |c| c.min(MAX_MICRO_USD))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::PriceOverride;

    fn pricing(multiplier: f64, overrides: Vec<PriceOverride>) -> Pricing {
        Pricing::new(PricingConfig {
            multiplier,
            overrides,
            default: None,
        })
    }

    fn per_mtok(input: u64, output: u64) -> Prices {
        Prices {
            input: input * 1000,
            output: output * 1000,
            cache_read: input * 100,
            cache_write_5m: input * 1250,
            cache_write_1h: input * 2000,
            web_search: 0,
            long_prompt: None,
        }
    }

    #[test]
    fn upstream_models_are_priced_by_what_served_them() {
        let o = |upstream: Option<&str>, model: &str, price| PriceOverride {
            upstream: upstream.map(str::to_owned),
            model: model.to_owned(),
            price,
        };
        let p = Pricing::new(PricingConfig {
            multiplier: 1.0,
            overrides: vec![
                o(None, "deepseek-chat", per_mtok(1, 2)),
                o(Some("openrouter"), "deepseek-chat", per_mtok(3, 4)),
            ],
            default: Some(per_mtok(7, 9)),
        });
        let sonnet = "claude-sonnet-4-6";
        // A priced non-Claude model behind a Claude id: its own price, per upstream.
        let at = p.priced_as(sonnet, Some("deepseek"), Some("deepseek-chat"));
        assert_eq!(at.model, "deepseek-chat");
        assert_eq!(p.tier_of(&at).0.input, 1_000);
        let at = p.priced_as(sonnet, Some("openrouter"), Some("deepseek-chat"));
        assert_eq!(p.tier_of(&at).0.input, 3_000);
        // An unpriced non-Claude model: `pricing.default`, flagged once.
        let at = p.priced_as(sonnet, Some("local"), Some("qwen3-coder"));
        assert_eq!(
            p.tier_of(&at),
            (tier(&per_mtok(7, 9)), PriceSource::Default)
        );
        assert!(p.first_unpriced("qwen3-coder"));
        assert!(!p.first_unpriced("qwen3-coder"));
        // A Claude model under a provider's id keeps the requested id's price.
        let at = p.priced_as(
            sonnet,
            Some("bedrock"),
            Some("us.anthropic.claude-sonnet-4-6"),
        );
        assert_eq!(at.model, sonnet);
        assert_eq!(p.tier_of(&at).1, PriceSource::Builtin);
        // No upstream model (or the same id): the requested id.
        assert_eq!(p.priced_as(sonnet, None, None).model, sonnet);
    }

    #[test]
    fn sonnet_with_every_kind_of_token() {
        let u = Usage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            cache_read_tokens: 1_000_000,
            cache_write_5m_tokens: 1_000_000,
            cache_write_1h_tokens: 1_000_000,
            web_search_requests: 3,
        };
        // $3 + $15 + $0.30 + $3.75 + $6 (1 h write is 2x input) + 3 x $0.01
        let (cost, src) = pricing(1.0, vec![]).cost_micro_usd("claude-sonnet-4-6", &u);
        assert_eq!(src, PriceSource::Builtin);
        assert_eq!(cost, 28_080_000);
    }

    #[test]
    fn one_hour_cache_write_is_twice_input_for_every_builtin() {
        for b in BUILTIN {
            assert_eq!(b.tier.cache_write_1h, 2 * b.tier.input, "{}", b.id);
            assert_eq!(b.tier.cache_write_5m * 4, 5 * b.tier.input, "{}", b.id);
        }
    }

    #[test]
    fn overrides_multiplier_family_and_default() {
        let o = PriceOverride {
            upstream: None,
            model: "claude-opus-4-8".into(),
            price: Prices {
                input: 1_000,
                output: 2_000,
                cache_read: 100,
                cache_write_5m: 1_250,
                cache_write_1h: 2_000,
                web_search: 0,
                long_prompt: None,
            },
        };
        let p = pricing(0.5, vec![o]);
        let u = Usage {
            input_tokens: 1000,
            output_tokens: 1000,
            ..Usage::default()
        };
        assert_eq!(
            p.cost_micro_usd("claude-opus-4-8-20261001", &u),
            (1_500, PriceSource::Override)
        );
        assert_eq!(p.tier("claude-opus-9").1, PriceSource::Family);
        assert_eq!(p.tier("mystery").1, PriceSource::Default);
        // $5 + $25 per million at half price.
        assert_eq!(p.cost_micro_usd("mystery", &u).0, 15_000);
        // A markup scales up.
        assert_eq!(pricing(2.5, vec![]).cost_micro_usd("mystery", &u).0, 75_000);
    }

    /// An override as 2.1.334 writes one: 1-hour writes at their own rate, and the
    /// `long_prompt` prices once input + cache-read + cache-write tokens pass the threshold.
    #[test]
    fn an_override_prices_one_hour_writes_and_long_prompts_at_their_own_rates() {
        let price = Prices {
            input: 3_000,
            output: 15_000,
            cache_read: 300,
            cache_write_5m: 3_750,
            cache_write_1h: 6_000,
            web_search: 0,
            long_prompt: Some(crate::config::LongPromptPrices {
                above_prompt_tokens: 200_000,
                input: 6_000,
                output: 22_500,
                cache_read: 600,
                cache_write_5m: 7_500,
                cache_write_1h: 12_000,
            }),
        };
        let o = PriceOverride {
            upstream: None,
            model: "house-model".into(),
            price,
        };
        let p = pricing(1.0, vec![o]);
        let cost = |u: &Usage| p.cost_micro_usd("house-model", u);
        let hour = Usage {
            cache_write_1h_tokens: 1_000,
            ..Usage::default()
        };
        let five = Usage {
            cache_write_5m_tokens: 1_000,
            ..Usage::default()
        };
        // $6 and $3.75 per million.
        assert_eq!(cost(&hour), (6_000, PriceSource::Override));
        assert_eq!(cost(&five).0, 3_750);
        // 200,000 prompt tokens exactly: not above the threshold, the short prices.
        let mut u = Usage {
            input_tokens: 100_000,
            output_tokens: 1_000,
            cache_read_tokens: 50_000,
            cache_write_5m_tokens: 30_000,
            cache_write_1h_tokens: 20_000,
            web_search_requests: 0,
        };
        assert_eq!(cost(&u).0, 300_000 + 15_000 + 15_000 + 112_500 + 120_000);
        // One more token: every token of the request at the long-prompt prices.
        u.input_tokens += 1;
        assert_eq!(cost(&u).0, 600_006 + 22_500 + 30_000 + 225_000 + 240_000);
        // Cache tokens count towards the threshold as input does.
        u.input_tokens -= 1;
        u.cache_read_tokens += 1;
        assert_eq!(
            cost(&u).0,
            600_000 + 22_500 + 30_000 + 1 + 225_000 + 240_000
        );
    }

    #[test]
    fn haiku_long_prompt_price_applies_above_threshold() {
        let p = pricing(1.0, vec![]);
        let short = Usage {
            input_tokens: 100_000,
            ..Usage::default()
        };
        let long = Usage {
            input_tokens: 100_001,
            ..Usage::default()
        };
        assert_eq!(p.cost_micro_usd("claude-haiku-5-5", &short).0, 10_000);
        assert_eq!(p.cost_micro_usd("claude-haiku-5-5", &long).0, 50_001);
    }

    /// Found by the `sse_usage` fuzz target (fuzz/corpus/sse_usage/crash-pricing-prompt-overflow):
    /// counts an upstream reports near `u64::MAX` overflowed the prompt sum.
    #[test]
    fn huge_reported_counts_saturate() {
        let u = Usage {
            input_tokens: u64::MAX,
            cache_write_1h_tokens: 20,
            ..Usage::default()
        };
        let p = pricing(1.0, vec![]);
        // The prompt is long: the long-prompt prices apply.
        let (_, long) = models::builtin("claude-haiku-5-5")
            .and_then(|b| b.tier.long_prompt)
            .unwrap();
        let nano =
            u128::from(u64::MAX) * u128::from(long.input) + 20 * u128::from(long.cache_write_1h);
        let cost = p.cost_micro_usd("claude-haiku-5-5", &u).0;
        assert_eq!(
            u128::from(cost),
            nano.div_ceil(1000).min(u128::from(MAX_MICRO_USD))
        );
        assert_eq!(p.cost_micro_usd("mystery", &u).0, MAX_MICRO_USD);
    }

    #[test]
    fn absurd_reported_usage_saturates_instead_of_overflowing() {
        let p = pricing(1.0, vec![]);
        let u = Usage {
            input_tokens: u64::MAX,
            output_tokens: u64::MAX,
            cache_read_tokens: u64::MAX,
            cache_write_5m_tokens: u64::MAX,
            cache_write_1h_tokens: u64::MAX,
            web_search_requests: u64::MAX,
        };
        assert_eq!(p.cost_micro_usd("claude-haiku-5-5", &u).0, MAX_MICRO_USD);
        assert_eq!(
            pricing(0.5, vec![]).cost_micro_usd("x", &u).0,
            MAX_MICRO_USD
        );
    }

    #[test]
    fn tiny_usage_is_never_free() {
        let u = Usage {
            input_tokens: 1,
            ..Usage::default()
        };
        assert_eq!(
            pricing(1.0, vec![])
                .cost_micro_usd("claude-haiku-5-5", &u)
                .0,
            1
        );
    }
}
