//! `/managed/settings` asked by a Claude Desktop session (its Code tab), as the reference
//! answers it: such a session gets only settings written for it (`code:` with content, or
//! `serve_to_desktop: true`), and `If-None-Match: *` under a `code:` policy is answered
//! "there are settings that must not be missing" (304 with `Cache-Control: no-store` and
//! `x-cc-gateway-version`), so a Code tab on a machine that does not take them won't start.

use axum::body::Body;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};

use super::ResolvedPolicy;

/// Claude Code's User-Agent entry points that are Claude Desktop sessions.
const DESKTOP_ENTRYPOINTS: &[&str] = &["claude-desktop", "claude-desktop-3p", "local-agent"];

/// `claude-cli/<version> (<entrypoint>, ...)` from a Claude Desktop session.
pub fn is_desktop_session(headers: &HeaderMap) -> bool {
    let Some(ua) = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some(rest) = ua
        .strip_prefix("claude-cli/")
        .or_else(|| ua.strip_prefix("claude-code/"))
    else {
        return false;
    };
    let Some((version, tail)) = rest.split_once(' ') else {
        return false;
    };
    if version.is_empty() || version.contains(char::is_whitespace) {
        return false;
    }
    let Some(inner) = tail.strip_prefix('(').and_then(|t| t.split_once(')')) else {
        return false;
    };
    inner.0.split(',').any(|part| {
        let p = part.trim();
        let p = if p == "local_agent" { "local-agent" } else { p };
        DESKTOP_ENTRYPOINTS.contains(&p)
    })
}

fn empty(status: StatusCode, no_store: bool) -> Response<Body> {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = status;
    if no_store {
        let h = resp.headers_mut();
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert(
            "x-cc-gateway-version",
            HeaderValue::from_static(env!("CARGO_PKG_VERSION")),
        );
    }
    resp
}

/// The answer when it differs from the ordinary one, else `None`.
pub fn answer(
    policy: &ResolvedPolicy,
    headers: &HeaderMap,
    if_none_match: Option<&str>,
) -> Option<Response<Body>> {
    if is_desktop_session(headers) && !policy.served_to_desktop {
        let mut resp = crate::edge::json_response(
            StatusCode::NOT_FOUND,
            serde_json::json!({"type": "error", "error": {"type": "not_found_error",
                "message": "not served to Claude Desktop sessions"}}),
        );
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return Some(resp);
    }
    if if_none_match.map(str::trim) == Some("*") && policy.under_code && policy.served_to_desktop {
        tracing::info!(
            policy = policy.index,
            "Claude Desktop's Code tab doesn't start: the managed policy has `code` settings and Claude Code on that machine doesn't take this gateway's settings (name this gateway in forceLoginGatewayUrl in that machine's managed settings)"
        );
        return Some(empty(StatusCode::NOT_MODIFIED, true));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ua(v: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::USER_AGENT, HeaderValue::from_static(v));
        h
    }

    #[test]
    fn desktop_user_agents() {
        assert!(is_desktop_session(&ua(
            "claude-cli/2.1.300 (external, claude-desktop-3p)"
        )));
        assert!(is_desktop_session(&ua("claude-cli/2.1.300 (local_agent)")));
        assert!(!is_desktop_session(&ua(
            "claude-cli/2.1.300 (external, cli)"
        )));
        assert!(!is_desktop_session(&ua("claude-cli/2.1.300")));
        assert!(!is_desktop_session(&HeaderMap::new()));
    }
}
