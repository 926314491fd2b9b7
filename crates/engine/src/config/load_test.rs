//! `load_test_mode`: capacity testing with canned replies (the reference's block, same
//! keys, bounds and defaults). When enabled, no model request leaves the gateway; every
//! other step (admission, spend checks, limits, metering, the relay) runs as in production.

use std::time::Duration;

use super::ConfigError;
use super::raw::RawLoadTestMode;

/// The reference's defaults: a 750-token reply spread over 9.5 seconds.
pub const DEFAULT_REPLY_TOKENS: u32 = 750;
pub const DEFAULT_REPLY_SECONDS: f64 = 9.5;

/// An enabled `load_test_mode`.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadTestConfig {
    /// The size of each canned reply, in tokens (about three per text delta).
    pub reply_tokens: u32,
    /// How long a streamed canned reply takes, its events spread evenly over it.
    pub reply_time: Duration,
}

/// `None` when the block is absent or `enabled: false` (the bounds are checked either way,
/// as the reference checks them).
pub fn validate(raw: Option<&RawLoadTestMode>) -> Result<Option<LoadTestConfig>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let reply_tokens = match raw.reply_tokens {
        None => DEFAULT_REPLY_TOKENS,
        Some(t) => u32::try_from(t)
            .ok()
            .filter(|t| (1..=100_000).contains(t))
            .ok_or_else(|| {
                ConfigError::at(
                    "load_test_mode.reply_tokens",
                    "must be a whole number from 1 to 100000",
                )
            })?,
    };
    let seconds = raw.reply_seconds.unwrap_or(DEFAULT_REPLY_SECONDS);
    if !(0.0..=600.0).contains(&seconds) {
        return Err(ConfigError::at(
            "load_test_mode.reply_seconds",
            "must be from 0 to 600",
        ));
    }
    Ok(raw.enabled.then(|| LoadTestConfig {
        reply_tokens,
        reply_time: Duration::from_secs_f64(seconds),
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn raw(enabled: bool, tokens: Option<i64>, seconds: Option<f64>) -> RawLoadTestMode {
        RawLoadTestMode {
            enabled,
            reply_tokens: tokens,
            reply_seconds: seconds,
        }
    }

    #[test]
    fn defaults_are_the_references() {
        let c = validate(Some(&raw(true, None, None))).unwrap().unwrap();
        assert_eq!(c.reply_tokens, 750);
        assert_eq!(c.reply_time, Duration::from_millis(9500));
        assert_eq!(validate(Some(&raw(false, None, None))).unwrap(), None);
        assert_eq!(validate(None).unwrap(), None);
    }

    #[test]
    fn bounds_name_the_key_even_when_disabled() {
        let e = validate(Some(&raw(false, Some(0), None))).unwrap_err();
        assert_eq!(e.path, "load_test_mode.reply_tokens");
        let e = validate(Some(&raw(true, None, Some(600.5)))).unwrap_err();
        assert_eq!(e.path, "load_test_mode.reply_seconds");
        let ok = validate(Some(&raw(true, Some(100_000), Some(0.0))))
            .unwrap()
            .unwrap();
        assert_eq!(ok.reply_time, Duration::ZERO);
    }
}
