//! `Idempotency-Key` on `POST /v1/messages` and `/v1/chat/completions`: a repeat within
//! `idempotency.ttl_seconds` gets the first answer again — status, headers and body (a
//! stream's recorded event stream) with `idempotent-replayed: true` — without reaching an
//! upstream or being charged again.
//!
//! Keys are per principal (the key is hashed with the principal's label and the endpoint,
//! so one caller's key never finds another's answer) and live in the store's keyed state
//! (`kv`), so every replica sees them; expired ones are purged by the kv cleanup job. The
//! first request claims the key (`kv_insert`, one winner on any replica) with the SHA-256 of
//! its body; when its 2xx answer has been sent whole, the answer replaces the claim
//! (`kv_replace`). Then:
//! - a repeat with the same body is replayed; with another body it is 422;
//! - a repeat while the first runs waits for it (`idempotency.wait_seconds`), then 409;
//! - a first request the gateway refused, or that ended in an error status, gives its key
//!   back (nothing was charged; a retry runs again);
//! - an answer longer than `idempotency.max_body_bytes`, or one its client left before
//!   the end, is not kept: its key answers 409 until it expires, since running the request
//!   again could charge twice.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use http_body::{Frame, SizeHint};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::auth::Principal;
use crate::config::limits::IdempotencyConfig;
use crate::error::ApiError;
use crate::gateway::Gateway;

/// The request header.
pub const HEADER: &str = "idempotency-key";
/// Set on a replayed answer.
pub const REPLAYED: &str = "idempotent-replayed";
/// Longest key accepted.
const MAX_KEY_LEN: usize = 255;
/// How often a waiting duplicate looks again.
const POLL: Duration = Duration::from_millis(50);

/// What is stored under a key: the claim, then the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    /// `pending`, `done` or `lost` (not kept: too long or its client left).
    state: String,
    /// SHA-256 of the request body, hex.
    body: String,
    /// Distinguishes one claim from a later one of the same key.
    claim: String,
    #[serde(default)]
    status: u16,
    #[serde(default)]
    headers: Vec<(String, String)>,
}

/// `[u32 head length][head JSON][answer body]`.
fn encode(entry: &Entry, data: &[u8]) -> Vec<u8> {
    let head = serde_json::to_vec(entry).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + head.len() + data.len());
    out.extend_from_slice(&u32::try_from(head.len()).unwrap_or(0).to_be_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(data);
    out
}

fn decode(value: &[u8]) -> Option<(Entry, Bytes)> {
    let len = u32::from_be_bytes(value.get(..4)?.try_into().ok()?) as usize;
    let head = value.get(4..4 + len)?;
    let entry = serde_json::from_slice(head).ok()?;
    Some((entry, Bytes::copy_from_slice(value.get(4 + len..)?)))
}

/// How the request goes on.
pub enum Claim {
    /// Answered from the store.
    Replay(Response<Body>),
    /// Runs; `Some` when its answer is to be kept.
    Run(Option<Held>),
}

/// A claimed key, until the answer is kept or the key given back.
pub struct Held {
    gw: Arc<Gateway>,
    cfg: IdempotencyConfig,
    key: String,
    claimed: Vec<u8>,
    entry: Entry,
}

/// The store key: principal, endpoint and the caller's key, hashed.
fn store_key(principal: &Principal, endpoint: &str, key: &str) -> String {
    let mut h = Sha256::new();
    for part in [principal.label().as_str(), endpoint, key] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    format!("idem:{}", hex::encode(h.finalize()))
}

/// Claims the request's `Idempotency-Key`, replays the kept answer, or refuses.
pub async fn claim(
    gw: &Arc<Gateway>,
    principal: &Principal,
    endpoint: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Claim, ApiError> {
    let (Some(cfg), Some(value)) = (gw.config.idempotency.clone(), headers.get(HEADER)) else {
        return Ok(Claim::Run(None));
    };
    let key = value
        .to_str()
        .ok()
        .filter(|k| !k.is_empty() && k.len() <= MAX_KEY_LEN)
        .ok_or_else(|| {
            ApiError::InvalidRequest(format!(
                "Idempotency-Key must be 1 to {MAX_KEY_LEN} visible ASCII characters"
            ))
        })?;
    let key = store_key(principal, endpoint, key);
    let entry = Entry {
        state: "pending".into(),
        body: hex::encode(Sha256::digest(body)),
        claim: uuid::Uuid::new_v4().simple().to_string(),
        status: 0,
        headers: Vec::new(),
    };
    let claimed = encode(&entry, &[]);
    let store = gw.store.clone();
    let waited_until = tokio::time::Instant::now() + cfg.wait;
    let mut reclaims = 0u32;
    loop {
        let now = gw.deps.clock.now();
        let expires = now + chrono::Duration::from_std(cfg.ttl).unwrap_or_default();
        if store
            .kv_insert(&key, claimed.clone(), Some(expires), now)
            .await
            .map_err(store_error)?
        {
            return Ok(Claim::Run(Some(Held {
                gw: gw.clone(),
                cfg,
                key,
                claimed,
                entry,
            })));
        }
        let Some(raw) = store.kv_get(&key, now).await.map_err(store_error)? else {
            // Given back or expired meanwhile: claim again (while the wait lasts).
            reclaims += 1;
            if reclaims > 3 && tokio::time::Instant::now() >= waited_until {
                return Err(in_progress());
            }
            if reclaims > 1 {
                tokio::time::sleep(POLL).await;
            }
            continue;
        };
        let Some((found, data)) = decode(&raw) else {
            tracing::warn!("an idempotency entry could not be read; refusing its key");
            return Err(ApiError::Internal);
        };
        if found.body != entry.body {
            return Err(ApiError::Unprocessable(
                "Idempotency-Key was already used with a different request body".into(),
            ));
        }
        match found.state.as_str() {
            "done" => return Ok(Claim::Replay(replay(&found, data))),
            "pending" if tokio::time::Instant::now() < waited_until => {
                tokio::time::sleep(POLL).await;
            }
            "pending" => return Err(in_progress()),
            _ => {
                return Err(ApiError::Conflict(
                    "the answer to the first request with this Idempotency-Key was not kept \
                     (too long, or its client left before the end); send a new key"
                        .into(),
                ));
            }
        }
    }
}

fn in_progress() -> ApiError {
    ApiError::Conflict(
        "a request with this Idempotency-Key is still in progress; retry later".into(),
    )
}

fn store_error(e: crate::store::StoreError) -> ApiError {
    tracing::warn!(error = %e, "idempotency keys unavailable");
    ApiError::ServiceUnavailable(
        "the gateway cannot check Idempotency-Key right now; retry shortly".into(),
    )
}

fn replay(entry: &Entry, data: Bytes) -> Response<Body> {
    let mut resp = Response::new(Body::from(data));
    *resp.status_mut() = StatusCode::from_u16(entry.status).unwrap_or(StatusCode::OK);
    let h = resp.headers_mut();
    for (k, v) in &entry.headers {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            h.append(k, v);
        }
    }
    h.insert(REPLAYED, HeaderValue::from_static("true"));
    resp
}

/// The request ended: a 2xx answer is recorded as it is sent; anything else gives the key
/// back (the gateway refused it, or the upstream answered an error, which is not charged).
pub async fn finish(
    held: Option<Held>,
    result: Result<Response<Body>, ApiError>,
) -> Result<Response<Body>, ApiError> {
    let Some(held) = held else { return result };
    match result {
        Ok(resp) if resp.status().is_success() => Ok(held.record(resp)),
        other => {
            held.give_back().await;
            other
        }
    }
}

impl Held {
    async fn give_back(self) {
        if let Err(e) = self.gw.store.kv_delete(&self.key, Some(self.claimed)).await {
            tracing::warn!(error = %e, "giving an idempotency key back failed; it answers 409 until it expires");
        }
    }

    fn record(self, resp: Response<Body>) -> Response<Body> {
        let entry = Entry {
            state: "done".into(),
            status: resp.status().as_u16(),
            headers: resp
                .headers()
                .iter()
                .filter(|(k, _)| {
                    *k != http::header::CONTENT_LENGTH && *k != http::header::TRANSFER_ENCODING
                })
                .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
                .collect(),
            ..self.entry.clone()
        };
        // With a length, the server stops polling once that many bytes were sent.
        let length = resp
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse().ok());
        resp.map(|inner| {
            Body::new(Recording {
                inner,
                data: Vec::new(),
                seen: 0,
                length,
                done: Some(Keep { held: self, entry }),
            })
        })
    }
}

/// What is written when the answer ends.
struct Keep {
    held: Held,
    entry: Entry,
}

impl Keep {
    /// Replaces the claim with the answer (`data: None`: not kept).
    fn write(self, data: Option<Vec<u8>>) {
        let Keep { held, mut entry } = self;
        let data = data.unwrap_or_else(|| {
            entry.state = "lost".into();
            Vec::new()
        });
        let value = encode(&entry, &data);
        let gw = held.gw.clone();
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        gw.tracker.clone().spawn(async move {
            let now = gw.deps.clock.now();
            let expires = now + chrono::Duration::from_std(held.cfg.ttl).unwrap_or_default();
            if let Err(e) = gw
                .store
                .kv_replace(&held.key, held.claimed, value, Some(expires), now)
                .await
            {
                tracing::warn!(error = %e, "keeping an idempotent answer failed; its key answers 409 until it expires");
            }
        });
    }
}

/// The answer's body, passed on unchanged and recorded up to the bound.
struct Recording {
    inner: Body,
    data: Vec<u8>,
    /// Bytes passed on.
    seen: u64,
    /// The answer's `content-length`, if it has one.
    length: Option<u64>,
    /// Until the answer ended.
    done: Option<Keep>,
}

impl Recording {
    /// Every byte was passed on (by its length, or its body says so).
    fn complete(&self) -> bool {
        self.length == Some(self.seen) || http_body::Body::is_end_stream(&self.inner)
    }

    fn end(&mut self, whole: bool) {
        if let Some(keep) = self.done.take() {
            let fits = self.data.len() <= keep.held.cfg.max_body_bytes;
            keep.write((whole && fits).then(|| std::mem::take(&mut self.data)));
        }
    }
}

impl http_body::Body for Recording {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                let max = self.done.as_ref().map_or(0, |k| k.held.cfg.max_body_bytes);
                if let Some(d) = frame.data_ref() {
                    self.seen = self.seen.saturating_add(d.len() as u64);
                    if self.data.len() <= max {
                        // One byte past the bound marks the answer too long to keep.
                        let room = (max + 1).saturating_sub(self.data.len());
                        self.data.extend_from_slice(&d[..d.len().min(room)]);
                    }
                }
                // A body that is complete is not always polled to its end.
                if self.complete() {
                    self.end(true);
                }
            }
            Poll::Ready(Some(Err(_))) => self.end(false),
            Poll::Ready(None) => self.end(true),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        // Dropped before its end: the client left.
        let whole = self.complete();
        self.end(whole);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn entries_round_trip_and_keys_differ_by_principal_and_endpoint() {
        let e = Entry {
            state: "done".into(),
            body: "ab".into(),
            claim: "c".into(),
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
        };
        let (back, data) = decode(&encode(&e, b"event: x\n\n")).unwrap();
        assert_eq!(back, e);
        assert_eq!(&data[..], b"event: x\n\n");
        assert!(decode(b"\0\0\0\x09{").is_none());
        let a = Principal::ClientKey { id: "a".into() };
        let b = Principal::ClientKey { id: "b".into() };
        assert_ne!(
            store_key(&a, "messages", "k"),
            store_key(&b, "messages", "k")
        );
        assert_ne!(
            store_key(&a, "messages", "k"),
            store_key(&a, "chat_completions", "k")
        );
    }
}
