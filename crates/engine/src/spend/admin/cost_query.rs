//! The parameters of `GET /v1/organizations/analytics/cost`, checked in the reference's
//! order and with its messages (the first problem only).

use chrono::{DateTime, Duration, NaiveDate, Utc};

use super::{bad, page_limit};
use crate::error::ApiError;

/// Every parameter the report takes (`beta` is also let through, as the reference does).
pub const PARAMS: [&str; 12] = [
    "starting_at",
    "ending_at",
    "time_bucket_width",
    "group_by[]",
    "actor_ids[]",
    "actor_types[]",
    "rbac_group_ids[]",
    "exclude_deleted_users",
    "order_by",
    "order",
    "limit",
    "page",
];
const PER_DAY: &str = "the gateway records spend per user per day only";
const RFC3339: &str = "must be an RFC 3339 timestamp with a time zone offset (Z or ±HH:MM), such \
                       as 2026-08-01T00:00:00Z";
/// The longest range, in days.
pub const MAX_DAYS: i64 = 31;

/// A checked report request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CostQuery {
    /// The first UTC day reported and the day after the last (exclusive).
    pub first_day: NaiveDate,
    pub end_day: NaiveDate,
    /// `time_bucket_width=1d`: one row per day (else one bucket for the whole range).
    pub daily: bool,
    pub by_actor: bool,
    pub by_group: bool,
    pub actor_ids: Vec<String>,
    pub group_ids: Vec<String>,
    pub limit: usize,
    pub ascending: bool,
    /// `order_by=time` with daily buckets: by day first.
    pub by_time: bool,
    pub page: Option<String>,
    /// The range reaches a day whose amounts may still change (today, or a day that ended
    /// less than 5 minutes ago): it cannot be read in pages.
    pub still_changing: bool,
}

/// The reference's timestamp shape (`YYYY-MM-DD[Tt ]HH:MM:SS[.f](Z|±HH:MM)`), parsed.
fn timestamp(s: &str) -> Option<DateTime<Utc>> {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let shape = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && matches!(b[10], b'T' | b't' | b' ')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !shape {
        return None;
    }
    let mut rest = &s[19..];
    if let Some(f) = rest.strip_prefix('.') {
        let n = f.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        rest = &f[n..];
    }
    let zone = rest.bytes().collect::<Vec<_>>();
    let ok_zone = matches!(zone.as_slice(), [b'Z' | b'z'])
        || (zone.len() == 6
            && matches!(zone[0], b'+' | b'-')
            && zone[1..3].iter().all(u8::is_ascii_digit)
            && zone[3] == b':'
            && zone[4..6].iter().all(u8::is_ascii_digit));
    if !ok_zone {
        return None;
    }
    let normal = format!("{}T{}", &s[..10], &s[11..]).to_ascii_uppercase();
    DateTime::parse_from_rfc3339(&normal)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn day(t: DateTime<Utc>) -> NaiveDate {
    t.date_naive()
}

pub fn parse(q: &[(String, String)], now: DateTime<Utc>) -> Result<CostQuery, ApiError> {
    for (k, _) in q {
        if !PARAMS.contains(&k.as_str()) && k != "beta" {
            return Err(bad(&format!(
                "{k}: not a parameter of the gateway's cost report, which takes {}",
                PARAMS.join(", ")
            )));
        }
    }
    let one = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let all = |k: &str| -> Vec<String> {
        q.iter()
            .filter(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .collect()
    };
    let start = one("starting_at").ok_or_else(|| bad("starting_at: required"))?;
    let start = timestamp(start).ok_or_else(|| bad(&format!("starting_at: {RFC3339}")))?;
    let end = match one("ending_at") {
        None => None,
        Some(e) => Some(timestamp(e).ok_or_else(|| bad(&format!("ending_at: {RFC3339}")))?),
    };
    let width = one("time_bucket_width");
    if width.is_some_and(|w| w != "1d") {
        return Err(bad(&format!("time_bucket_width: must be 1d; {PER_DAY}")));
    }
    if width.is_some() && end.is_none() {
        return Err(bad("ending_at: required when time_bucket_width is set"));
    }
    let span = Duration::days(MAX_DAYS);
    let until = end.unwrap_or_else(|| now.min(start + span));
    if start >= until {
        return Err(bad(
            "starting_at: must be before ending_at, which defaults to now",
        ));
    }
    if until - start > span {
        return Err(bad(&format!(
            "ending_at: the range may span at most {MAX_DAYS} days"
        )));
    }
    let group_by = all("group_by[]");
    if group_by
        .iter()
        .any(|g| g != "actor" && g != "rbac_group_id")
    {
        return Err(bad(&format!(
            "group_by[]: must be actor or rbac_group_id; {PER_DAY}"
        )));
    }
    let by_actor = group_by.iter().any(|g| g == "actor");
    let actor_ids = all("actor_ids[]");
    if actor_ids.len() > 100 {
        return Err(bad("actor_ids[]: at most 100 entries per request"));
    }
    let group_ids = all("rbac_group_ids[]");
    if group_ids.len() > 100 {
        return Err(bad("rbac_group_ids[]: at most 100 entries per request"));
    }
    if all("actor_types[]").iter().any(|t| t != "user_actor") {
        return Err(bad(
            "actor_types[]: must be user_actor, the only kind of actor a gateway has",
        ));
    }
    let limit = page_limit(q, 20)?;
    let order = one("order").unwrap_or("desc");
    if order != "asc" && order != "desc" {
        return Err(bad("order: must be asc or desc"));
    }
    let order_by = one("order_by").unwrap_or("amount");
    if !["amount", "list_amount", "time"].contains(&order_by) {
        return Err(bad("order_by: must be amount, list_amount or time"));
    }
    let exclude = one("exclude_deleted_users").map_or("false".to_owned(), str::to_lowercase);
    if exclude != "true" && exclude != "false" {
        return Err(bad("exclude_deleted_users: must be true or false"));
    }
    if exclude == "true" && !by_actor {
        return Err(bad("exclude_deleted_users: requires group_by[]=actor"));
    }
    let daily = width.is_some();
    let end_at = if end.is_none() && until == now {
        now + Duration::days(1)
    } else {
        until + Duration::seconds(1)
    };
    let end_day = day(end_at);
    Ok(CostQuery {
        first_day: day(start + Duration::seconds(1)),
        end_day,
        daily,
        by_actor,
        by_group: group_by.iter().any(|g| g == "rbac_group_id"),
        actor_ids,
        group_ids,
        limit,
        ascending: order == "asc",
        by_time: daily && order_by == "time",
        page: one("page").map(str::to_owned),
        still_changing: end_day > day(now - Duration::minutes(5)),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use chrono::TimeZone;

    use super::*;

    fn q(s: &str) -> Vec<(String, String)> {
        serde_urlencoded::from_str(s).unwrap()
    }

    fn message(s: &str, now: DateTime<Utc>) -> String {
        match parse(&q(s), now) {
            Err(ApiError::InvalidRequest(m)) => m,
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn timestamps_and_ranges_as_the_reference_checks_them() {
        let now = Utc
            .with_ymd_and_hms(2026, 9, 10, 12, 0, 0)
            .single()
            .unwrap();
        assert!(timestamp("2026-08-01T00:00:00Z").is_some());
        assert!(timestamp("2026-08-01 00:00:00.5+02:00").is_some());
        assert!(timestamp("2026-08-01t00:00:00z").is_some());
        for bad in [
            "2026-08-01",
            "2026-08-01T00:00:00",
            "2026-13-01T00:00:00Z",
            "2026-08-01T00:00:00+0200",
        ] {
            assert!(timestamp(bad).is_none(), "{bad}");
        }
        assert_eq!(message("", now), "starting_at: required");
        assert!(
            message("starting_at=2026-08-01", now).starts_with("starting_at: must be an RFC 3339")
        );
        assert_eq!(
            message("starting_at=2026-08-01T00:00:00Z&time_bucket_width=1d", now),
            "ending_at: required when time_bucket_width is set"
        );
        assert_eq!(
            message(
                "starting_at=2026-08-01T00:00:00Z&ending_at=2026-09-05T00:00:00Z",
                now
            ),
            "ending_at: the range may span at most 31 days"
        );
        assert_eq!(
            message("starting_at=2026-09-11T00:00:00Z", now),
            "starting_at: must be before ending_at, which defaults to now"
        );
        assert!(
            message("starting_at=2026-09-01T00:00:00Z&foo=1", now)
                .starts_with("foo: not a parameter")
        );
        let c = parse(&q("starting_at=2026-09-01T00:00:00Z&ending_at=2026-09-03T00:00:00Z&time_bucket_width=1d&order_by=time"), now).unwrap();
        assert_eq!(
            (c.first_day.to_string(), c.end_day.to_string()),
            ("2026-09-01".into(), "2026-09-03".into())
        );
        assert!(c.daily && c.by_time && !c.still_changing);
        let open = parse(&q("starting_at=2026-09-01T00:00:00Z"), now).unwrap();
        assert_eq!(
            open.end_day.to_string(),
            "2026-09-11",
            "to now: today included"
        );
        assert!(open.still_changing);
    }
}
