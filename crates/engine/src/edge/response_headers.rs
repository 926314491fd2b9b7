//! Headers added to every response: the request id and the security headers.

use http::header::{
    REFERRER_POLICY, STRICT_TRANSPORT_SECURITY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use http::{HeaderMap, HeaderName, HeaderValue};

/// Pages served to browsers: nothing loads from anywhere but this origin.
pub const PAGE_CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Parsed once (a `&str` name is parsed and checked on every insert).
const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const CROSS_ORIGIN_OPENER_POLICY: HeaderName =
    HeaderName::from_static("cross-origin-opener-policy");

pub fn apply(headers: &mut HeaderMap, request_id: &str, tls: bool) {
    if let Ok(v) = HeaderValue::from_str(request_id) {
        headers.insert(X_REQUEST_ID, v);
    }
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(
        CROSS_ORIGIN_OPENER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if tls {
        headers.insert(
            STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000; includeSubDomains"),
        );
    }
}
