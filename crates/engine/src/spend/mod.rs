//! Spend caps that are never exceeded.
//!
//! Caps are set per scope (user > group > organization) and period (daily, weekly from
//! Monday, monthly from the 1st; UTC) in integer USD cents. At admission the worst-case cost
//! of a request is reserved against every binding cap in the same store transaction that
//! checks them; when the response ends (or the client leaves) the reservation is settled to
//! the real cost in the transaction that writes the usage row. Open reservations left by a
//! crash are reconciled at start.

pub mod admin;
pub mod admission;
pub mod headers;
pub mod usage_api;

use chrono::{DateTime, Datelike, Duration, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use crate::metering::pricing::Pricing;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    Daily,
    Weekly,
    Monthly,
}

impl Period {
    pub const ALL: [Period; 3] = [Period::Daily, Period::Weekly, Period::Monthly];

    pub fn as_str(self) -> &'static str {
        match self {
            Period::Daily => "daily",
            Period::Weekly => "weekly",
            Period::Monthly => "monthly",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "daily" => Some(Period::Daily),
            "weekly" => Some(Period::Weekly),
            "monthly" => Some(Period::Monthly),
            _ => None,
        }
    }

    /// The window containing `now`: its start and the next reset.
    pub fn window(self, now: DateTime<Utc>) -> Window {
        let day = Utc
            .with_ymd_and_hms(now.year(), now.month(), now.day(), 0, 0, 0)
            .single()
            .unwrap_or(now);
        let (start, reset) = match self {
            Period::Daily => (day, day + Duration::days(1)),
            Period::Weekly => {
                let start = day - Duration::days(i64::from(now.weekday().num_days_from_monday()));
                (start, start + Duration::days(7))
            }
            Period::Monthly => {
                let start = Utc
                    .with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0)
                    .single()
                    .unwrap_or(day);
                let (y, m) = if now.month() == 12 {
                    (now.year() + 1, 1)
                } else {
                    (now.year(), now.month() + 1)
                };
                let reset = Utc
                    .with_ymd_and_hms(y, m, 1, 0, 0, 0)
                    .single()
                    .unwrap_or(start + Duration::days(31));
                (start, reset)
            }
        };
        Window {
            period: self,
            start,
            reset,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub period: Period,
    pub start: DateTime<Utc>,
    pub reset: DateTime<Utc>,
}

pub fn windows(now: DateTime<Utc>) -> [Window; 3] {
    Period::ALL.map(|p| p.window(now))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeType {
    Organization,
    RbacGroup,
    User,
}

impl ScopeType {
    pub fn as_str(self) -> &'static str {
        match self {
            ScopeType::Organization => "organization",
            ScopeType::RbacGroup => "rbac_group",
            ScopeType::User => "user",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "organization" => Some(ScopeType::Organization),
            "rbac_group" => Some(ScopeType::RbacGroup),
            "user" => Some(ScopeType::User),
            _ => None,
        }
    }
}

/// A stored cap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendLimit {
    pub id: String,
    pub scope_type: ScopeType,
    /// Group name or user `sub`; empty for the organization.
    pub scope_id: String,
    pub period: Period,
    /// `None` is unlimited; `Some(0)` blocks everything.
    pub amount_cents: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupMode {
    /// The smallest group cap binds (default).
    #[default]
    Min,
    /// The largest binds; an unlimited group wins.
    Max,
}

/// The cap that binds a person for one period: user, else group (by mode), else org.
/// `None` means unlimited.
pub fn binding_cap(
    limits: &[SpendLimit],
    period: Period,
    sub: &str,
    groups: &[String],
    mode: GroupMode,
) -> Option<(i64, ScopeType)> {
    let of = |t: ScopeType| {
        limits
            .iter()
            .filter(move |l| l.period == period && l.scope_type == t)
    };
    if let Some(u) = of(ScopeType::User).find(|l| l.scope_id == sub) {
        return u.amount_cents.map(|a| (a, ScopeType::User));
    }
    let group_caps: Vec<Option<i64>> = of(ScopeType::RbacGroup)
        .filter(|l| groups.contains(&l.scope_id))
        .map(|l| l.amount_cents)
        .collect();
    if !group_caps.is_empty() {
        let pick = match mode {
            GroupMode::Min => group_caps.iter().flatten().min().copied(),
            GroupMode::Max => {
                if group_caps.iter().any(Option::is_none) {
                    None
                } else {
                    group_caps.iter().flatten().max().copied()
                }
            }
        };
        return pick.map(|a| (a, ScopeType::RbacGroup));
    }
    of(ScopeType::Organization)
        .next()
        .and_then(|o| o.amount_cents)
        .map(|a| (a, ScopeType::Organization))
}

/// One period's standing for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Standing {
    pub period: Period,
    /// Cap in cents (`None`: unlimited).
    pub cap_cents: Option<i64>,
    pub cap_scope: Option<ScopeType>,
    /// Settled spend in the current window.
    pub spent_micro: u64,
    /// Held by open reservations (this request's included, when reserving).
    pub reserved_micro: u64,
    pub reset: DateTime<Utc>,
}

impl Standing {
    /// Settled spend over the cap (0 when unlimited).
    pub fn utilization(&self) -> f64 {
        match self.cap_cents {
            Some(c) if c > 0 => self.spent_micro as f64 / (c as f64 * 10_000.0),
            Some(_) => 1.0,
            None => 0.0,
        }
    }
}

/// What the gateway asks the store to reserve.
#[derive(Debug, Clone)]
pub struct ReserveRequest {
    pub reservation_id: String,
    pub request_id: String,
    pub sub: String,
    pub groups: Vec<String>,
    pub amount_micro: u64,
    pub windows: [Window; 3],
    pub mode: GroupMode,
    pub now: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReserveOutcome {
    Reserved(Vec<Standing>),
    /// Nothing was written; `exceeded` lists the periods that would go over.
    Refused {
        standings: Vec<Standing>,
        exceeded: Vec<Period>,
    },
}

/// Ids that sort by creation time: `spl_` + 12 hex digits of Unix ms + 16 random hex.
pub fn new_id(prefix: &str) -> String {
    let bytes: [u8; 8] = rand::random();
    format!(
        "{prefix}_{:012x}{}",
        Utc::now().timestamp_millis().max(0),
        hex::encode(bytes)
    )
}

/// One audit row: a cap mutation with the cap before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditRow {
    pub id: String,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub action: String,
    pub limit_id: Option<String>,
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
}

/// The most a request can cost: every prompt byte as a token at the dearest input rate
/// (a 1-hour cache write), bounded by a 1M-token context, plus `max_tokens` of output.
pub fn worst_case_micro(
    pricing: &Pricing,
    model: &str,
    body_bytes: usize,
    max_tokens: Option<u64>,
) -> u64 {
    let (tier, _) = pricing.tier(model);
    let input_tokens = (body_bytes as u64).min(1_000_000);
    let input_rate = tier.input.max(tier.cache_write_1h).max(
        tier.long_prompt
            .map_or(0, |(_, l)| l.input.max(l.cache_write_1h)),
    );
    let output_rate = tier
        .output
        .max(tier.long_prompt.map_or(0, |(_, l)| l.output));
    let output_tokens = max_tokens.unwrap_or_else(|| {
        crate::models::builtin(model).map_or(128_000, |b| u64::from(b.max_output.1))
    });
    let nano = u128::from(input_tokens) * u128::from(input_rate)
        + u128::from(output_tokens) * u128::from(output_rate);
    u64::try_from(nano.div_ceil(1000)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn lim(t: ScopeType, id: &str, period: Period, amount: Option<i64>) -> SpendLimit {
        SpendLimit {
            id: new_id("spl"),
            scope_type: t,
            scope_id: id.into(),
            period,
            amount_cents: amount,
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    #[test]
    fn windows_reset_in_utc() {
        let t = Utc
            .with_ymd_and_hms(2026, 12, 31, 23, 59, 0)
            .single()
            .unwrap(); // a Thursday
        let [d, w, m] = windows(t);
        assert_eq!(
            d.reset,
            Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).single().unwrap()
        );
        assert_eq!(
            w.start,
            Utc.with_ymd_and_hms(2026, 12, 28, 0, 0, 0)
                .single()
                .unwrap()
        );
        assert_eq!(
            w.reset,
            Utc.with_ymd_and_hms(2027, 1, 4, 0, 0, 0).single().unwrap()
        );
        assert_eq!(
            m.start,
            Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).single().unwrap()
        );
        assert_eq!(
            m.reset,
            Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).single().unwrap()
        );
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
    fn worst_case_covers_prompt_and_output() {
        let p = Pricing::new(crate::config::PricingConfig {
            multiplier: 1.0,
            overrides: vec![],
        });
        // Sonnet 4.6: 1000 bytes x $6 (1 h cache write) + 100 x $15 per MTok.
        assert_eq!(
            worst_case_micro(&p, "claude-sonnet-4-6", 1000, Some(100)),
            6_000 + 1_500
        );
    }
}
