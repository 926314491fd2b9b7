//! `/_fake/*` control API for out-of-process users (e.g. the benchmark running
//! the fake as a subprocess). Control requests are never recorded.
//!
//! | Request | Effect |
//! |---|---|
//! | `POST /_fake/config` (FakeConfig JSON) | replace the config, 204 |
//! | `GET /_fake/config` | current config as JSON |
//! | `POST /_fake/faults` (Fault JSON) | queue a fault, 204 |
//! | `GET /_fake/requests` | JSON array of recorded requests |
//! | `GET /_fake/streams` | JSON array of `{request_index, completed, usage, last_event_ms_after_start}` |
//! | `GET /_fake/refusals` | JSON array of `{request_index, status, message}`: the `strict` rules' refusals |
//! | `POST /_fake/recording` (`{"on": bool}`) | turn body recording on/off, 204 |
//! | `POST /_fake/clear` | forget recorded requests and streams, 204 |

use bytes::Bytes;
use http::request::Parts;
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::config::{FakeConfig, Fault};
use crate::server::{Shared, empty_response, error_response, json_response};
use crate::sse::{Abort, FakeBody};

/// Largest control request body.
const MAX_CONTROL_BODY: usize = 1024 * 1024;

#[derive(Deserialize)]
struct Recording {
    on: bool,
}

fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("invalid control JSON: {e}"))
}

fn to_json<T: serde::Serialize>(value: &T) -> Response<FakeBody> {
    match serde_json::to_vec(value) {
        Ok(v) => json_response(StatusCode::OK, Bytes::from(v)),
        Err(e) => error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            &e.to_string(),
        ),
    }
}

/// Serves one control request.
pub(crate) async fn handle(
    shared: &Shared,
    parts: &Parts,
    body: Incoming,
) -> Result<Response<FakeBody>, Abort> {
    let bytes = match Limited::new(body, MAX_CONTROL_BODY).collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => {
            return Ok(error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                "control body too large or unreadable",
            ));
        }
    };
    let resp = match (&parts.method, parts.uri.path()) {
        (&Method::POST, "/_fake/config") => parse::<FakeConfig>(&bytes).map(|c| {
            shared.set_config(c);
            empty_response(StatusCode::NO_CONTENT)
        }),
        (&Method::GET, "/_fake/config") => Ok(to_json(&shared.rendered().config)),
        (&Method::POST, "/_fake/faults") => parse::<Fault>(&bytes).map(|f| {
            shared.push_fault(f);
            empty_response(StatusCode::NO_CONTENT)
        }),
        (&Method::GET, "/_fake/requests") => Ok(to_json(&shared.records.lock().requests())),
        (&Method::GET, "/_fake/refusals") => Ok(to_json(&shared.records.lock().refusals())),
        (&Method::GET, "/_fake/streams") => {
            let streams: Vec<serde_json::Value> = shared
                .records
                .lock()
                .streams()
                .into_iter()
                .map(|s| {
                    let last = s
                        .last_event_sent_at
                        .map(|t| t.saturating_duration_since(s.started_at).as_secs_f64() * 1000.0);
                    serde_json::json!({
                        "request_index": s.request_index,
                        "completed": s.completed,
                        "usage": s.usage,
                        "last_event_ms_after_start": last,
                    })
                })
                .collect();
            Ok(to_json(&streams))
        }
        (&Method::POST, "/_fake/recording") => parse::<Recording>(&bytes).map(|r| {
            shared.set_recording(r.on);
            empty_response(StatusCode::NO_CONTENT)
        }),
        (&Method::POST, "/_fake/clear") => {
            shared.records.lock().clear();
            Ok(empty_response(StatusCode::NO_CONTENT))
        }
        (method, path) => Ok(error_response(
            StatusCode::NOT_FOUND,
            "not_found_error",
            &format!("Not found: {method} {path}"),
        )),
    };
    Ok(resp.unwrap_or_else(|msg| {
        error_response(StatusCode::BAD_REQUEST, "invalid_request_error", &msg)
    }))
}
