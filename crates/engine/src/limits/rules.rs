//! Which `rate_limits.inference` entry applies to a caller (the first whose `match` fits),
//! and what an admission draws under it. Limiter keys name the rule and the principal (the
//! person's subject, the client key's id, the workload's subject); they live in the store
//! or in memory, never in a metric label.

use super::bucket::{Kind, day_start};
use super::{Dim, Draw, SlotDraw};
use crate::auth::Principal;
use crate::config::limits::{InferenceLimits, LimitMatch, LimitRule};

/// Whether `m` matches the caller: any listed criterion fits (an empty match, all).
pub fn matches(m: &LimitMatch, who: &Principal) -> bool {
    if m.is_catch_all() {
        return true;
    }
    match who {
        Principal::Session { user, .. } => {
            user.groups.iter().any(|g| m.groups.contains(g))
                || m.users.iter().any(|u| {
                    user.email
                        .as_deref()
                        .is_some_and(|e| e.eq_ignore_ascii_case(u))
                        || user.sub.eq_ignore_ascii_case(u)
                })
        }
        Principal::ClientKey { id } => m.client_keys.contains(id),
        Principal::Workload(w) => m.workload.iter().any(|s| s == "*" || *s == w.sub),
    }
}

/// The first matching rule and its index.
pub fn first<'a>(limits: &'a InferenceLimits, who: &Principal) -> Option<(usize, &'a LimitRule)> {
    limits
        .rules
        .iter()
        .enumerate()
        .find(|(_, r)| matches(&r.matcher, who))
}

/// What one admission takes: the matched rule's buckets and counter, sorted by key (the
/// order rows are locked in), and its concurrency slot — a client key no rule limits in
/// concurrency gets the per-key default.
pub fn draws(
    limits: &InferenceLimits,
    who: &Principal,
    estimate: u64,
    now_ms: i64,
) -> (Option<usize>, Vec<Draw>, Option<SlotDraw>) {
    let principal = who.label();
    let matched = first(limits, who);
    let mut draws = Vec::new();
    let mut slot = None;
    if let Some((i, rule)) = matched {
        let key = |dim: Dim| format!("r{i}:{}:{principal}", dim.as_str());
        let tokens = estimate as f64;
        if let Some(rpm) = rule.rpm {
            draws.push(Draw {
                key: key(Dim::Rpm),
                dim: Dim::Rpm,
                cost: 1.0,
                kind: Kind::Bucket {
                    capacity: f64::from(rule.burst),
                    per_ms: f64::from(rpm) / 60_000.0,
                },
            });
        }
        if let Some(tpm) = rule.tpm {
            draws.push(Draw {
                key: key(Dim::Tpm),
                dim: Dim::Tpm,
                cost: tokens,
                kind: Kind::Bucket {
                    capacity: tpm as f64,
                    per_ms: tpm as f64 / 60_000.0,
                },
            });
        }
        if let Some(daily) = rule.daily_tokens {
            draws.push(Draw {
                key: key(Dim::DailyTokens),
                dim: Dim::DailyTokens,
                cost: tokens,
                kind: Kind::Daily {
                    limit: daily as f64,
                    day: day_start(now_ms),
                },
            });
        }
        if let Some(limit) = rule.concurrent {
            slot = Some(SlotDraw {
                key: key(Dim::Concurrent),
                limit,
                id: String::new(),
                per_replica: false,
            });
        }
    }
    if slot.is_none()
        && let (Principal::ClientKey { .. }, Some(limit)) = (who, limits.client_key_concurrency)
    {
        slot = Some(SlotDraw {
            key: format!("default:concurrent:{principal}"),
            limit,
            id: String::new(),
            per_replica: true,
        });
    }
    draws.sort_by(|a, b| a.key.cmp(&b.key));
    (matched.map(|(i, _)| i), draws, slot)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::identity::UserIdentity;

    fn person(groups: &[&str]) -> Principal {
        Principal::Session {
            user: UserIdentity {
                sub: "s1".into(),
                email: Some("Ada@Example.com".into()),
                name: None,
                groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            },
            jti: "j".into(),
            billing_group_tag: None,
        }
    }

    fn rule(matcher: LimitMatch, rpm: u32) -> LimitRule {
        LimitRule {
            matcher,
            rpm: Some(rpm),
            burst: rpm,
            tpm: None,
            daily_tokens: None,
            concurrent: None,
        }
    }

    #[test]
    fn the_first_matching_rule_wins_and_a_catch_all_takes_the_rest() {
        let limits = InferenceLimits {
            rules: vec![
                rule(
                    LimitMatch {
                        groups: vec!["interns".into()],
                        ..Default::default()
                    },
                    2,
                ),
                rule(
                    LimitMatch {
                        users: vec!["ada@example.com".into()],
                        ..Default::default()
                    },
                    3,
                ),
                rule(LimitMatch::default(), 9),
            ],
            client_key_concurrency: Some(50),
            fail_closed: false,
        };
        assert_eq!(first(&limits, &person(&["interns"])).unwrap().0, 0);
        assert_eq!(first(&limits, &person(&["staff"])).unwrap().0, 1);
        let key = Principal::ClientKey { id: "ci".into() };
        assert_eq!(first(&limits, &key).unwrap().0, 2);
        let (i, draws, slot) = draws(&limits, &key, 100, 0);
        assert_eq!(i, Some(2));
        assert_eq!(draws[0].key, "r2:rpm:key:ci");
        // No rule sets `concurrent`: the client key's default applies.
        let slot = slot.unwrap();
        assert_eq!(
            (slot.key.as_str(), slot.limit, slot.per_replica),
            ("default:concurrent:key:ci", 50, true)
        );
        let (_, _, none) = super::draws(&limits, &person(&[]), 1, 0);
        assert!(none.is_none());
    }
}
