//! Which connection thread (see `edge::listener::threads`) the current code runs on.
//!
//! Resources kept one per connection thread (the upstream HTTP client's pool, see
//! `upstream::http_client`) pick their copy with [`current`], so a connection's work
//! never lends or borrows a socket whose task runs on another thread: each such
//! hand-over costs a cross-thread wake (an eventfd write and a context switch) per request.

use std::cell::Cell;

thread_local! {
    static INDEX: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Marks the calling thread as connection thread `index` (called once, at its start).
pub fn enter(index: usize) {
    INDEX.set(Some(index));
}

/// The connection thread this code runs on; `None` on any other thread.
pub fn current() -> Option<usize> {
    INDEX.get()
}
