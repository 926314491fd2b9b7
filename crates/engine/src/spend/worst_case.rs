//! The most a request can cost, reserved at admission so a cap is never exceeded.
//!
//! A plain request costs at most its prompt (every byte counted as a token at the dearest
//! input rate, a 1-hour cache write) plus `max_tokens` of output. Some requests can cost
//! more than their own bytes say ([`CostDrivers`]): content the upstream fetches (an image
//! or document by URL, a Files API `file_id`), MCP servers whose tool results become
//! input, and server tools (web search, web fetch, code execution), which run several
//! sampling rounds on the upstream, each re-reading the context, and bill per use. For
//! those the input of every round is bounded only by the context window.

use crate::metering::pricing::{MAX_MICRO_USD, PricedAs, Pricing};

/// The context window that bounds one round's input when the prompt's own bytes do not.
pub const CONTEXT_WINDOW: u64 = 200_000;
/// With the 1M-token context beta.
pub const LONG_CONTEXT_WINDOW: u64 = 1_000_000;
/// Sampling rounds of one server-tool turn before the upstream pauses it (`pause_turn`).
pub const MAX_SERVER_ROUNDS: u64 = 10;
/// Uses of a server tool that sets no `max_uses`.
pub const DEFAULT_TOOL_USES: u64 = 10;

/// What in a request can make it cost more than its bytes and `max_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CostDrivers {
    /// Content the upstream fetches or MCP servers: input is bounded by the context window.
    pub fetched_input: bool,
    /// Server-tool uses the request allows (sum of `max_uses`, defaulted), 0 without.
    pub server_tool_uses: u64,
    /// Of those, web searches (billed per search).
    pub web_searches: u64,
    /// The 1M-token context window is asked for (`anthropic-beta: context-1m-…`).
    pub long_context: bool,
}

impl CostDrivers {
    /// Sampling rounds the upstream may run for this request.
    pub fn rounds(&self) -> u64 {
        1 + self.server_tool_uses.min(MAX_SERVER_ROUNDS)
    }

    fn window(&self) -> u64 {
        if self.long_context {
            LONG_CONTEXT_WINDOW
        } else {
            CONTEXT_WINDOW
        }
    }
}

/// The worst case in micro-USD, at most [`MAX_MICRO_USD`] (so sums stay in the rows' range).
pub fn worst_case_micro(
    pricing: &Pricing,
    at: &PricedAs<'_>,
    body_bytes: usize,
    max_tokens: Option<u64>,
    drivers: &CostDrivers,
) -> u64 {
    let (tier, _) = pricing.tier_of(at);
    let prompt = (body_bytes as u64).min(LONG_CONTEXT_WINDOW);
    let unbounded = drivers.fetched_input || drivers.server_tool_uses > 0;
    let per_round_input = if unbounded {
        prompt.max(drivers.window())
    } else {
        prompt
    };
    let input_rate = tier.input.max(tier.cache_write_1h).max(
        tier.long_prompt
            .map_or(0, |(_, l)| l.input.max(l.cache_write_1h)),
    );
    let output_rate = tier
        .output
        .max(tier.long_prompt.map_or(0, |(_, l)| l.output));
    // No upstream generates more than its model's output limit (a larger `max_tokens` is
    // refused upstream); unknown models are bounded by the largest window.
    let limit =
        crate::models::builtin(at.model).map_or(LONG_CONTEXT_WINDOW, |b| u64::from(b.max_output.1));
    let output_tokens = max_tokens.unwrap_or(limit).min(limit);
    let rounds = u128::from(drivers.rounds());
    let nano = rounds
        * (u128::from(per_round_input) * u128::from(input_rate)
            + u128::from(output_tokens) * u128::from(output_rate))
        + u128::from(drivers.web_searches) * u128::from(tier.web_search);
    u64::try_from(nano.div_ceil(1000)).map_or(MAX_MICRO_USD, |c| c.min(MAX_MICRO_USD))
}

/// The most output tokens priced for a model the built-in table does not know.
pub const OUTPUT_TOKENS_BOUND: u64 = 1_000_000;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::PricingConfig;

    fn pricing() -> Pricing {
        Pricing::new(PricingConfig {
            multiplier: 1.0,
            overrides: Vec::new(),
            default: None,
        })
    }

    const SONNET: PricedAs<'static> = PricedAs {
        model: "claude-sonnet-4-6",
        upstream: None,
    };

    #[test]
    fn plain_requests_cost_their_bytes_and_max_tokens() {
        // Sonnet 4.6: 1000 bytes x $6 (1 h cache write) + 100 x $15 per MTok.
        let plain = worst_case_micro(
            &pricing(),
            &SONNET,
            1_000,
            Some(100),
            &CostDrivers::default(),
        );
        assert_eq!(plain, 6_000 + 1_500);
    }

    #[test]
    fn fetched_content_and_server_tools_raise_the_worst_case() {
        let p = pricing();
        let plain = worst_case_micro(&p, &SONNET, 1_000, Some(100), &CostDrivers::default());
        let fetched = CostDrivers {
            fetched_input: true,
            ..Default::default()
        };
        let by_url = worst_case_micro(&p, &SONNET, 1_000, Some(100), &fetched);
        assert!(by_url > 100 * plain, "{by_url} vs {plain}");
        let search = CostDrivers {
            server_tool_uses: 5,
            web_searches: 5,
            ..Default::default()
        };
        let searched = worst_case_micro(&p, &SONNET, 1_000, Some(100), &search);
        assert!(
            searched > 5 * by_url,
            "six rounds of a full window: {searched}"
        );
        let long = CostDrivers {
            long_context: true,
            ..fetched
        };
        assert!(worst_case_micro(&p, &SONNET, 1_000, Some(100), &long) > 4 * by_url);
    }

    #[test]
    fn worst_case_bounds_max_tokens_by_the_models_output_limit() {
        let pricing = Pricing::new(crate::config::PricingConfig {
            multiplier: 1.0,
            overrides: vec![],
            default: None,
        });
        let sonnet = |n| worst_case_micro(&pricing, &SONNET, 100, Some(n), &CostDrivers::default());
        let limit = crate::models::builtin("claude-sonnet-4-6")
            .map(|b| u64::from(b.max_output.1))
            .unwrap();
        assert_eq!(sonnet(u64::MAX), sonnet(limit));
        assert!(sonnet(limit - 1) < sonnet(limit));
        let unknown = |n| {
            worst_case_micro(
                &pricing,
                &PricedAs::model("mystery-model"),
                100,
                Some(n),
                &CostDrivers::default(),
            )
        };
        assert_eq!(unknown(u64::MAX), unknown(OUTPUT_TOKENS_BOUND));
        // Absurd operator prices still give an amount every store and JSON reader takes.
        let dear = Pricing::new(crate::config::PricingConfig {
            multiplier: 1.0,
            overrides: vec![crate::config::PriceOverride {
                upstream: None,
                model: "mystery-model".into(),
                price: crate::config::Prices {
                    input: u64::MAX,
                    output: u64::MAX,
                    cache_read: u64::MAX,
                    cache_write_5m: u64::MAX,
                    cache_write_1h: u64::MAX,
                    web_search: u64::MAX,
                    long_prompt: None,
                },
            }],
            default: None,
        });
        let most = worst_case_micro(
            &dear,
            &PricedAs::model("mystery-model"),
            usize::MAX,
            Some(u64::MAX),
            &CostDrivers::default(),
        );
        assert_eq!(most, MAX_MICRO_USD);
    }

    #[test]
    fn absurd_inputs_saturate_within_the_store_range() {
        let p = pricing();
        let d = CostDrivers {
            fetched_input: true,
            server_tool_uses: u64::MAX,
            web_searches: u64::MAX,
            long_context: true,
        };
        let w = worst_case_micro(&p, &SONNET, usize::MAX, Some(u64::MAX), &d);
        assert_eq!(w, MAX_MICRO_USD);
        let plain = worst_case_micro(&p, &SONNET, 10, Some(u64::MAX), &CostDrivers::default());
        let limit = worst_case_micro(&p, &SONNET, 10, None, &CostDrivers::default());
        assert_eq!(
            plain, limit,
            "max_tokens is bounded by the model's output limit"
        );
    }
}
