//! A refused admission as the caller sees it: 429 `rate_limit_error`, `retry-after` in
//! whole seconds (at most [`MAX_RETRY_AFTER`]: Claude Code gives up on longer waits), the
//! unified rate-limit headers (`status: rejected`, `reset`) and Anthropic's per-limit
//! `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`; and its event.

use chrono::{DateTime, SecondsFormat, Utc};
use http::{HeaderMap, HeaderName, HeaderValue, header};

use super::{Dim, Draw, SlotDraw, Verdict};
use crate::error::ApiError;
use crate::events::Event;

/// The longest `retry-after` sent.
pub const MAX_RETRY_AFTER: u64 = 60;

fn put(h: &mut HeaderMap, name: &str, value: &str) {
    if let (Ok(n), Ok(v)) = (
        HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_str(value),
    ) {
        h.insert(n, v);
    }
}

/// The limit that refused (the longest wait of those that did not fit) and its wait.
fn binding(
    draws: &[Draw],
    slot: Option<&SlotDraw>,
    verdict: &Verdict,
    now_ms: i64,
) -> (Dim, u64, f64) {
    let mut worst: Option<(Dim, u64, f64)> = None;
    for (d, a) in draws.iter().zip(&verdict.available) {
        if d.kind.fits(*a, d.cost) {
            continue;
        }
        let wait = d.kind.wait_secs(*a, d.cost, now_ms);
        if worst.is_none_or(|(_, w, _)| wait > w) {
            worst = Some((d.dim, wait, d.kind.capacity()));
        }
    }
    match (worst, slot) {
        (Some(w), _) => w,
        // Only the slots were full: a stream may end any moment.
        (None, Some(s)) => (Dim::Concurrent, 1, f64::from(s.limit)),
        (None, None) => (Dim::Concurrent, 1, 0.0),
    }
}

/// The event and the 429 of a refused admission under rule `rule` (None: the per-key
/// default concurrency).
pub fn refused(
    rule: Option<usize>,
    draws: &[Draw],
    slot: Option<&SlotDraw>,
    verdict: &Verdict,
    now: DateTime<Utc>,
) -> (Event, ApiError) {
    let (dim, wait, limit) = binding(draws, slot, verdict, now.timestamp_millis());
    let retry_after = wait.clamp(1, MAX_RETRY_AFTER);
    let reset = now + chrono::Duration::seconds(wait.min(86_400) as i64);
    let what = match dim {
        Dim::Rpm => format!("{limit} requests per minute"),
        Dim::Tpm => format!("{limit} tokens per minute"),
        Dim::DailyTokens => format!("{limit} tokens per day"),
        Dim::Concurrent => format!("{limit} concurrent requests"),
    };
    let message = format!(
        "rate limit reached ({}: {what}); retry after {retry_after} s",
        dim.as_str()
    );
    let mut h = HeaderMap::new();
    h.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    put(&mut h, "anthropic-ratelimit-unified-status", "rejected");
    put(
        &mut h,
        "anthropic-ratelimit-unified-reset",
        &reset.timestamp().to_string(),
    );
    let family = match dim {
        Dim::Rpm | Dim::Concurrent => "requests",
        Dim::Tpm | Dim::DailyTokens => "tokens",
    };
    put(
        &mut h,
        &format!("anthropic-ratelimit-{family}-limit"),
        &format!("{limit}"),
    );
    put(
        &mut h,
        &format!("anthropic-ratelimit-{family}-remaining"),
        "0",
    );
    put(
        &mut h,
        &format!("anthropic-ratelimit-{family}-reset"),
        &reset.to_rfc3339_opts(SecondsFormat::Secs, true),
    );
    let event = Event::new("ratelimit.blocked")
        .with("kind", dim.as_str())
        .with(
            "rule",
            rule.map_or_else(
                || "client_key_default".to_owned(),
                |i| format!("rate_limits.inference[{i}]"),
            ),
        )
        .with("retry_after", retry_after);
    let error = ApiError::RateLimited {
        message,
        headers: Box::new(h),
    };
    (event, error)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::limits::Kind;

    #[test]
    fn retry_after_is_capped_at_a_minute_and_names_the_limit() {
        let day = Draw {
            key: "r0:daily_tokens:user:s".into(),
            dim: Dim::DailyTokens,
            cost: 10.0,
            kind: Kind::Daily { limit: 5.0, day: 0 },
        };
        let verdict = Verdict {
            available: vec![0.0],
            slots_in_use: 0,
            admitted: false,
        };
        let now = DateTime::from_timestamp(3600, 0).unwrap();
        let (event, error) = refused(Some(0), &[day], None, &verdict, now);
        assert_eq!(event.evt, "ratelimit.blocked");
        let resp = error.into_response();
        assert_eq!(resp.status(), 429);
        assert_eq!(resp.headers()["retry-after"], "60");
        assert_eq!(
            resp.headers()["anthropic-ratelimit-unified-status"],
            "rejected"
        );
        assert_eq!(resp.headers()["anthropic-ratelimit-tokens-limit"], "5");
    }
}
