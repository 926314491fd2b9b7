//! Runtime warnings an operator needs to read once per process, not once per request: a
//! request from a public address with no `access_control.allow_cidrs`, `X-Forwarded-For`
//! from a peer outside `listen.trusted_proxies`, a sign-in rate limit refusing someone.

use std::sync::atomic::{AtomicBool, Ordering};

/// A flag that is true for its first caller only.
#[derive(Debug, Default)]
pub struct Once(AtomicBool);

impl Once {
    pub const fn new() -> Self {
        Self(AtomicBool::new(false))
    }

    /// True the first time it is asked, false ever after.
    pub fn first(&self) -> bool {
        !self.0.swap(true, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_first_caller_hears_yes() {
        let once = super::Once::new();
        assert!(once.first());
        assert!(!once.first());
        assert!(!once.first());
    }
}
