//! The caller's model id in the answer. When the gateway sent a request under another id
//! (a model map, a Bedrock or Mantle id, a fallback model), the upstream's answer names
//! that id; a client that resumes a conversation from its last answer (Claude Code's
//! `--continue`) would then ask for an id the gateway does not serve. [`requested_model`]
//! puts the requested id back: in an SSE answer only the first event (`message_start`)
//! is held until it is complete and rewritten, every later byte passes as it arrives; a
//! JSON answer is read whole (it is not streamed anyway) and its top-level `model` set.

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::header;
use serde_json::Value;

use super::{Answer, BodyError, BodyStream};

/// The most held while looking for the end of the first SSE event, or read of a JSON
/// answer: past it the bytes go on unchanged.
const HOLD_LIMIT: usize = 8 * 1024 * 1024;

/// `answer` naming `requested` as its model (success answers only).
pub fn requested_model(answer: &mut Answer, requested: &str) {
    if !answer.status.is_success() {
        return;
    }
    let sse = answer
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    answer.headers.remove(header::CONTENT_LENGTH);
    let body = std::mem::replace(&mut answer.body, futures_util::stream::empty().boxed());
    answer.body = held(body, requested.to_owned(), sse);
}

/// Holds the body until `rewrite` can act (the first event's end, or the whole JSON),
/// then passes everything else on.
fn held(body: BodyStream, requested: String, sse: bool) -> BodyStream {
    struct State {
        body: BodyStream,
        buf: BytesMut,
        done: bool,
    }
    let state = State {
        body,
        buf: BytesMut::new(),
        done: false,
    };
    futures_util::stream::unfold(state, move |mut s| {
        let requested = requested.clone();
        async move {
            if s.done {
                let next = s.body.next().await?;
                return Some((next, s));
            }
            loop {
                match s.body.next().await {
                    Some(Ok(chunk)) => {
                        s.buf.extend_from_slice(&chunk);
                        let end = if sse { event_end(&s.buf) } else { None };
                        if let Some(end) = end {
                            s.done = true;
                            let held = s.buf.split().freeze();
                            let (first, rest) = (held.slice(..end), held.slice(end..));
                            let mut out = BytesMut::from(&rewrite_event(&first, &requested)[..]);
                            out.extend_from_slice(&rest);
                            return Some((Ok(out.freeze()), s));
                        }
                        if s.buf.len() > HOLD_LIMIT {
                            s.done = true;
                            return Some((Ok(s.buf.split().freeze()), s));
                        }
                    }
                    Some(Err(e)) => {
                        s.done = true;
                        if s.buf.is_empty() {
                            return Some((Err(e), s));
                        }
                        // What was held goes first; the error is the body's next item.
                        let held = s.buf.split().freeze();
                        let err = e;
                        let rest: BodyStream =
                            futures_util::stream::once(async move { Err::<Bytes, BodyError>(err) })
                                .chain(std::mem::replace(
                                    &mut s.body,
                                    futures_util::stream::empty().boxed(),
                                ))
                                .boxed();
                        s.body = rest;
                        return Some((Ok(held), s));
                    }
                    None => {
                        s.done = true;
                        if s.buf.is_empty() {
                            return None;
                        }
                        let held = s.buf.split().freeze();
                        let out = if sse {
                            held
                        } else {
                            rewrite_json(&held, &requested)
                        };
                        return Some((Ok(out), s));
                    }
                }
            }
        }
    })
    .boxed()
}

/// Where the first SSE event ends (after its blank line).
fn event_end(buf: &[u8]) -> Option<usize> {
    let lf = memchr::memmem::find(buf, b"\n\n").map(|i| i + 2);
    let crlf = memchr::memmem::find(buf, b"\r\n\r\n").map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A `message_start` event with `message.model` set; any other event as it was.
fn rewrite_event(event: &[u8], requested: &str) -> Bytes {
    let Ok(text) = std::str::from_utf8(event) else {
        return Bytes::copy_from_slice(event);
    };
    let mut out = String::with_capacity(text.len() + requested.len());
    let mut changed = false;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\r', '\n']);
        let ending = &line[body.len()..];
        if let Some(data) = body.strip_prefix("data:")
            && let Ok(mut v) = serde_json::from_str::<Value>(data.trim_start())
            && v["type"] == "message_start"
            && v["message"]["model"].is_string()
        {
            v["message"]["model"] = Value::String(requested.to_owned());
            out.push_str("data: ");
            out.push_str(&v.to_string());
            out.push_str(ending);
            changed = true;
            continue;
        }
        out.push_str(line);
    }
    if changed {
        Bytes::from(out)
    } else {
        Bytes::copy_from_slice(event)
    }
}

/// A JSON message with its top-level `model` set (as it was when it has none).
fn rewrite_json(body: &Bytes, requested: &str) -> Bytes {
    let has_model = serde_json::from_slice::<serde_json::Map<String, Value>>(body)
        .is_ok_and(|m| m.get("model").is_some_and(Value::is_string));
    if !has_model {
        return body.clone();
    }
    let quoted = Value::String(requested.to_owned()).to_string();
    super::body::edit(body, &[], &[("model", quoted)]).unwrap_or_else(|_| body.clone())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use http::{HeaderMap, HeaderValue, StatusCode};

    fn answer(content_type: &str, chunks: Vec<&'static str>) -> Answer {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(content_type).unwrap(),
        );
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("10"));
        let body = futures_util::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<Bytes, BodyError>(Bytes::from_static(c.as_bytes())))
                .collect::<Vec<_>>(),
        )
        .boxed();
        Answer {
            status: StatusCode::OK,
            headers,
            body,
            notes: Vec::new(),
            estimated: false,
        }
    }

    async fn text(a: Answer) -> String {
        let chunks: Vec<_> = a.body.collect().await;
        let bytes: Vec<u8> = chunks
            .into_iter()
            .flat_map(|c| c.unwrap().to_vec())
            .collect();
        String::from_utf8(bytes).unwrap()
    }

    #[tokio::test]
    async fn the_first_event_names_the_requested_model_and_the_rest_passes() {
        let a = answer(
            "text/event-stream",
            vec![
                "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"anthropic.claude-opus-5-5\",\"content\":[]}}\n",
                "\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"model\":\"untouched\"}\n\n",
            ],
        );
        let mut a = a;
        requested_model(&mut a, "claude-opus-5-5");
        assert!(a.headers.get(header::CONTENT_LENGTH).is_none());
        let out = text(a).await;
        assert!(out.contains("\"model\":\"claude-opus-5-5\""), "{out}");
        assert!(!out.contains("anthropic.claude"), "{out}");
        assert!(out.contains("\"model\":\"untouched\""), "{out}");
        assert!(out.starts_with("event: message_start\ndata: {"), "{out}");
    }

    #[tokio::test]
    async fn a_json_answer_gets_its_top_level_model_only() {
        let a = answer(
            "application/json",
            vec![
                "{\"content\":[{\"type\":\"tool_use\",\"input\":{\"model\":\"x\"}}],",
                "\"model\":\"deepseek-chat\",\"usage\":{\"input_tokens\":1}}",
            ],
        );
        let mut a = a;
        requested_model(&mut a, "claude-sonnet-4-6");
        let out = text(a).await;
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["model"], "claude-sonnet-4-6");
        assert_eq!(v["content"][0]["input"]["model"], "x");
        assert_eq!(v["usage"]["input_tokens"], 1);
    }
}
