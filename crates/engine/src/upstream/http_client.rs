//! The upstream HTTP clients, one copy per connection thread.
//!
//! An HTTP client pools its connections, and each pooled connection is driven by a task on
//! the runtime that opened it. Shared by every connection thread, a request on one thread
//! would often check out a connection opened on the other, and every exchange on it would
//! then wake that thread and be woken back (measured: about one eventfd write per request
//! at c=16). [`PerThread::get`] hands each connection thread its own client built with the
//! same settings, so its upstream connections stay on the thread; other threads
//! (background jobs, engines started without connection threads) use the shared one.

use std::sync::Arc;

/// A shared client and one per connection thread, all built alike.
#[derive(Clone)]
pub struct PerThread<C> {
    shared: C,
    per_thread: Arc<[C]>,
}

/// The reqwest client every upstream link has.
pub type HttpClient = PerThread<reqwest::Client>;

impl<C> PerThread<C> {
    /// `threads` clients besides the shared one, each from `build`.
    pub fn build<E>(threads: usize, build: impl Fn() -> Result<C, E>) -> Result<Self, E> {
        let shared = build()?;
        let per_thread = (0..threads).map(|_| build()).collect::<Result<_, _>>()?;
        Ok(Self { shared, per_thread })
    }

    /// The client of the connection thread this runs on, else the shared one.
    pub fn get(&self) -> &C {
        crate::connection_thread::current()
            .and_then(|i| self.per_thread.get(i))
            .unwrap_or(&self.shared)
    }

    /// The shared client, for work that is not a caller's request (token exchanges).
    pub fn shared(&self) -> &C {
        &self.shared
    }
}

impl<C> From<C> for PerThread<C> {
    /// One client for every thread.
    fn from(shared: C) -> Self {
        Self {
            shared,
            per_thread: Arc::new([]),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn same(a: &reqwest::Client, b: &reqwest::Client) -> bool {
        std::ptr::eq(a, b)
    }

    #[test]
    fn each_connection_thread_gets_its_own_client_and_others_the_shared_one() {
        let clients = HttpClient::build(2, || reqwest::Client::builder().build()).unwrap();
        assert!(same(clients.get(), clients.shared()));
        let on = |index: usize| {
            let clients = clients.clone();
            std::thread::spawn(move || {
                crate::connection_thread::enter(index);
                let mine = clients.get() as *const reqwest::Client as usize;
                (
                    mine,
                    mine == clients.shared() as *const reqwest::Client as usize,
                )
            })
            .join()
            .unwrap()
        };
        let (first, first_shared) = on(0);
        let (second, second_shared) = on(1);
        assert!(!first_shared && !second_shared);
        assert_ne!(first, second);
        assert_eq!(
            on(0).0,
            first,
            "a thread's client is the same on every call"
        );
        // A thread index beyond the clients built (another engine's threads) gets the
        // shared client.
        assert!(on(5).1);
    }
}
