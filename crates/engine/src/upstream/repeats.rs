//! Warnings that repeat, logged at most once a minute each, as the reference logs them
//! since 2.1.334 (`<message> (repeats logged at most once a minute)`): an upstream answering
//! 5xx to every request must not write a line per request. Each distinct message has its
//! own minute; the table forgets everything once it holds 100 messages.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a message stays quiet after it was logged.
pub const QUIET: Duration = Duration::from_secs(60);
/// Messages remembered at most (then all are forgotten, as the reference does).
const MAX_MESSAGES: usize = 100;

#[derive(Default)]
pub struct Repeats {
    logged: Mutex<HashMap<String, Instant>>,
}

impl Repeats {
    /// Logs `message` as a warning unless it was logged less than a minute ago.
    pub fn warn(&self, message: &str) {
        if self.due(message, Instant::now()) {
            tracing::warn!("{message} (repeats logged at most once a minute)");
        }
    }

    /// Whether `message` may be logged at `now` (and, if so, that it was).
    fn due(&self, message: &str, now: Instant) -> bool {
        let mut logged = self
            .logged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if logged
            .get(message)
            .is_some_and(|at| now.saturating_duration_since(*at) < QUIET)
        {
            return false;
        }
        if logged.len() >= MAX_MESSAGES {
            logged.clear();
        }
        logged.insert(message.to_owned(), now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_message_is_logged_at_most_once_a_minute() {
        let r = Repeats::default();
        let t0 = Instant::now();
        assert!(r.due("upstream 501 on /v1/messages", t0));
        assert!(!r.due("upstream 501 on /v1/messages", t0 + Duration::from_secs(59)));
        assert!(r.due("upstream 501 on /v1/messages/count_tokens", t0));
        assert!(r.due("upstream 501 on /v1/messages", t0 + QUIET));
    }

    #[test]
    fn the_table_is_forgotten_when_full() {
        let r = Repeats::default();
        let t0 = Instant::now();
        for i in 0..MAX_MESSAGES {
            assert!(r.due(&format!("m{i}"), t0));
        }
        assert!(!r.due("m0", t0));
        assert!(r.due("one more", t0));
        assert!(r.due("m0", t0), "forgotten with the rest");
    }
}
