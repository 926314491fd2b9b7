//! Cap arithmetic, pure and backend-free: which cap binds a person in each period, their
//! standing against it, and which periods a new hold would push over. Both stores read the
//! caps and the spend rows, then call these; nothing here touches a database.

use super::{GroupMode, Period, PoolRule, ScopeType, SpendLimit, Standing, Window};

/// The cap that binds a person for one period: user, else group (by mode), else org.
/// `None` means unlimited.
pub fn binding_cap(
    limits: &[SpendLimit],
    period: Period,
    sub: &str,
    groups: &[String],
    mode: GroupMode,
) -> Option<(i64, ScopeType)> {
    binding_limit(limits, period, sub, groups, mode)
        .and_then(|l| l.amount_cents.map(|a| (a, l.scope_type)))
}

/// The stored limit that decides a person's cap for one period (its amount may be `None`,
/// unlimited): their own, else among their groups' the smallest (`min`: a real cap before
/// an unlimited one) or the largest (`max`: an unlimited one first), else the
/// organization's. Ties go to the smaller id, as the reference's `caps_by_period` does.
pub fn binding_limit<'a>(
    limits: &'a [SpendLimit],
    period: Period,
    sub: &str,
    groups: &[String],
    mode: GroupMode,
) -> Option<&'a SpendLimit> {
    let of = |t: ScopeType| {
        limits
            .iter()
            .filter(move |l| l.period == period && l.scope_type == t)
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

/// The binding cap in cents for each window, in window order (`None`: unlimited).
pub fn binding_caps(
    limits: &[SpendLimit],
    windows: &[Window; 3],
    sub: &str,
    groups: &[String],
    mode: GroupMode,
) -> [Option<i64>; 3] {
    windows.map(|w| binding_cap(limits, w.period, sub, groups, mode).map(|c| c.0))
}

/// A person's standing in each window: its binding cap with the `(spent, reserved)` totals
/// of that window (`totals` in window order).
pub fn standings(
    limits: &[SpendLimit],
    totals: [(u64, u64); 3],
    windows: &[Window; 3],
    sub: &str,
    groups: &[String],
    mode: GroupMode,
) -> Vec<Standing> {
    windows
        .iter()
        .zip(totals)
        .map(|(w, (spent, reserved))| {
            let cap = binding_cap(limits, w.period, sub, groups, mode);
            Standing {
                period: w.period,
                cap_cents: cap.map(|c| c.0),
                cap_scope: cap.map(|c| c.1),
                spent_micro: spent,
                reserved_micro: reserved,
                reset: w.reset,
            }
        })
        .collect()
}

/// The periods in which spent + reserved + `amount_micro` would go over the cap
/// (a cap in cents is 10 000 micro-USD per cent; unlimited never goes over).
pub fn exceeded(standings: &[Standing], amount_micro: u64) -> Vec<Period> {
    standings
        .iter()
        .filter(|s| {
            s.cap_cents.is_some_and(|cap| {
                let cap_micro = u128::from(cap.max(0) as u64) * 10_000;
                u128::from(s.spent_micro) + u128::from(s.reserved_micro) + u128::from(amount_micro)
                    > cap_micro
            })
        })
        .map(|s| s.period)
        .collect()
}

/// The standings after a hold of `amount_micro` was written in every period.
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
    use crate::spend::{new_id, windows};

    fn lim(t: ScopeType, id: &str, period: Period, amount: Option<i64>) -> SpendLimit {
        SpendLimit {
            id: new_id("spl"),
            scope_type: t,
            scope_id: id.into(),
            period,
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
            binding_cap(&limits, Period::Daily, "alice", &g, GroupMode::Min),
            Some((500, ScopeType::RbacGroup))
        );
        assert_eq!(
            binding_cap(&limits, Period::Daily, "alice", &g, GroupMode::Max),
            None,
            "an unlimited group wins in max mode"
        );
        assert_eq!(
            binding_cap(&limits, Period::Daily, "bob", &g, GroupMode::Min),
            None,
            "a user override beats groups"
        );
        assert_eq!(
            binding_cap(&limits, Period::Daily, "carol", &[], GroupMode::Min),
            Some((1000, ScopeType::Organization))
        );
        assert_eq!(
            binding_cap(&limits, Period::Weekly, "carol", &[], GroupMode::Min),
            None
        );
        assert_eq!(
            binding_cap(&limits, Period::Monthly, "alice", &g, GroupMode::Min),
            Some((9000, ScopeType::Organization))
        );
    }

    #[test]
    fn standings_pair_caps_with_totals_and_find_the_exceeded_periods() {
        let now = Utc.with_ymd_and_hms(2026, 3, 4, 12, 0, 0).single().unwrap();
        let wins = windows(now);
        let limits = vec![
            lim(ScopeType::Organization, "", Period::Daily, Some(10)),
            lim(ScopeType::User, "alice", Period::Weekly, Some(0)),
        ];
        let totals = [(50_000, 40_000), (0, 0), (7, 8)];
        assert_eq!(
            binding_caps(&limits, &wins, "alice", &[], GroupMode::Min),
            [Some(10), Some(0), None]
        );
        let mut s = standings(&limits, totals, &wins, "alice", &[], GroupMode::Min);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].cap_cents, Some(10));
        assert_eq!(s[0].cap_scope, Some(ScopeType::Organization));
        assert_eq!((s[0].spent_micro, s[0].reserved_micro), (50_000, 40_000));
        assert_eq!(s[1].cap_scope, Some(ScopeType::User));
        assert_eq!(s[2].cap_cents, None);
        assert_eq!(s[2].reset, wins[2].reset);
        // 10 cents = 100 000 micro: 90 000 used, so 10 000 more fits exactly.
        assert_eq!(exceeded(&s, 10_000), vec![Period::Weekly]);
        assert_eq!(exceeded(&s, 10_001), vec![Period::Daily, Period::Weekly]);
        assert_eq!(exceeded(&s, 0), vec![], "a zero cap refuses only spending");
        add_hold(&mut s, 5);
        assert_eq!(
            s.iter().map(|s| s.reserved_micro).collect::<Vec<_>>(),
            vec![40_005, 5, 13]
        );
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
