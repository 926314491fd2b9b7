//! Prices a request's usage in integer micro-USD.
//!
//! Lookup order: an operator override for the model (full id, then the id without its date
//! suffix) -> the built-in table -> the newest built-in price of the model's Claude family
//! -> [`crate::models::DEFAULT_TIER`], flagged so the caller can warn. `pricing.multiplier`
//! (in (0, 1]) scales the result.

use crate::config::PricingConfig;
use crate::models::{self, BUILTIN, DEFAULT_TIER, Tier};

use super::usage::Usage;

/// Where a price came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceSource {
    Override,
    Builtin,
    /// Unknown id of a known family: priced like its newest sibling.
    Family,
    /// Nothing known: the default tier.
    Default,
}

#[derive(Debug, Clone)]
pub struct Pricing {
    config: PricingConfig,
}

impl Pricing {
    pub fn new(config: PricingConfig) -> Self {
        Self { config }
    }

    pub fn tier(&self, model: &str) -> (Tier, PriceSource) {
        let norm = models::normalize(model);
        let found = self
            .config
            .overrides
            .iter()
            .find(|o| o.model == model)
            .or_else(|| {
                self.config
                    .overrides
                    .iter()
                    .find(|o| models::normalize(&o.model) == norm)
            });
        if let Some(o) = found {
            let tier = Tier {
                input: o.input,
                output: o.output,
                cache_write_5m: o.cache_write_5m,
                cache_write_1h: o.cache_write_1h,
                cache_read: o.cache_read,
                web_search: o.web_search,
                long_prompt: None,
            };
            return (tier, PriceSource::Override);
        }
        if let Some(b) = models::builtin(model) {
            return (b.tier, PriceSource::Builtin);
        }
        if let Some(fam) = models::family(model)
            && let Some(b) = BUILTIN.iter().find(|b| b.family == fam)
        {
            return (b.tier, PriceSource::Family);
        }
        (DEFAULT_TIER, PriceSource::Default)
    }

    /// Cost in micro-USD (rounded up, so a non-zero usage never costs 0), at most
    /// [`MAX_MICRO_USD`].
    pub fn cost_micro_usd(&self, model: &str, usage: &Usage) -> (u64, PriceSource) {
        let (tier, source) = self.tier(model);
        (cost_with(&tier, usage, self.config.multiplier), source)
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
    let scaled = if multiplier >= 1.0 {
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
        })
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
            model: "claude-opus-4-8".into(),
            input: 1_000,
            output: 2_000,
            cache_read: 100,
            cache_write_5m: 1_250,
            cache_write_1h: 2_000,
            web_search: 0,
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
