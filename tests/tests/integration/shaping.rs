//! Capability-aware shaping: a text-only model behind an Anthropic-compatible endpoint
//! (`deepseek-chat` on upstream `ds`) and a Claude upstream (`claude`). Images, inputs over
//! the context window and server tools nobody runs are set aside, sent to the configured
//! fallback model, or refused in words that name the model and the setting (a long input
//! as `prompt is too long`, which makes Claude Code compact); thinking a Claude upstream
//! did not sign never reaches one; `/v1/models` names the smallest window.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, load};
use serde_json::{Value, json};

struct Two {
    gw: TestGateway,
    /// The Claude upstream (the gateway's `fake` is `ds`).
    claude: FakeUpstream,
}

/// `sonnet` is served by `ds` as `deepseek-chat`; `opus` by `claude`; `both` by both.
async fn two(routing: &str) -> Two {
    let ds = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let claude = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - {{name: ds, provider: anthropic, base_url: "{ds}", auth: {{api_key: "{OPERATOR_KEY}"}}, models: [claude-sonnet-4-6, both]}}
  - {{name: claude, provider: anthropic, base_url: "{claude}", auth: {{api_key: "{OPERATOR_KEY}"}}, models: [claude-opus-4-8, both]}}
models:
  - {{id: claude-sonnet-4-6, upstream_model: {{ds: deepseek-chat}}}}
  - {{id: both, upstream_model: {{ds: deepseek-chat, claude: claude-opus-4-8}}}}
auto_include_builtin_models: true
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
{routing}
"#,
        db = dir.path().join("g.db").display(),
        ds = ds.url(),
        claude = claude.url(),
    );
    let gw = TestGateway::start_config(load(&yaml, dir.path()), ds, dir).await;
    Two { gw, claude }
}

fn with_image(model: &str) -> Value {
    json!({
        "model": model,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is in the picture?"},
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
            ]}
        ]}]
    })
}

fn long(model: &str, kib: usize) -> Value {
    json!({
        "model": model,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "word ".repeat(kib * 1024 / 5)}]
    })
}

async fn post(gw: &TestGateway, body: Value) -> (u16, Value, Option<String>) {
    let resp = gw.messages(body).send().await.unwrap();
    let status = resp.status().as_u16();
    let upstream = resp
        .headers()
        .get("x-gatehouse-upstream")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, resp.json().await.unwrap_or(Value::Null), upstream)
}

#[tokio::test]
async fn images_for_a_model_without_vision_are_refused_by_name_or_sent_to_the_fallback() {
    let t = two("").await;
    let (status, body, _) = post(&t.gw, with_image("claude-sonnet-4-6")).await;
    assert_eq!(status, 400, "{body}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("`claude-sonnet-4-6` cannot read images on ds"),
        "{msg}"
    );
    assert!(msg.contains("routing.fallback_models.images"), "{msg}");
    assert!(
        t.gw.fake.requests().is_empty(),
        "the text-only upstream never saw it"
    );
    // A model served by both: only the one with vision gets the images.
    let (status, _, up) = post(&t.gw, with_image("both")).await;
    assert_eq!((status, up.as_deref()), (200, Some("claude")));
    let reason = t.gw.usage_rows(1).await[0].route_reason.clone();
    assert!(
        reason.contains("shaped: set aside ds=no vision"),
        "{reason}"
    );
    // Text alone still goes to the text-only model.
    let (status, _, up) = post(&t.gw, long("claude-sonnet-4-6", 1)).await;
    assert_eq!((status, up.as_deref()), (200, Some("ds")));

    let t = two("routing: {fallback_models: {images: claude-opus-4-8}}").await;
    let (status, _, up) = post(&t.gw, with_image("claude-sonnet-4-6")).await;
    assert_eq!((status, up.as_deref()), (200, Some("claude")));
    assert_eq!(
        t.claude.requests().last().unwrap().body["model"],
        "claude-opus-4-8"
    );
    let row = &t.gw.usage_rows(1).await[0];
    assert_eq!(
        row.model, "claude-sonnet-4-6",
        "the row keeps the requested model"
    );
    assert!(
        row.route_reason.contains("images sent to claude-opus-4-8"),
        "{}",
        row.route_reason
    );
}

#[tokio::test]
async fn an_input_over_the_window_is_prompt_too_long_or_goes_to_the_larger_model() {
    let capped = "routing: {capabilities: [{upstream: ds, context_window: 2000}]}";
    let t = two(capped).await;
    let (status, body, _) = post(&t.gw, long("claude-sonnet-4-6", 20)).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.starts_with("prompt is too long: "), "{msg}");
    assert!(msg.ends_with(" tokens > 2000 maximum"), "{msg}");
    assert!(t.gw.fake.requests().is_empty());
    // Under the window: sent.
    assert_eq!(post(&t.gw, long("claude-sonnet-4-6", 4)).await.0, 200);
    // The built-in window of deepseek-chat (131072) lets 20 KiB through without the entry.
    let t = two("").await;
    assert_eq!(post(&t.gw, long("claude-sonnet-4-6", 20)).await.0, 200);

    let t = two(
        "routing: {capabilities: [{upstream: ds, context_window: 2000}], fallback_models: {long_context: claude-opus-4-8}}",
    )
    .await;
    let (status, _, up) = post(&t.gw, long("claude-sonnet-4-6", 20)).await;
    assert_eq!((status, up.as_deref()), (200, Some("claude")));
}

#[tokio::test]
async fn thinking_no_claude_upstream_signed_never_reaches_one() {
    let t = two("").await;
    let body = json!({
        "model": "claude-opus-4-8",
        "max_tokens": 4000,
        "thinking": {"type": "enabled", "budget_tokens": 2000},
        "messages": [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "reasoning from an OpenAI-compatible model", "signature": ""},
                {"type": "tool_use", "id": "toolu_oai_66756e6374696f6e732e42617368", "name": "Bash", "input": {"command": "ls"}}
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_oai_66756e6374696f6e732e42617368", "content": "ok"}]}
        ]
    });
    let (status, _, up) = post(&t.gw, body).await;
    assert_eq!((status, up.as_deref()), (200, Some("claude")));
    let sent = t.claude.requests().last().unwrap().body.clone();
    let assistant = sent["messages"][1]["content"].as_array().unwrap();
    assert!(assistant.iter().all(|b| b["type"] != "thinking"), "{sent}");
    assert!(
        sent.get("thinking").is_none(),
        "the last turn lost its thinking: {sent}"
    );
    assert_eq!(assistant[0]["id"], "toolu_oai_66756e6374696f6e732e42617368");
    let reason = t.gw.usage_rows(1).await[0].route_reason.clone();
    assert!(reason.contains("unsigned thinking dropped"), "{reason}");
}

#[tokio::test]
async fn server_tools_nobody_runs_are_refused_in_words_that_name_the_setting() {
    let t = two("").await;
    let body = json!({
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
        "messages": [{"role": "user", "content": "search the news"}]
    });
    let (status, resp, _) = post(&t.gw, body.clone()).await;
    assert_eq!(status, 400, "{resp}");
    let msg = resp["error"]["message"].as_str().unwrap();
    assert!(msg.contains("`web_search`") && msg.contains("ds"), "{msg}");
    assert!(msg.contains("server_tools.web_search"), "{msg}");
    // A model with a Claude upstream among its candidates goes there.
    let mut both = body;
    both["model"] = json!("both");
    let (status, _, up) = post(&t.gw, both).await;
    assert_eq!((status, up.as_deref()), (200, Some("claude")));
}

#[tokio::test]
async fn the_model_list_names_the_smallest_window() {
    let t = two("").await;
    let list: Value =
        t.gw.client
            .get(t.gw.url("/v1/models"))
            .header("x-api-key", CLIENT_KEY)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let find = |id: &str| {
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(find("claude-sonnet-4-6")["max_input_tokens"], 131_072);
    assert_eq!(find("both")["max_input_tokens"], 131_072);
    assert!(find("claude-opus-4-8").get("max_input_tokens").is_none());
}

#[tokio::test]
async fn tool_ids_an_upstream_restricts_are_fitted_and_stay_paired() {
    let t =
        two("routing: {capabilities: [{upstream: ds, tool_ids: {alphanumeric: true, length: 9}}]}")
            .await;
    let body = json!({
        "model": "claude-sonnet-4-6",
        "max_tokens": 64,
        "messages": [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "Bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "toolu_01B", "name": "Read", "input": {"file_path": "a"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "ok"},
                {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "text"}
            ]}
        ]
    });
    for _ in 0..2 {
        assert_eq!(post(&t.gw, body.clone()).await.0, 200);
    }
    let sent: Vec<Value> =
        t.gw.fake
            .requests()
            .iter()
            .map(|r| r.body.clone())
            .collect();
    let ids = |v: &Value| -> Vec<String> {
        let calls = v["messages"][1]["content"].as_array().unwrap();
        let results = v["messages"][2]["content"].as_array().unwrap();
        calls
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .chain(
                results
                    .iter()
                    .map(|r| r["tool_use_id"].as_str().unwrap().to_owned()),
            )
            .collect()
    };
    let (first, second) = (ids(&sent[0]), ids(&sent[1]));
    assert_eq!(first, second, "the same ids every turn");
    assert_eq!(first[0], first[2], "a call and its result still match");
    assert_eq!(first[1], first[3]);
    assert_ne!(first[0], first[1], "parallel calls stay apart");
    for id in &first {
        assert!(
            id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()),
            "{id}"
        );
    }
    // The Claude upstream takes Anthropic's ids as they are.
    let mut to_claude = body;
    to_claude["model"] = json!("claude-opus-4-8");
    assert_eq!(post(&t.gw, to_claude).await.0, 200);
    let claude_sent = t.claude.requests().last().unwrap().body.clone();
    assert_eq!(
        claude_sent["messages"][1]["content"][0]["id"],
        "toolu_01A09q90qw90lq917835lq9"
    );
}
