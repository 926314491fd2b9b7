//! Desktop notifications: spend past 75 % and 95 %, spend and policy blocks, login needed,
//! central server unreachable.
//!
//! [`Gate`] rate-limits them (one per kind per minute, at most five a minute overall) so a
//! retry storm does not spam. Showing is best effort: without a notification daemon the
//! failure is logged and recorded in a `desktop.notify` event, never fatal. Every decision
//! — shown, failed or suppressed — is such an event, which tests and the UI read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gatehouse_engine::events::{Event, EventSink};

/// Shows one notification.
pub trait Notifier: Send + Sync {
    fn show(&self, title: &str, body: &str) -> Result<(), String>;
}

/// The OS notification service (D-Bus on Linux) through `notify-rust`.
pub struct SystemNotifier;

impl Notifier for SystemNotifier {
    fn show(&self, title: &str, body: &str) -> Result<(), String> {
        notify_rust::Notification::new()
            .appname("Gatehouse")
            .summary(title)
            .body(body)
            .timeout(notify_rust::Timeout::Milliseconds(8000))
            .show()
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    SpendWarning,
    SpendBlocked,
    PolicyBlocked,
    LoginNeeded,
    CentralUnreachable,
    /// Traffic moved off a failing or rate-limited provider.
    ProviderAway,
    /// A provider that was skipped takes traffic again.
    ProviderBack,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::SpendWarning => "spend_warning",
            Kind::SpendBlocked => "spend_blocked",
            Kind::PolicyBlocked => "policy_blocked",
            Kind::LoginNeeded => "login_needed",
            Kind::CentralUnreachable => "central_unreachable",
            Kind::ProviderAway => "provider_away",
            Kind::ProviderBack => "provider_back",
        }
    }
}

const PER_KIND: Duration = Duration::from_secs(60);
const WINDOW: Duration = Duration::from_secs(60);
const PER_WINDOW: usize = 5;

pub struct Gate {
    notifier: Arc<dyn Notifier>,
    events: Arc<dyn EventSink>,
    state: Mutex<GateState>,
}

#[derive(Default)]
struct GateState {
    last: HashMap<Kind, Instant>,
    recent: Vec<Instant>,
}

impl Gate {
    pub fn new(notifier: Arc<dyn Notifier>, events: Arc<dyn EventSink>) -> Self {
        Self {
            notifier,
            events,
            state: Mutex::new(GateState::default()),
        }
    }

    fn admit(&self, kind: Kind, now: Instant) -> bool {
        let Ok(mut s) = self.state.lock() else {
            return false;
        };
        if s.last
            .get(&kind)
            .is_some_and(|t| now.duration_since(*t) < PER_KIND)
        {
            return false;
        }
        s.recent.retain(|t| now.duration_since(*t) < WINDOW);
        if s.recent.len() >= PER_WINDOW {
            return false;
        }
        s.recent.push(now);
        s.last.insert(kind, now);
        true
    }

    /// Shows the notification unless rate-limited; returns whether it was shown.
    pub fn notify(&self, kind: Kind, title: &str, body: &str) -> bool {
        let event = Event::new("desktop.notify")
            .with("kind", kind.as_str())
            .with("title", title);
        if !self.admit(kind, Instant::now()) {
            self.events.emit(&event.with("outcome", "suppressed"));
            return false;
        }
        match self.notifier.show(title, body) {
            Ok(()) => {
                self.events.emit(&event.with("outcome", "shown"));
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not show a desktop notification");
                self.events
                    .emit(&event.with("outcome", "failed").with("error", e));
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_engine::events::MemoryEventSink;

    use super::*;

    struct Counting(Mutex<u32>, bool);
    impl Notifier for Counting {
        fn show(&self, _: &str, _: &str) -> Result<(), String> {
            if let Ok(mut n) = self.0.lock() {
                *n += 1;
            }
            if self.1 {
                Ok(())
            } else {
                Err("no notification daemon".into())
            }
        }
    }

    #[test]
    fn a_storm_is_rate_limited_per_kind_and_overall() {
        let n = Arc::new(Counting(Mutex::new(0), true));
        let events = Arc::new(MemoryEventSink::default());
        let gate = Gate::new(n.clone(), events.clone());
        for _ in 0..50 {
            gate.notify(Kind::SpendBlocked, "Spend limit reached", "x");
        }
        assert_eq!(n.0.lock().map(|g| *g).unwrap_or(0), 1);
        for k in [
            Kind::SpendWarning,
            Kind::PolicyBlocked,
            Kind::LoginNeeded,
            Kind::CentralUnreachable,
        ] {
            assert!(gate.notify(k, "t", "b"));
        }
        // Five shown in this minute: a new kind waits too.
        assert_eq!(n.0.lock().map(|g| *g).unwrap_or(0), 5);
        let notes = events.named("desktop.notify");
        assert_eq!(
            notes
                .iter()
                .filter(|e| e["outcome"] == "suppressed")
                .count(),
            49
        );
    }

    #[test]
    fn a_missing_daemon_is_recorded_not_fatal() {
        let events = Arc::new(MemoryEventSink::default());
        let gate = Gate::new(Arc::new(Counting(Mutex::new(0), false)), events.clone());
        assert!(!gate.notify(Kind::LoginNeeded, "Sign in", "b"));
        let e = events.named("desktop.notify");
        assert_eq!(e[0]["outcome"], "failed");
        assert_eq!(e[0]["error"], "no notification daemon");
    }
}
