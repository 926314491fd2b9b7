//! The series one `inference` event feeds, found once per label combination.
//!
//! An answered request touches up to ten series (requests, duration, time to first byte,
//! tokens, prompt tokens, cost, disconnects). Finding each in its `Family` hashes its labels
//! with SipHash and copies them into owned strings, every time: about a tenth of a plain
//! request's instructions (callgrind). [`Cache`] keeps, per raw `(endpoint, status,
//! upstream, model)`, handles to those series — clones of the family's own counters and
//! histograms, so the exposition is the same — and is looked up without allocating. A
//! series the event has nothing for (no tokens of a kind, no cost, no disconnect) is still
//! created only when first needed. At most [`MAX_KEYS`] combinations are kept; past that,
//! the caller resolves each series as before.

use std::hash::Hash;
use std::sync::{Arc, Mutex, OnceLock};

use hashbrown::{Equivalent, HashMap};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

/// Label combinations kept (each a few hundred bytes).
pub const MAX_KEYS: usize = 4096;

/// The raw label values of an `inference` event, owned.
#[derive(Hash, PartialEq, Eq)]
struct Key {
    endpoint: Box<str>,
    status: u64,
    upstream: Box<str>,
    model: Box<str>,
}

/// The same, borrowed from the event; hashes exactly as [`Key`] does (field by field, a
/// `Box<str>` as its `str`).
#[derive(Hash, Clone, Copy)]
pub struct KeyRef<'a> {
    pub endpoint: &'a str,
    pub status: u64,
    pub upstream: &'a str,
    pub model: &'a str,
}

impl Equivalent<Key> for KeyRef<'_> {
    fn equivalent(&self, key: &Key) -> bool {
        self.status == key.status
            && *self.endpoint == *key.endpoint
            && *self.upstream == *key.upstream
            && *self.model == *key.model
    }
}

impl KeyRef<'_> {
    fn owned(&self) -> Key {
        Key {
            endpoint: self.endpoint.into(),
            status: self.status,
            upstream: self.upstream.into(),
            model: self.model.into(),
        }
    }
}

/// Handles to one combination's series; the lazily created ones are filled on first use.
pub struct Series {
    /// The model label (the id, or `other` past the bound), fixed when first seen.
    pub model: String,
    pub requests: Counter,
    pub duration: Histogram,
    /// Time to first byte, for events that name an upstream.
    pub ttft: OnceLock<Histogram>,
    /// Tokens by kind: input, output, cache_read, cache_write.
    pub tokens: [OnceLock<Counter>; 4],
    /// Prompt tokens by kind: cache_read, cache_write, uncached.
    pub prompt: [OnceLock<Counter>; 3],
    pub cost: OnceLock<Counter>,
    pub disconnects: OnceLock<Counter>,
}

impl Series {
    pub fn new(model: String, requests: Counter, duration: Histogram) -> Series {
        Series {
            model,
            requests,
            duration,
            ttft: OnceLock::new(),
            tokens: Default::default(),
            prompt: Default::default(),
            cost: OnceLock::new(),
            disconnects: OnceLock::new(),
        }
    }
}

/// Series by label combination (see the module doc).
#[derive(Default)]
pub struct Cache {
    map: Mutex<HashMap<Key, Arc<Series>>>,
}

impl Cache {
    /// The series of `key`, made by `make` the first time; `None` when the cache is full
    /// and `key` is not in it (the caller then resolves each series itself).
    pub fn get(&self, key: KeyRef<'_>, make: impl FnOnce() -> Series) -> Option<Arc<Series>> {
        let mut map = self.map.lock().ok()?;
        if let Some(s) = map.get(&key) {
            return Some(s.clone());
        }
        if map.len() >= MAX_KEYS {
            return None;
        }
        let series = Arc::new(make());
        map.insert(key.owned(), series.clone());
        Some(series)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn key(model: &str) -> KeyRef<'_> {
        KeyRef {
            endpoint: "messages",
            status: 200,
            upstream: "a",
            model,
        }
    }

    fn series() -> Series {
        Series::new("m".into(), Counter::default(), Histogram::new([1.0]))
    }

    #[test]
    fn a_combination_is_made_once_and_the_cache_is_bounded() {
        let cache = Cache::default();
        let mut made = 0;
        let first = cache.get(key("m"), || {
            made += 1;
            series()
        });
        let again = cache.get(key("m"), || {
            made += 1;
            series()
        });
        assert_eq!(made, 1);
        assert!(Arc::ptr_eq(&first.unwrap(), &again.unwrap()));
        let other_status = KeyRef {
            status: 500,
            ..key("m")
        };
        assert!(!Arc::ptr_eq(
            &cache.get(other_status, series).unwrap(),
            &cache.get(key("m"), series).unwrap()
        ));
        let names: Vec<String> = (0..MAX_KEYS).map(|i| format!("model-{i}")).collect();
        for n in &names {
            cache.get(key(n), series);
        }
        assert!(cache.get(key("one-more"), series).is_none(), "full");
        assert!(
            cache.get(key("m"), series).is_some(),
            "kept ones still answer"
        );
    }
}
