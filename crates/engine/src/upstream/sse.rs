//! Anthropic server-sent events for providers that do not speak SSE on their wire (Bedrock's
//! event stream): each JSON event becomes `event: <type>` / `data: <json>`, and when
//! nothing arrives for the ping interval an `event: ping` is sent, so long thinking pauses
//! do not trip client or proxy idle timeouts (the SDKs drop the provider's own pings).

use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

use super::{BodyError, BodyStream};

/// How long a stream may stay silent before a ping.
pub const PING_AFTER: Duration = Duration::from_secs(15);

/// The keep-alive event (the gateway's, and Anthropic's own): no sign of progress.
pub(crate) const PING: &[u8] = b"event: ping\ndata: {\"type\": \"ping\"}\n\n";

/// One SSE frame for an Anthropic event given as JSON bytes; its `type` names the event.
pub fn frame(json: &[u8]) -> Bytes {
    let kind = serde_json::from_slice::<serde_json::Value>(json)
        .ok()
        .and_then(|v| v["type"].as_str().map(str::to_owned))
        .filter(|t| t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .unwrap_or_else(|| "message".to_owned());
    let mut out = Vec::with_capacity(json.len() + kind.len() + 16);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    // SSE data cannot hold a raw newline; JSON has none outside strings, where it is escaped.
    out.extend(json.iter().copied().filter(|b| *b != b'\n' && *b != b'\r'));
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// An `error` event with an Anthropic error envelope (a stream that broke mid-way).
pub fn error_frame(kind: &str, message: &str) -> Bytes {
    let json = serde_json::json!({"type": "error", "error": {"type": kind, "message": message}});
    frame(json.to_string().as_bytes())
}

/// `frames` with a ping whenever `interval` passes without one.
pub fn with_pings<S>(frames: S, interval: Duration) -> BodyStream
where
    S: Stream<Item = Result<Bytes, BodyError>> + Send + 'static,
{
    let frames = Box::pin(frames);
    futures_util::stream::unfold(Some(frames), move |state| async move {
        let mut frames = state?;
        match tokio::time::timeout(interval, frames.next()).await {
            Err(_) => Some((Ok(Bytes::from_static(PING)), Some(frames))),
            Ok(Some(item)) => Some((item, Some(frames))),
            Ok(None) => None,
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn frames_name_the_event() {
        assert_eq!(
            frame(br#"{"type":"message_stop"}"#),
            Bytes::from_static(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
        );
        assert!(error_frame("api_error", "x").starts_with(b"event: error\n"));
    }

    #[tokio::test(start_paused = true)]
    async fn silence_gets_pings_and_the_end_ends() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, BodyError>>(4);
        let inner = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        let mut s = with_pings(inner, Duration::from_secs(15));
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(20)).await;
            tx.send(Ok(Bytes::from_static(b"x"))).await.unwrap();
        });
        assert_eq!(s.next().await.unwrap().unwrap(), Bytes::from_static(PING));
        assert_eq!(s.next().await.unwrap().unwrap(), Bytes::from_static(b"x"));
        assert!(s.next().await.is_none());
    }
}
