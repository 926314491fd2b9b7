//! The fake's prompt cache (`FakeConfig::prompt_cache`) over real loopback sockets: JSON and
//! SSE answers carry the cache's usage, each instance has its own cache.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use fake_upstream::{FakeConfig, FakeUpstream};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

async fn post(fake: &FakeUpstream, path: &str, body: &Value) -> (StatusCode, String) {
    let client = Client::builder(TokioExecutor::new()).build_http();
    let req = Request::builder()
        .method(Method::POST)
        .uri(format!("{}{path}", fake.url()))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

/// The answer's usage: the JSON body's, or for a stream `message_start`'s usage with
/// `message_delta`'s on top (both must agree on the input side).
async fn usage(fake: &FakeUpstream, body: &Value) -> Value {
    let (status, text) = post(fake, "/v1/messages", body).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    if body["stream"] != true {
        let v: Value = serde_json::from_str(&text).unwrap();
        return v["usage"].clone();
    }
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let start = events
        .iter()
        .find(|e| e["type"] == "message_start")
        .unwrap();
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    let mut usage = start["message"]["usage"].clone();
    for key in [
        "input_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    ] {
        assert_eq!(usage[key], delta["usage"][key], "{key} differs: {text}");
    }
    usage["output_tokens"] = delta["usage"]["output_tokens"].clone();
    usage
}

/// A Claude Code-shaped request: ~12 KB system prompt and the last user message marked.
fn request(system_seed: &str, turns: usize, stream: bool) -> Value {
    let system = format!("{system_seed}: you are a careful coding agent. ").repeat(300);
    let mut messages = Vec::new();
    for t in 0..turns {
        if t > 0 {
            messages.push(json!({"role": "assistant", "content": format!("Done with step {t}.")}));
        }
        messages.push(json!({"role": "user", "content": [
            {"type": "text", "text": format!("step {t}: {}", "read the file and fix it. ".repeat(40))}
        ]}));
    }
    let last = messages.len() - 1;
    messages[last]["content"][0]["cache_control"] = json!({"type": "ephemeral"});
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "stream": stream,
        "tools": [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}],
        "system": [
            {"type": "text", "text": "You are Claude Code."},
            {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
        ],
        "messages": messages,
    })
}

fn n(usage: &Value, key: &str) -> u64 {
    assert!(usage[key].is_u64(), "{key} missing: {usage}");
    usage[key].as_u64().unwrap()
}

fn cached_config() -> FakeConfig {
    FakeConfig {
        prompt_cache: true,
        ..FakeConfig::default()
    }
}

#[tokio::test]
async fn the_second_identical_request_reads_the_cache_in_json_and_sse() {
    let fake = FakeUpstream::start(cached_config()).await.unwrap();
    for stream in [false, true] {
        let seed = if stream { "streamed" } else { "json" };
        let first = usage(&fake, &request(seed, 1, stream)).await;
        assert_eq!(n(&first, "cache_read_input_tokens"), 0, "{first}");
        let written = n(&first, "cache_creation_input_tokens");
        assert!(written > 2000, "{first}");
        assert_eq!(
            first["cache_creation"]["ephemeral_5m_input_tokens"],
            written
        );
        let second = usage(&fake, &request(seed, 1, stream)).await;
        assert_eq!(n(&second, "cache_read_input_tokens"), written, "{second}");
        assert_eq!(n(&second, "cache_creation_input_tokens"), 0, "{second}");
        assert_eq!(n(&second, "output_tokens"), 8);
        // The next turn reads the previous one and writes only what is new.
        let next = usage(&fake, &request(seed, 2, stream)).await;
        assert_eq!(n(&next, "cache_read_input_tokens"), written, "{next}");
        assert!(n(&next, "cache_creation_input_tokens") > 100, "{next}");
    }
    fake.shutdown().await;
}

#[tokio::test]
async fn another_instance_has_its_own_cache() {
    let a = FakeUpstream::start(cached_config()).await.unwrap();
    let b = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    // Turned on through the control API, as the benchmark's subprocesses are.
    let (status, _) = post(&b, "/_fake/config", &json!({"prompt_cache": true})).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let req = request("shared", 3, false);
    usage(&a, &req).await;
    assert!(n(&usage(&a, &req).await, "cache_read_input_tokens") > 0);
    let on_b = usage(&b, &req).await;
    assert_eq!(n(&on_b, "cache_read_input_tokens"), 0, "{on_b}");
    assert!(n(&on_b, "cache_creation_input_tokens") > 0, "{on_b}");
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn a_changed_system_prompt_misses_and_off_keeps_the_fixed_usage() {
    let fake = FakeUpstream::start(cached_config()).await.unwrap();
    usage(&fake, &request("before", 2, false)).await;
    let changed = usage(&fake, &request("after", 2, false)).await;
    assert_eq!(n(&changed, "cache_read_input_tokens"), 0, "{changed}");
    fake.set_config(FakeConfig::default());
    let off = usage(&fake, &request("after", 2, false)).await;
    assert_eq!(n(&off, "input_tokens"), 25);
    assert_eq!(n(&off, "cache_read_input_tokens"), 0);
    assert_eq!(n(&off, "cache_creation_input_tokens"), 0);
    fake.shutdown().await;
}
