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
//!
//! With conversation affinity ([`Affine`]) nothing is drawn: the strategy's tiers (the
//! order for `ordered`, priority bands for `weighted`, the caller's region then the rest
//! for `region`, equal prices for `cheapest`, equal p95 for `fastest`) are each ranked by
//! rendezvous hashing of the conversation's key with the upstreams' weights, so every
//! turn of a conversation (on every replica) gets the same order and new conversations
//! spread as the strategy says; the upstream that served the previous turn goes first
//! when it is in the best tier (a conversation that moved inside its tier, after a
//! failure, does not move back and lose its cache again). A better tier still wins: the
//! strategy's order, priority, price, speed or region are the operator's preferences, and
//! the router's health checks skip any upstream whose breaker is open or that cools down.

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
    /// The conversation this request belongs to, when affinity applies.
    pub affinity: Option<Affine>,
    /// What capability shaping set aside or redirected, for `route_reason`.
    pub shaped: Option<&'a str>,
}

/// A request's conversation, for affinity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Affine {
    /// The conversation's key ([`crate::conversation::key`]).
    pub key: u64,
    /// The upstream (index) that served its previous turn, as this replica saw it.
    pub previous: Option<usize>,
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
            affinity: None,
            shaped: None,
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
        let legs = match plan.affinity {
            Some(affine) if legs.len() > 1 => {
                match self.affine(plan, affine, legs, health, &name) {
                    Ok(chosen) => return chosen,
                    Err(legs) => legs,
                }
            }
            _ => legs,
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

    /// The strategy's tiers, each ranked for the conversation; the previous turn's
    /// upstream first. `Err` gives the legs back when affinity chose nothing: the first
    /// tier has one member (the strategy decided) and no previous turn moves ahead of it.
    fn affine(
        &self,
        plan: &Plan<'_>,
        affine: Affine,
        legs: Vec<Leg>,
        health: &UpstreamHealth,
        name: &dyn Fn(&Leg) -> String,
    ) -> Result<(Vec<Leg>, Option<String>), Vec<Leg>> {
        use crate::conversation::rendezvous::{rank, score};
        let tiers = self.tiers(plan, legs, health);
        let decided = tiers.first().is_none_or(|t| t.len() == 1);
        // Only inside the best tier does the previous turn's upstream count.
        let previous = affine.previous.filter(|p| {
            tiers
                .first()
                .is_some_and(|t| t.iter().any(|l| l.upstream == *p))
        });
        if decided {
            return Err(tiers.into_iter().flatten().collect());
        }
        let mut out: Vec<Leg> = Vec::new();
        for tier in tiers {
            out.extend(rank(tier, |l| {
                score(affine.key, &name(l), self.attr(l.upstream).weight)
            }));
        }
        let strategy = plan.strategy.as_str();
        let kept = previous.and_then(|p| out.iter().position(|l| l.upstream == p));
        let how = match kept {
            Some(pos) => {
                let leg = out.remove(pos);
                out.insert(0, leg);
                "the previous turn's upstream"
            }
            None => "by conversation",
        };
        let first = out.first().map(name).unwrap_or_default();
        Ok((out, Some(format!("affinity: {first}, {how} ({strategy})"))))
    }

    /// The groups a strategy prefers in order, whose members it treats alike.
    fn tiers(&self, plan: &Plan<'_>, legs: Vec<Leg>, health: &UpstreamHealth) -> Vec<Vec<Leg>> {
        // `fastest` trusts p95 only once every candidate has enough samples.
        let p95 = |l: &Leg| {
            health
                .ttfb_stats(l.upstream)
                .filter(|(n, _)| *n >= FASTEST_MIN_SAMPLES)
                .map(|(_, p95)| p95.as_millis() as u64)
        };
        let timed = plan.strategy == Strategy::Fastest && legs.iter().all(|l| p95(l).is_some());
        let key = |l: &Leg| -> (u64, u64) {
            match plan.strategy {
                Strategy::Ordered => (0, 0),
                Strategy::Weighted => (u64::from(self.attr(l.upstream).priority), 0),
                Strategy::Region => {
                    let near = plan.region.is_some_and(|r| {
                        self.attr(l.upstream)
                            .region
                            .is_some_and(|u| u.eq_ignore_ascii_case(r))
                    });
                    (u64::from(!near), u64::from(self.attr(l.upstream).priority))
                }
                Strategy::Cheapest => match plan.pricing {
                    // Prices to a thousandth of a dollar per million tokens.
                    Some(p) => ((self.price(l, p) * 1000.0).round() as u64, 0),
                    None => (0, 0),
                },
                Strategy::Fastest if timed => (p95(l).unwrap_or_default(), 0),
                Strategy::Fastest => (0, 0),
            }
        };
        if plan.strategy == Strategy::Ordered {
            return legs.into_iter().map(|l| vec![l]).collect();
        }
        let mut keyed: Vec<((u64, u64), Leg)> = legs.into_iter().map(|l| (key(&l), l)).collect();
        keyed.sort_by_key(|(k, _)| *k);
        let mut tiers: Vec<((u64, u64), Vec<Leg>)> = Vec::new();
        for (k, leg) in keyed {
            match tiers.last_mut() {
                Some((tk, tier)) if *tk == k => tier.push(leg),
                _ => tiers.push((k, vec![leg])),
            }
        }
        tiers.into_iter().map(|(_, t)| t).collect()
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
