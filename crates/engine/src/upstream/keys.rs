//! Key pools (`auth.api_keys`): one upstream, several keys, used in turn.
//!
//! [`Pooled`] wraps an upstream's link and sets each attempt's credential itself. A key
//! answered 401 or 403 is set aside (10 minutes, doubling on each repeat up to 4 hours; a
//! success clears its record) and the next key is tried at once, so the caller never sees
//! one bad key; a key answered 429 cools down for the answer's `retry-after` (30 s when
//! absent, at most an hour) and the next key is tried. Only when no key is left does the
//! attempt fail: a 429 with the soonest key's `retry-after` when some are only cooling
//! (the router fails over or relays it), a credential error when all are set aside.
//! Network errors are the upstream's, not a key's: they end the attempt as they are.
//!
//! Events and the dashboard name keys by id only (`key-2` or the operator's id), never
//! by value or any part of it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use super::{Answer, Call, SendError, Upstream};
use crate::config::CredentialScheme;
use crate::config::upstream::PoolKey;
use crate::deps::Clock;
use crate::events::{Event, EventSink};

/// How long a key answered 401/403 is set aside the first time.
const SET_ASIDE: TimeDelta = TimeDelta::minutes(10);
/// The longest a key is set aside.
const SET_ASIDE_MAX: TimeDelta = TimeDelta::hours(4);
/// Cooldown after a 429 without `retry-after`.
const COOLDOWN_DEFAULT: TimeDelta = TimeDelta::seconds(30);
/// The longest cooldown a `retry-after` can ask for.
const COOLDOWN_MAX: TimeDelta = TimeDelta::hours(1);

#[derive(Debug, Default, Clone)]
struct Record {
    /// Set aside after 401/403 until then.
    set_aside_until: Option<DateTime<Utc>>,
    /// The status that set it aside.
    set_aside_status: Option<u16>,
    /// Repeated 401/403 without a success between them.
    strikes: u32,
    /// Cooling down after 429 until then.
    cooling_until: Option<DateTime<Utc>>,
    uses: u64,
    failures: u64,
}

impl Record {
    fn ready(&self, now: DateTime<Utc>) -> bool {
        self.set_aside_until.is_none_or(|t| t <= now) && self.cooling_until.is_none_or(|t| t <= now)
    }

    fn state(&self, now: DateTime<Utc>) -> (&'static str, Option<DateTime<Utc>>) {
        match (self.set_aside_until, self.cooling_until) {
            (Some(t), _) if t > now => ("set_aside", Some(t)),
            (_, Some(t)) if t > now => ("cooling", Some(t)),
            _ => ("ready", None),
        }
    }
}

/// The keys of one upstream and what each has met.
pub struct Pool {
    upstream: String,
    scheme: CredentialScheme,
    keys: Vec<PoolKey>,
    records: Vec<Mutex<Record>>,
    next: AtomicUsize,
    clock: Arc<dyn Clock>,
    events: Arc<dyn EventSink>,
}

impl Pool {
    /// The order keys are tried in: a conversation's own ranking of them (the same key for
    /// every turn while it is ready, so its prompt cache holds), else in turn.
    fn order(&self, affinity: Option<u64>) -> Vec<usize> {
        let n = self.keys.len();
        match affinity {
            Some(key) => {
                use crate::conversation::rendezvous::{rank, score};
                rank((0..n).collect(), |i| score(key, &self.keys[*i].id, 1))
            }
            None => {
                let start = self.next.fetch_add(1, Ordering::Relaxed);
                (0..n).map(|k| (start + k) % n).collect()
            }
        }
    }

    pub fn new(
        upstream: &str,
        scheme: CredentialScheme,
        keys: &[PoolKey],
        clock: Arc<dyn Clock>,
        events: Arc<dyn EventSink>,
    ) -> Self {
        Self {
            upstream: upstream.to_owned(),
            scheme,
            keys: keys.to_vec(),
            records: keys.iter().map(|_| Mutex::default()).collect(),
            next: AtomicUsize::new(0),
            clock,
            events,
        }
    }

    fn with<T>(&self, i: usize, f: impl FnOnce(&mut Record) -> T) -> Option<T> {
        self.records.get(i)?.lock().ok().map(|mut r| f(&mut r))
    }

    fn event(&self, name: &'static str, i: usize) -> Event {
        Event::new(name)
            .with("upstream", self.upstream.clone())
            .with("key_id", self.keys[i].id.clone())
    }

    fn succeeded(&self, i: usize) {
        let restored = self.with(i, |r| {
            r.uses += 1;
            let had = r.strikes > 0;
            r.strikes = 0;
            r.set_aside_status = None;
            had
        });
        if restored == Some(true) {
            self.events.emit(&self.event("upstream.key_restored", i));
        }
    }

    fn set_aside(&self, i: usize, status: u16, now: DateTime<Utc>) {
        let until = self.with(i, |r| {
            r.uses += 1;
            r.failures += 1;
            let factor = 1i32 << r.strikes.min(5);
            r.strikes = r.strikes.saturating_add(1);
            let until = now + (SET_ASIDE * factor).min(SET_ASIDE_MAX);
            r.set_aside_until = Some(until);
            r.set_aside_status = Some(status);
            until
        });
        if let Some(until) = until {
            tracing::warn!(upstream = %self.upstream, key_id = %self.keys[i].id, status, "upstream key refused; set aside");
            self.events.emit(
                &self
                    .event("upstream.key_set_aside", i)
                    .with("status", status)
                    .with("until", iso(until)),
            );
        }
    }

    fn cool(&self, i: usize, wait: TimeDelta, now: DateTime<Utc>) {
        let until = now + wait;
        self.with(i, |r| {
            r.uses += 1;
            r.failures += 1;
            r.cooling_until = Some(until);
        });
        self.events.emit(
            &self
                .event("upstream.key_cooling", i)
                .with("until", iso(until)),
        );
    }

    /// When the soonest cooling key is ready again, if no key is set aside for longer.
    fn soonest_cooled(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.records
            .iter()
            .filter_map(|r| r.lock().ok().map(|r| r.clone()))
            .filter(|r| r.set_aside_until.is_none_or(|t| t <= now))
            .filter_map(|r| r.cooling_until)
            .min()
    }

    /// Each key as the dashboard shows it: id, state, until when, uses and failures.
    pub fn to_json(&self) -> Vec<Value> {
        let now = self.clock.now();
        self.keys
            .iter()
            .zip(&self.records)
            .filter_map(|(k, r)| {
                let r = r.lock().ok()?.clone();
                let (state, until) = r.state(now);
                Some(json!({
                    "id": k.id,
                    "state": state,
                    "until": until.map(iso),
                    "status": r.set_aside_status,
                    "uses": r.uses,
                    "failures": r.failures,
                }))
            })
            .collect()
    }
}

fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// How long a 429 asks to wait: `retry-after-ms`, `retry-after` in seconds or as an HTTP
/// date, else the default; bounded.
fn retry_after(headers: &HeaderMap, now: DateTime<Utc>) -> TimeDelta {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let asked = if let Some(ms) = text("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
    {
        TimeDelta::try_milliseconds(ms.clamp(0.0, 3.6e6) as i64)
    } else if let Some(v) = text("retry-after") {
        match v.trim().parse::<u64>() {
            Ok(secs) => TimeDelta::try_seconds(secs.min(3600) as i64),
            Err(_) => DateTime::parse_from_rfc2822(v.trim())
                .ok()
                .map(|t| t.with_timezone(&Utc) - now),
        }
    } else {
        None
    };
    asked
        .unwrap_or(COOLDOWN_DEFAULT)
        .clamp(TimeDelta::seconds(1), COOLDOWN_MAX)
}

/// An upstream's link with its key pool.
pub struct Pooled {
    inner: Arc<dyn Upstream>,
    pool: Arc<Pool>,
}

impl Pooled {
    pub fn new(inner: Arc<dyn Upstream>, pool: Arc<Pool>) -> Self {
        Self { inner, pool }
    }
}

#[async_trait]
impl Upstream for Pooled {
    async fn send(&self, call: Call<'_>) -> Result<Answer, SendError> {
        let pool = &self.pool;
        let order = pool.order(call.affinity);
        let mut tried = false;
        for i in order {
            let now = pool.clock.now();
            if pool.with(i, |r| r.ready(now)) != Some(true) {
                continue;
            }
            tried = true;
            let attempt = call.with_credential((pool.scheme, &pool.keys[i].value));
            let answer = self.inner.send(attempt).await?;
            match answer.status {
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    pool.set_aside(i, answer.status.as_u16(), pool.clock.now());
                }
                StatusCode::TOO_MANY_REQUESTS => {
                    let now = pool.clock.now();
                    pool.cool(i, retry_after(&answer.headers, now), now);
                }
                _ => {
                    pool.succeeded(i);
                    return Ok(answer);
                }
            }
        }
        let now = pool.clock.now();
        match pool.soonest_cooled(now) {
            Some(ready_at) => Ok(all_cooling(ready_at - now)),
            None => Err(SendError::Credential(format!(
                "every key of upstream `{}` is set aside after 401/403{}",
                pool.upstream,
                if tried { "" } else { " (none tried)" }
            ))),
        }
    }
}

/// The 429 of a pool whose every usable key is cooling down.
fn all_cooling(wait: TimeDelta) -> Answer {
    let mut answer = super::errors::envelope(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limit_error",
        "every key of this upstream is rate limited; retry later",
    );
    answer
        .headers
        .insert(http::header::RETRY_AFTER, wait.num_seconds().max(1).into());
    answer
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn retry_after_forms_and_bounds() {
        let now = at("2026-12-01T00:00:00Z");
        let h = |pairs: &[(&'static str, &str)]| {
            let mut m = HeaderMap::new();
            for (k, v) in pairs {
                m.insert(*k, v.parse().unwrap());
            }
            retry_after(&m, now)
        };
        assert_eq!(h(&[]), COOLDOWN_DEFAULT);
        assert_eq!(h(&[("retry-after", "30")]), TimeDelta::seconds(30));
        assert_eq!(
            h(&[("retry-after-ms", "1500")]),
            TimeDelta::milliseconds(1500)
        );
        assert_eq!(h(&[("retry-after", "999999")]), COOLDOWN_MAX);
        assert_eq!(h(&[("retry-after", "0")]), TimeDelta::seconds(1));
        assert_eq!(
            h(&[("retry-after", "Tue, 01 Dec 2026 00:01:00 GMT")]),
            TimeDelta::seconds(60)
        );
        assert_eq!(h(&[("retry-after", "soon")]), COOLDOWN_DEFAULT);
    }

    #[test]
    fn set_aside_doubles_and_is_bounded() {
        let now = at("2026-12-01T00:00:00Z");
        let pool = Pool::new(
            "up",
            CredentialScheme::ApiKey,
            &[PoolKey {
                id: "a".into(),
                value: crate::secret::Secret::new("k".to_owned()),
            }],
            Arc::new(crate::deps::SystemClock),
            Arc::new(crate::events::MemoryEventSink::default()),
        );
        let mut last = TimeDelta::zero();
        for _ in 0..10 {
            pool.set_aside(0, 401, now);
            let until = pool.with(0, |r| r.set_aside_until).flatten().unwrap();
            assert!(until - now >= last);
            last = until - now;
        }
        assert_eq!(last, SET_ASIDE_MAX);
        pool.succeeded(0);
        pool.set_aside(0, 403, now);
        assert_eq!(
            pool.with(0, |r| r.set_aside_until).flatten().unwrap() - now,
            SET_ASIDE
        );
    }
}
