//! A workload (CRI) caller's stream: an `error` event inside a 200 stream (an upstream
//! overloaded mid-answer, say) carries the upstream's words, which can name accounts,
//! ARNs or hosts. Every `data:` line whose JSON is `{"type":"error",...}` is rewritten
//! with the one hygiene of [`super::errors::for_workload`]: the error's type kept when it
//! is well formed, the message a `capability_rejected:` token or the type's generic
//! sentence. Complete lines pass as they come; only a line still arriving is held.

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::StatusCode;
use serde_json::Value;

use super::{BodyError, BodyStream};

/// The status an error event's type stands for, for its generic sentence.
fn status_of(kind: &str) -> StatusCode {
    match kind {
        "invalid_request_error" => StatusCode::BAD_REQUEST,
        "authentication_error" => StatusCode::UNAUTHORIZED,
        "permission_error" => StatusCode::FORBIDDEN,
        "not_found_error" => StatusCode::NOT_FOUND,
        "request_too_large" => StatusCode::PAYLOAD_TOO_LARGE,
        "rate_limit_error" => StatusCode::TOO_MANY_REQUESTS,
        "overloaded_error" => StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// One line, cleaned when it is an error event's data.
fn clean_line(line: &[u8]) -> Option<Bytes> {
    let text = std::str::from_utf8(line).ok()?;
    let body = text.trim_end_matches(['\r', '\n']);
    let data = body.strip_prefix("data:")?.trim_start();
    let v: Value = serde_json::from_str(data).ok()?;
    if v["type"] != "error" {
        return None;
    }
    let kind = v["error"]["type"].as_str().unwrap_or("api_error");
    let cleaned = super::errors::for_workload(status_of(kind), data.as_bytes());
    let mut out = BytesMut::with_capacity(cleaned.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(&cleaned);
    out.extend_from_slice(&line[body.len()..]);
    Some(out.freeze())
}

/// Rewrites every complete line of `chunk` (after what `carry` held), keeping the last
/// partial line in `carry`.
fn pass(carry: &mut BytesMut, chunk: &[u8]) -> Bytes {
    carry.extend_from_slice(chunk);
    let Some(last_nl) = memchr::memrchr(b'\n', carry) else {
        return Bytes::new();
    };
    let complete = carry.split_to(last_nl + 1).freeze();
    if memchr::memmem::find(&complete, b"\"error\"").is_none() {
        return complete;
    }
    let mut out = BytesMut::with_capacity(complete.len());
    for line in complete.split_inclusive(|b| *b == b'\n') {
        match clean_line(line) {
            Some(cleaned) => out.extend_from_slice(&cleaned),
            None => out.extend_from_slice(line),
        }
    }
    out.freeze()
}

/// `body` with its error events cleaned for a workload caller.
pub fn clean(body: BodyStream) -> BodyStream {
    futures_util::stream::unfold(
        (body, BytesMut::new(), false),
        |(mut body, mut carry, done)| async move {
            if done {
                return None;
            }
            loop {
                match body.next().await {
                    Some(Ok(chunk)) => {
                        let out = pass(&mut carry, &chunk);
                        if !out.is_empty() {
                            return Some((Ok(out), (body, carry, false)));
                        }
                    }
                    Some(Err(e)) => return Some((Err::<Bytes, BodyError>(e), (body, carry, true))),
                    None if carry.is_empty() => return None,
                    None => {
                        let rest = carry.split().freeze();
                        let out = clean_line(&rest).unwrap_or(rest);
                        return Some((Ok(out), (body, carry, true)));
                    }
                }
            }
        },
    )
    .boxed()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    async fn run(chunks: &[&'static str]) -> String {
        let body = futures_util::stream::iter(
            chunks
                .iter()
                .map(|c| Ok::<Bytes, BodyError>(Bytes::from_static(c.as_bytes())))
                .collect::<Vec<_>>(),
        )
        .boxed();
        let parts: Vec<_> = clean(body).collect().await;
        let bytes: Vec<u8> = parts
            .into_iter()
            .flat_map(|p| p.unwrap().to_vec())
            .collect();
        String::from_utf8(bytes).unwrap()
    }

    #[tokio::test]
    async fn an_error_event_loses_the_upstream_words_and_the_rest_passes() {
        let out = run(&[
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\n\n",
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",",
            "\"message\":\"arn:aws:bedrock:us-east-1:123456789012 is overloaded\"}}\n\n",
        ])
        .await;
        assert!(out.contains("\"text\":\"hi\""), "{out}");
        assert!(!out.contains("123456789012"), "{out}");
        assert!(
            out.contains("data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"the upstream is overloaded\"}}\n\n"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn a_stream_without_errors_is_unchanged_and_a_last_partial_line_is_kept() {
        let input = "event: ping\ndata: {\"type\":\"ping\"}\n\ndata: {\"type\":\"message_stop\"}";
        assert_eq!(run(&[input]).await, input);
    }
}
