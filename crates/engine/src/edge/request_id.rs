//! Request ids: the caller's `x-client-request-id` when it is `[A-Za-z0-9._-]{1,64}`,
//! else a fresh random UUID (from the thread-local generator: no syscall per request).
//! Every response carries it as `x-request-id`.

use http::HeaderMap;

pub fn from_headers(headers: &HeaderMap) -> String {
    headers
        .get("x-client-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|s| is_valid(s))
        .map_or_else(
            || {
                uuid::Builder::from_random_bytes(rand::random())
                    .into_uuid()
                    .to_string()
            },
            str::to_owned,
        )
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
        let mut h = HeaderMap::new();
        h.insert("x-client-request-id", "abc-1.2_3".parse().unwrap());
        assert_eq!(from_headers(&h), "abc-1.2_3");
        h.insert("x-client-request-id", "bad id".parse().unwrap());
        assert_ne!(from_headers(&h), "bad id");
        h.insert("x-client-request-id", "a".repeat(65).parse().unwrap());
        assert_eq!(from_headers(&h).len(), 36);
    }
}
