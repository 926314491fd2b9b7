//! The in-process limiter of a SQLite gateway (one process owns the file, so its memory is
//! the whole truth): the same arithmetic as the shared rows, under one mutex held for
//! microseconds per admission.

use std::collections::HashMap;
use std::sync::Mutex;

use super::bucket::{DAY_MS, State};
use super::{Draw, SlotDraw, Verdict};

/// Entries kept before idle ones (untouched for a day) are dropped.
const PRUNE_AT: usize = 100_000;

#[derive(Default)]
pub struct Memory {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    buckets: HashMap<String, State>,
    /// Slots in use per key.
    slots: HashMap<String, u32>,
}

impl Memory {
    /// Checks every draw and the slot and takes all or nothing.
    pub fn admit(&self, draws: &[Draw], slot: Option<&SlotDraw>, now_ms: i64) -> Verdict {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if inner.buckets.len() > PRUNE_AT {
            inner.buckets.retain(|_, s| s.at_ms > now_ms - DAY_MS);
        }
        let available: Vec<f64> = draws
            .iter()
            .map(|d| d.kind.available(inner.buckets.get(&d.key).copied(), now_ms))
            .collect();
        let slots_in_use = slot.map_or(0, |s| inner.slots.get(&s.key).copied().unwrap_or(0));
        let admitted = draws
            .iter()
            .zip(&available)
            .all(|(d, a)| d.kind.fits(*a, d.cost))
            && slot.is_none_or(|s| slots_in_use < s.limit);
        if admitted {
            for (d, a) in draws.iter().zip(&available) {
                inner
                    .buckets
                    .insert(d.key.clone(), d.kind.charged(*a, d.cost, now_ms));
            }
            if let Some(s) = slot {
                *inner.slots.entry(s.key.clone()).or_default() += 1;
            }
        }
        Verdict {
            available,
            slots_in_use,
            admitted,
        }
    }

    /// Gives tokens back at settlement (negative: takes them).
    pub fn refund(&self, refunds: &[(Draw, f64)]) {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (d, refund) in refunds {
            if let Some(s) = inner.buckets.get_mut(&d.key) {
                *s = d.kind.refunded(*s, *refund);
            }
        }
    }

    /// Frees a slot of `key`.
    pub fn release(&self, key: &str) {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = inner.slots.get_mut(key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                inner.slots.remove(key);
            }
        }
    }
}
