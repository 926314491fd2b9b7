//! The identity directory: who signed in (email, name, groups), kept in the store for admin
//! views. Written off the request path, at most once per 15 minutes per person unless their
//! identity changed.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};

use super::session::UserIdentity;
use crate::store::Store;

const REFRESH: Duration = Duration::minutes(15);
/// The directory forgets its in-memory marks past this many people (they are rewritten).
const MAX_TRACKED: usize = 100_000;

#[derive(Default)]
pub struct Directory {
    seen: Mutex<HashMap<String, (u64, DateTime<Utc>)>>,
}

fn fingerprint(who: &UserIdentity) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    who.hash(&mut h);
    h.finish()
}

impl Directory {
    /// Records `who` when new, changed or last written more than 15 minutes ago.
    pub fn note(
        &self,
        who: &UserIdentity,
        now: DateTime<Utc>,
        store: &Arc<dyn Store>,
        tracker: &tokio_util::task::TaskTracker,
    ) {
        let fp = fingerprint(who);
        let due = match self.seen.lock() {
            Ok(mut seen) => {
                let due = seen
                    .get(&who.sub)
                    .is_none_or(|(f, at)| *f != fp || now - *at >= REFRESH);
                if due {
                    if seen.len() >= MAX_TRACKED {
                        seen.clear();
                    }
                    seen.insert(who.sub.clone(), (fp, now));
                }
                due
            }
            Err(_) => false,
        };
        if due {
            let (store, who) = (store.clone(), who.clone());
            tracker.spawn(async move {
                if let Err(e) = store.upsert_principal(who, now).await {
                    tracing::warn!(error = %e, "could not update the identity directory");
                }
            });
        }
    }
}
