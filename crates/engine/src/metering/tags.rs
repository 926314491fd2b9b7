//! What a coding agent says about a request, kept with its usage row: Claude Code's
//! session, agent and parent agent ids, the request class of its hint headers, and the
//! client program (the user-agent's first product token).
//!
//! These come from the caller and are untrusted: each is kept only when it is short and
//! made of a small character set (anything else is dropped, not cleaned), so a row, an
//! export or a page can show it as it is. They are never metric labels (unbounded values).
//! A request that sends none of them costs nothing here: no allocation, one header lookup
//! per name.

use http::{HeaderMap, HeaderName};

/// Claude Code's session id (a UUID in practice).
pub const SESSION_ID: &str = "x-claude-code-session-id";
/// Sent by subagents only.
pub const AGENT_ID: &str = "x-claude-code-agent-id";
/// Sent by nested agents only.
pub const PARENT_AGENT_ID: &str = "x-claude-code-parent-agent-id";
/// A hint header (with `CLAUDE_CODE_GATEWAY_HINT_HEADERS=1`).
pub const REQUEST_CLASS: &str = "x-claude-code-request-class";

// The names above as parsed header names: a lookup by `&str` parses the name every time.
const SESSION_ID_NAME: HeaderName = HeaderName::from_static(SESSION_ID);
const AGENT_ID_NAME: HeaderName = HeaderName::from_static(AGENT_ID);
const PARENT_AGENT_ID_NAME: HeaderName = HeaderName::from_static(PARENT_AGENT_ID);
const REQUEST_CLASS_NAME: HeaderName = HeaderName::from_static(REQUEST_CLASS);

/// The longest id kept.
pub const MAX_ID: usize = 128;
/// The longest client token kept (`claude-cli/2.1.337`).
pub const MAX_CLIENT: usize = 64;

/// The request classes Claude Code sends; any other value is dropped.
pub const REQUEST_CLASSES: [&str; 5] = ["main", "subagent", "workflow", "compaction", "auxiliary"];

/// What the caller said about a request; every field is optional and already checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClientTags {
    pub session_id: Option<String>,
    pub agent_id: Option<String>,
    pub parent_agent_id: Option<String>,
    /// One of [`REQUEST_CLASSES`].
    pub request_class: Option<&'static str>,
    /// The user-agent's first product token, e.g. `claude-cli/2.1.337`.
    pub client: Option<String>,
}

impl ClientTags {
    /// The tags a request's headers carry; `None` when it carries none worth keeping.
    pub fn from_headers(headers: &HeaderMap) -> Option<Box<ClientTags>> {
        let tags = ClientTags {
            session_id: id(headers, &SESSION_ID_NAME),
            agent_id: id(headers, &AGENT_ID_NAME),
            parent_agent_id: id(headers, &PARENT_AGENT_ID_NAME),
            request_class: headers
                .get(&REQUEST_CLASS_NAME)
                .and_then(|v| v.to_str().ok())
                .and_then(request_class),
            client: headers
                .get(http::header::USER_AGENT)
                .and_then(|v| client(v.as_bytes())),
        };
        (tags != ClientTags::default()).then(|| Box::new(tags))
    }

    /// A subagent's request: it named an agent, or its class says so.
    pub fn is_subagent(&self) -> bool {
        self.agent_id.is_some() || self.request_class == Some("subagent")
    }

    /// A compaction request (only known with the hint headers).
    pub fn is_compaction(&self) -> bool {
        self.request_class == Some("compaction")
    }

    /// Claude Code's command-line client (`claude-cli/…`).
    pub fn from_claude_code(&self) -> bool {
        self.client
            .as_deref()
            .is_some_and(|c| c.starts_with("claude-cli/"))
    }
}

/// The stored form of a request class back (unknown stored text reads as none).
pub fn request_class(value: &str) -> Option<&'static str> {
    REQUEST_CLASSES
        .iter()
        .find(|c| c.eq_ignore_ascii_case(value.trim()))
        .copied()
}

/// An id header's value when it is 1..=[`MAX_ID`] characters of `[A-Za-z0-9._:-]`.
fn id(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    let v = headers.get(name)?.as_bytes();
    valid_id(v).then(|| String::from_utf8_lossy(v).into_owned())
}

/// Whether `v` is an id worth keeping (see [`id`]).
pub fn valid_id(v: &[u8]) -> bool {
    !v.is_empty()
        && v.len() <= MAX_ID
        && v.iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// The user-agent's first product token (`name/version`), when it is printable ASCII
/// without spaces and at most [`MAX_CLIENT`] bytes.
fn client(ua: &[u8]) -> Option<String> {
    let first = ua.split(|b| *b == b' ').next()?;
    let ok = !first.is_empty()
        && first.len() <= MAX_CLIENT
        && first
            .iter()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'<' | b'>' | b'\\'));
    ok.then(|| String::from_utf8_lossy(first).into_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn headers(pairs: &[(&'static str, &[u8])]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, http::HeaderValue::from_bytes(v).unwrap());
        }
        h
    }

    #[test]
    fn claude_code_headers_are_kept() {
        let h = headers(&[
            (SESSION_ID, b"4f0c2d9e-1b2a-4c3d-8e9f-0a1b2c3d4e5f"),
            (AGENT_ID, b"a1b2c3"),
            (PARENT_AGENT_ID, b"p9"),
            (REQUEST_CLASS, b"Subagent"),
            ("user-agent", b"claude-cli/2.1.337 (external, cli)"),
        ]);
        let t = ClientTags::from_headers(&h).unwrap();
        assert_eq!(
            t.session_id.as_deref(),
            Some("4f0c2d9e-1b2a-4c3d-8e9f-0a1b2c3d4e5f")
        );
        assert_eq!(t.agent_id.as_deref(), Some("a1b2c3"));
        assert_eq!(t.parent_agent_id.as_deref(), Some("p9"));
        assert_eq!(t.request_class, Some("subagent"));
        assert_eq!(t.client.as_deref(), Some("claude-cli/2.1.337"));
        assert!(t.is_subagent() && t.from_claude_code() && !t.is_compaction());
    }

    #[test]
    fn hostile_values_are_dropped_not_cleaned() {
        let long = vec![b'a'; MAX_ID + 1];
        let h = headers(&[
            (SESSION_ID, b"<script>alert(1)</script>"),
            (AGENT_ID, &long),
            (PARENT_AGENT_ID, b"has space"),
            (REQUEST_CLASS, b"root"),
            ("user-agent", b"=cmd|'/c calc'!A1"),
        ]);
        assert_eq!(ClientTags::from_headers(&h), None);
        let h = headers(&[(SESSION_ID, b"\xff\xfe")]);
        assert_eq!(ClientTags::from_headers(&h), None);
        let h = headers(&[(SESSION_ID, &[b'a'; MAX_ID])]);
        assert!(ClientTags::from_headers(&h).unwrap().session_id.is_some());
    }

    #[test]
    fn nothing_sent_is_none() {
        assert_eq!(ClientTags::from_headers(&HeaderMap::new()), None);
        let t = ClientTags::from_headers(&headers(&[("user-agent", b"curl/8.5.0")])).unwrap();
        assert!(!t.from_claude_code() && !t.is_subagent());
    }
}
