//! Strategies: the order in which the candidate legs of one request are tried, before the
//! router's health checks and failover run over that order. `ordered` keeps the
//! `upstreams` order; `weighted` tries the lowest `priority` band first, drawing inside a
//! band by `weight`; `cheapest` sorts by the upstream model's input + output price times
//! the upstream's `cost_weight`; `fastest` by the observed p95 time to first byte (weighted
//! until every candidate has [`FASTEST_MIN_SAMPLES`]); `region` puts the upstreams tagged
//! with the caller's region first, weighted inside each group.
//!
//! Each returns a note for `route_reason` naming its choice (`cheapest: b 3.60 < a 18.00
//! $/Mtok`). Random draws come from one seeded generator (`routing.random_seed`).

use std::sync::Mutex;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::router::Leg;
use crate::config::UpstreamConfig;
use crate::config::routing::{Strategies, Strategy, UpstreamRouting};
use crate::metering::pricing::Pricing;

use super::health::UpstreamHealth;

/// Time-to-first-byte samples every candidate needs before `fastest` trusts them.
pub const FASTEST_MIN_SAMPLES: usize = 3;

/// How one request's legs are ordered.
#[derive(Debug, Clone, Copy)]
pub struct Plan<'a> {
    pub strategy: Strategy,
    /// What named the strategy (`default`, `model`, `header`), for `route_reason`.
    pub source: &'static str,
    /// The caller's region, for `region`.
    pub region: Option<&'a str>,
    /// Prices, for `cheapest`.
    pub pricing: Option<&'a Pricing>,
    /// The routing rule that decided the candidates, for `route_reason`.
    pub rule: Option<&'a str>,
}

impl Plan<'_> {
    /// The `upstreams` order.
    pub fn ordered() -> Self {
        Plan {
            strategy: Strategy::Ordered,
            source: "default",
            region: None,
            pricing: None,
            rule: None,
        }
    }
}

/// The routing attributes of every upstream and the generator of random draws.
pub struct Strategist {
    attrs: Vec<UpstreamRouting>,
    rng: Mutex<StdRng>,
}

impl Strategist {
    pub fn new(upstreams: &[UpstreamConfig], strategies: &Strategies) -> Self {
        let attrs = upstreams
            .iter()
            .map(|u| {
                strategies
                    .upstreams
                    .iter()
                    .find(|(n, _)| *n == u.name)
                    .map(|(_, a)| a.clone())
                    .unwrap_or_default()
            })
            .collect();
        let rng = match strategies.seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_os_rng(),
        };
        Self {
            attrs,
            rng: Mutex::new(rng),
        }
    }

    fn attr(&self, upstream: usize) -> UpstreamRouting {
        self.attrs.get(upstream).cloned().unwrap_or_default()
    }

    /// `legs` in the order `plan` wants them, and what the strategy chose (`None` for
    /// `ordered`).
    pub fn order(
        &self,
        plan: &Plan<'_>,
        legs: Vec<Leg>,
        names: &[UpstreamConfig],
        health: &UpstreamHealth,
    ) -> (Vec<Leg>, Option<String>) {
        let name = |l: &Leg| {
            names
                .get(l.upstream)
                .map_or("?", |u| u.name.as_str())
                .to_owned()
        };
        match plan.strategy {
            Strategy::Ordered => (legs, None),
            Strategy::Weighted => {
                let legs = self.weighted(legs);
                let note = format!(
                    "weighted: drew {}",
                    legs.first().map(name).unwrap_or_default()
                );
                (legs, Some(note))
            }
            Strategy::Cheapest => {
                let Some(pricing) = plan.pricing else {
                    return (legs, None);
                };
                let mut priced: Vec<(f64, Leg)> = legs
                    .into_iter()
                    .map(|l| (self.price(&l, pricing), l))
                    .collect();
                priced.sort_by(|a, b| a.0.total_cmp(&b.0));
                let note = priced
                    .iter()
                    .map(|(p, l)| format!("{} {p:.2}", name(l)))
                    .collect::<Vec<_>>()
                    .join(" < ");
                let legs = priced.into_iter().map(|(_, l)| l).collect();
                (legs, Some(format!("cheapest: {note} $/Mtok")))
            }
            Strategy::Fastest => self.fastest(legs, health, &name),
            Strategy::Region => self.region(legs, plan.region, &name),
        }
    }

    /// Input + output price per million tokens of the leg's model, times `cost_weight`.
    fn price(&self, leg: &Leg, pricing: &Pricing) -> f64 {
        // Tier prices are nano-USD per token: USD per million tokens × 1000.
        let (tier, _) = pricing.tier(&leg.upstream_model);
        let nano = tier.input.saturating_add(tier.output) as f64;
        nano / 1000.0 * self.attr(leg.upstream).cost_weight
    }

    fn fastest(
        &self,
        legs: Vec<Leg>,
        health: &UpstreamHealth,
        name: &dyn Fn(&Leg) -> String,
    ) -> (Vec<Leg>, Option<String>) {
        let p95: Option<Vec<u128>> = legs
            .iter()
            .map(|l| {
                health
                    .ttfb_stats(l.upstream)
                    .filter(|(n, _)| *n >= FASTEST_MIN_SAMPLES)
                    .map(|(_, p95)| p95.as_millis())
            })
            .collect();
        let Some(p95) = p95 else {
            let legs = self.weighted(legs);
            let first = legs.first().map(name).unwrap_or_default();
            return (
                legs,
                Some(format!(
                    "fastest: too few samples yet, weighted drew {first}"
                )),
            );
        };
        let mut timed: Vec<(u128, Leg)> = p95.into_iter().zip(legs).collect();
        timed.sort_by_key(|(ms, _)| *ms);
        let note = timed
            .iter()
            .map(|(ms, l)| format!("{} {ms}ms", name(l)))
            .collect::<Vec<_>>()
            .join(" < ");
        let legs = timed.into_iter().map(|(_, l)| l).collect();
        (legs, Some(format!("fastest: p95 {note}")))
    }

    fn region(
        &self,
        legs: Vec<Leg>,
        region: Option<&str>,
        name: &dyn Fn(&Leg) -> String,
    ) -> (Vec<Leg>, Option<String>) {
        let Some(region) = region else {
            let legs = self.weighted(legs);
            let first = legs.first().map(name).unwrap_or_default();
            return (
                legs,
                Some(format!(
                    "region: caller's region unknown, weighted drew {first}"
                )),
            );
        };
        let (near, far): (Vec<Leg>, Vec<Leg>) = legs.into_iter().partition(|l| {
            self.attr(l.upstream)
                .region
                .is_some_and(|r| r.eq_ignore_ascii_case(region))
        });
        let found = !near.is_empty();
        let mut legs = self.weighted(near);
        legs.extend(self.weighted(far));
        let first = legs.first().map(name).unwrap_or_default();
        let note = if found {
            format!("region {region}: drew {first}")
        } else {
            format!("region {region}: no upstream there, weighted drew {first}")
        };
        (legs, Some(note))
    }

    /// Priority bands, lowest first; inside a band a weighted draw without replacement
    /// (weight 0 comes last in its band).
    fn weighted(&self, legs: Vec<Leg>) -> Vec<Leg> {
        let mut bands: Vec<(u32, Vec<Leg>)> = Vec::new();
        for leg in legs {
            let p = self.attr(leg.upstream).priority;
            match bands.iter_mut().find(|(bp, _)| *bp == p) {
                Some((_, b)) => b.push(leg),
                None => bands.push((p, vec![leg])),
            }
        }
        bands.sort_by_key(|(p, _)| *p);
        let Ok(mut rng) = self.rng.lock() else {
            return bands.into_iter().flat_map(|(_, b)| b).collect();
        };
        let mut out = Vec::new();
        for (_, mut band) in bands {
            while !band.is_empty() {
                let weights: Vec<u64> = band
                    .iter()
                    .map(|l| u64::from(self.attr(l.upstream).weight))
                    .collect();
                let total: u64 = weights.iter().sum();
                let pick = if total == 0 {
                    0
                } else {
                    let mut x = rng.random_range(0..total);
                    weights
                        .iter()
                        .position(|w| {
                            if x < *w {
                                true
                            } else {
                                x -= w;
                                false
                            }
                        })
                        .unwrap_or(0)
                };
                out.push(band.remove(pick));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use bytes::Bytes;

    fn strategist(attrs: Vec<UpstreamRouting>) -> Strategist {
        Strategist {
            attrs,
            rng: Mutex::new(StdRng::seed_from_u64(1)),
        }
    }

    fn legs(n: usize) -> Vec<Leg> {
        (0..n)
            .map(|i| Leg {
                upstream: i,
                upstream_model: "claude-sonnet-4-5".into(),
                body: Bytes::new(),
            })
            .collect()
    }

    fn attr(priority: u32, weight: u32) -> UpstreamRouting {
        UpstreamRouting {
            priority,
            weight,
            ..UpstreamRouting::default()
        }
    }

    #[test]
    fn weighted_draws_inside_the_best_band() {
        let s = strategist(vec![attr(1, 1), attr(0, 3), attr(0, 1)]);
        let mut firsts = [0usize; 3];
        for _ in 0..4000 {
            let order = s.weighted(legs(3));
            firsts[order[0].upstream] += 1;
            assert_eq!(order[2].upstream, 0, "the worse band comes last");
        }
        assert_eq!(firsts[0], 0);
        // 3:1 inside band 0.
        let share = firsts[1] as f64 / 4000.0;
        assert!((0.72..0.78).contains(&share), "{share}");
    }

    #[test]
    fn weight_zero_comes_last_in_its_band() {
        let s = strategist(vec![attr(0, 0), attr(0, 5)]);
        for _ in 0..100 {
            assert_eq!(s.weighted(legs(2))[0].upstream, 1);
        }
    }
}
