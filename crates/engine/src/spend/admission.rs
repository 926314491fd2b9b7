//! Admission against the caps (out of the person's spend lease, see [`super::ledger`]), the
//! guard that gives an unmetered request's claim back (a client that leaves before any
//! upstream answered), and the settlement at start of the reservations and leases a crash
//! left open (charged their reserved worst case, flagged
//! `estimated`: the upstream may have served them, and a cap must never be exceedable by
//! crashing the gateway in a loop).

use std::time::Duration;

use super::ledger::{Take, Ticket, Want};
use super::{Standing, worst_case_micro};
use crate::error::ApiError;
use crate::events::Event;
use crate::gateway::Gateway;
use crate::identity::UserIdentity;
use crate::store::SettleAs;

/// How long admission waits for the store before applying `fail_closed_on_error`.
const PRECHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// An admitted request's claim on its person's spend lease, with the standings to report;
/// given back on drop unless handed to the meter (see [`super::ledger`]).
pub struct Held {
    pub ticket: Ticket,
    pub standings: Vec<Standing>,
}

impl Held {
    /// The meter charges it from here on.
    pub fn hand_over(self) -> (Ticket, Vec<Standing>) {
        (self.ticket, self.standings)
    }
}

pub enum Admitted {
    /// No caps configured, or caps unreadable and failing open.
    Unchecked,
    Held(Held),
    /// Over a cap, or caps unreadable and failing closed: the event to log and the 429.
    Refused {
        event: Event,
        error: ApiError,
    },
}

/// What a request may cost, as admission sees it.
pub struct Cost<'a> {
    /// What the request is priced as on each upstream it may be sent to; the dearest
    /// prices it.
    pub models: &'a [crate::metering::pricing::PricedAs<'a>],
    pub body_bytes: usize,
    pub max_tokens: Option<u64>,
    pub drivers: &'a super::CostDrivers,
    /// The requested model's family ([`super::Family::of_model`]): its caps bind too.
    pub family: Option<super::Family>,
    /// How many upstream attempts routing may make. Each attempt given up at the
    /// first-byte timeout may have been served upstream and is charged its worst case, so
    /// the reservation covers every attempt and a settlement can never pass it.
    pub attempts: usize,
}

impl Cost<'_> {
    fn worst_case(&self, gw: &Gateway) -> u64 {
        self.models
            .iter()
            .map(|m| {
                worst_case_micro(
                    &gw.pricing,
                    m,
                    self.body_bytes,
                    self.max_tokens,
                    self.drivers,
                )
            })
            .max()
            .unwrap_or(0)
            .saturating_mul(self.attempts.max(1) as u64)
            .min(crate::metering::pricing::MAX_MICRO_USD)
    }
}

pub async fn reserve(
    gw: &Gateway,
    who: &UserIdentity,
    request_id: &str,
    cost: &Cost<'_>,
) -> Admitted {
    let Some(spend) = &gw.config.spend else {
        return Admitted::Unchecked;
    };
    let now = gw.deps.clock.now();
    let amount = cost.worst_case(gw);
    let want = Want {
        sub: &who.sub,
        groups: &who.groups,
        family: cost.family,
        request_id,
        worst_micro: amount,
        mode: spend.group_mode,
        pool_rule: &spend.pool_rule,
        now,
    };
    match tokio::time::timeout(PRECHECK_TIMEOUT, gw.ledger.take(&want)).await {
        Ok(Ok(Take::Held(ticket, standings))) => Admitted::Held(Held { ticket, standings }),
        Ok(Ok(Take::Refused {
            standings,
            exceeded,
            pool,
        })) => {
            let mut event = Event::new("spend.blocked")
                .with("request_id", request_id)
                .with("sub", who.sub.clone())
                .with(
                    "periods",
                    exceeded
                        .iter()
                        .map(|m| m.period.as_str())
                        .collect::<Vec<_>>(),
                )
                .with(
                    "models",
                    exceeded
                        .iter()
                        .map(|m| m.family.map(super::Family::as_str))
                        .collect::<Vec<_>>(),
                )
                .with("reservation_micro_usd", amount);
            let error = match &pool {
                Some(pool) => {
                    event = event
                        .with("source", "group_pool")
                        .with("group", pool.group.clone());
                    super::headers::pool_blocked(pool, spend.blocked_message.as_deref(), now)
                }
                None => super::headers::blocked(
                    &standings,
                    &exceeded,
                    spend.blocked_message.as_deref(),
                    now,
                ),
            };
            Admitted::Refused { event, error }
        }
        outcome => {
            let why = match outcome {
                Ok(Err(e)) => e.to_string(),
                _ => "timed out".to_owned(),
            };
            tracing::warn!(reason = %why, fail_closed = spend.fail_closed, "spend caps unavailable");
            let event = Event::new("spend.unavailable")
                .with("request_id", request_id)
                .with("fail_closed", spend.fail_closed);
            if spend.fail_closed {
                Admitted::Refused {
                    event,
                    error: super::headers::unavailable(),
                }
            } else {
                gw.deps.emit(event);
                Admitted::Unchecked
            }
        }
    }
}

/// Settles the reservations a crash left open at their reserved amount, each flagged
/// `estimated` and announced with a `spend.reservation_estimated` event.
///
/// A usage row and the settlement of its reservation are one store transaction, so an open
/// reservation has no usage row of its own: the gateway stopped before its request was
/// metered, after the request may already have reached an upstream that charges for it.
/// Releasing it would let a crash loop spend past a cap; charging the worst case that was
/// reserved never undercounts, and an operator sees the estimate (state `estimated`) and
/// can correct the cap's standing. Usage stored under the same request id belongs to
/// another request that reused the caller's `x-client-request-id`, and was charged through
/// its own reservation.
pub async fn reconcile(gw: &Gateway) {
    let open = match gw.store.open_reservations().await {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(error = %e, "could not read open reservations");
            return;
        }
    };
    for r in open {
        let now = gw.deps.clock.now();
        let settled = gw
            .store
            .settle(&r.id, r.amount_micro, SettleAs::Estimated, now)
            .await;
        if let Err(e) = settled {
            tracing::warn!(error = %e, "could not settle a reservation; it is reconciled at the next start");
            continue;
        }
        gw.deps.emit(
            Event::new("spend.reservation_estimated")
                .with("reservation", r.id)
                .with("request_id", r.request_id)
                .with("charged_micro_usd", r.amount_micro)
                .with(
                    "reason",
                    "the gateway stopped before this request was metered; charged its reserved worst case",
                ),
        );
    }
}
