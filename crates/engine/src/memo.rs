//! A value computed once for everyone who asks while it is being computed (single flight),
//! and reused for a time-to-live after that. A caller takes a value whose computation
//! started after it asked, or one younger than the time-to-live; otherwise it computes a
//! new one while later callers wait for it. Routes whose answer costs store work
//! (`/readyz`, the status snapshots) go through one, so a flood of them costs at most one
//! computation at a time, never a queue of them.

use std::time::{Duration, Instant};

use tokio::sync::Mutex;

pub struct Memo<T> {
    ttl: Duration,
    slot: Mutex<Option<(Instant, T)>>,
}

impl<T: Clone> Memo<T> {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            slot: Mutex::new(None),
        }
    }

    /// The value, computed by `make` unless one started after this call or is younger
    /// than the time-to-live.
    pub async fn get<F, Fut>(&self, make: F) -> T
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        self.get_kept(|_| true, make).await
    }

    /// [`Memo::get`], keeping the value for later callers only when `keep` says so (a
    /// failed computation is not reused: the next caller computes again).
    pub async fn get_kept<F, Fut>(&self, keep: impl Fn(&T) -> bool, make: F) -> T
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let asked = Instant::now();
        let mut slot = self.slot.lock().await;
        if let Some((started, v)) = slot.as_ref()
            && (*started >= asked || started.elapsed() < self.ttl)
        {
            return v.clone();
        }
        let started = Instant::now();
        let v = make().await;
        *slot = keep(&v).then(|| (started, v.clone()));
        v
    }
}

/// A [`Memo`] per key (e.g. a report's parameters), at most [`MemoMap::MAX_KEYS`] of them:
/// when full, the map starts again empty (computations running keep their own memo).
pub struct MemoMap<T> {
    ttl: Duration,
    memos: std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<Memo<T>>>>,
}

impl<T: Clone> MemoMap<T> {
    pub const MAX_KEYS: usize = 64;

    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            memos: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// The value for `key`, shared as [`Memo::get_kept`] shares it.
    pub async fn get<F, Fut>(&self, key: &str, keep: impl Fn(&T) -> bool, make: F) -> T
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let memo = match self.memos.lock() {
            Ok(mut m) => {
                if m.len() >= Self::MAX_KEYS && !m.contains_key(key) {
                    m.clear();
                }
                m.entry(key.to_owned())
                    .or_insert_with(|| std::sync::Arc::new(Memo::new(self.ttl)))
                    .clone()
            }
            Err(_) => std::sync::Arc::new(Memo::new(self.ttl)),
        };
        memo.get_kept(keep, make).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn concurrent_callers_share_one_computation() {
        let memo = Arc::new(Memo::new(Duration::from_secs(60)));
        let runs = Arc::new(AtomicUsize::new(0));
        let calls = (0..50).map(|_| {
            let (memo, runs) = (memo.clone(), runs.clone());
            tokio::spawn(async move {
                memo.get(|| async {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    runs.fetch_add(1, Ordering::SeqCst)
                })
                .await
            })
        });
        for c in calls {
            assert_eq!(c.await.unwrap_or(usize::MAX), 0);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn without_a_ttl_waiters_share_only_a_computation_they_waited_for() {
        let memo = Arc::new(Memo::new(Duration::ZERO));
        let runs = Arc::new(AtomicUsize::new(0));
        let slow = |runs: Arc<AtomicUsize>| async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            runs.fetch_add(1, Ordering::SeqCst)
        };
        let first = {
            let (memo, runs) = (memo.clone(), runs.clone());
            tokio::spawn(async move { memo.get(|| slow(runs)).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        // Asked while the first computation ran (it started before): computes anew.
        let second = memo.get(|| slow(runs.clone())).await;
        assert_eq!(first.await.unwrap_or(usize::MAX), 0);
        assert_eq!(second, 1);
    }

    #[tokio::test]
    async fn an_expired_value_is_computed_again() {
        let memo = Memo::new(Duration::ZERO);
        assert_eq!(memo.get(|| async { 1 }).await, 1);
        assert_eq!(memo.get(|| async { 2 }).await, 2);
    }

    #[tokio::test]
    async fn a_memo_map_shares_per_key_and_stays_bounded() {
        let map = MemoMap::new(Duration::from_secs(60));
        let runs = AtomicUsize::new(0);
        for key in ["a", "b", "a", "b"] {
            map.get(
                key,
                |_| true,
                || async { runs.fetch_add(1, Ordering::SeqCst) },
            )
            .await;
        }
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        for i in 0..200 {
            map.get(&i.to_string(), |_| true, || async { 0 }).await;
        }
        assert!(map.memos.lock().map(|m| m.len()).unwrap_or(0) <= MemoMap::<usize>::MAX_KEYS);
    }

    #[tokio::test]
    async fn a_failure_is_not_reused() {
        let memo = Memo::new(Duration::from_secs(60));
        let runs = AtomicUsize::new(0);
        for _ in 0..3 {
            let v = memo
                .get_kept(Option::is_some, || async {
                    runs.fetch_add(1, Ordering::SeqCst);
                    None::<u8>
                })
                .await;
            assert_eq!(v, None);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }
}
