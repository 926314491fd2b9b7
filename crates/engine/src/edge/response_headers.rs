//! Headers added to every response: the request id and the security headers.

use http::{HeaderMap, HeaderValue};

/// Pages served to browsers: nothing loads from anywhere but this origin.
pub const PAGE_CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

pub fn apply(headers: &mut HeaderMap, request_id: &str, tls: bool) {
    if let Ok(v) = HeaderValue::from_str(request_id) {
        headers.insert("x-request-id", v);
    }
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    if tls {
        headers.insert(
            "strict-transport-security",
            HeaderValue::from_static("max-age=31536000; includeSubDomains"),
        );
    }
}
