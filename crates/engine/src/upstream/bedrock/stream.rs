//! Bedrock's event stream as Anthropic SSE: each `chunk` carries one Anthropic event as
//! JSON, re-emitted as `event: <type>` / `data: <json>`; an exception frame ends the stream
//! with an `error` event in Anthropic's envelope (a generic message: its text can name the
//! account); a broken connection ends it with a body error, so the meter records it.

use std::time::Duration;

use aws_sdk_bedrockruntime::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::invoke_model_with_response_stream::InvokeModelWithResponseStreamOutput;
use aws_sdk_bedrockruntime::types::ResponseStream;
use aws_sdk_bedrockruntime::types::error::ResponseStreamError;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, StatusCode, header};

use super::super::{Answer, BodyError, errors, sse};

/// The status Bedrock documents for each stream exception.
fn status(e: &ResponseStreamError) -> StatusCode {
    let code = match e {
        ResponseStreamError::ThrottlingException(_) => 429,
        ResponseStreamError::ValidationException(_) => 400,
        ResponseStreamError::ModelTimeoutException(_) => 408,
        ResponseStreamError::ServiceUnavailableException(_) => 503,
        ResponseStreamError::ModelStreamErrorException(_) => 424,
        _ => 500,
    };
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

type Receiver = aws_sdk_bedrockruntime::primitives::event_stream::EventReceiver<
    ResponseStream,
    ResponseStreamError,
>;

enum State {
    Open(Box<Receiver>),
    Done,
}

/// The 200 answer whose body is the re-encoded stream; `trace` names who to log when a
/// chunk carries a guardrail trace (with `guardrail_trace`).
pub fn answer(
    out: InvokeModelWithResponseStreamOutput,
    ping: Duration,
    upstream: String,
    trace: Option<super::trace::Who>,
) -> Answer {
    let frames = futures_util::stream::unfold(State::Open(Box::new(out.body)), move |state| {
        let upstream = upstream.clone();
        let trace = trace.clone();
        async move {
            let State::Open(mut rx) = state else {
                return None;
            };
            loop {
                match rx.recv().await {
                    Ok(Some(ResponseStream::Chunk(part))) => {
                        let Some(json) = part.bytes() else { continue };
                        if let Some(who) = &trace {
                            super::trace::log_json(&upstream, who, json.as_ref());
                        }
                        return Some((Ok(sse::frame(json.as_ref())), State::Open(rx)));
                    }
                    Ok(Some(_)) => continue,
                    Ok(None) => return None,
                    Err(SdkError::ServiceError(se)) => {
                        let e = se.err();
                        let status = status(e);
                        tracing::warn!(upstream = %upstream, status = status.as_u16(), message = ?e.message(), "Bedrock stream error");
                        let message = errors::caller_message(status, None, None);
                        let frame = sse::error_frame(errors::error_type(status), &message);
                        return Some((Ok(frame), State::Done));
                    }
                    Err(other) => {
                        let why = DisplayErrorContext(&other).to_string();
                        tracing::warn!(upstream = %upstream, error = %why, "Bedrock stream broke");
                        return Some((Err(BodyError(why)), State::Done));
                    }
                }
            }
        }
    });
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Answer {
        status: StatusCode::OK,
        headers,
        body: sse::with_pings(frames.boxed(), ping),
        notes: Vec::new(),
        estimated: false,
    }
}
