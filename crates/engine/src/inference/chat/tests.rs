//! Golden tests of the three translations (fixtures in `crates/engine/tests/golden/chat/`:
//! `input` and the `expected` output; `GATEHOUSE_BLESS=1` rewrites `expected` from the code,
//! to be read before committing), and the refusals of input the front door does not take.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::response::{self, Context};
use super::{request, stream};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/chat")
}

/// Compares `actual` with the fixture's `expected` (or writes it when blessing).
fn golden(name: &str, actual: Value) {
    let path = dir().join(name);
    let mut fixture: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    if std::env::var_os("GATEHOUSE_BLESS").is_some() {
        fixture["expected"] = actual;
        let text = serde_json::to_string_pretty(&fixture).unwrap() + "\n";
        std::fs::write(&path, text).unwrap();
        return;
    }
    assert_eq!(
        actual, fixture["expected"],
        "{name}: translation differs from the golden file"
    );
}

fn input(name: &str) -> Value {
    let text = std::fs::read_to_string(dir().join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn ctx(include_usage: bool) -> Context {
    Context {
        model: "claude-test".into(),
        created: 1_767_225_600,
        include_usage,
    }
}

#[test]
fn request_goldens() {
    for name in [
        "request_basic.json",
        "request_tools.json",
        "request_named_tool.json",
    ] {
        let body = serde_json::to_vec(&input(name)["input"]).unwrap();
        let t = request::translate(&body).unwrap();
        let actual = json!({"body": t.body, "stream": t.stream, "include_usage": t.include_usage});
        golden(name, actual);
    }
}

#[test]
fn response_goldens() {
    for name in ["response_text.json", "response_parallel_tools.json"] {
        golden(
            name,
            response::completion(&input(name)["input"], &ctx(false)),
        );
    }
}

/// The caller's events for an Anthropic SSE text fed in small pieces.
async fn translate_stream(sse: &str, include_usage: bool) -> Vec<Value> {
    let pieces: Vec<Result<Bytes, std::convert::Infallible>> = sse
        .as_bytes()
        .chunks(7)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let out: Vec<_> = stream::translate(futures_util::stream::iter(pieces), ctx(include_usage))
        .collect()
        .await;
    let text: String = out
        .into_iter()
        .map(|b| String::from_utf8(b.unwrap().to_vec()).unwrap())
        .collect();
    text.split_terminator("\n\n")
        .map(|e| {
            let data = e
                .strip_prefix("data: ")
                .expect("every event is one data line");
            serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.into()))
        })
        .collect()
}

#[tokio::test]
async fn stream_goldens() {
    for name in [
        "stream_text_usage.json",
        "stream_parallel_tools.json",
        "stream_error.json",
        "stream_cut.json",
    ] {
        let fixture = input(name);
        let include_usage = fixture["include_usage"].as_bool().unwrap();
        let events = translate_stream(fixture["input"].as_str().unwrap(), include_usage).await;
        golden(name, Value::Array(events));
    }
}

const FINISH: [(&str, &str); 7] = [
    ("end_turn", "stop"),
    ("stop_sequence", "stop"),
    ("pause_turn", "stop"),
    ("max_tokens", "length"),
    ("model_context_window_exceeded", "length"),
    ("tool_use", "tool_calls"),
    ("refusal", "content_filter"),
];

#[tokio::test]
async fn every_stop_reason_has_its_finish_reason_in_both_shapes() {
    for (stop, finish) in FINISH {
        let message = json!({"id": "msg_x", "content": [], "stop_reason": stop, "usage": {}});
        let c = response::completion(&message, &ctx(false));
        assert_eq!(c["choices"][0]["finish_reason"], finish, "{stop}");
        let sse = format!(
            "data: {{\"type\":\"message_start\",\"message\":{{\"id\":\"m\",\"usage\":{{}}}}}}\n\n\
             data: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{stop}\"}},\"usage\":{{\"output_tokens\":1}}}}\n\n\
             data: {{\"type\":\"message_stop\"}}\n\n"
        );
        let events = translate_stream(&sse, false).await;
        assert_eq!(events[1]["choices"][0]["finish_reason"], finish, "{stop}");
        assert_eq!(events[2], "[DONE]");
    }
}

#[test]
fn refused_input_names_the_field() {
    let cases = [
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 2}),
            "n:",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 1.5}),
            "temperature:",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "logprobs": true}),
            "logprobs:",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
                   "response_format": {"type": "json_schema", "json_schema": {}}}),
            "response_format:",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "frobnicate": 1}),
            "frobnicate:",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}]}),
            "model:",
        ),
        (json!({"model": "m", "messages": []}), "messages:"),
        (
            json!({"model": "m", "messages": [{"role": "function", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "ftp://x/y.png"}}]}]}),
            "messages[0].content[0].image_url.url",
        ),
        (
            json!({"model": "m", "messages": [{"role": "assistant", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}]}),
            "messages[0].tool_calls[0].function.arguments",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
                   "reasoning_effort": "high", "max_tokens": 100}),
            "max_tokens:",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
                   "tools": [{"type": "web_search"}]}),
            "tools[0].type",
        ),
    ];
    for (body, field) in cases {
        let err = request::translate(body.to_string().as_bytes()).unwrap_err();
        let crate::error::ApiError::InvalidRequest(message) = &err else {
            panic!("{body}: {err:?} is not a 400");
        };
        assert!(
            message.starts_with(field),
            "{body}: `{message}` does not start with {field}"
        );
    }
    assert!(request::translate(b"[1]").is_err());
    assert!(request::translate(b"{nope").is_err());
}

#[test]
fn default_max_tokens_follow_the_model_table() {
    let body = |model: &str| {
        json!({"model": model, "messages": [{"role": "user", "content": "x"}]}).to_string()
    };
    let max = |model: &str| {
        request::translate(body(model).as_bytes()).unwrap().body["max_tokens"].clone()
    };
    // claude-opus-4-1: default output 32,000, capped at 16,384.
    assert_eq!(max("claude-opus-4-1"), request::DEFAULT_MAX_TOKENS_CAP);
    assert_eq!(
        max("someone-elses-model"),
        request::DEFAULT_MAX_TOKENS_UNKNOWN
    );
    // With reasoning: the budget on top, never past the model's largest output.
    let reasoning = |model: &str, effort: &str| {
        let body = json!({"model": model, "messages": [{"role": "user", "content": "x"}],
                          "reasoning_effort": effort});
        request::translate(body.to_string().as_bytes())
    };
    let t = reasoning("claude-opus-4-1", "high").unwrap();
    assert_eq!(t.body["max_tokens"], 32_000);
    assert_eq!(t.body["thinking"]["budget_tokens"], 16_384);
    assert_eq!(
        reasoning("claude-sonnet-4-5", "medium").unwrap().body["max_tokens"],
        16_384 + 4_096
    );
    let err = reasoning("claude-3-5-haiku", "high").unwrap_err();
    assert!(err.to_string().starts_with("reasoning_effort:"), "{err}");
    assert!(
        reasoning("claude-sonnet-4-5", "none")
            .unwrap()
            .body
            .get("thinking")
            .is_none()
    );
}

#[test]
fn upstream_errors_take_the_openai_envelope() {
    let status = http::StatusCode::TOO_MANY_REQUESTS;
    let body = br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
    assert_eq!(
        super::errors::translate(status, body),
        json!({"error": {"message": "slow down", "type": "rate_limit_error", "param": null, "code": "rate_limit_exceeded"}})
    );
    let v = super::errors::translate(http::StatusCode::BAD_GATEWAY, b"<html>");
    assert_eq!(v["error"]["type"], "server_error");
    assert_eq!(v["error"]["message"], "the upstream answered Bad Gateway");
}

#[test]
fn an_event_past_the_bound_ends_the_stream() {
    let mut t = stream::Translator::new(ctx(false));
    let mut d = stream::Decoder::default();
    let start = b"data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n";
    assert_eq!(d.feed(start, &mut t).unwrap().len(), 1);
    let piece = vec![b'x'; 1024 * 1024];
    let mut result = Ok(Vec::new());
    for _ in 0..17 {
        result = d.feed(&piece, &mut t);
        if result.is_err() {
            break;
        }
    }
    assert_eq!(result, Err(stream::EventTooLarge));
    let end = t.end("cut");
    assert_eq!(end.len(), 1);
    assert!(std::str::from_utf8(&end[0]).unwrap().contains("\"error\""));
}
