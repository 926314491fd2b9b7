//! The tray icon's state at a glance: set up needed, ready, paused, over budget, sign-in
//! needed or central server unreachable. One state wins, by what the user must act on
//! first ([`TrayState::pick`]); the shell draws it as a badge on the icon and a tooltip,
//! and `gatehouse status` reports it.

use gatehouse_engine::spend::Period;
use serde_json::Value;

use super::connected::{Cached, LoginState};
use super::{App, setup};
use crate::settings::{Mode, SPEND_KEY};

/// What the tray shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrayState {
    SetupNeeded,
    Ready,
    Paused,
    OverBudget,
    SignInNeeded,
    CentralUnreachable,
}

/// The facts a state is picked from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Facts {
    pub paused: bool,
    pub connected: bool,
    pub signed_in: bool,
    /// Connected mode: the last pull failed to reach the server.
    pub unreachable: bool,
    /// A budget (standalone) or a central cap (connected) is used up.
    pub over_budget: bool,
    /// Standalone with no usable provider.
    pub setup_needed: bool,
}

impl TrayState {
    /// What the user must act on first: a paused gateway answers nothing, then signing in,
    /// then the server, then money, then setting up.
    pub fn pick(f: Facts) -> TrayState {
        if f.paused {
            TrayState::Paused
        } else if f.connected && !f.signed_in {
            TrayState::SignInNeeded
        } else if f.connected && f.unreachable {
            TrayState::CentralUnreachable
        } else if f.over_budget {
            TrayState::OverBudget
        } else if !f.connected && f.setup_needed {
            TrayState::SetupNeeded
        } else {
            TrayState::Ready
        }
    }

    /// The name in `gatehouse status` and events.
    pub fn as_str(self) -> &'static str {
        match self {
            TrayState::SetupNeeded => "setup_needed",
            TrayState::Ready => "ready",
            TrayState::Paused => "paused",
            TrayState::OverBudget => "over_budget",
            TrayState::SignInNeeded => "sign_in_needed",
            TrayState::CentralUnreachable => "central_unreachable",
        }
    }

    /// The tooltip's words.
    pub fn tooltip(self) -> &'static str {
        match self {
            TrayState::SetupNeeded => "Gatehouse — set up needed: open it to add a provider",
            TrayState::Ready => "Gatehouse — ready",
            TrayState::Paused => "Gatehouse — paused: requests are refused until you resume",
            TrayState::OverBudget => "Gatehouse — over budget: requests are refused",
            TrayState::SignInNeeded => "Gatehouse — sign-in needed",
            TrayState::CentralUnreachable => "Gatehouse — central server unreachable",
        }
    }

    /// The badge's colour on the icon (RGBA), none when ready.
    pub fn badge(self) -> Option<[u8; 4]> {
        match self {
            TrayState::Ready => None,
            TrayState::SetupNeeded => Some([0x25, 0x63, 0xeb, 0xff]),
            TrayState::Paused => Some([0x6b, 0x72, 0x80, 0xff]),
            TrayState::OverBudget | TrayState::CentralUnreachable => Some([0xdc, 0x26, 0x26, 0xff]),
            TrayState::SignInNeeded => Some([0xf5, 0x9e, 0x0b, 0xff]),
        }
    }
}

/// The tray's state now.
pub async fn current(app: &App) -> TrayState {
    let settings = app.settings();
    let connected = settings.mode == Mode::Connected;
    let signed_in = matches!(app.login_state(), LoginState::SignedIn);
    let unreachable = app
        .inner()
        .central
        .lock()
        .map(|c| c.reachable == Some(false))
        .unwrap_or(false);
    let over_budget = if connected {
        central_used_up(app).await
    } else {
        budget_used_up(app, &settings.budgets).await
    };
    let setup_needed = !connected && !setup::provider_ready(app);
    TrayState::pick(Facts {
        paused: app.paused().await,
        connected,
        signed_in,
        unreachable,
        over_budget,
        setup_needed,
    })
}

/// A personal budget whose period's spend reached it.
async fn budget_used_up(app: &App, b: &crate::settings::Budgets) -> bool {
    let now = app.inner().deps.clock.now();
    for (period, cents) in [
        (Period::Daily, b.daily_cents),
        (Period::Weekly, b.weekly_cents),
        (Period::Monthly, b.monthly_cents),
    ] {
        let Some(cents) = cents else { continue };
        let start = period.window(now).start;
        if let Ok(t) = app.store().usage_totals(start).await
            && t.cost_micro_usd >= cents.saturating_mul(10_000)
        {
            return true;
        }
    }
    false
}

/// A central cap (as last pulled) at or past its limit.
async fn central_used_up(app: &App) -> bool {
    let cached: Option<Cached> = app.inner().state.get(SPEND_KEY).await.ok().flatten();
    cached
        .and_then(|c| c.body.get("periods").and_then(Value::as_array).cloned())
        .is_some_and(|ps| {
            ps.iter()
                .any(|p| p["utilization"].as_f64().is_some_and(|u| u >= 1.0))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_to_act_on_first_wins() {
        let f = Facts::default();
        assert_eq!(TrayState::pick(f), TrayState::Ready);
        let setup = Facts {
            setup_needed: true,
            ..f
        };
        assert_eq!(TrayState::pick(setup), TrayState::SetupNeeded);
        let over = Facts {
            over_budget: true,
            ..setup
        };
        assert_eq!(TrayState::pick(over), TrayState::OverBudget);
        let paused = Facts {
            paused: true,
            ..over
        };
        assert_eq!(TrayState::pick(paused), TrayState::Paused);
        let connected = Facts {
            connected: true,
            setup_needed: true,
            ..f
        };
        assert_eq!(TrayState::pick(connected), TrayState::SignInNeeded);
        let signed = Facts {
            signed_in: true,
            unreachable: true,
            over_budget: true,
            ..connected
        };
        assert_eq!(TrayState::pick(signed), TrayState::CentralUnreachable);
        let reachable = Facts {
            unreachable: false,
            ..signed
        };
        assert_eq!(TrayState::pick(reachable), TrayState::OverBudget);
        assert_eq!(TrayState::Ready.badge(), None);
        for s in [
            TrayState::SetupNeeded,
            TrayState::Paused,
            TrayState::OverBudget,
            TrayState::SignInNeeded,
            TrayState::CentralUnreachable,
        ] {
            assert!(s.badge().is_some() && s.tooltip().starts_with("Gatehouse — "));
        }
    }
}
