//! Request framing limits, checked before any body byte is read.
//!
//! URL length -> 414; header bytes (sum of name + value + 4) -> 431; Transfer-Encoding
//! without Content-Length -> 411; a Content-Length that is not a number, or above the
//! limit -> 413.

use http::{HeaderMap, Uri, header};

use crate::config::Limits;
use crate::error::ApiError;

pub fn check(uri: &Uri, headers: &HeaderMap, limits: &Limits) -> Result<Option<u64>, ApiError> {
    let target_len = uri.path_and_query().map_or(0, |pq| pq.as_str().len());
    if target_len > limits.max_url_length {
        return Err(ApiError::UriTooLong {
            limit: limits.max_url_length,
        });
    }
    let header_bytes: usize = headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum();
    if header_bytes > limits.max_header_bytes {
        return Err(ApiError::HeadersTooLarge {
            limit: limits.max_header_bytes,
        });
    }
    let lengths: Vec<_> = headers.get_all(header::CONTENT_LENGTH).iter().collect();
    if headers.contains_key(header::TRANSFER_ENCODING) && lengths.is_empty() {
        return Err(ApiError::LengthRequired);
    }
    let Some(first) = lengths.first() else {
        return Ok(None);
    };
    let parsed = |v: &http::HeaderValue| {
        v.to_str()
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok())
    };
    let len = parsed(first).ok_or_else(|| {
        ApiError::PayloadTooLarge("Content-Length is not a valid non-negative number".into())
    })?;
    if lengths.iter().any(|v| parsed(v) != Some(len)) {
        return Err(ApiError::PayloadTooLarge(
            "conflicting Content-Length headers".into(),
        ));
    }
    if len > limits.max_request_bytes {
        return Err(ApiError::PayloadTooLarge(format!(
            "request body of {len} bytes exceeds the limit of {} bytes",
            limits.max_request_bytes
        )));
    }
    Ok(Some(len))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_request_bytes: 100,
            max_header_bytes: 200,
            max_url_length: 30,
        }
    }

    fn hm(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        m
    }

    fn status(uri: &str, headers: &[(&str, &str)]) -> Option<u16> {
        check(&uri.parse().unwrap(), &hm(headers), &limits())
            .err()
            .map(|e| e.outcome().0.as_u16())
    }

    #[test]
    fn each_limit_has_its_status() {
        assert_eq!(status("/v1/messages", &[("content-length", "10")]), None);
        assert_eq!(status(&format!("/{}", "a".repeat(40)), &[]), Some(414));
        let big = "x".repeat(300);
        assert_eq!(status("/", &[("x-big", &big)]), Some(431));
        assert_eq!(status("/", &[("transfer-encoding", "chunked")]), Some(411));
        assert_eq!(status("/", &[("content-length", "101")]), Some(413));
        assert_eq!(status("/", &[("content-length", "-1")]), Some(413));
        assert_eq!(status("/", &[("content-length", "abc")]), Some(413));
        assert_eq!(
            status("/", &[("content-length", "99999999999999999999999")]),
            Some(413)
        );
        assert_eq!(
            status("/", &[("content-length", "5"), ("content-length", "6")]),
            Some(413)
        );
        assert_eq!(
            status(
                "/",
                &[("transfer-encoding", "chunked"), ("content-length", "5")]
            ),
            None
        );
    }
}
