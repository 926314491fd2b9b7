//! Anthropic's prompt cache, modelled per fake instance (`FakeConfig::prompt_cache`): one
//! running fake is one upstream, with its own cache, so a conversation that moves to another
//! fake pays for its prefix again.
//!
//! A Messages request is read as its prefix blocks in the order the API caches them: each
//! tool, each system block, then each content block of each message (a string content is
//! one text block). Every block boundary has a *prefix hash* (model, roles and the blocks'
//! canonical JSON without their `cache_control`, so moving a marker does not change the
//! prefix) and a cumulative token estimate (bytes / 4). Blocks carrying `cache_control` are
//! breakpoints.
//!
//! Per request, as the API does it:
//! - read: the longest prefix cached and fresh, looked up at every block boundary up to
//!   [`LOOKBACK_BLOCKS`] blocks before a breakpoint; that entry's clock is reset;
//! - write: every breakpoint past that prefix whose prefix reaches [`MIN_CACHEABLE_TOKENS`]
//!   becomes an entry; the tokens from the read prefix to the last one written are
//!   `cache_creation_input_tokens` (the 5-minute kind);
//! - the rest of the request is `input_tokens`.
//!
//! Without any breakpoint nothing is read or written. Entries live [`TTL`] after their last
//! use; at most [`MAX_ENTRIES`] are kept, expired ones dropped first, then the least
//! recently used. The clock is passed in (`Instant`), so tests can move it.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::config::FakeConfig;

/// How long an entry lives after its last read or write (the API's default `5m` cache).
pub(crate) const TTL: Duration = Duration::from_secs(5 * 60);
/// Entries kept per instance; beyond it the least recently used goes.
pub(crate) const MAX_ENTRIES: usize = 4096;
/// A prefix shorter than this is never written (Sonnet's and Opus's minimum).
pub(crate) const MIN_CACHEABLE_TOKENS: u64 = 1024;
/// Block boundaries before a breakpoint at which an earlier entry is looked for.
pub(crate) const LOOKBACK_BLOCKS: usize = 20;

/// What one request's usage reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CacheUsage {
    pub(crate) input_tokens: u64,
    pub(crate) cache_read_input_tokens: u64,
    pub(crate) cache_creation_input_tokens: u64,
}

/// One block boundary of a request's prefix.
#[derive(Clone, Copy, Debug)]
struct Step {
    /// Hash of everything up to and including this block.
    hash: u64,
    /// Estimated tokens up to and including this block.
    tokens: u64,
    /// The block carries `cache_control`.
    breakpoint: bool,
}

/// A request's prefix, block by block.
#[derive(Debug, Default)]
pub(crate) struct Prefix {
    steps: Vec<Step>,
}

impl Prefix {
    /// The prefix of a Messages body; `None` when it is not a JSON object.
    pub(crate) fn of(body: &Value) -> Option<Prefix> {
        let obj = body.as_object()?;
        let mut walk = Walk::new(obj.get("model").and_then(Value::as_str).unwrap_or(""));
        if let Some(tools) = obj.get("tools").and_then(Value::as_array) {
            walk.section(b"tools");
            for tool in tools {
                walk.block(tool);
            }
        }
        match obj.get("system") {
            Some(Value::String(text)) => {
                walk.section(b"system");
                walk.text(text);
            }
            Some(Value::Array(blocks)) => {
                walk.section(b"system");
                for block in blocks {
                    walk.block(block);
                }
            }
            _ => {}
        }
        for message in obj
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let role = message.get("role").and_then(Value::as_str).unwrap_or("");
            walk.section(role.as_bytes());
            match message.get("content") {
                Some(Value::String(text)) => walk.text(text),
                Some(Value::Array(blocks)) => {
                    for block in blocks {
                        walk.block(block);
                    }
                }
                _ => {}
            }
        }
        Some(Prefix { steps: walk.steps })
    }

    /// Estimated tokens of the whole request (at least 1).
    pub(crate) fn total_tokens(&self) -> u64 {
        self.steps.last().map_or(0, |s| s.tokens).max(1)
    }
}

/// Builds the steps: one running hasher, cloned at each boundary.
struct Walk {
    hasher: DefaultHasher,
    bytes: u64,
    steps: Vec<Step>,
}

impl Walk {
    fn new(model: &str) -> Walk {
        let mut hasher = DefaultHasher::new();
        hasher.write(model.as_bytes());
        hasher.write_u8(0xff);
        Walk {
            hasher,
            bytes: 0,
            steps: Vec::new(),
        }
    }

    /// Starts a section (tools, system, a message's role): hashed, not a boundary.
    fn section(&mut self, name: &[u8]) {
        self.hasher.write_u8(0xfe);
        self.hasher.write(name);
        self.hasher.write_u8(0xff);
        self.bytes += name.len() as u64;
    }

    /// A string content or system: one text block without a marker.
    fn text(&mut self, text: &str) {
        let block = serde_json::json!({"type": "text", "text": text});
        self.block(&block);
    }

    fn block(&mut self, block: &Value) {
        let breakpoint = block.get("cache_control").is_some_and(|c| !c.is_null());
        let canonical = match block {
            Value::Object(map) if map.contains_key("cache_control") => {
                let mut map = map.clone();
                map.remove("cache_control");
                serde_json::to_vec(&Value::Object(map))
            }
            _ => serde_json::to_vec(block),
        }
        .unwrap_or_default();
        self.hasher.write_usize(canonical.len());
        self.hasher.write(&canonical);
        self.bytes += canonical.len() as u64;
        self.steps.push(Step {
            hash: self.hasher.clone().finish(),
            tokens: self.bytes.div_ceil(4),
            breakpoint,
        });
    }
}

/// The usage of one `/v1/messages` body when `on` (the instance's `prompt_cache`), now.
/// `None`: off, or not a JSON object.
pub(crate) fn usage(cache: &PromptCache, on: bool, body: &[u8]) -> Option<CacheUsage> {
    if !on {
        return None;
    }
    let prefix = Prefix::of(&serde_json::from_slice::<Value>(body).ok()?)?;
    Some(cache.apply(&prefix, Instant::now()))
}

impl CacheUsage {
    /// `config` answering with this usage (the fixed token fields replaced).
    pub(crate) fn config(self, config: &FakeConfig) -> FakeConfig {
        let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        FakeConfig {
            input_tokens: clamp(self.input_tokens),
            cache_read_input_tokens: clamp(self.cache_read_input_tokens),
            cache_creation_5m_tokens: clamp(self.cache_creation_input_tokens),
            cache_creation_1h_tokens: 0,
            ..config.clone()
        }
    }
}

/// One instance's cache: prefix hash → its last use (the tokens are the request's own
/// estimate at that boundary, the same for every request with that prefix).
#[derive(Default)]
pub(crate) struct PromptCache {
    entries: Mutex<HashMap<u64, Instant>>,
}

impl PromptCache {
    /// Reads and writes the cache for one request at `now`; the usage it reports.
    pub(crate) fn apply(&self, prefix: &Prefix, now: Instant) -> CacheUsage {
        let total = prefix.total_tokens();
        let steps = &prefix.steps;
        let Some(last_breakpoint) = steps.iter().rposition(|s| s.breakpoint) else {
            return CacheUsage {
                input_tokens: total,
                ..CacheUsage::default()
            };
        };
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let fresh = |last_used: &Instant| now.saturating_duration_since(*last_used) < TTL;
        // The longest cached prefix: boundaries from the last breakpoint back, each within
        // the lookback of the nearest breakpoint at or after it.
        let mut hit = None;
        let mut nearest_breakpoint = last_breakpoint;
        for i in (0..=last_breakpoint).rev() {
            if steps[i].breakpoint {
                nearest_breakpoint = i;
            }
            if nearest_breakpoint - i > LOOKBACK_BLOCKS {
                continue;
            }
            if let Some(last_used) = entries.get_mut(&steps[i].hash)
                && fresh(last_used)
            {
                *last_used = now;
                hit = Some(i);
                break;
            }
        }
        let read = hit.map_or(0, |i| steps[i].tokens);
        let first_new = hit.map_or(0, |i| i + 1);
        let mut written = read;
        for step in &steps[first_new..=last_breakpoint] {
            if !step.breakpoint || step.tokens < MIN_CACHEABLE_TOKENS {
                continue;
            }
            make_room(&mut entries, now);
            entries.insert(step.hash, now);
            written = step.tokens;
        }
        let creation = written - read;
        CacheUsage {
            input_tokens: total.saturating_sub(written),
            cache_read_input_tokens: read,
            cache_creation_input_tokens: creation,
        }
    }

    /// Entries held (expired ones included until they are dropped).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Frees a slot when the cache is full: expired entries first, else the least recently used.
fn make_room(entries: &mut HashMap<u64, Instant>, now: Instant) {
    if entries.len() < MAX_ENTRIES {
        return;
    }
    entries.retain(|_, last_used| now.saturating_duration_since(*last_used) < TTL);
    if entries.len() < MAX_ENTRIES {
        return;
    }
    if let Some(oldest) = entries
        .iter()
        .min_by_key(|(_, last_used)| **last_used)
        .map(|(k, _)| *k)
    {
        entries.remove(&oldest);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    /// About `kib` KiB of text.
    fn text(seed: &str, kib: usize) -> String {
        let line = format!("{seed}: follow the repository's conventions and keep answers short. ");
        line.repeat(kib * 1024 / line.len() + 1)
    }

    /// A Claude Code-like body: system marked, the last user message marked.
    fn body(system: &str, turns: usize) -> Value {
        let mut messages = Vec::new();
        for t in 0..turns {
            if t > 0 {
                messages.push(json!({"role": "assistant", "content": format!("answer {t}")}));
            }
            messages.push(json!({"role": "user", "content": [
                {"type": "text", "text": format!("question {t} {}", text("q", 1))}
            ]}));
        }
        if let Some(last) = messages.last_mut() {
            last["content"][0]["cache_control"] = json!({"type": "ephemeral"});
        }
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 100,
            "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}],
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            "messages": messages,
        })
    }

    fn apply(cache: &PromptCache, body: &Value, now: Instant) -> CacheUsage {
        cache.apply(&Prefix::of(body).unwrap(), now)
    }

    #[test]
    fn second_identical_request_reads_what_the_first_wrote() {
        let cache = PromptCache::default();
        let now = Instant::now();
        let b = body(&text("sys", 12), 1);
        let total = Prefix::of(&b).unwrap().total_tokens();
        let first = apply(&cache, &b, now);
        assert_eq!(first.cache_read_input_tokens, 0);
        assert!(first.cache_creation_input_tokens > 3000, "{first:?}");
        assert_eq!(
            first.input_tokens + first.cache_creation_input_tokens,
            total
        );
        let second = apply(&cache, &b, now + Duration::from_secs(1));
        assert_eq!(
            second.cache_read_input_tokens,
            first.cache_creation_input_tokens
        );
        assert_eq!(second.cache_creation_input_tokens, 0);
    }

    #[test]
    fn the_next_turn_reads_the_previous_turn_and_writes_the_new_part() {
        let cache = PromptCache::default();
        let now = Instant::now();
        let system = text("sys", 12);
        let one = apply(&cache, &body(&system, 1), now);
        let two = apply(&cache, &body(&system, 2), now);
        assert_eq!(two.cache_read_input_tokens, one.cache_creation_input_tokens);
        assert!(two.cache_creation_input_tokens > 200, "{two:?}");
        // A new conversation with the same system prompt reads the system prefix only.
        let other = body(&system, 1);
        let mut other = other;
        other["messages"][0]["content"][0]["text"] = json!(text("other", 1));
        let three = apply(&cache, &other, now);
        assert!(three.cache_read_input_tokens > 2500, "{three:?}");
        assert!(three.cache_read_input_tokens < one.cache_creation_input_tokens);
    }

    #[test]
    fn a_changed_system_prompt_misses() {
        let cache = PromptCache::default();
        let now = Instant::now();
        apply(&cache, &body(&text("sys", 12), 2), now);
        let changed = apply(&cache, &body(&text("SYS", 12), 2), now);
        assert_eq!(changed.cache_read_input_tokens, 0);
        assert!(changed.cache_creation_input_tokens > 0);
    }

    #[test]
    fn separate_caches_do_not_share() {
        let (a, b) = (PromptCache::default(), PromptCache::default());
        let now = Instant::now();
        let req = body(&text("sys", 12), 1);
        apply(&a, &req, now);
        assert_eq!(apply(&b, &req, now).cache_read_input_tokens, 0);
        assert!(apply(&a, &req, now).cache_read_input_tokens > 0);
    }

    #[test]
    fn entries_expire_five_minutes_after_their_last_use() {
        let cache = PromptCache::default();
        let t0 = Instant::now();
        let req = body(&text("sys", 12), 1);
        apply(&cache, &req, t0);
        // A read at 4 minutes renews the entry ...
        let t1 = t0 + Duration::from_secs(240);
        assert!(apply(&cache, &req, t1).cache_read_input_tokens > 0);
        assert!(apply(&cache, &req, t1 + Duration::from_secs(299)).cache_read_input_tokens > 0);
        // ... and 5 minutes of silence ends it.
        let late = apply(&cache, &req, t1 + Duration::from_secs(299 + 300));
        assert_eq!(late.cache_read_input_tokens, 0);
        assert!(late.cache_creation_input_tokens > 0);
    }

    #[test]
    fn no_breakpoint_no_cache_and_short_prefixes_are_not_written() {
        let cache = PromptCache::default();
        let now = Instant::now();
        let plain = json!({"model": "m", "messages": [{"role": "user", "content": text("x", 8)}]});
        for _ in 0..2 {
            let u = apply(&cache, &plain, now);
            assert_eq!(u.cache_read_input_tokens + u.cache_creation_input_tokens, 0);
        }
        let short = json!({"model": "m", "system": [{"type": "text", "text": "short", "cache_control": {"type": "ephemeral"}}],
                           "messages": [{"role": "user", "content": "hi"}]});
        for _ in 0..2 {
            let u = apply(&cache, &short, now);
            assert_eq!(u.cache_read_input_tokens + u.cache_creation_input_tokens, 0);
        }
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn the_model_is_part_of_the_prefix() {
        let cache = PromptCache::default();
        let now = Instant::now();
        let mut req = body(&text("sys", 12), 1);
        apply(&cache, &req, now);
        req["model"] = json!("claude-opus-4-5");
        assert_eq!(apply(&cache, &req, now).cache_read_input_tokens, 0);
    }

    #[test]
    fn memory_is_bounded() {
        let cache = PromptCache::default();
        let now = Instant::now();
        let system = text("sys", 5);
        for i in 0..MAX_ENTRIES + 10 {
            let mut req = body(&system, 1);
            req["system"][0]["text"] = json!(format!("{i} {system}"));
            apply(&cache, &req, now + Duration::from_millis(i as u64));
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
    }
}
