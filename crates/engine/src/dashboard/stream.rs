//! `GET /gatehouse/api/events`: the dashboard's live stream. It only carries event *names*
//! (`event: dashboard`, `data: {"evt":"inference"}`), at most one message per [`COALESCE`]
//! window per stream, with a keep-alive comment every 15 s. Streams end when the gateway
//! shuts down; at most [`MAX_STREAMS`] are open at once (the route is public).

use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::error::ApiError;
use crate::events::live::{Live, Subscription};

/// Open SSE streams at most.
pub const MAX_STREAMS: usize = 64;
/// Events arriving within this time of the first go out as one message.
pub const COALESCE: Duration = Duration::from_millis(200);
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Events that change what the dashboard shows.
const DASHBOARD_EVENTS: &[&str] = &[
    "inference",
    "block.recorded",
    "upstream.state",
    "upstream.breaker",
    "upstream.cooldown",
    "app.state",
    "admin.limit.upsert",
    "admin.limit.delete",
    "spend.reservation_settled",
    "spend.reservation_estimated",
];

struct StreamState {
    sub: Subscription,
    opened: bool,
}

impl StreamState {
    /// The next bytes to send; `None` ends the stream (shutdown).
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if !self.opened {
            // An opening comment, so the browser sees the stream open at once.
            self.opened = true;
            return Some(Bytes::from_static(b": live\n\n"));
        }
        let keep_alive_at = Instant::now() + KEEP_ALIVE;
        let mut pending: Option<(&'static str, Instant)> = None;
        loop {
            let wake = pending.map_or(keep_alive_at, |(_, at)| at);
            tokio::select! {
                () = self.sub.closing.cancelled() => return None,
                () = tokio::time::sleep_until(wake) => {
                    return Some(match pending {
                        Some((evt, _)) => message(evt),
                        None => Bytes::from_static(b": keep-alive\n\n"),
                    });
                }
                got = self.sub.rx.recv() => {
                    let evt = match got {
                        Ok(e) if DASHBOARD_EVENTS.contains(&e.evt) => e.evt,
                        Ok(_) => continue,
                        Err(broadcast::error::RecvError::Lagged(_)) => "lagged",
                        Err(broadcast::error::RecvError::Closed) => return None,
                    };
                    // Events within COALESCE of the first go out as one message (the last name).
                    let at = pending.map_or_else(|| Instant::now() + COALESCE, |(_, at)| at);
                    pending = Some((evt, at));
                }
            }
        }
    }
}

fn message(evt: &str) -> Bytes {
    let data = serde_json::json!({ "evt": evt });
    Bytes::from(format!("event: dashboard\ndata: {data}\n\n"))
}

/// `GET /gatehouse/api/events`.
pub fn sse(live: &Live) -> Result<Response<Body>, ApiError> {
    let Some(sub) = live.open(MAX_STREAMS) else {
        return Err(ApiError::ServiceUnavailable(
            "too many open dashboard event streams".into(),
        ));
    };
    let state = StreamState { sub, opened: false };
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        let chunk = st.next_chunk().await?;
        Some((Ok::<_, std::io::Error>(chunk), st))
    });
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_only_the_name() {
        assert_eq!(
            message("inference"),
            Bytes::from_static(b"event: dashboard\ndata: {\"evt\":\"inference\"}\n\n")
        );
    }
}
