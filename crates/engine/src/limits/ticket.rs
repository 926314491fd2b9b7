//! What an admitted request holds until it ends: its concurrency [`Slot`] (freed when
//! dropped) and its token [`Charge`] (corrected at settlement, refunded whole when the
//! request ends without one).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http::Response;
use http_body::{Frame, SizeHint};

use super::{Draw, Limiter, SlotDraw};

/// An admitted request's slot and charge (either may be absent).
#[derive(Default)]
pub struct Ticket {
    pub slot: Option<Slot>,
    pub charge: Option<Charge>,
}

/// A concurrency slot, freed on drop.
pub struct Slot {
    limiter: Arc<Limiter>,
    draw: SlotDraw,
}

impl Slot {
    pub(super) fn new(limiter: Arc<Limiter>, draw: SlotDraw) -> Self {
        Self { limiter, draw }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.limiter.release(&self.draw);
    }
}

/// Tokens charged from the estimate; [`Charge::settle`] gives back what the request did
/// not use (or takes what it used beyond). Dropped unsettled, it refunds the estimate.
pub struct Charge {
    limiter: Arc<Limiter>,
    draws: Vec<Draw>,
    charged: u64,
    settled: bool,
}

impl Charge {
    pub(super) fn new(limiter: Arc<Limiter>, draws: Vec<Draw>, charged: u64) -> Self {
        Self {
            limiter,
            draws,
            charged,
            settled: false,
        }
    }

    /// Corrects the charge to `actual` tokens.
    pub fn settle(mut self, actual: u64) {
        self.correct(actual);
    }

    fn correct(&mut self, actual: u64) {
        if self.settled {
            return;
        }
        self.settled = true;
        let refund = self.charged as f64 - actual as f64;
        if refund == 0.0 {
            return;
        }
        let refunds = std::mem::take(&mut self.draws)
            .into_iter()
            .map(|d| (d, refund))
            .collect();
        self.limiter.refund(refunds);
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.correct(0);
    }
}

/// `response` with `slot` held until its body is dropped: sent to the end, failed, or
/// abandoned by a client that went away.
pub fn hold(response: Response<Body>, slot: Option<Slot>) -> Response<Body> {
    let Some(slot) = slot else {
        return response;
    };
    response.map(|body| {
        Body::new(Held {
            inner: body,
            _slot: slot,
        })
    })
}

struct Held {
    inner: Body,
    _slot: Slot,
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
