//! Spend caps that are never exceeded.
//!
//! Caps are set per scope (user > group > organization) and period (daily, weekly from
//! Monday, monthly from the 1st; UTC; or `total`, lifetime spend that never resets) in
//! integer USD cents, for every model or for one model family ([`family`]: a limit with a
//! `model` binds only that family's requests and counts only its spend). Each person's
//! spend is kept per period for every model and, for a request of a Claude family, per
//! period for that family too ([`caps::Meter`]), so a family cap's period-to-date is exact. At admission the worst-case cost
//! of a request is taken out of the person's spend lease (`ledger`): a reservation of
//! several requests' worst case, checked against every binding cap in the store transaction
//! that makes it (and, when the person is in groups with a shared budget, against the first
//! budget in paying order with room, which then holds the lease too). When the response ends (or the client leaves) the real cost is charged
//! against the lease in the transaction that writes the usage row. Open reservations and
//! leases left by a crash are reconciled at start.

pub mod admin;
pub mod admission;
pub mod caps;
pub mod family;
pub mod headers;
pub mod ledger;
pub mod usage_api;
pub mod worst_case;

use chrono::{DateTime, Datelike, Duration, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

pub use crate::config::{GroupMode, PoolRule};
pub use caps::{Meter, binding_cap, binding_limit};
pub use family::Family;
pub use worst_case::{CostDrivers, worst_case_micro};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    Daily,
    Weekly,
    Monthly,
    /// Lifetime spend: never resets (a Gatehouse extension).
    Total,
}

impl Period {
    /// The periods that reset (the reference's).
    pub const ALL: [Period; 3] = [Period::Daily, Period::Weekly, Period::Monthly];
    /// Every period, `total` last: the order the stores lock a person's rows in.
    pub const EVERY: [Period; 4] = [
        Period::Daily,
        Period::Weekly,
        Period::Monthly,
        Period::Total,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Period::Daily => "daily",
            Period::Weekly => "weekly",
            Period::Monthly => "monthly",
            Period::Total => "total",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "daily" => Some(Period::Daily),
            "weekly" => Some(Period::Weekly),
            "monthly" => Some(Period::Monthly),
            "total" => Some(Period::Total),
            _ => None,
        }
    }

    /// The window containing `now`: its start and the next reset. `total`'s window starts
    /// at the Unix epoch and its reset is [`DateTime::<Utc>::MAX_UTC`] (it never resets:
    /// [`Window::resets`]).
    pub fn window(self, now: DateTime<Utc>) -> Window {
        let day = Utc
            .with_ymd_and_hms(now.year(), now.month(), now.day(), 0, 0, 0)
            .single()
            .unwrap_or(now);
        let (start, reset) = match self {
            Period::Total => (DateTime::<Utc>::UNIX_EPOCH, DateTime::<Utc>::MAX_UTC),
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

impl Window {
    /// When it resets; `None` for `total`.
    pub fn resets(&self) -> Option<DateTime<Utc>> {
        (self.period != Period::Total).then_some(self.reset)
    }
}

/// The windows of the periods that reset, in [`Period::ALL`] order.
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

    /// The Admin API's `scope` object of this kind for `id` (a group or a user).
    pub fn to_json(self, id: &str) -> serde_json::Value {
        match self {
            ScopeType::Organization => json!({"type": "organization"}),
            ScopeType::RbacGroup => json!({"type": "rbac_group", "rbac_group_id": id}),
            ScopeType::User => json!({"type": "user", "user_id": id}),
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
    /// The model family it binds (`None`: every model).
    pub model: Option<Family>,
    /// `None` is unlimited; `Some(0)` blocks everything.
    pub amount_cents: Option<i64>,
    /// A group's monthly limit may also carry a budget the whole group spends together.
    pub pooled: Option<PooledBudget>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl SpendLimit {
    /// The Admin API's `spend_limit` object (also kept in the audit trail).
    pub fn to_json(&self) -> serde_json::Value {
        let scope = self.scope_type.to_json(&self.scope_id);
        let mut v = json!({
            "type": "spend_limit",
            "id": self.id,
            "scope": scope,
            "period": self.period.as_str(),
            // A Gatehouse extension: the model family it binds (`null`: every model).
            "model": self.model.map(Family::as_str),
            "amount": self.amount_cents.map(|a| a.to_string()),
            "currency": "USD",
            "created_at": self.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "updated_at": self.updated_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        });
        // A group's monthly limit is where a shared budget is (`null`: none).
        if self.holds_pool() {
            v["pooled_budget"] = self.pooled.map_or(
                serde_json::Value::Null,
                |p| json!({"amount": p.amount_cents.to_string(), "paused": p.paused}),
            );
        }
        v
    }

    /// A group's monthly limit of every model: the only one that may carry a shared budget.
    pub fn holds_pool(&self) -> bool {
        self.scope_type == ScopeType::RbacGroup
            && self.period == Period::Monthly
            && self.model.is_none()
    }

    /// The shared budget that admits requests (set and not paused), in cents.
    pub fn active_pool(&self) -> Option<i64> {
        self.pooled
            .filter(|p| !p.paused && self.holds_pool())
            .map(|p| p.amount_cents)
    }
}

/// A shared group budget (the reference's `pooled_budget`): one monthly amount in cents
/// that every member's spend counts against, beside each member's own limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PooledBudget {
    pub amount_cents: i64,
    /// A paused budget is kept but admits and counts nothing.
    pub paused: bool,
}

/// A shared budget's standing this month.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolStanding {
    pub group: String,
    pub cap_cents: i64,
    pub spent_micro: u64,
    pub reserved_micro: u64,
    pub reset: DateTime<Utc>,
}

/// One period's standing for a person, of every model or of one family.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Standing {
    pub period: Period,
    /// The model family whose spend and cap this is (`None`: every model).
    pub family: Option<Family>,
    /// Cap in cents (`None`: unlimited).
    pub cap_cents: Option<i64>,
    pub cap_scope: Option<ScopeType>,
    /// Settled spend in the current window.
    pub spent_micro: u64,
    /// Held by open reservations (this request's included, when reserving).
    pub reserved_micro: u64,
    /// `None` for `total`, which never resets.
    pub reset: Option<DateTime<Utc>>,
}

impl Standing {
    /// The counter it stands on.
    pub fn meter(&self) -> Meter {
        Meter {
            period: self.period,
            family: self.family,
        }
    }

    /// How people read the cap: `daily`, `daily Opus`, `total`.
    pub fn describe(&self) -> String {
        self.meter().describe()
    }

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
    /// The model family of the request(s) it admits: their spend is also counted per family
    /// and the family's caps bind them (`None`: not a Claude family).
    pub family: Option<Family>,
    /// Headroom every binding cap must still have after this reservation (0: none). A
    /// lease asks for room for several more beside it, so leases are taken only far from
    /// a cap and admission near a cap stays exact, one worst case at a time.
    pub keep_free_micro: u64,
    pub windows: [Window; 3],
    pub mode: GroupMode,
    /// Which of the person's pooled groups pays (the first in this order with room).
    pub pool_rule: PoolRule,
    pub now: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReserveOutcome {
    Reserved(Vec<Standing>),
    /// Nothing was written; `exceeded` lists the caps that would go over. `pool` is set
    /// when the person's own caps had room but every shared budget of theirs was used up
    /// (the first in paying order is described).
    Refused {
        standings: Vec<Standing>,
        exceeded: Vec<Meter>,
        pool: Option<PoolStanding>,
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

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
}
