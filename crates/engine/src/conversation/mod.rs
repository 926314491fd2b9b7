//! Conversations across requests: which turns belong together, where a conversation goes
//! ([`rendezvous`]) and whether its prompt cache still holds ([`tracker`]).
//!
//! A conversation's key is Claude Code's `x-claude-code-session-id` with the agent id
//! (a subagent is its own conversation) and, for auxiliary and compaction requests, their
//! class (they carry their own system prompt and model); a caller that says nothing is
//! keyed by its principal with the hash of the system prompt and the first turn. Keys and
//! fingerprints are xxh3 hashes: stable across processes and versions, so every replica
//! computes the same routing choice with no shared state.

pub mod rendezvous;
pub mod tracker;

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::metering::tags::ClientTags;

pub use tracker::{Break, Cause, Tracker};

/// What the gateway knows of one turn of a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    /// The conversation's key (affinity and cache tracking).
    pub key: u64,
    /// Hash of the request's `system` (raw bytes), 0 when absent.
    pub system: u64,
    /// Hash of the request's `tools` (raw bytes), 0 when absent.
    pub tools: u64,
}

/// Seeds keep the hashes of different things apart.
const KEY_SEED: u64 = 0x6761_7465_686f_7573; // "gatehous"
const FALLBACK_SEED: u64 = 0x636f_6e76_6572_7361; // "conversa"

/// The hash of a raw JSON value, 0 for none.
pub fn fingerprint(raw: Option<&str>) -> u64 {
    raw.map_or(0, |r| xxh3_64(r.as_bytes()))
}

/// The key of the conversation a request belongs to: Claude Code's session (with agent
/// and, for side requests, class), else the principal with `system` and the first turn.
pub fn key(tags: Option<&ClientTags>, principal: &str, system: u64, first_turn: u64) -> u64 {
    if let Some(t) = tags
        && let Some(session) = t.session_id.as_deref()
    {
        let class = t
            .request_class
            .filter(|c| matches!(*c, "auxiliary" | "compaction"))
            .unwrap_or_default();
        let agent = t.agent_id.as_deref().unwrap_or_default();
        let joined = format!("{session}\u{1f}{agent}\u{1f}{class}");
        return xxh3_64_with_seed(joined.as_bytes(), KEY_SEED);
    }
    let mut buf = Vec::with_capacity(principal.len() + 17);
    buf.extend_from_slice(principal.as_bytes());
    buf.push(0x1f);
    buf.extend_from_slice(&system.to_le_bytes());
    buf.extend_from_slice(&first_turn.to_le_bytes());
    xxh3_64_with_seed(&buf, FALLBACK_SEED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(session: &str, agent: Option<&str>, class: Option<&'static str>) -> ClientTags {
        ClientTags {
            session_id: Some(session.into()),
            agent_id: agent.map(Into::into),
            request_class: class,
            ..ClientTags::default()
        }
    }

    #[test]
    fn a_session_is_one_conversation_per_agent_and_side_class() {
        let main = key(Some(&tags("s1", None, Some("main"))), "p", 1, 2);
        assert_eq!(main, key(Some(&tags("s1", None, None)), "q", 9, 9));
        assert_ne!(main, key(Some(&tags("s1", Some("a1"), None)), "p", 1, 2));
        assert_ne!(
            main,
            key(Some(&tags("s1", None, Some("compaction"))), "p", 1, 2)
        );
        assert_ne!(main, key(Some(&tags("s2", None, None)), "p", 1, 2));
    }

    #[test]
    fn without_a_session_the_principal_and_the_opening_decide() {
        let k = key(None, "key:a", 7, 8);
        assert_eq!(k, key(None, "key:a", 7, 8));
        assert_ne!(k, key(None, "key:b", 7, 8));
        assert_ne!(k, key(None, "key:a", 7, 9));
        // Stable across processes and releases: replicas must agree.
        assert_eq!(fingerprint(Some("[]")), xxh3_64(b"[]"));
    }
}
