//! `provider: openai`: Gatehouse in front of an OpenAI-compatible Chat Completions upstream
//! (the fake's `/v1/chat/completions`). The fake's face is validated first with the
//! official `openai` SDK; then the official Anthropic SDK and the Claude Code CLI go
//! through Gatehouse to it, a capped session is refused before it, and `count_tokens` is
//! estimated locally.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use fake_upstream::{FakeConfig, FakeUpstream, Fault, TOOL_COMMAND, TOOL_OUTPUT};
use gatehouse_engine::deps::MapEnvironment;
use gatehouse_tests::caps::{ADMIN, infer, msg, set_limit, token};
use gatehouse_tests::{
    CLIENT_KEY, OPERATOR_KEY, SESSION_SECRET_A, TestGateway, e2e_bin, e2e_dir, sign_in_gateway_with,
};
use serde_json::{Value, json};
use tokio::process::Command;

/// One `provider: openai` upstream at the fake's `/v1`.
fn openai_yaml(fake_url: &str, db: &Path) -> String {
    format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - name: compat
    provider: openai
    base_url: "{fake_url}/v1"
    auth: {{api_key: "{OPERATOR_KEY}"}}
client_keys:
  - {{id: tester, key: "{CLIENT_KEY}"}}
"#,
        db = db.display()
    )
}

async fn gateway() -> TestGateway {
    TestGateway::start_with(FakeConfig::default(), openai_yaml).await
}

fn require(path: &Path) {
    assert!(
        path.exists(),
        "{} is missing: run scripts/test.sh (it installs tests/e2e with npm ci)",
        path.display()
    );
}

/// Runs a node script of `tests/e2e` with `env`; its stdout is one JSON line.
async fn node(script: &str, env: &[(&str, &str)]) -> Value {
    gatehouse_tests::node_json(script, &[], env).await
}

/// The chat completions the fake received, in order.
fn completions(fake: &FakeUpstream) -> Vec<fake_upstream::RecordedRequest> {
    fake.requests()
        .into_iter()
        .filter(|r| r.path == "/v1/chat/completions")
        .collect()
}

#[tokio::test]
async fn the_openai_sdk_validates_the_fake() {
    require(&e2e_dir().join("node_modules/openai"));
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let v = node("openai_fake.mjs", &[("FAKE_URL", &fake.url())]).await;
    assert_eq!(v["tool_call"]["name"], "Bash");
    assert_eq!(v["tool_call"]["arguments"]["command"], TOOL_COMMAND);
    assert_eq!(v["tool_call"]["finish"], "tool_calls");
    assert_eq!(
        v["answer"]["text"],
        format!("The command printed: {TOOL_OUTPUT}")
    );
    assert_eq!(v["answer"]["finish"], "stop");
    assert_eq!(v["answer"]["usage"]["prompt_tokens"], 120);
    assert_eq!(v["streamed_tool"]["name"], "Bash");
    assert_eq!(v["streamed_tool"]["arguments"]["command"], TOOL_COMMAND);
    assert_eq!(v["streamed_tool"]["finish"], "tool_calls");
    assert_eq!(
        v["streamed_text"]["text"],
        "Hello from the fake OpenAI upstream."
    );
    assert_eq!(v["streamed_text"]["reasoning"], "Thinking about it.");
    assert_eq!(v["streamed_text"]["usage"]["completion_tokens"], 9);
    assert_eq!(
        v["streamed_text"]["usage"]["prompt_tokens_details"]["cached_tokens"],
        20
    );
    assert_eq!(v["orphan"]["status"], 400);
    assert_eq!(v["limited"]["status"], 429);
    assert_eq!(v["limited"]["code"], "rate_limit_exceeded");
    assert_eq!(v["limited"]["retry_after"], "7");
    assert_eq!(v["overflow"]["status"], 400);
    assert_eq!(v["overflow"]["code"], "context_length_exceeded");
    // The SDK sent what the fake recorded: the tool message answers the call it made.
    let reqs = completions(&fake);
    let tool_msg = reqs[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(tool_msg["tool_call_id"], v["tool_call"]["id"]);
}

#[tokio::test]
async fn the_anthropic_sdk_through_gatehouse_to_an_openai_upstream() {
    require(&e2e_dir().join("node_modules/@anthropic-ai/sdk"));
    let gw = gateway().await;
    let base = gw.handle.base_url();
    let fake_url = gw.fake.url();
    let v = node(
        "sdk_openai_upstream.mjs",
        &[
            ("GATEHOUSE_URL", &base),
            ("GATEHOUSE_KEY", CLIENT_KEY),
            ("FAKE_URL", &fake_url),
        ],
    )
    .await;
    assert!(v["json"]["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(v["json"]["text"], "Hello from the fake OpenAI upstream.");
    assert_eq!(v["json"]["stop_reason"], "end_turn");
    // 120 prompt tokens of which 20 cached: 100 fresh input, 20 cache reads.
    assert_eq!(v["json"]["usage"]["input_tokens"], 100);
    assert_eq!(v["json"]["usage"]["cache_read_input_tokens"], 20);
    assert_eq!(v["json"]["usage"]["output_tokens"], 9);
    assert_eq!(
        v["streamed"]["text"],
        "Hello from the fake OpenAI upstream."
    );
    assert_eq!(v["streamed"]["usage"]["output_tokens"], 9);
    let events: Vec<&str> = v["streamed"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(events.first(), Some(&"message_start"));
    assert_eq!(events.last(), Some(&"message_stop"));
    assert_eq!(v["tool"]["name"], "Bash");
    assert_eq!(v["tool"]["input"]["command"], TOOL_COMMAND);
    assert_eq!(v["tool"]["stop_reason"], "tool_use");
    // Kimi-style `functions.Bash:N` ids are carried in a `toolu_`-safe form...
    let tool_id = v["tool"]["id"].as_str().unwrap();
    assert!(tool_id.starts_with("toolu_oai_"), "{tool_id}");
    assert_eq!(
        v["answered"]["text"],
        format!("The command printed: {TOOL_OUTPUT}")
    );
    assert_eq!(v["limited"]["status"], 429);
    assert_eq!(v["limited"]["type"], "rate_limit_error");
    assert_eq!(v["limited"]["retry_after"], "7");
    assert!(!v["limited"].to_string().contains("acct-secret"), "{v}");
    assert_eq!(v["overflow"]["status"], 400);
    assert_eq!(v["overflow"]["type"], "invalid_request_error");
    assert_eq!(
        v["overflow"]["message"],
        "prompt is too long: 130000 tokens > 128000 maximum"
    );

    // ...and the upstream gets its own id back in the `role: tool` message.
    let reqs = completions(&gw.fake);
    assert_eq!(reqs.len(), 6);
    let tool_msg = reqs[3].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    assert!(
        tool_msg["tool_call_id"]
            .as_str()
            .unwrap()
            .starts_with("functions.Bash:")
    );
    assert_eq!(tool_msg["content"], TOOL_OUTPUT);
    for r in &reqs {
        let auth: Vec<&str> = r
            .headers
            .iter()
            .filter(|(k, _)| k == "authorization")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(auth, vec![format!("Bearer {OPERATOR_KEY}")]);
        assert!(r.headers.iter().all(|(k, v)| k != "x-api-key"
            && !k.starts_with("anthropic-")
            && !v.contains(CLIENT_KEY)));
        assert_eq!(r.body["model"], "claude-sonnet-4-6");
        assert!(
            matches!(r.body["max_tokens"].as_u64(), Some(256 | 16)),
            "{}",
            r.body
        );
    }
    assert_eq!(reqs[1].body["stream_options"]["include_usage"], true);

    // Every answered request is metered with the translated usage, JSON and stream alike.
    let rows = gw.usage_rows(6).await;
    let ok: Vec<_> = rows.iter().filter(|r| r.status == 200).collect();
    assert_eq!(ok.len(), 4);
    for r in &ok {
        assert_eq!(r.upstream.as_deref(), Some("compat"));
        assert_eq!(
            (r.input_tokens, r.cache_read_tokens, r.output_tokens),
            (100, 20, 9)
        );
        assert_eq!(r.usage_source, "reported");
    }
    assert!(ok.iter().any(|r| r.stream) && ok.iter().any(|r| !r.stream));
    assert!(rows.iter().any(|r| r.status == 429));
}

#[tokio::test]
async fn claude_code_runs_a_tool_through_an_openai_upstream() {
    let claude = e2e_bin("claude");
    require(&claude);
    let gw = gateway().await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let base = gw.handle.base_url();
    let child = Command::new(&claude)
        .args([
            "-p",
            "Run the marker command with Bash and tell me what it printed.",
            "--allowedTools",
            "Bash",
            "--output-format",
            "json",
        ])
        .current_dir(work.path())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home.path())
        .env("TERM", "dumb")
        .env("ANTHROPIC_BASE_URL", &base)
        .env("ANTHROPIC_AUTH_TOKEN", CLIENT_KEY)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(150), child)
        .await
        .expect("claude -p finished within 150 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "claude failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(result["is_error"], false, "{stdout}");
    assert!(result["num_turns"].as_u64().unwrap() >= 2, "{stdout}");
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .contains(&format!("The command printed: {TOOL_OUTPUT}")),
        "{stdout}"
    );
    // The fake asked for Bash, Claude Code ran it, and the translated `role: tool` message
    // answered the fake's own call id with the command's real output.
    let reqs = completions(&gw.fake);
    let answered = reqs
        .iter()
        .find_map(|r| {
            let msgs = r.body["messages"].as_array()?;
            let call = msgs.iter().find_map(|m| m["tool_calls"].as_array())?;
            let tool = msgs.iter().find(|m| m["role"] == "tool")?;
            Some((call[0].clone(), tool.clone()))
        })
        .unwrap_or_else(|| panic!("no tool round trip in {reqs:?}"));
    let (call, tool) = answered;
    assert_eq!(call["function"]["name"], "Bash");
    assert_eq!(tool["tool_call_id"], call["id"]);
    assert!(
        tool["content"].as_str().unwrap().contains(TOOL_OUTPUT),
        "{tool}"
    );
    assert!(call["id"].as_str().unwrap().starts_with("functions.Bash:"));
    let rows = gw.usage_rows(reqs.len()).await;
    assert!(rows.iter().all(|r| r.upstream.as_deref() == Some("compat")));
}

#[tokio::test]
async fn a_capped_session_is_refused_before_the_openai_upstream() {
    let setup = |fake_url: &str| {
        let ups = format!(
            "  - {{name: compat, provider: openai, base_url: \"{fake_url}/v1\", auth: {{api_key: \"{OPERATOR_KEY}\"}}}}"
        );
        (ups, MapEnvironment::default())
    };
    let s = sign_in_gateway_with(&[SESSION_SECRET_A], ADMIN, &setup).await;
    let base = s.gw.url("");
    set_limit(
        &s.gw.client,
        &base,
        json!({"scope": {"type": "user", "user_id": "quinn"}, "amount": "0", "period": "daily"}),
    )
    .await;
    let quinn = token(&s.origin, "quinn", &["engineering"]);
    let r = infer(&s.gw.client, &base, &quinn, &msg(64)).await;
    assert_eq!(r.status(), 429);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["type"], "billing_error", "{body}");
    assert!(
        completions(&s.gw.fake).is_empty(),
        "the upstream was called"
    );
    // The same upstream serves someone without a cap.
    let ruth = token(&s.origin, "ruth", &["engineering"]);
    let r = infer(&s.gw.client, &base, &ruth, &msg(64)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(completions(&s.gw.fake).len(), 1);
}

#[tokio::test]
async fn count_tokens_is_estimated_locally() {
    let gw = gateway().await;
    let body = json!({
        "model": "claude-sonnet-4-6",
        "system": "You are terse.",
        "messages": [{"role": "user", "content": "hello world, count me"}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}]
    });
    let r = gw
        .client
        .post(gw.url("/v1/messages/count_tokens"))
        .header("x-api-key", CLIENT_KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-gatehouse-estimated"], "true");
    let v: Value = r.json().await.unwrap();
    let n = v["input_tokens"].as_u64().unwrap();
    assert!((15..60).contains(&n), "{v}");
    assert!(gw.fake.requests().is_empty(), "count_tokens went upstream");
    let rows = gw.usage_rows(1).await;
    assert_eq!(rows[0].endpoint, "count_tokens");
    assert_eq!(rows[0].usage_source, "estimated");
    assert!(
        rows[0].route_reason.contains("estimated locally"),
        "{}",
        rows[0].route_reason
    );
    // A Messages answer is never marked.
    let r = gw
        .messages(gatehouse_tests::sonnet(false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("x-gatehouse-estimated").is_none());
}

#[tokio::test]
async fn dropped_fields_are_named_and_upstream_errors_are_cleaned() {
    let gw = gateway().await;
    let body = json!({
        "model": "claude-sonnet-4-6", "max_tokens": 64, "stream": false,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}]
    });
    let r = gw.messages(body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let rows = gw.usage_rows(1).await;
    assert!(
        rows[0]
            .route_reason
            .contains("openai: dropped cache_control, thinking"),
        "{}",
        rows[0].route_reason
    );
    let sent = &completions(&gw.fake)[0].body;
    assert!(sent.get("thinking").is_none() && sent["messages"][0]["content"] == "hi");

    // A 500 whose message names the account is relayed without it.
    gw.fake.push_fault(Fault::Status {
        status: 500,
        retry_after: None,
        error_type: Some("server_error".into()),
        message: Some("internal error for org-acct-secret-42".into()),
    });
    let r = gw.messages(body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 502);
    let text = r.text().await.unwrap();
    assert!(!text.contains("acct-secret"), "{text}");

    // The operator's key refused upstream is never relayed as the caller's own 401.
    gw.fake.push_fault(Fault::Status {
        status: 401,
        retry_after: None,
        error_type: Some("invalid_api_key".into()),
        message: Some("Incorrect API key provided: sk-oper***".into()),
    });
    let r = gw.messages(body).send().await.unwrap();
    assert_eq!(r.status(), 502);
    let text = r.text().await.unwrap();
    assert!(
        !text.contains("authentication_error") && !text.contains("sk-oper"),
        "{text}"
    );
    assert!(
        !gw.events
            .events()
            .iter()
            .any(|e| e.to_string().contains("acct-secret"))
    );
}

#[tokio::test]
async fn output_limit_lowered_and_a_broken_stream_ends_in_an_error_event() {
    let gw = TestGateway::start_with(FakeConfig::default(), |url, db| {
        openai_yaml(url, db).replace(
            "    auth: {api_key:",
            "    max_output_tokens: 8192\n    max_tokens_field: max_completion_tokens\n    auth: {api_key:",
        )
    })
    .await;
    let mut body = gatehouse_tests::sonnet(true);
    body["max_tokens"] = json!(64000);
    let r = gw.messages(body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains("event: message_stop"), "{text}");
    let sent = &completions(&gw.fake)[0].body;
    assert_eq!(sent["max_completion_tokens"], 8192);
    assert!(sent.get("max_tokens").is_none());
    let rows = gw.usage_rows(1).await;
    assert!(
        rows[0]
            .route_reason
            .contains("openai: max_tokens 64000 lowered to 8192"),
        "{}",
        rows[0].route_reason
    );

    // The upstream's stream breaks after two deltas: the caller gets an `error` event.
    gw.fake
        .push_fault(Fault::MidStreamError { after_deltas: 1 });
    let r = gw.messages(body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains("event: error"), "{text}");
    assert!(!text.contains("event: message_stop"), "{text}");
    let rows = gw.usage_rows(2).await;
    assert_eq!(rows.len(), 2);
}

#[tokio::test]
async fn a_server_that_ignores_stream_still_streams_to_the_caller() {
    let gw = TestGateway::start_with(FakeConfig::default(), |url, db| {
        format!(
            "{}models:\n  - {{id: claude-sonnet-4-6, upstream_model: {{compat: fake-nostream}}}}\n",
            openai_yaml(url, db)
        )
    })
    .await;
    let r = gw
        .messages(gatehouse_tests::sonnet(true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let text = r.text().await.unwrap();
    assert!(text.starts_with("event: message_start"), "{text}");
    assert!(
        text.contains("Hello from the fake OpenAI upstream."),
        "{text}"
    );
    assert!(text.contains("event: message_stop"), "{text}");
    let sent = &completions(&gw.fake)[0].body;
    assert_eq!(sent["model"], "fake-nostream");
    assert_eq!(sent["stream"], true);
    let rows = gw.usage_rows(1).await;
    assert_eq!((rows[0].input_tokens, rows[0].output_tokens), (100, 9));
    assert_eq!(rows[0].usage_source, "reported");
}

#[tokio::test]
async fn claude_code_hands_a_reasoning_models_thinking_back() {
    let claude = e2e_bin("claude");
    require(&claude);
    let gw = TestGateway::start_with(FakeConfig::default(), |url, db| {
        format!(
            "{}models:\n  - {{id: fake-reasoner, upstream_model: {{compat: fake-reasoner}}}}\n",
            openai_yaml(url, db)
        )
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let base = gw.handle.base_url();
    // A DeepSeek-style reasoner: its thinking comes back as a `thinking` block, and the
    // fake refuses the follow-up unless that thinking returns as `reasoning_content`.
    let out = Command::new(&claude)
        .args([
            "-p",
            "Run the marker command with Bash and tell me what it printed.",
            "--model",
            "fake-reasoner",
            "--allowedTools",
            "Bash",
            "--output-format",
            "json",
        ])
        .current_dir(work.path())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home.path())
        .env("TERM", "dumb")
        .env("ANTHROPIC_BASE_URL", &base)
        .env("ANTHROPIC_AUTH_TOKEN", CLIENT_KEY)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", "fake-reasoner")
        .env("ANTHROPIC_SMALL_FAST_MODEL", "fake-reasoner")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(150), out)
        .await
        .expect("claude -p finished within 150 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "claude failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .contains(&format!("The command printed: {TOOL_OUTPUT}")),
        "{stdout}"
    );
    let reqs = completions(&gw.fake);
    let handed_back = reqs.iter().any(|r| {
        r.body["model"] == "fake-reasoner"
            && r.body["messages"].as_array().is_some_and(|m| {
                m.iter().any(|m| {
                    m["tool_calls"].is_array() && m["reasoning_content"] == "Thinking about it."
                })
            })
    });
    assert!(handed_back, "{reqs:?}");
}
