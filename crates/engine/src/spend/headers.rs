//! What callers see of their caps: the `anthropic-ratelimit-unified-*` headers Claude Code
//! reads on success (past 75 % and 95 %), and the 429 `billing_error` when a cap is reached.
//! A model family's cap names itself when it is the one that binds: "daily Opus limit" in
//! the message and `x-gatehouse-spend-model: opus` beside the reference's headers; a
//! `total` cap, which never resets, sends no `Retry-After` and no reset time.

use chrono::{DateTime, Utc};
use http::{HeaderMap, HeaderName, HeaderValue, header};

use super::{Meter, Standing};
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
    put(h, unified!("status"), status);
    put(h, unified!("representative-claim"), "overage");
    put(h, unified!("overage-status"), status);
    put(h, unified!("overage-utilization"), &format!("{u:.2}"));
    if let Some(t) = threshold {
        put(h, unified!("overage-surpassed-threshold"), t);
    }
    if let Some(reset) = s.reset.map(|r| r.timestamp().to_string()) {
        put(h, unified!("reset"), &reset);
        put(h, unified!("overage-reset"), &reset);
    }
}

fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// 429 for a request that would go over a cap: the binding that resets last is described
/// (`total` never resets: it is described first of all; at equal resets a family's cap,
/// the narrower one).
pub fn blocked(
    standings: &[Standing],
    exceeded: &[Meter],
    blocked_message: Option<&str>,
    now: DateTime<Utc>,
) -> ApiError {
    let binding = standings
        .iter()
        .filter(|s| exceeded.contains(&s.meter()))
        .max_by_key(|s| {
            (
                s.reset.unwrap_or(DateTime::<Utc>::MAX_UTC),
                s.family.is_some(),
            )
        });
    let mut message = match binding {
        Some(b) if b.family.is_some() => match b.reset {
            Some(r) => format!(
                "spend limit reached ({} limit; resets {})",
                b.describe(),
                when(r)
            ),
            None => format!("spend limit reached ({} limit; never resets)", b.describe()),
        },
        Some(b) => match b.reset {
            Some(r) => format!(
                "spend limit reached ({}; resets {})",
                b.period.as_str(),
                when(r)
            ),
            None => format!("spend limit reached ({}; never resets)", b.period.as_str()),
        },
        None => "spend limit reached".to_owned(),
    };
    if let Some(m) = blocked_message.filter(|m| !m.trim().is_empty()) {
        message.push_str(" · ");
        message.push_str(m.trim());
    }
    let mut headers = HeaderMap::new();
    if let Some(b) = binding {
        rejected(&mut headers, b, now);
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

/// The reference's headers of a refusal by the cap `b` (and the family it names).
fn rejected(h: &mut HeaderMap, b: &Standing, now: DateTime<Utc>) {
    if let Some(r) = b.reset {
        let secs = (r - now).num_seconds().max(1);
        h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        let reset = r.timestamp().to_string();
        put(h, unified!("reset"), &reset);
        put(h, unified!("overage-reset"), &reset);
    }
    put(h, unified!("status"), "rejected");
    put(h, unified!("overage-utilization"), "1");
    put(h, unified!("overage-surpassed-threshold"), "1");
    put(h, unified!("overage-period"), b.period.as_str());
    put(
        h,
        unified!("overage-disabled-reason"),
        "org_spend_cap_reached",
    );
    if let Some(f) = b.family {
        put(
            h,
            HeaderName::from_static("x-gatehouse-spend-model"),
            f.as_str(),
        );
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

    use crate::spend::{Family, Period};

    fn st(period: Period, cap: Option<i64>, spent_cents: u64, reset_day: u32) -> Standing {
        Standing {
            period,
            family: None,
            cap_cents: cap,
            cap_scope: None,
            spent_micro: spent_cents * 10_000,
            reserved_micro: 0,
            reset: Utc.with_ymd_and_hms(2026, 12, reset_day, 0, 0, 0).single(),
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
            match blocked(&[s], &[Meter::all(Period::Daily)], None, now) {
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
            &[Meter::all(Period::Daily), Meter::all(Period::Monthly)],
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

    #[test]
    fn a_family_or_total_cap_names_itself() {
        let now = Utc
            .with_ymd_and_hms(2026, 12, 1, 12, 0, 0)
            .single()
            .unwrap();
        let mut opus = st(Period::Daily, Some(100), 100, 2);
        opus.family = Family::parse("opus");
        let plain = st(Period::Daily, Some(1000), 100, 2);
        let r = blocked(&[plain.clone(), opus.clone()], &[opus.meter()], None, now);
        let ApiError::SpendLimited {
            message, headers, ..
        } = &r
        else {
            panic!("{r:?}")
        };
        assert!(
            message.starts_with("spend limit reached (daily Opus limit; resets 2026-12-02"),
            "{message}"
        );
        assert_eq!(headers["x-gatehouse-spend-model"], "opus");
        assert_eq!(headers[format!("{P}overage-period").as_str()], "daily");
        let mut total = st(Period::Total, Some(5), 5, 2);
        total.reset = None;
        let r = blocked(
            &[plain, total.clone()],
            &[Meter::all(Period::Daily), total.meter()],
            None,
            now,
        );
        let ApiError::SpendLimited {
            message, headers, ..
        } = &r
        else {
            panic!("{r:?}")
        };
        assert_eq!(message, "spend limit reached (total; never resets)");
        assert!(headers.get("retry-after").is_none(), "it never resets");
        assert!(headers.get("x-gatehouse-spend-model").is_none());
        assert_eq!(headers[format!("{P}overage-period").as_str()], "total");
    }
}
