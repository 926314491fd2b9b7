//! Golden tests of the translation, one fixture pair per case under
//! `crates/engine/tests/golden/openai/`:
//!
//! - `request/<case>.anthropic.json` → `request/<case>.openai.json` (`{"body", "dropped"}`;
//!   model, output-limit field and streaming follow the Anthropic body);
//! - `response/<case>.openai.json` → `response/<case>.anthropic.json`;
//! - `stream/<case>.sse` (OpenAI's SSE bytes) → `stream/<case>.events.json` (the Anthropic
//!   events in order), fed in small pieces so events split across chunks are covered.
//!
//! `GOLDEN_BLESS=1` writes a missing expected file (to be reviewed before it is committed).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{request, response, stream};
use crate::config::TokenField;

fn dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/openai/{kind}"))
}

/// Every `(case, input path)` of a kind whose file name ends in `suffix`.
fn cases(kind: &str, suffix: &str) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(dir(kind))
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name()?.to_str()?.to_owned();
            Some((name.strip_suffix(suffix)?.to_owned(), path))
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no {kind} fixtures");
    out
}

fn check(kind: &str, expected_name: &str, actual: &Value) {
    let path = dir(kind).join(expected_name);
    if !path.exists() && std::env::var("GOLDEN_BLESS").is_ok() {
        std::fs::write(&path, serde_json::to_string_pretty(actual).unwrap() + "\n").unwrap();
    }
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing {}", path.display()));
    let expected: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        &expected,
        actual,
        "{kind}/{expected_name} differs; actual:\n{}",
        serde_json::to_string_pretty(actual).unwrap()
    );
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn requests() {
    for (case, path) in cases("request", ".anthropic.json") {
        let body = read(&path);
        let model = body["model"].as_str().unwrap();
        let stream = body["stream"] == true;
        let t = request::translate(&body, model, TokenField::for_model(model), stream).unwrap();
        let actual = json!({"body": t.body, "dropped": t.dropped});
        check("request", &format!("{case}.openai.json"), &actual);
    }
}

#[test]
fn responses() {
    for (case, path) in cases("response", ".openai.json") {
        let actual = response::translate(&read(&path), "requested-model");
        check("response", &format!("{case}.anthropic.json"), &actual);
    }
}

#[test]
fn streams() {
    for (case, path) in cases("stream", ".sse") {
        let bytes = std::fs::read(&path).unwrap();
        let mut lines = stream::DataLines::default();
        let mut t = stream::Translator::new("requested-model");
        let mut events = Vec::new();
        for piece in bytes.chunks(7) {
            for data in lines.push(piece).unwrap() {
                events.extend(t.data(&data));
            }
        }
        if let Some(rest) = lines.flush() {
            events.extend(t.data(&rest));
        }
        events.extend(t.finish());
        check(
            "stream",
            &format!("{case}.events.json"),
            &Value::Array(events),
        );
    }
}

#[test]
fn not_a_messages_body_is_refused() {
    let f = TokenField::MaxTokens;
    assert!(request::translate(&json!([1]), "m", f, false).is_err());
    assert!(request::translate(&json!({"messages": 1}), "m", f, false).is_err());
    let bad_role = json!({"messages": [{"role": "tool", "content": "x"}]});
    assert!(request::translate(&bad_role, "m", f, false).is_err());
}

#[test]
fn token_field_follows_the_model() {
    for m in [
        "o1",
        "o3-mini",
        "o4-mini-2025-04-16",
        "gpt-5",
        "openai/gpt-5-mini",
    ] {
        assert_eq!(
            TokenField::for_model(m),
            TokenField::MaxCompletionTokens,
            "{m}"
        );
    }
    for m in [
        "gpt-4o",
        "deepseek-chat",
        "qwen3-coder",
        "o1x",
        "llama3.1:8b",
    ] {
        assert_eq!(TokenField::for_model(m), TokenField::MaxTokens, "{m}");
    }
}

#[test]
fn context_overflow_becomes_prompt_is_too_long() {
    use super::errors::{context_overflow, too_long_message};
    let m = "This model's maximum context length is 128000 tokens. However, your messages \
             resulted in 130512 tokens. Please reduce the length of the messages.";
    assert!(context_overflow(None, m));
    assert!(context_overflow(Some("context_length_exceeded"), "x"));
    assert!(!context_overflow(Some("invalid_value"), "bad tool schema"));
    assert_eq!(
        too_long_message(m),
        "prompt is too long: 130512 tokens > 128000 maximum"
    );
    assert!(too_long_message("context window exceeded").starts_with("prompt is too long: "));
}
