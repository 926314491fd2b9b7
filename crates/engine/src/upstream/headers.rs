//! Header hygiene in both directions.
//!
//! Toward the upstream only a fixed set is kept (content-type, accept, accept-encoding,
//! user-agent, every `anthropic-*`, `x-stainless-*` and `x-claude-code-*`); the caller's
//! `Authorization` and `x-api-key` never pass, and the operator's credential is applied.
//! Toward the caller, hop-by-hop and infrastructure headers and the upstream's own
//! rate-limit headers are removed (a team quota must not reach a user as if it were theirs).
//! `content-length` is kept when the body passes through unchanged (the HTTP client drops
//! it itself when it decompresses), so small JSON answers are not re-framed as chunked.

use http::{HeaderMap, HeaderName, HeaderValue, header};

use crate::config::CredentialScheme;
use crate::secret::Secret;

fn keep_request(name: &str) -> bool {
    matches!(
        name,
        "content-type" | "accept" | "accept-encoding" | "user-agent"
    ) || name.starts_with("anthropic-")
        || name.starts_with("x-stainless-")
        || name.starts_with("x-claude-code-")
}

/// The beta an Anthropic OAuth token needs beside it.
pub const OAUTH_BETA: &str = "oauth-2025-04-20";

/// Adds `beta` to `anthropic-beta` unless it is there already.
fn add_beta(out: &mut HeaderMap, beta: &str) {
    let mut current = super::capabilities::betas(out);
    if current.iter().any(|b| b == beta) {
        return;
    }
    current.push(beta.to_owned());
    let joined = current.join(",");
    if let Ok(v) = HeaderValue::from_str(&joined) {
        out.insert(HeaderName::from_static("anthropic-beta"), v);
    }
}

/// The caller's `x-stainless-*` headers, for SDK-style upstreams that take nothing else of
/// the caller's but `anthropic-beta` (placed by the capability table).
pub fn copy_stainless(incoming: &HeaderMap, out: &mut HeaderMap) {
    for (name, value) in incoming {
        if name.as_str().starts_with("x-stainless-") {
            out.append(name.clone(), value.clone());
        }
    }
}

fn api_key(out: &mut HeaderMap, key: &crate::secret::Secret) {
    if let Ok(mut v) = HeaderValue::from_str(key.expose()) {
        v.set_sensitive(true);
        out.insert(HeaderName::from_static("x-api-key"), v);
    }
}

/// `Authorization: Bearer <token>`, marked sensitive.
pub fn bearer(out: &mut HeaderMap, token: &crate::secret::Secret) {
    if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {}", token.expose())) {
        v.set_sensitive(true);
        out.insert(header::AUTHORIZATION, v);
    }
}

/// Parsed once: a lookup by `&str` parses the name every time.
const ANTHROPIC_VERSION: HeaderName = HeaderName::from_static("anthropic-version");

/// Bytes an identity header value keeps as they are: printable ASCII but `%` (and the
/// space, which `trim` leaves only inside); the rest is percent-encoded.
const IDENTITY_ESCAPED: &percent_encoding::AsciiSet =
    &percent_encoding::CONTROLS.add(b' ').add(b'%');

/// A claim as an identity header value, as the reference encodes it: trimmed, then every
/// byte outside printable ASCII (and `%` itself) percent-encoded; nothing when empty.
pub fn identity_value(claim: &str) -> Option<HeaderValue> {
    let claim = claim.trim();
    if claim.is_empty() {
        return None;
    }
    let encoded = percent_encoding::utf8_percent_encode(claim, IDENTITY_ESCAPED).to_string();
    HeaderValue::from_str(&encoded).ok()
}

/// `forward_user_identity`: the person's sub as `x-claude-gateway-user-id`, their email
/// as `x-claude-gateway-user-email` and `x-litellm-end-user-id` (LiteLLM's end-user
/// budgets key on it), replacing any header of those names.
pub fn identity(out: &mut HeaderMap, caller: &super::Caller<'_>) {
    let email = caller.email.and_then(identity_value);
    let named = [
        ("x-litellm-end-user-id", email.clone()),
        ("x-claude-gateway-user-id", identity_value(caller.sub)),
        ("x-claude-gateway-user-email", email),
    ];
    for (name, value) in named {
        if let Some(v) = value {
            out.insert(HeaderName::from_static(name), v);
        }
    }
}

/// Whether a person's own quota is behind an upstream's 429 (an identity-forwarding
/// proxy's per-person limit): it is relayed, not failed over, when the person has an email.
pub fn per_person_limit(forward_identity: bool, caller: Option<&super::Caller<'_>>) -> bool {
    forward_identity
        && caller
            .and_then(|c| c.email)
            .and_then(identity_value)
            .is_some()
}

/// Headers for the upstream request: the caller's allowed headers, then the credential
/// (`scheme` and the value read for this request).
pub fn to_upstream(
    incoming: &HeaderMap,
    credential: Option<(CredentialScheme, &Secret)>,
) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(incoming.len());
    for (name, value) in incoming {
        if keep_request(name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    match credential {
        Some((CredentialScheme::ApiKey, key)) => api_key(&mut out, key),
        Some((CredentialScheme::Bearer, token)) => bearer(&mut out, token),
        Some((CredentialScheme::OAuth, token)) => {
            bearer(&mut out, token);
            add_beta(&mut out, OAUTH_BETA);
        }
        None => {}
    }
    if !out.contains_key(&ANTHROPIC_VERSION) {
        out.insert(ANTHROPIC_VERSION, HeaderValue::from_static("2023-06-01"));
    }
    out
}

fn drop_response(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "content-encoding"
            | "set-cookie"
            | "server"
            | "via"
            | "alt-svc"
            | "cf-ray"
            | "cf-cache-status"
            | "x-envoy-upstream-service-time"
            | "anthropic-organization-id"
            | "request-id"
            | "strict-transport-security"
            | "x-request-id"
            | "date"
    ) || name.starts_with("anthropic-ratelimit-")
        || name.starts_with("x-gatehouse-")
}

/// Headers for the caller's response.
pub fn to_caller(upstream: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(upstream.len());
    for (name, value) in upstream {
        if !drop_response(name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::secret::Secret;

    fn hm(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        m
    }

    #[test]
    fn request_side_keeps_the_list_and_swaps_credentials() {
        let incoming = hm(&[
            ("authorization", "Bearer caller-key"),
            ("x-api-key", "caller-key"),
            ("content-type", "application/json"),
            ("anthropic-beta", "a,b"),
            ("anthropic-version", "2023-06-01"),
            ("x-stainless-lang", "js"),
            ("x-claude-code-session-id", "s1"),
            ("cookie", "c=1"),
            ("x-forwarded-for", "1.2.3.4"),
            ("host", "gw"),
            ("x-app", "cli"),
        ]);
        let key = Secret::new("sk-operator");
        let out = to_upstream(&incoming, Some((CredentialScheme::ApiKey, &key)));
        assert_eq!(out["x-api-key"], "sk-operator");
        assert!(out.get("authorization").is_none());
        assert_eq!(out["anthropic-beta"], "a,b");
        assert_eq!(out["x-stainless-lang"], "js");
        assert_eq!(out["x-claude-code-session-id"], "s1");
        for gone in ["cookie", "x-forwarded-for", "host", "x-app"] {
            assert!(out.get(gone).is_none(), "{gone}");
        }
        let token = Secret::new("tok");
        let out = to_upstream(&incoming, Some((CredentialScheme::Bearer, &token)));
        assert_eq!(out["authorization"], "Bearer tok");
        assert!(out.get("x-api-key").is_none());
        assert!(to_upstream(&incoming, None).get("x-api-key").is_none());
        let oauth = Secret::new("oat");
        let out = to_upstream(&incoming, Some((CredentialScheme::OAuth, &oauth)));
        assert_eq!(out["authorization"], "Bearer oat");
        assert_eq!(out["anthropic-beta"], "a,b,oauth-2025-04-20");
    }

    #[test]
    fn identity_values_are_percent_encoded_as_the_reference_does() {
        let v = |s: &str| identity_value(s).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(v(" ana@corp.example "), Some("ana@corp.example".into()));
        assert_eq!(v("Zoë 100%"), Some("Zo%C3%AB%20100%25".into()));
        assert_eq!(v("a\nb"), Some("a%0Ab".into()));
        assert_eq!(v("  "), None);
        let caller = crate::upstream::Caller {
            request_id: "r",
            sub: "u-1",
            email: Some("ana@corp.example"),
        };
        let mut out = hm(&[("x-claude-gateway-user-id", "spoofed")]);
        identity(&mut out, &caller);
        assert_eq!(out["x-claude-gateway-user-id"], "u-1");
        assert_eq!(out.get_all("x-claude-gateway-user-id").iter().count(), 1);
        assert_eq!(out["x-claude-gateway-user-email"], "ana@corp.example");
        assert_eq!(out["x-litellm-end-user-id"], "ana@corp.example");
        assert!(per_person_limit(true, Some(&caller)));
        assert!(!per_person_limit(false, Some(&caller)));
        let no_email = crate::upstream::Caller {
            email: None,
            ..caller
        };
        assert!(!per_person_limit(true, Some(&no_email)));
    }

    #[test]
    fn response_side_strips_infrastructure_and_rate_limits() {
        let up = hm(&[
            ("content-type", "text/event-stream"),
            ("content-length", "10"),
            ("transfer-encoding", "chunked"),
            ("anthropic-ratelimit-tokens-remaining", "5"),
            ("anthropic-organization-id", "org"),
            ("cf-ray", "x"),
            ("via", "1.1 x"),
            ("request-id", "req_1"),
            ("retry-after", "3"),
            ("x-should-retry", "true"),
        ]);
        let out = to_caller(&up);
        let names: Vec<&str> = out.keys().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "content-type",
                "content-length",
                "retry-after",
                "x-should-retry"
            ]
        );
    }
}
