//! The OpenAI-compatible front door end to end: the official `openai` npm SDK (pinned in
//! `tests/e2e/package.json`, driven through `tests/e2e/openai_chat.mjs`) against Gatehouse
//! with the Anthropic fake upstream behind it. Checks what the SDK reads, what the fake was
//! sent (the translated Messages body, the operator's key only) and the usage rows.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fake_upstream::{FakeConfig, Fault, ToolUse};
use gatehouse_tests::caps::{ADMIN, set_limit, token};
use gatehouse_tests::{
    CLIENT_KEY, OPERATOR_KEY, SESSION_SECRET_A, TestGateway, base_yaml, e2e_dir, sign_in_gateway,
};
use serde_json::{Value, json};

const MODEL: &str = "claude-sonnet-4-5";

/// Runs `openai_chat.mjs <scenario>` against `base_url` with `key`; its JSON summary.
async fn sdk(scenario: &str, base_url: &str, key: &str) -> Value {
    let sdk = e2e_dir().join("node_modules/openai");
    assert!(
        sdk.exists(),
        "{} is missing: run scripts/test.sh (it installs tests/e2e with npm ci)",
        sdk.display()
    );
    gatehouse_tests::node_json(
        "openai_chat.mjs",
        &[scenario],
        &[
            ("GATEHOUSE_URL", base_url),
            ("GATEHOUSE_KEY", key),
            ("MODEL", MODEL),
        ],
    )
    .await
}

/// The Messages requests the fake received, in order.
fn upstream_bodies(gw: &TestGateway) -> Vec<Value> {
    let requests = gw.fake.requests();
    for r in &requests {
        let keys: Vec<&str> = r
            .headers
            .iter()
            .filter(|(k, _)| k == "x-api-key")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(
            keys,
            [OPERATOR_KEY],
            "the upstream sees the operator key only"
        );
        assert!(
            r.headers
                .iter()
                .all(|(k, v)| k != "authorization" && !v.contains(CLIENT_KEY))
        );
    }
    requests
        .into_iter()
        .filter(|r| r.path == "/v1/messages")
        .map(|r| r.body)
        .collect()
}

#[tokio::test]
async fn openai_sdk_chats_streams_and_lists_models() {
    let reply = "Hello from behind the door.";
    let gw = TestGateway::start_with(
        FakeConfig {
            reply_text: reply.into(),
            output_tokens: 3,
            input_tokens: 20,
            cache_read_input_tokens: 5,
            cache_creation_5m_tokens: 2,
            token_interval_ms: 5,
            ..FakeConfig::default()
        },
        base_yaml,
    )
    .await;
    let v = sdk("chat", &gw.handle.base_url(), CLIENT_KEY).await;

    let plain = &v["plain"];
    assert_eq!(plain["object"], "chat.completion");
    assert!(
        plain["id"]
            .as_str()
            .unwrap()
            .starts_with("chatcmpl-msg_fake_")
    );
    assert_eq!(plain["model"], MODEL);
    assert_eq!(plain["choices"][0]["message"]["role"], "assistant");
    assert_eq!(plain["choices"][0]["message"]["content"], reply);
    assert_eq!(plain["choices"][0]["finish_reason"], "stop");
    let usage = json!({"prompt_tokens": 27, "completion_tokens": 3, "total_tokens": 30,
                       "prompt_tokens_details": {"cached_tokens": 5}});
    assert_eq!(plain["usage"], usage);

    let streamed = &v["streamed"];
    assert_eq!(streamed["text"], reply);
    assert_eq!(streamed["finish"], "stop");
    assert_eq!(streamed["usage"], usage);
    let chunks = streamed["chunks"].as_array().unwrap();
    assert!(
        chunks.len() >= 5,
        "role, 3 deltas, finish, usage: {chunks:?}"
    );
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(
        chunks.last().unwrap()["choices"],
        0,
        "the usage chunk has no choices"
    );

    // models.list(): the same answer Claude Code reads, with OpenAI's fields.
    let models = v["models"].as_array().unwrap();
    assert!(models.iter().any(|m| m["id"] == MODEL));
    for m in models {
        assert_eq!(m["object"], "model");
        assert_eq!(m["type"], "model");
        assert_eq!(m["owned_by"], "anthropic");
        assert!(
            m["created"].is_i64() && m["created_at"].is_string() && m["display_name"].is_string()
        );
    }
    let sonnet = models.iter().find(|m| m["id"] == MODEL).unwrap();
    assert_eq!(sonnet["created_at"], "2025-09-29T00:00:00Z");
    assert_eq!(sonnet["created"], 1_759_104_000);

    assert_eq!(v["denied"]["class"], "AuthenticationError");
    assert_eq!(v["denied"]["status"], 401);
    assert_eq!(v["denied"]["error"]["code"], "invalid_api_key");
    assert_eq!(v["invalid"]["class"], "BadRequestError");
    assert_eq!(v["invalid"]["status"], 400);
    assert_eq!(v["invalid"]["error"]["type"], "invalid_request_error");
    assert!(
        v["invalid"]["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("n:")
    );

    // The refused requests never reached the upstream; the two others arrived translated.
    let bodies = upstream_bodies(&gw);
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["max_tokens"], 64);
    assert_eq!(
        bodies[0]["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Say hello."}]}])
    );
    assert_eq!(
        bodies[1]["system"],
        json!([{"type": "text", "text": "Be brief."}])
    );
    assert_eq!(bodies[1]["stream"], true);
    assert_eq!(
        bodies[1]["max_tokens"], 16_384,
        "the default: the model's, capped"
    );

    let rows = gw.usage_rows(2).await;
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r.endpoint, "chat_completions");
        assert_eq!(r.principal, "key:tester");
        assert_eq!(r.model, MODEL);
        assert_eq!((r.status, r.input_tokens, r.output_tokens), (200, 20, 3));
        assert_eq!((r.cache_read_tokens, r.cache_write_5m_tokens), (5, 2));
        assert_eq!(r.usage_source, "reported");
        assert!(r.cost_micro_usd > 0);
    }
    assert_eq!(rows.iter().filter(|r| r.stream).count(), 1);

    // The raw answer carries both shapes at the top level too.
    let list: Value = gw
        .client
        .get(gw.url("/v1/models"))
        .bearer_auth(CLIENT_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["object"], "list");
    assert_eq!(list["has_more"], false);
    assert_eq!(list["first_id"], list["data"][0]["id"]);

    // A wrong method on the door answers in OpenAI's envelope too.
    let r = gw
        .client
        .get(gw.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.headers()["allow"], "POST");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["param"], Value::Null);
}

#[tokio::test]
async fn openai_sdk_tool_call_round_trip() {
    let gw = TestGateway::start_with(
        FakeConfig {
            reply_text: "Sunny in both.".into(),
            output_tokens: 2,
            tool_uses: vec![
                ToolUse {
                    id: "toolu_paris".into(),
                    name: "get_weather".into(),
                    input: json!({"city": "Paris"}),
                },
                ToolUse {
                    id: "toolu_oslo".into(),
                    name: "get_weather".into(),
                    input: json!({"city": "Oslo"}),
                },
            ],
            ..FakeConfig::default()
        },
        base_yaml,
    )
    .await;
    let v = sdk("tools", &gw.handle.base_url(), CLIENT_KEY).await;

    let calls = |completion: &Value| -> Vec<(String, Value)> {
        let choice = &completion["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls");
        choice["message"]["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                assert_eq!(c["type"], "function");
                assert_eq!(c["function"]["name"], "get_weather");
                let args =
                    serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
                (c["id"].as_str().unwrap().to_owned(), args)
            })
            .collect()
    };
    let expected = vec![
        ("toolu_paris".to_owned(), json!({"city": "Paris"})),
        ("toolu_oslo".to_owned(), json!({"city": "Oslo"})),
    ];
    assert_eq!(calls(&v["first"]), expected);
    // The SDK's stream helper put the streamed fragments back together.
    assert_eq!(calls(&v["streamed"]), expected);
    let second = &v["second"]["choices"][0];
    assert_eq!(second["message"]["content"], "Sunny in both.");
    assert_eq!(second["finish_reason"], "stop");

    let bodies = upstream_bodies(&gw);
    assert_eq!(bodies.len(), 3);
    assert_eq!(
        bodies[0]["tools"],
        json!([{"name": "get_weather", "description": "The weather in a city",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}])
    );
    assert_eq!(bodies[0]["tool_choice"], json!({"type": "auto"}));
    // The results came back as one user turn of tool_result blocks after the tool_use turn.
    let turns = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(turns.len(), 3);
    let asked: Vec<&Value> = turns[1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .collect();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0]["input"], json!({"city": "Paris"}));
    assert_eq!(
        turns[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_paris", "content": "sunny in Paris"},
            {"type": "tool_result", "tool_use_id": "toolu_oslo", "content": "sunny in Oslo"},
        ]})
    );
    assert_eq!(bodies[2]["stream"], true);
    let rows = gw.usage_rows(3).await;
    assert!(
        rows.iter()
            .all(|r| r.endpoint == "chat_completions" && r.status == 200 && r.output_tokens == 2)
    );
}

#[tokio::test]
async fn openai_sdk_sees_an_upstream_429_with_its_retry_after() {
    let gw = TestGateway::start_with(FakeConfig::default(), base_yaml).await;
    gw.fake.push_fault(Fault::Status {
        status: 429,
        retry_after: Some(7),
        error_type: None,
        message: None,
    });
    let v = sdk("error", &gw.handle.base_url(), CLIENT_KEY).await;
    let failed = &v["failed"];
    assert_eq!(failed["class"], "RateLimitError");
    assert_eq!(failed["status"], 429);
    assert_eq!(failed["retry_after"], "7");
    assert_eq!(
        failed["error"],
        json!({"message": "Number of requests has exceeded your rate limit.",
               "type": "rate_limit_error", "param": null, "code": "rate_limit_exceeded"})
    );
    let rows = gw.usage_rows(1).await;
    assert_eq!(
        (rows[0].endpoint.as_str(), rows[0].status),
        ("chat_completions", 429)
    );
}

#[tokio::test]
async fn a_capped_session_is_refused_before_the_upstream() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    let base = s.gw.url("");
    set_limit(
        &s.gw.client,
        &base,
        json!({"scope": {"type": "rbac_group", "rbac_group_id": "interns"}, "amount": "0", "period": "daily"}),
    )
    .await;
    set_limit(
        &s.gw.client,
        &base,
        json!({"scope": {"type": "rbac_group", "rbac_group_id": "engineering"}, "amount": "100", "period": "daily"}),
    )
    .await;
    let intern = token(&s.origin, "ivy", &["interns"]);
    let v = sdk("error", &base, &intern).await;
    let failed = &v["failed"];
    assert_eq!(failed["class"], "RateLimitError");
    assert_eq!(failed["status"], 429);
    assert_eq!(failed["error"]["type"], "insufficient_quota");
    assert!(failed["retry_after"].is_string(), "{failed}");
    assert!(
        s.gw.fake
            .requests()
            .iter()
            .all(|r| r.path != "/v1/messages"),
        "the upstream was never called"
    );

    // A session with room under its caps is served, and its usage settles as any other.
    let engineer = token(&s.origin, "eve", &["engineering"]);
    let r = s
        .gw
        .client
        .post(s.gw.url("/v1/chat/completions"))
        .bearer_auth(&engineer)
        .json(&json!({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    let rows = s.gw.usage_rows(1).await;
    assert_eq!(rows[0].principal, "user:eve");
    assert_eq!(rows[0].endpoint, "chat_completions");
    assert!(rows[0].cost_micro_usd > 0);
    // Settled: the cap is charged the metered cost and, once the idle lease is released,
    // nothing stays reserved.
    let me = || gatehouse_tests::caps::my_daily(&s.gw.client, &base, &engineer);
    gatehouse_tests::wait_until("the idle lease released", || async {
        me().await["reserved_micro_usd"] == 0
    })
    .await;
    let daily = me().await;
    assert_eq!(daily["period"], "daily");
    assert_eq!(daily["spent_micro_usd"], rows[0].cost_micro_usd);
}

/// The fake's scripted tool calls, read by the official Anthropic SDK (streamed and not):
/// the fake the tests above rely on speaks the wire the SDK accepts.
#[tokio::test]
async fn anthropic_sdk_reads_the_fakes_tool_calls() {
    let gw = TestGateway::start_with(
        FakeConfig {
            reply_text: "Let me check.".into(),
            output_tokens: 2,
            tool_uses: vec![ToolUse {
                id: "toolu_1".into(),
                name: "get_weather".into(),
                input: json!({"city": "Paris", "units": ["C", "F"]}),
            }],
            ..FakeConfig::default()
        },
        base_yaml,
    )
    .await;
    let url = gw.handle.base_url();
    let v = gatehouse_tests::node_json(
        "anthropic_tools.mjs",
        &[],
        &[("GATEHOUSE_URL", &url), ("GATEHOUSE_KEY", CLIENT_KEY)],
    )
    .await;
    for m in [&v["streamed"], &v["plain"]] {
        assert_eq!(m["stop_reason"], "tool_use");
        assert_eq!(
            m["content"][0],
            json!({"type": "text", "text": "Let me check."})
        );
        assert_eq!(m["content"][1]["type"], "tool_use");
        assert_eq!(m["content"][1]["id"], "toolu_1");
        assert_eq!(
            m["content"][1]["input"],
            json!({"city": "Paris", "units": ["C", "F"]})
        );
    }
}

#[tokio::test]
async fn an_upstream_error_mid_stream_reaches_the_sdk_as_an_api_error() {
    let gw = TestGateway::start_with(
        FakeConfig {
            reply_text: "one two three four".into(),
            output_tokens: 4,
            ..FakeConfig::default()
        },
        base_yaml,
    )
    .await;
    gw.fake
        .push_fault(Fault::MidStreamError { after_deltas: 2 });
    let v = sdk("stream_error", &gw.handle.base_url(), CLIENT_KEY).await;
    assert_eq!(v["text"], "one two", "the deltas before the error arrived");
    assert_eq!(v["failed"]["class"], "APIError");
    assert_eq!(
        v["failed"]["error"],
        json!({"message": "Overloaded", "type": "server_error", "param": null, "code": "overloaded"})
    );
    let rows = gw.usage_rows(1).await;
    assert_eq!(rows[0].endpoint, "chat_completions");
    assert!(rows[0].stream);
}
