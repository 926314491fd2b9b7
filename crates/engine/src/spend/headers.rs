//! What callers see of their caps: the `anthropic-ratelimit-unified-*` headers Claude Code
//! reads on success (past 75 % and 95 %), and the 429 `billing_error` when a cap is reached.

use chrono::{DateTime, Utc};
use http::{HeaderMap, HeaderName, HeaderValue, header};

use super::{Period, Standing};
use crate::error::ApiError;

/// `anthropic-ratelimit-unified-<suffix>`, built without parsing or allocating.
macro_rules! unified {
    ($suffix:literal) => {
        HeaderName::from_static(concat!("anthropic-ratelimit-unified-", $suffix))
    };
}

fn put(h: &mut HeaderMap, name: HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        h.insert(name, v);
    }
}

/// The fullest capped period (by settled spend).
fn fullest(standings: &[Standing]) -> Option<&Standing> {
    standings
        .iter()
        .filter(|s| s.cap_cents.is_some())
        .max_by(|a, b| a.utilization().total_cmp(&b.utilization()))
}

/// Headers for a successful response; none for a person without a cap.
pub fn on_success(h: &mut HeaderMap, standings: &[Standing]) {
    let Some(s) = fullest(standings) else { return };
    let u = s.utilization().min(0.99);
    let threshold = if u > 0.95 {
        Some("0.95")
    } else if u > 0.75 {
        Some("0.75")
    } else {
        None
    };
    let status = if threshold.is_some() {
        "allowed_warning"
    } else {
        "allowed"
    };
    let reset = s.reset.timestamp().to_string();
    put(h, unified!("status"), status);
    put(h, unified!("representative-claim"), "overage");
    put(h, unified!("overage-status"), status);
    put(h, unified!("overage-utilization"), &format!("{u:.2}"));
    if let Some(t) = threshold {
        put(h, unified!("overage-surpassed-threshold"), t);
    }
    put(h, unified!("reset"), &reset);
    put(h, unified!("overage-reset"), &reset);
}

fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// 429 for a request that would go over a cap: the binding that resets last is described.
pub fn blocked(
    standings: &[Standing],
    exceeded: &[Period],
    blocked_message: Option<&str>,
    now: DateTime<Utc>,
) -> ApiError {
    let binding = standings
        .iter()
        .filter(|s| exceeded.contains(&s.period))
        .max_by_key(|s| s.reset);
    let mut message = match binding {
        Some(b) => format!(
            "spend limit reached ({}; resets {})",
            b.period.as_str(),
            when(b.reset)
        ),
        None => "spend limit reached".to_owned(),
    };
    if let Some(m) = blocked_message.filter(|m| !m.trim().is_empty()) {
        message.push_str(" · ");
        message.push_str(m.trim());
    }
    let mut headers = HeaderMap::new();
    let h = &mut headers;
    if let Some(b) = binding {
        let secs = (b.reset - now).num_seconds().max(1);
        h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        let reset = b.reset.timestamp().to_string();
        put(h, unified!("status"), "rejected");
        put(h, unified!("reset"), &reset);
        put(h, unified!("overage-reset"), &reset);
        put(h, unified!("overage-utilization"), "1");
        put(h, unified!("overage-surpassed-threshold"), "1");
        put(h, unified!("overage-period"), b.period.as_str());
        put(
            h,
            unified!("overage-disabled-reason"),
            "org_spend_cap_reached",
        );
    }
    // The person's own cap names itself (Claude Code passes the code on to Desktop); a
    // group's or the organization's does not.
    let own = binding.is_some_and(|b| b.cap_scope == Some(super::ScopeType::User));
    ApiError::SpendLimited {
        message,
        headers: Box::new(headers),
        code: own.then_some("spend_limit_reached"),
    }
}

/// 429 when the person's own caps had room but every shared group budget of theirs was
/// used up: the reference's shape, the monthly period with `overage-scope: group_pool`
/// (the person's own cap is not what blocked them), its sentence, and no `details`.
pub fn pool_blocked(
    pool: &super::PoolStanding,
    blocked_message: Option<&str>,
    now: DateTime<Utc>,
) -> ApiError {
    let reset = pool.reset;
    let mut message = format!(
        "This request exceeds your group's budget. Ask your organization's admins to raise it, \
         or try again after it resets on {} at {} UTC.",
        reset.format("%B %-d"),
        reset.format("%H:%M")
    );
    if let Some(m) = blocked_message.filter(|m| !m.trim().is_empty()) {
        message = format!("{} · {}", message.trim_end_matches('.'), m.trim());
    }
    let mut headers = HeaderMap::new();
    let h = &mut headers;
    h.insert(
        header::RETRY_AFTER,
        HeaderValue::from((reset - now).num_seconds().max(1)),
    );
    let at = reset.timestamp().to_string();
    put(h, unified!("status"), "rejected");
    put(h, unified!("reset"), &at);
    put(h, unified!("overage-reset"), &at);
    put(h, unified!("overage-utilization"), "1");
    put(h, unified!("overage-surpassed-threshold"), "1");
    put(h, unified!("overage-period"), "monthly");
    put(h, unified!("overage-scope"), "group_pool");
    put(
        h,
        unified!("overage-disabled-reason"),
        "org_spend_cap_reached",
    );
    ApiError::SpendLimited {
        message,
        headers: Box::new(headers),
        code: None,
    }
}

/// 429 when caps cannot be read and the gateway fails closed.
pub fn unavailable() -> ApiError {
    let mut headers = HeaderMap::new();
    put(
        &mut headers,
        unified!("overage-disabled-reason"),
        "fetch_error",
    );
    ApiError::SpendLimited {
        message: "spend limit unavailable: the gateway cannot read spend caps right now; try again shortly".into(),
        headers: Box::new(headers),
        code: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    const P: &str = "anthropic-ratelimit-unified-";
    use chrono::TimeZone;

    fn st(period: Period, cap: Option<i64>, spent_cents: u64, reset_day: u32) -> Standing {
        Standing {
            period,
            cap_cents: cap,
            cap_scope: None,
            spent_micro: spent_cents * 10_000,
            reserved_micro: 0,
            reset: Utc
                .with_ymd_and_hms(2026, 12, reset_day, 0, 0, 0)
                .single()
                .unwrap(),
        }
    }

    #[test]
    fn thresholds_are_strictly_greater() {
        for (spent, threshold, status) in [
            (75, None, "allowed"),
            (76, Some("0.75"), "allowed_warning"),
            (95, Some("0.75"), "allowed_warning"),
            (96, Some("0.95"), "allowed_warning"),
            (100, Some("0.95"), "allowed_warning"),
        ] {
            let mut h = HeaderMap::new();
            on_success(
                &mut h,
                &[
                    st(Period::Daily, Some(100), spent, 2),
                    st(Period::Monthly, None, 0, 31),
                ],
            );
            assert_eq!(h[format!("{P}status").as_str()], status, "{spent}");
            assert_eq!(
                h.get(format!("{P}overage-surpassed-threshold").as_str())
                    .map(|v| v.to_str().unwrap()),
                threshold,
                "{spent}"
            );
        }
        let mut h = HeaderMap::new();
        on_success(&mut h, &[st(Period::Daily, Some(100), 99, 2)]);
        assert_eq!(h[format!("{P}overage-utilization").as_str()], "0.99");
        let mut none = HeaderMap::new();
        on_success(&mut none, &[st(Period::Daily, None, 500, 2)]);
        assert!(none.is_empty(), "no headers for a person without a cap");
    }

    #[test]
    fn only_the_persons_own_cap_names_itself() {
        let now = Utc
            .with_ymd_and_hms(2026, 12, 1, 12, 0, 0)
            .single()
            .unwrap();
        let code = |scope| {
            let mut s = st(Period::Daily, Some(100), 100, 2);
            s.cap_scope = scope;
            match blocked(&[s], &[Period::Daily], None, now) {
                ApiError::SpendLimited { code, .. } => code,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(
            code(Some(super::super::ScopeType::User)),
            Some("spend_limit_reached")
        );
        assert_eq!(code(Some(super::super::ScopeType::Organization)), None);
        assert_eq!(code(None), None);
        let ApiError::SpendLimited { code, .. } = unavailable() else {
            panic!("a spend error")
        };
        assert_eq!(code, None, "not when caps cannot be read");
    }

    #[test]
    fn blocked_describes_the_binding_that_resets_last() {
        let now = Utc
            .with_ymd_and_hms(2026, 12, 1, 12, 0, 0)
            .single()
            .unwrap();
        let s = [
            st(Period::Daily, Some(100), 100, 2),
            st(Period::Monthly, Some(1000), 1000, 31),
        ];
        let r = blocked(
            &s,
            &[Period::Daily, Period::Monthly],
            Some("Ask the platform team."),
            now,
        )
        .into_response();
        assert_eq!(r.status(), 429);
        let h = r.headers();
        assert_eq!(h["x-should-retry"], "false");
        assert_eq!(h[format!("{P}overage-period").as_str()], "monthly");
        assert_eq!(
            h["retry-after"],
            (Utc.with_ymd_and_hms(2026, 12, 31, 0, 0, 0)
                .single()
                .unwrap()
                - now)
                .num_seconds()
                .to_string()
                .as_str()
        );
        assert!(h.get(format!("{P}representative-claim").as_str()).is_none());
    }
}
