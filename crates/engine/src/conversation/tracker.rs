//! What each conversation's last turn looked like, per replica: the upstream that served
//! it (affinity keeps the conversation there while it is healthy), its model, the hashes
//! of its system prompt and tools, and whether it used the prompt cache. When a turn that
//! should have read the cache reads nothing, [`Tracker::observe`] names the likely cause
//! the gateway can see.
//!
//! Bounded: [`SHARDS`] maps of at most [`PER_SHARD`] conversations; a full shard drops
//! its oldest quarter. Nothing here is shared between replicas: a replica that never saw
//! a conversation routes it by rendezvous hashing alone, which every replica agrees on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

use super::Turn;

const SHARDS: usize = 16;
/// Conversations remembered per shard (32,768 in all, about 100 bytes each).
pub const PER_SHARD: usize = 2048;
/// Distinct upstream and model names shared between conversations' entries.
const NAMES_KEPT: usize = 1024;
/// A conversation not seen for this long is forgotten for routing.
const FORGET_SECS: i64 = 3600;
/// Prompt caching's default lifetime: a longer pause explains a miss.
const CACHE_TTL_SECS: i64 = 300;
/// Below this many input tokens a prompt is not cached at all, so no miss is reported.
const MIN_CACHEABLE: u64 = 1024;

#[derive(Debug, Clone)]
struct State {
    upstream: Arc<str>,
    model: Arc<str>,
    system: u64,
    tools: u64,
    /// The last turn read or wrote the cache.
    cached: bool,
    seen: DateTime<Utc>,
}

/// What served a turn and what it cost in prompt tokens.
#[derive(Debug, Clone, Copy)]
pub struct Served<'a> {
    pub upstream: &'a str,
    pub model: &'a str,
    pub input: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub at: DateTime<Utc>,
}

/// Why a conversation's cache reads fell to zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// Another upstream served this turn (each keeps its own cache).
    UpstreamSwitch { from: String },
    /// Another model served this turn.
    ModelSwitch { from: String },
    /// The system prompt differs from the last turn's.
    SystemChanged,
    /// The tool list differs from the last turn's.
    ToolsChanged,
    /// The last turn is older than the cache's default lifetime.
    Expired { minutes: i64 },
    /// Nothing the gateway sees changed: the conversation's prefix or the upstream's
    /// cache did.
    Unknown,
}

impl Cause {
    /// The label of `cache.broken` events and the metric.
    pub fn label(&self) -> &'static str {
        match self {
            Cause::UpstreamSwitch { .. } => "upstream_switch",
            Cause::ModelSwitch { .. } => "model_switch",
            Cause::SystemChanged => "system_changed",
            Cause::ToolsChanged => "tools_changed",
            Cause::Expired { .. } => "expired",
            Cause::Unknown => "unknown",
        }
    }

    /// One sentence for the dashboard.
    pub fn explain(&self) -> String {
        match self {
            Cause::UpstreamSwitch { from } => {
                format!("the conversation moved from upstream {from}, whose cache it had")
            }
            Cause::ModelSwitch { from } => format!("the model changed from {from}"),
            Cause::SystemChanged => "the system prompt changed".into(),
            Cause::ToolsChanged => "the tool list changed".into(),
            Cause::Expired { minutes } => {
                format!("{minutes} min since the previous turn: the cache had expired")
            }
            Cause::Unknown => {
                "nothing the gateway sees changed: the prefix or the upstream's cache did".into()
            }
        }
    }
}

/// A turn that read nothing from a cache the previous turn had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Break {
    pub cause: Cause,
}

/// A broken cache as the dashboard lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BreakRecord {
    pub request_id: String,
    pub at: DateTime<Utc>,
    pub session_id: Option<String>,
    pub upstream: String,
    pub model: String,
    pub cause: &'static str,
    pub explanation: String,
}

/// Broken caches kept for the dashboard.
const BREAKS_KEPT: usize = 50;
/// Upstream and model pairs whose prompt tokens are tallied (later pairs are not).
const TALLIES_KEPT: usize = 400;

/// Prompt tokens one upstream's model answered since the gateway started.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Tally {
    pub upstream: String,
    pub model: String,
    pub turns: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub uncached_tokens: u64,
    pub breaks: u64,
}

/// The conversations this replica has seen.
pub struct Tracker {
    shards: Vec<Mutex<HashMap<u64, State>>>,
    breaks: Mutex<std::collections::VecDeque<BreakRecord>>,
    tallies: Mutex<Vec<Tally>>,
    /// Upstream and model names, one allocation each however many entries hold them.
    names: Mutex<std::collections::HashSet<Arc<str>>>,
}

impl Default for Tracker {
    fn default() -> Self {
        Self::new()
    }
}

impl Tracker {
    pub fn new() -> Self {
        Tracker {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            breaks: Mutex::new(std::collections::VecDeque::new()),
            tallies: Mutex::new(Vec::new()),
            names: Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// The shared copy of `name` (a fresh one past [`NAMES_KEPT`] names).
    fn intern(&self, name: &str) -> Arc<str> {
        let Ok(mut names) = self.names.lock() else {
            return Arc::from(name);
        };
        if let Some(n) = names.get(name) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(name);
        if names.len() < NAMES_KEPT {
            names.insert(n.clone());
        }
        n
    }

    /// Adds a served turn to its upstream and model's tally.
    fn tally(&self, served: &Served<'_>, broke: bool) {
        let Ok(mut tallies) = self.tallies.lock() else {
            return;
        };
        let found = tallies
            .iter()
            .position(|t| t.upstream == served.upstream && t.model == served.model);
        let i = match found {
            Some(i) => i,
            None if tallies.len() < TALLIES_KEPT => {
                tallies.push(Tally {
                    upstream: served.upstream.to_owned(),
                    model: served.model.to_owned(),
                    ..Tally::default()
                });
                tallies.len() - 1
            }
            None => return,
        };
        let t = &mut tallies[i];
        t.turns += 1;
        t.cache_read_tokens = t.cache_read_tokens.saturating_add(served.cache_read);
        t.cache_write_tokens = t.cache_write_tokens.saturating_add(served.cache_write);
        t.uncached_tokens = t.uncached_tokens.saturating_add(served.input);
        t.breaks += u64::from(broke);
    }

    /// Every upstream and model's prompt tokens since the gateway started.
    pub fn tallies(&self) -> Vec<Tally> {
        self.tallies.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Keeps a broken cache for the dashboard (the oldest dropped past [`BREAKS_KEPT`]).
    pub fn remember(&self, record: BreakRecord) {
        if let Ok(mut ring) = self.breaks.lock() {
            if ring.len() == BREAKS_KEPT {
                ring.pop_front();
            }
            ring.push_back(record);
        }
    }

    /// At most `limit` broken caches, newest first.
    pub fn recent_breaks(&self, limit: usize) -> Vec<BreakRecord> {
        self.breaks
            .lock()
            .map(|r| r.iter().rev().take(limit).cloned().collect())
            .unwrap_or_default()
    }

    fn shard(&self, key: u64) -> &Mutex<HashMap<u64, State>> {
        &self.shards[(key as usize) % SHARDS]
    }

    /// The upstream that served the conversation's last turn, if seen within the hour.
    pub fn previous(&self, key: u64, now: DateTime<Utc>) -> Option<Arc<str>> {
        let shard = self.shard(key).lock().ok()?;
        let s = shard.get(&key)?;
        ((now - s.seen).num_seconds() < FORGET_SECS).then(|| s.upstream.clone())
    }

    /// Remembers `turn` as served, and reports a broken cache.
    pub fn observe(&self, turn: &Turn, served: &Served<'_>) -> Option<Break> {
        let Ok(mut shard) = self.shard(turn.key).lock() else {
            return None;
        };
        let cached_now = served.cache_read > 0 || served.cache_write > 0;
        let prompt = served
            .input
            .saturating_add(served.cache_read)
            .saturating_add(served.cache_write);
        let broke = match shard.get(&turn.key) {
            Some(prev) if prev.cached && served.cache_read == 0 && prompt >= MIN_CACHEABLE => {
                Some(Break {
                    cause: cause(prev, turn, served),
                })
            }
            _ => None,
        };
        self.tally(served, broke.is_some());
        if shard.len() >= PER_SHARD && !shard.contains_key(&turn.key) {
            evict_oldest_quarter(&mut shard);
        }
        let entry = shard.entry(turn.key);
        let reuse = |old: &Arc<str>, new: &str| {
            if &**old == new {
                old.clone()
            } else {
                self.intern(new)
            }
        };
        match entry {
            std::collections::hash_map::Entry::Occupied(mut o) => {
                let s = o.get_mut();
                s.upstream = reuse(&s.upstream, served.upstream);
                s.model = reuse(&s.model, served.model);
                s.system = turn.system;
                s.tools = turn.tools;
                s.cached = cached_now;
                s.seen = served.at;
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(State {
                    upstream: self.intern(served.upstream),
                    model: self.intern(served.model),
                    system: turn.system,
                    tools: turn.tools,
                    cached: cached_now,
                    seen: served.at,
                });
            }
        }
        broke
    }

    /// Conversations remembered (all shards).
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.len()))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn cause(prev: &State, turn: &Turn, served: &Served<'_>) -> Cause {
    if &*prev.upstream != served.upstream {
        return Cause::UpstreamSwitch {
            from: prev.upstream.to_string(),
        };
    }
    if &*prev.model != served.model {
        return Cause::ModelSwitch {
            from: prev.model.to_string(),
        };
    }
    if prev.system != turn.system {
        return Cause::SystemChanged;
    }
    if prev.tools != turn.tools {
        return Cause::ToolsChanged;
    }
    let idle = (served.at - prev.seen).num_seconds();
    if idle > CACHE_TTL_SECS {
        return Cause::Expired { minutes: idle / 60 };
    }
    Cause::Unknown
}

/// Drops the least recently seen quarter of a full shard.
fn evict_oldest_quarter(shard: &mut HashMap<u64, State>) {
    let mut seen: Vec<DateTime<Utc>> = shard.values().map(|s| s.seen).collect();
    let cut = seen.len() / 4;
    if cut == 0 {
        return;
    }
    let (_, edge, _) = seen.select_nth_unstable(cut);
    let edge = *edge;
    shard.retain(|_, s| s.seen > edge);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use chrono::TimeDelta;

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap()
    }

    fn served<'a>(upstream: &'a str, model: &'a str, read: u64, at: DateTime<Utc>) -> Served<'a> {
        Served {
            upstream,
            model,
            input: 50,
            cache_read: read,
            cache_write: if read == 0 { 5000 } else { 100 },
            at,
        }
    }

    fn turn(system: u64, tools: u64) -> Turn {
        Turn {
            key: 7,
            system,
            tools,
        }
    }

    #[test]
    fn names_what_changed_when_the_cache_reads_stop() {
        let cases: [(&str, &str, Turn, i64, &str); 6] = [
            ("b", "m", turn(1, 1), 10, "upstream_switch"),
            ("a", "m2", turn(1, 1), 10, "model_switch"),
            ("a", "m", turn(2, 1), 10, "system_changed"),
            ("a", "m", turn(1, 2), 10, "tools_changed"),
            ("a", "m", turn(1, 1), 600, "expired"),
            ("a", "m", turn(1, 1), 10, "unknown"),
        ];
        for (upstream, model, next, after, label) in cases {
            let t = Tracker::new();
            assert!(t.observe(&turn(1, 1), &served("a", "m", 0, t0())).is_none());
            assert!(
                t.observe(
                    &turn(1, 1),
                    &served("a", "m", 4000, t0() + TimeDelta::seconds(5))
                )
                .is_none()
            );
            let at = t0() + TimeDelta::seconds(5 + after);
            let broke = t.observe(&next, &served(upstream, model, 0, at)).unwrap();
            assert_eq!(broke.cause.label(), label);
            assert_eq!(&*t.previous(7, at).unwrap(), upstream);
        }
    }

    #[test]
    fn a_first_turn_or_a_cache_that_keeps_reading_is_no_break() {
        let t = Tracker::new();
        assert!(t.observe(&turn(1, 1), &served("a", "m", 0, t0())).is_none());
        assert!(
            t.observe(&turn(1, 1), &served("a", "m", 900, t0()))
                .is_none()
        );
        // A conversation forgotten for routing after an hour.
        assert!(t.previous(7, t0() + TimeDelta::hours(2)).is_none());
    }

    #[test]
    fn memory_is_bounded() {
        let t = Tracker::new();
        for key in 0..(SHARDS * PER_SHARD * 2) as u64 {
            let at = t0() + TimeDelta::seconds(key as i64);
            let tk = Turn {
                key,
                system: 0,
                tools: 0,
            };
            t.observe(&tk, &served("a", "m", 0, at));
        }
        assert!(t.len() <= SHARDS * PER_SHARD, "{}", t.len());
    }
}
