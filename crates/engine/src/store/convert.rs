//! The column conversions both backends share: times are stored as Unix milliseconds
//! (`BIGINT` / `INTEGER`), counters as signed 64-bit integers. Out-of-range values saturate
//! (`u64` above `i64::MAX` is stored as `i64::MAX`) or clamp (a negative count reads as 0;
//! an unrepresentable time reads as the Unix epoch).

use chrono::{DateTime, TimeZone, Utc};

/// A time as stored: Unix milliseconds.
pub(super) fn ms(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

/// A stored time back; the epoch if out of range.
pub(super) fn from_ms(v: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(v).single().unwrap_or_default()
}

/// A count as stored, saturating at `i64::MAX`.
pub(super) fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A stored count back; negative reads as 0.
pub(super) fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// `LIKE` pattern of a needle, with its own wildcards escaped (`\`).
pub(super) fn like_pattern(needle: &str) -> String {
    let mut p = String::with_capacity(needle.len() + 2);
    p.push('%');
    for c in needle.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_saturates() {
        let at = from_ms(1_700_000_000_123);
        assert_eq!(ms(at), 1_700_000_000_123);
        assert_eq!(i(u64::MAX), i64::MAX);
        assert_eq!(u(-5), 0);
        assert_eq!(u(i(42)), 42);
    }
}
