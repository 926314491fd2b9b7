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
pub mod caps;
pub mod headers;
pub mod usage_api;

use chrono::{DateTime, Datelike, Duration, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

pub use crate::config::GroupMode;
use crate::metering::pricing::{MAX_MICRO_USD, Pricing};
pub use caps::binding_cap;

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

impl SpendLimit {
    /// The Admin API's `spend_limit` object (also kept in the audit trail).
    pub fn to_json(&self) -> serde_json::Value {
        let scope = match self.scope_type {
            ScopeType::Organization => json!({"type": "organization"}),
            ScopeType::RbacGroup => json!({"type": "rbac_group", "rbac_group_id": self.scope_id}),
            ScopeType::User => json!({"type": "user", "user_id": self.scope_id}),
        };
        json!({
            "type": "spend_limit",
            "id": self.id,
            "scope": scope,
            "period": self.period.as_str(),
            "amount": self.amount_cents.map(|a| a.to_string()),
            "currency": "USD",
            "created_at": self.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "updated_at": self.updated_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        })
    }
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

/// Ids that sort by creation time: the prefix, 12 hex digits of Unix ms, 4 of a process
/// sequence (so ids made in the same millisecond keep their order; audit pages rely on
/// it) and 12 random ones (unique across replicas).
pub fn new_id(prefix: &str) -> String {
    static SEQ: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let bytes: [u8; 6] = rand::random();
    format!(
        "{prefix}_{:012x}{seq:04x}{}",
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

/// The most output tokens priced for a model the built-in table does not know.
const OUTPUT_TOKENS_BOUND: u64 = 1_000_000;

/// The most a request can cost: every prompt byte as a token at the dearest input rate
/// (a 1-hour cache write), bounded by a 1M-token context, plus `max_tokens` of output,
/// bounded by the model's output limit (the upstream refuses more; the request still goes
/// to it, as the reference gateway forwards it). At most [`MAX_MICRO_USD`].
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
    let limit = crate::models::builtin(model).map(|b| u64::from(b.max_output.1));
    let output_tokens = match max_tokens {
        Some(n) => n.min(limit.unwrap_or(OUTPUT_TOKENS_BOUND)),
        None => limit.unwrap_or(128_000),
    };
    let nano = u128::from(input_tokens) * u128::from(input_rate)
        + u128::from(output_tokens) * u128::from(output_rate);
    u64::try_from(nano.div_ceil(1000)).map_or(MAX_MICRO_USD, |c| c.min(MAX_MICRO_USD))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn worst_case_bounds_max_tokens_by_the_models_output_limit() {
        let pricing = Pricing::new(crate::config::PricingConfig {
            multiplier: 1.0,
            overrides: vec![],
        });
        let sonnet = |n| worst_case_micro(&pricing, "claude-sonnet-4-6", 100, Some(n));
        let limit = crate::models::builtin("claude-sonnet-4-6")
            .map(|b| u64::from(b.max_output.1))
            .unwrap();
        assert_eq!(sonnet(u64::MAX), sonnet(limit));
        assert!(sonnet(limit - 1) < sonnet(limit));
        let unknown = |n| worst_case_micro(&pricing, "mystery-model", 100, Some(n));
        assert_eq!(unknown(u64::MAX), unknown(OUTPUT_TOKENS_BOUND));
        // Absurd operator prices still give an amount every store and JSON reader takes.
        let dear = Pricing::new(crate::config::PricingConfig {
            multiplier: 1.0,
            overrides: vec![crate::config::PriceOverride {
                model: "mystery-model".into(),
                input: u64::MAX,
                output: u64::MAX,
                cache_read: u64::MAX,
                cache_write_5m: u64::MAX,
                cache_write_1h: u64::MAX,
                web_search: u64::MAX,
            }],
        });
        let most = worst_case_micro(&dear, "mystery-model", usize::MAX, Some(u64::MAX));
        assert_eq!(most, MAX_MICRO_USD);
    }

    #[test]
    fn ids_made_in_a_row_sort_in_that_order() {
        let ids: Vec<String> = (0..500).map(|_| new_id("spla")).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        assert_eq!(ids[0].len(), "spla_".len() + 28);
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
