//! Cap arithmetic, pure and backend-free: which cap binds a person in each period, their
//! standing against it, and which periods a new hold would push over. Both stores read the
//! caps and the spend rows, then call these; nothing here touches a database.

use chrono::{DateTime, Utc};

use super::{Family, GroupMode, Period, PoolRule, ScopeType, SpendLimit, Standing};

/// One counter of a person's spend: a period's spend of every model, or of one family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Meter {
    pub period: Period,
    /// `None`: every model.
    pub family: Option<Family>,
}

impl Meter {
    /// A period's spend of every model.
    pub fn all(period: Period) -> Meter {
        Meter {
            period,
            family: None,
        }
    }

    /// How people read it: `daily`, `daily Opus`, `total Opus`.
    pub fn describe(&self) -> String {
        match self.family {
            Some(f) => format!("{} {}", self.period.as_str(), f.label()),
            None => self.period.as_str().to_owned(),
        }
    }
}

/// The meters a reservation for a request of `family` holds on, in the order the stores
/// lock their rows: every model's daily, weekly, monthly and total spend, then the same
/// four of the family's.
pub fn held_meters(family: Option<Family>) -> Vec<Meter> {
    let mut out: Vec<Meter> = Period::EVERY.iter().map(|p| Meter::all(*p)).collect();
    if let Some(f) = family {
        out.extend(Period::EVERY.iter().map(|p| Meter {
            period: *p,
            family: Some(f),
        }));
    }
    out
}

/// The meters a person's standings report: every model's daily, weekly and monthly spend
/// always (the reference's three), every other meter (`total`, a family's) only where a
/// cap binds the person. `among` limits the families (a reservation's own; `None`: all).
pub fn shown(
    limits: &[SpendLimit],
    among: Option<&[Meter]>,
    sub: &str,
    groups: &[String],
    mode: GroupMode,
) -> Vec<Meter> {
    let every = || {
        Period::EVERY
            .iter()
            .flat_map(|p| {
                std::iter::once(None)
                    .chain(Family::all().map(Some))
                    .map(move |f| (p, f))
            })
            .map(|(p, f)| Meter {
                period: *p,
                family: f,
            })
    };
    let mut out: Vec<Meter> = Period::ALL.iter().map(|p| Meter::all(*p)).collect();
    let capped = |m: &Meter| binding_cap(limits, m.period, m.family, sub, groups, mode).is_some();
    let extra: Vec<Meter> = match among {
        Some(held) => held.iter().copied().filter(|m| !out.contains(m)).collect(),
        None => every().filter(|m| !out.contains(m)).collect(),
    };
    out.extend(extra.into_iter().filter(|m| capped(m)));
    out.sort_by_key(|m| (m.family, m.period));
    out
}

/// The cap that binds a person for one period and family (`None`: every model): user,
/// else group (by mode), else org. `None` means unlimited.
pub fn binding_cap(
    limits: &[SpendLimit],
    period: Period,
    family: Option<Family>,
    sub: &str,
    groups: &[String],
    mode: GroupMode,
) -> Option<(i64, ScopeType)> {
    binding_limit(limits, period, family, sub, groups, mode)
        .and_then(|l| l.amount_cents.map(|a| (a, l.scope_type)))
}

/// The stored limit that decides a person's cap for one period and family (its amount may
/// be `None`, unlimited): their own, else among their groups' the smallest (`min`: a real
/// cap before an unlimited one) or the largest (`max`: an unlimited one first), else the
/// organization's. Ties go to the smaller id, as the reference's `caps_by_period` does. A
/// family's limits and every model's are separate: each binds on its own.
pub fn binding_limit<'a>(
    limits: &'a [SpendLimit],
    period: Period,
    family: Option<Family>,
    sub: &str,
    groups: &[String],
    mode: GroupMode,
) -> Option<&'a SpendLimit> {
    let of = |t: ScopeType| {
        limits
            .iter()
            .filter(move |l| l.period == period && l.model == family && l.scope_type == t)
    };
    if let Some(u) = of(ScopeType::User).find(|l| l.scope_id == sub) {
        return Some(u);
    }
    let group = of(ScopeType::RbacGroup)
        .filter(|l| groups.contains(&l.scope_id))
        .min_by(|a, b| {
            let key = |l: &SpendLimit| match mode {
                GroupMode::Min => (l.amount_cents.is_none(), l.amount_cents.unwrap_or(0)),
                GroupMode::Max => (l.amount_cents.is_some(), -l.amount_cents.unwrap_or(0)),
            };
            key(a).cmp(&key(b)).then_with(|| a.id.cmp(&b.id))
        });
    group.or_else(|| of(ScopeType::Organization).next())
}

/// The binding cap in cents of each meter, in order (`None`: unlimited).
pub fn binding_caps(
    limits: &[SpendLimit],
    meters: &[Meter],
    sub: &str,
    groups: &[String],
    mode: GroupMode,
) -> Vec<Option<i64>> {
    meters
        .iter()
        .map(|m| binding_cap(limits, m.period, m.family, sub, groups, mode).map(|c| c.0))
        .collect()
}

/// A person's standing on each of `meters`: its binding cap with the `(spent, reserved)`
/// totals `totals` gives for it (nothing recorded: zero), reset as of `now`.
pub fn standings(
    limits: &[SpendLimit],
    meters: &[Meter],
    totals: impl Fn(&Meter) -> (u64, u64),
    now: DateTime<Utc>,
    sub: &str,
    groups: &[String],
    mode: GroupMode,
) -> Vec<Standing> {
    meters
        .iter()
        .map(|m| {
            let cap = binding_cap(limits, m.period, m.family, sub, groups, mode);
            let (spent, reserved) = totals(m);
            Standing {
                period: m.period,
                family: m.family,
                cap_cents: cap.map(|c| c.0),
                cap_scope: cap.map(|c| c.1),
                spent_micro: spent,
                reserved_micro: reserved,
                reset: m.period.window(now).resets(),
            }
        })
        .collect()
}

/// The caps that spent + reserved + `amount_micro` would go over (a cap in cents is
/// 10 000 micro-USD per cent; unlimited never goes over).
pub fn exceeded(standings: &[Standing], amount_micro: u64) -> Vec<Meter> {
    standings
        .iter()
        .filter(|s| {
            s.cap_cents.is_some_and(|cap| {
                let cap_micro = u128::from(cap.max(0) as u64) * 10_000;
                u128::from(s.spent_micro) + u128::from(s.reserved_micro) + u128::from(amount_micro)
                    > cap_micro
            })
        })
        .map(Standing::meter)
        .collect()
}

/// The standings after a hold of `amount_micro` was written on every meter.
pub fn add_hold(standings: &mut [Standing], amount_micro: u64) {
    for s in standings {
        s.reserved_micro = s.reserved_micro.saturating_add(amount_micro);
    }
}

/// The person's shared group budgets in paying order, each `(group, budget in cents)`:
/// the active pools of their groups, by `rule` (`default_order`: the largest budget first;
/// `priority_list`: the listed groups first, in list order), ties by group name. This is
/// the reference's order; the first pool with room for a request pays for it.
pub fn pools(limits: &[SpendLimit], groups: &[String], rule: &PoolRule) -> Vec<(String, i64)> {
    let mut found: Vec<(String, i64)> = limits
        .iter()
        .filter(|l| groups.contains(&l.scope_id))
        .filter_map(|l| l.active_pool().map(|a| (l.scope_id.clone(), a)))
        .collect();
    found.sort_by(|a, b| {
        let first = match rule {
            PoolRule::DefaultOrder => b.1.cmp(&a.1),
            PoolRule::PriorityList(order) => {
                let at = |g: &str| order.iter().position(|o| o == g).unwrap_or(order.len());
                at(&a.0).cmp(&at(&b.0))
            }
        };
        first.then_with(|| a.0.cmp(&b.0))
    });
    found.dedup_by(|a, b| a.0 == b.0);
    found
}

/// Whether a pool of `cap_cents` with `spent + reserved` micro-USD used has room for
/// `amount_micro` more.
pub fn pool_fits(cap_cents: i64, spent: u64, reserved: u64, amount_micro: u64) -> bool {
    let cap_micro = u128::from(cap_cents.max(0) as u64) * 10_000;
    u128::from(spent) + u128::from(reserved) + u128::from(amount_micro) <= cap_micro
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::spend::{Family, new_id, windows};

    fn lim(t: ScopeType, id: &str, period: Period, amount: Option<i64>) -> SpendLimit {
        SpendLimit {
            id: new_id("spl"),
            scope_type: t,
            scope_id: id.into(),
            period,
            model: None,
            amount_cents: amount,
            pooled: None,
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    #[test]
    fn user_then_group_then_org() {
        let g = vec!["eng".to_owned(), "ops".to_owned()];
        let limits = vec![
            lim(ScopeType::Organization, "", Period::Daily, Some(1000)),
            lim(ScopeType::RbacGroup, "eng", Period::Daily, Some(500)),
            lim(ScopeType::RbacGroup, "ops", Period::Daily, None),
            lim(ScopeType::User, "bob", Period::Daily, None),
            lim(ScopeType::Organization, "", Period::Monthly, Some(9000)),
        ];
        assert_eq!(
            binding_cap(&limits, Period::Daily, None, "alice", &g, GroupMode::Min),
            Some((500, ScopeType::RbacGroup))
        );
        assert_eq!(
            binding_cap(&limits, Period::Daily, None, "alice", &g, GroupMode::Max),
            None,
            "an unlimited group wins in max mode"
        );
        assert_eq!(
            binding_cap(&limits, Period::Daily, None, "bob", &g, GroupMode::Min),
            None,
            "a user override beats groups"
        );
        assert_eq!(
            binding_cap(&limits, Period::Daily, None, "carol", &[], GroupMode::Min),
            Some((1000, ScopeType::Organization))
        );
        assert_eq!(
            binding_cap(&limits, Period::Weekly, None, "carol", &[], GroupMode::Min),
            None
        );
        assert_eq!(
            binding_cap(&limits, Period::Monthly, None, "alice", &g, GroupMode::Min),
            Some((9000, ScopeType::Organization))
        );
    }

    #[test]
    fn standings_pair_caps_with_totals_and_find_the_exceeded_periods() {
        let now = Utc.with_ymd_and_hms(2026, 3, 4, 12, 0, 0).single().unwrap();
        let limits = vec![
            lim(ScopeType::Organization, "", Period::Daily, Some(10)),
            lim(ScopeType::User, "alice", Period::Weekly, Some(0)),
        ];
        let meters = shown(&limits, None, "alice", &[], GroupMode::Min);
        assert_eq!(meters, Period::ALL.map(Meter::all).to_vec());
        assert_eq!(
            binding_caps(&limits, &meters, "alice", &[], GroupMode::Min),
            [Some(10), Some(0), None]
        );
        let totals = |m: &Meter| match m.period {
            Period::Daily => (50_000, 40_000),
            Period::Weekly => (0, 0),
            _ => (7, 8),
        };
        let mut s = standings(&limits, &meters, totals, now, "alice", &[], GroupMode::Min);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].cap_cents, Some(10));
        assert_eq!(s[0].cap_scope, Some(ScopeType::Organization));
        assert_eq!((s[0].spent_micro, s[0].reserved_micro), (50_000, 40_000));
        assert_eq!(s[1].cap_scope, Some(ScopeType::User));
        assert_eq!(s[2].cap_cents, None);
        assert_eq!(s[2].reset, Some(windows(now)[2].reset));
        // 10 cents = 100 000 micro: 90 000 used, so 10 000 more fits exactly.
        let all = |p| vec![Meter::all(p)];
        assert_eq!(exceeded(&s, 10_000), all(Period::Weekly));
        assert_eq!(
            exceeded(&s, 10_001),
            vec![Meter::all(Period::Daily), Meter::all(Period::Weekly)]
        );
        assert_eq!(exceeded(&s, 0), vec![], "a zero cap refuses only spending");
        add_hold(&mut s, 5);
        assert_eq!(
            s.iter().map(|s| s.reserved_micro).collect::<Vec<_>>(),
            vec![40_005, 5, 13]
        );
    }

    fn family(name: &str) -> Option<Family> {
        Family::parse(name)
    }

    fn capped(model: &str, period: Period, cents: i64) -> SpendLimit {
        let mut l = lim(ScopeType::Organization, "", period, Some(cents));
        l.model = family(model);
        l
    }

    #[test]
    fn a_family_cap_binds_only_its_family_and_counts_only_its_spend() {
        let now = Utc.with_ymd_and_hms(2026, 3, 4, 12, 0, 0).single().unwrap();
        let limits = vec![
            lim(ScopeType::Organization, "", Period::Daily, Some(100)),
            capped("opus", Period::Daily, 10),
            capped("sonnet", Period::Total, 50),
        ];
        let (opus, sonnet) = (family("opus"), family("sonnet"));
        let daily_opus = Meter {
            period: Period::Daily,
            family: opus,
        };
        assert_eq!(
            binding_cap(&limits, Period::Daily, opus, "a", &[], GroupMode::Min),
            Some((10, ScopeType::Organization))
        );
        assert_eq!(
            binding_cap(&limits, Period::Daily, sonnet, "a", &[], GroupMode::Min),
            None,
            "an Opus cap leaves Sonnet alone"
        );
        assert_eq!(
            binding_cap(&limits, Period::Daily, None, "a", &[], GroupMode::Min),
            Some((100, ScopeType::Organization)),
            "and the all-model cap is its own"
        );
        // An Opus request holds eight meters; its standings show the three plain periods
        // and the capped Opus one.
        let held = held_meters(opus);
        assert_eq!(held.len(), 8);
        assert_eq!(held[3], Meter::all(Period::Total));
        let meters = shown(&limits, Some(&held), "a", &[], GroupMode::Min);
        let mut want = Period::ALL.map(Meter::all).to_vec();
        want.push(daily_opus);
        assert_eq!(meters, want);
        // 6 cents of Opus and 80 of everything today: 4 more cents fit the Opus cap.
        let totals = |m: &Meter| match (m.period, m.family) {
            (Period::Daily, None) => (800_000, 0),
            (Period::Daily, Some(_)) => (60_000, 0),
            _ => (0, 0),
        };
        let s = standings(&limits, &meters, totals, now, "a", &[], GroupMode::Min);
        assert_eq!(s[3].describe(), "daily Opus");
        assert_eq!(exceeded(&s, 40_000), vec![]);
        assert_eq!(exceeded(&s, 40_001), vec![daily_opus]);
        assert_eq!(
            exceeded(&s, 200_001),
            vec![Meter::all(Period::Daily), daily_opus]
        );
        // Shown without a reservation: every capped family meter, total never resetting.
        let all = shown(&limits, None, "a", &[], GroupMode::Min);
        assert_eq!(all.len(), 5);
        let s = standings(&limits, &all, |_| (0, 0), now, "a", &[], GroupMode::Min);
        let total = s.iter().find(|s| s.period == Period::Total).unwrap();
        assert_eq!((total.family, total.reset), (sonnet, None));
        assert_eq!(total.describe(), "total Sonnet");
    }

    #[test]
    fn the_total_period_never_resets() {
        let w = Period::Total.window(Utc::now());
        assert_eq!(w.start.timestamp_millis(), 0);
        assert_eq!(w.resets(), None);
        assert!(Period::Daily.window(Utc::now()).resets().is_some());
        assert_eq!(Period::parse("total"), Some(Period::Total));
        assert!(!Period::ALL.contains(&Period::Total));
    }

    fn pool(group: &str, cents: i64, paused: bool) -> SpendLimit {
        let mut l = lim(ScopeType::RbacGroup, group, Period::Monthly, Some(100));
        l.pooled = Some(super::super::PooledBudget {
            amount_cents: cents,
            paused,
        });
        l
    }

    #[test]
    fn pools_pay_in_the_rules_order() {
        let limits = vec![
            pool("eng", 500, false),
            pool("ops", 900, false),
            pool("research", 500, false),
            pool("paused", 10_000, true),
            pool("other", 10_000, false),
            lim(ScopeType::RbacGroup, "plain", Period::Monthly, Some(5)),
        ];
        let groups: Vec<String> = ["research", "eng", "ops", "paused", "plain"]
            .map(String::from)
            .to_vec();
        let names = |rule: &PoolRule| -> Vec<String> {
            pools(&limits, &groups, rule)
                .into_iter()
                .map(|p| p.0)
                .collect()
        };
        assert_eq!(
            names(&PoolRule::DefaultOrder),
            ["ops", "eng", "research"],
            "the largest budget first, ties by name; paused and others' pools never"
        );
        let order: std::sync::Arc<[String]> = vec!["research".to_owned(), "x".to_owned()].into();
        assert_eq!(
            names(&PoolRule::PriorityList(order)),
            ["research", "eng", "ops"],
            "listed groups first, then the rest by name"
        );
        assert!(pool_fits(1, 5_000, 4_000, 1_000));
        assert!(!pool_fits(1, 5_000, 4_000, 1_001));
        assert!(!pool_fits(0, 0, 0, 1));
    }
}
