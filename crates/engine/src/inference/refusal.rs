//! Refusals: the one way inference says no. [`refuse`] logs the refusal's event, keeps it
//! in the ring of recent refusals ([`super::blocks`], the dashboard's Policy blocks view)
//! and hands the error back to be returned.

pub use super::blocks::{Block, Layer, Refusals};
use crate::error::ApiError;
use crate::events::Event;
use crate::gateway::Gateway;

/// Refuses a request: logs `event`, keeps the block and returns `error` to be answered.
pub fn refuse(
    gw: &Gateway,
    request_id: &str,
    layer: Layer,
    model: Option<&str>,
    event: Event,
    error: ApiError,
) -> ApiError {
    let principal = event
        .fields
        .get("principal")
        .and_then(|v| v.as_str())
        .map(str::to_owned);
    gw.deps.emit(event);
    let status = error.outcome().0.as_u16();
    let mut block = block(gw, request_id, layer, model, status, error.to_string());
    block.principal = principal;
    gw.refusals.record(block, &gw.live);
    error
}

/// Keeps a block for a refusal the gateway relays rather than answers (a central
/// Gatehouse's spend 429); its event is the caller's to log.
pub fn keep(
    gw: &Gateway,
    request_id: &str,
    layer: Layer,
    model: Option<&str>,
    status: u16,
    message: String,
) {
    let block = block(gw, request_id, layer, model, status, message);
    gw.refusals.record(block, &gw.live);
}

fn block(
    gw: &Gateway,
    request_id: &str,
    layer: Layer,
    model: Option<&str>,
    status: u16,
    message: String,
) -> Block {
    Block {
        at: gw.deps.clock.now(),
        request_id: request_id.to_owned(),
        layer,
        model: model.map(str::to_owned),
        status,
        message,
        principal: None,
    }
}
