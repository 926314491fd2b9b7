//! The policy webhook: an operator service that sees each inference request (after JSON
//! parsing, before routing) and answers allow or block. It never rewrites the request.
//!
//! Sent: `{"path", "query", "headers": {a few}, "body": <the request body as sent>}` with
//! `x-request-id` and a sanitised `x-principal-sub`. The answer must be 2xx with a JSON
//! object holding a boolean `block`; `reason` is shown to the user after removing control
//! and format characters and cutting it to 500 code points; `rule_id` goes into the event.
//! A timeout, non-2xx or malformed answer blocks (fail closed, the default) or lets the
//! request pass with a `policy.skipped` event (fail open). After [`BREAKER_FAILURES`]
//! failures in a row the webhook is not called for [`BREAKER_OPEN`] (then one probe), and
//! each request meanwhile gets the failure decision at once: a dead or hung webhook costs
//! its timeout a few times, not on every request.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::breaker::{Admit, Breaker};
use crate::outbound::SafeFetch;

/// Failures in a row that open the webhook's breaker.
pub const BREAKER_FAILURES: u32 = 3;
/// How long an open breaker answers for the webhook before one probe.
pub const BREAKER_OPEN: std::time::Duration = std::time::Duration::from_secs(10);

/// Request headers the webhook gets to see.
const FORWARDED: &[&str] = &[
    "content-type",
    "anthropic-version",
    "anthropic-beta",
    "user-agent",
];
const MAX_REASON: usize = 500;

pub use crate::config::WebhookConfig;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Block {
        reason: String,
        rule_id: Option<String>,
    },
    /// The webhook could not decide and the config fails open.
    Skipped {
        why: String,
    },
    /// The webhook could not decide and the config fails closed.
    Unavailable {
        why: String,
    },
}

pub struct Webhook {
    cfg: WebhookConfig,
    fetch: SafeFetch,
    breaker: std::sync::Mutex<Breaker>,
}

/// Removes control and format characters, trims, and cuts to 500 code points.
pub fn sanitize_reason(s: &str) -> String {
    let cleaned: String = s
        .chars()
        .filter(|c| !c.is_control() && !is_format(*c))
        .collect();
    let cleaned = cleaned.trim();
    if cleaned.chars().count() > MAX_REASON {
        let cut: String = cleaned.chars().take(MAX_REASON - 1).collect();
        format!("{cut}…")
    } else {
        cleaned.to_owned()
    }
}

/// Unicode general category Cf (format) characters that matter for display spoofing.
fn is_format(c: char) -> bool {
    matches!(c as u32,
        0x00AD | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x180E | 0x200B..=0x200F
        | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB
        | 0xE0001 | 0xE0020..=0xE007F)
}

/// A header-safe form of a subject: printable ASCII kept, everything else percent-encoded.
fn header_safe(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes().take(256) {
        if (0x21..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Webhook {
    pub fn new(cfg: WebhookConfig, fetch: SafeFetch) -> Self {
        Self {
            cfg,
            fetch,
            breaker: std::sync::Mutex::new(Breaker::new(BREAKER_FAILURES, BREAKER_OPEN)),
        }
    }

    fn breaker(&self) -> std::sync::MutexGuard<'_, Breaker> {
        // Plain state: a panic elsewhere cannot leave it half-written.
        self.breaker.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks the webhook, through its breaker.
    pub async fn check(
        &self,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        body: &[u8],
        request_id: &str,
        principal_sub: &str,
    ) -> Decision {
        let now = std::time::Instant::now();
        if self.breaker().admit(now) == Admit::Skip {
            return self.fail("not called: it failed repeatedly (circuit open)".into());
        }
        let (decision, ok) = self
            .call(path, query, headers, body, request_id, principal_sub)
            .await;
        if ok {
            self.breaker().on_success();
        } else {
            self.breaker().on_failure(std::time::Instant::now());
        }
        decision
    }

    fn fail(&self, why: String) -> Decision {
        if self.cfg.fail_closed {
            Decision::Unavailable { why }
        } else {
            Decision::Skipped { why }
        }
    }

    /// One call; the decision and whether the webhook answered properly.
    async fn call(
        &self,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        body: &[u8],
        request_id: &str,
        principal_sub: &str,
    ) -> (Decision, bool) {
        let mut shown = serde_json::Map::new();
        for name in FORWARDED {
            if let Some(v) = headers.get(*name).and_then(|v| v.to_str().ok()) {
                shown.insert((*name).to_owned(), Value::String(v.to_owned()));
            }
        }
        let query = query.map(|q| format!("?{q}")).unwrap_or_default();
        // The body is embedded as sent (it already parsed as a JSON object).
        let mut payload = Vec::with_capacity(body.len() + 256);
        payload.extend_from_slice(b"{\"path\":");
        payload.extend_from_slice(Value::String(path.to_owned()).to_string().as_bytes());
        payload.extend_from_slice(b",\"query\":");
        payload.extend_from_slice(Value::String(query).to_string().as_bytes());
        payload.extend_from_slice(b",\"headers\":");
        payload.extend_from_slice(Value::Object(shown).to_string().as_bytes());
        payload.extend_from_slice(b",\"body\":");
        payload.extend_from_slice(body);
        payload.push(b'}');
        let mut h = HeaderMap::new();
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Ok(v) = HeaderValue::from_str(request_id) {
            h.insert(HeaderName::from_static("x-request-id"), v);
        }
        if let Ok(v) = HeaderValue::from_str(&header_safe(principal_sub)) {
            h.insert(HeaderName::from_static("x-principal-sub"), v);
        }
        let call = async {
            let resp = self
                .fetch
                .post(&self.cfg.url, h, Bytes::from(payload))
                .await
                .map_err(|e| e.to_string())?;
            if !resp.status().is_success() {
                return Err(format!("status {}", resp.status()));
            }
            resp.bytes().await.map_err(|e| e.to_string())
        };
        let body = match tokio::time::timeout(self.cfg.timeout, call).await {
            Err(_) => {
                let ms = self.cfg.timeout.as_millis();
                return (self.fail(format!("timed out after {ms} ms")), false);
            }
            Ok(Err(e)) => return (self.fail(e), false),
            Ok(Ok(b)) => b,
        };
        let Ok(Value::Object(answer)) = serde_json::from_slice::<Value>(&body) else {
            return (self.fail("answer is not a JSON object".into()), false);
        };
        let decision = match answer.get("block") {
            Some(Value::Bool(false)) => Decision::Allow,
            Some(Value::Bool(true)) => Decision::Block {
                reason: answer
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(sanitize_reason)
                    .filter(|r| !r.is_empty())
                    .unwrap_or_else(|| "blocked by your organization's policy".into()),
                rule_id: answer
                    .get("rule_id")
                    .and_then(Value::as_str)
                    .map(|r| sanitize_reason(r).chars().take(128).collect()),
            },
            _ => return (self.fail("answer has no boolean `block`".into()), false),
        };
        (decision, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_cleaned_and_bounded() {
        assert_eq!(
            sanitize_reason("  no\u{1b}[31m secrets\u{202e} here\n"),
            "no[31m secrets here"
        );
        let long = "x".repeat(600);
        let r = sanitize_reason(&long);
        assert_eq!(r.chars().count(), 500);
        assert!(r.ends_with('…'));
        assert_eq!(sanitize_reason(&"é".repeat(500)).chars().count(), 500);
        assert_eq!(header_safe("alice é\n"), "alice%20%C3%A9%0A");
    }
}
