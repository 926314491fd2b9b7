//! Request ids: the caller's `x-client-request-id` when it is `[A-Za-z0-9._-]{1,64}`,
//! else a fresh time-ordered UUID (version 7: the gateway clock's milliseconds, then bits
//! from the thread-local generator, so no syscall per request). Every response carries it
//! as `x-request-id`.
//!
//! Fresh ids sort in the order they were made, as do the usage rows they name. The usage
//! index leads with the row's time, not its id (migration 0007), so a caller's own random
//! id costs the store no more than a fresh one: a batch of rows dirties the index's newest
//! page or two either way.

use chrono::{DateTime, Utc};
use http::HeaderMap;

/// Parsed once: a lookup by `&str` parses the name every time.
const CLIENT_REQUEST_ID: http::HeaderName = http::HeaderName::from_static("x-client-request-id");

pub fn from_headers(headers: &HeaderMap, now: DateTime<Utc>) -> String {
    headers
        .get(&CLIENT_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|s| is_valid(s))
        .map_or_else(|| fresh(now), str::to_owned)
}

/// A version 7 UUID for `now`.
fn fresh(now: DateTime<Utc>) -> String {
    let millis = u64::try_from(now.timestamp_millis()).unwrap_or(0);
    uuid::Builder::from_unix_timestamp_millis(millis, &rand::random())
        .into_uuid()
        .to_string()
}

fn is_valid(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn accepts_only_safe_ids() {
        let now = Utc::now();
        let mut h = HeaderMap::new();
        h.insert("x-client-request-id", "abc-1.2_3".parse().unwrap());
        assert_eq!(from_headers(&h, now), "abc-1.2_3");
        h.insert("x-client-request-id", "bad id".parse().unwrap());
        assert_ne!(from_headers(&h, now), "bad id");
        h.insert("x-client-request-id", "a".repeat(65).parse().unwrap());
        assert_eq!(from_headers(&h, now).len(), 36);
    }

    #[test]
    fn fresh_ids_are_unique_version_7_and_ordered_by_time() {
        let t0 = DateTime::from_timestamp_millis(1_780_000_000_000).unwrap();
        let later = t0 + chrono::Duration::milliseconds(1);
        let (a, b) = (fresh(t0), fresh(t0));
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 7);
        let (secs, nanos) = parsed.get_timestamp().unwrap().to_unix();
        assert_eq!((secs, nanos / 1_000_000), (1_780_000_000, 0));
        // As text, as the index compares them.
        assert!(fresh(later) > a && fresh(later) > b);
    }
}
