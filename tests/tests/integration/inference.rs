//! Inference through the gateway to the fake upstream: streaming event by event, JSON,
//! count_tokens, credential swap, header hygiene, model mapping and usage rows.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use fake_upstream::FakeConfig;
use futures_util::StreamExt;
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, base_yaml, sonnet};
use serde_json::json;

#[tokio::test]
async fn stream_arrives_event_by_event_and_is_metered() {
    let cfg = FakeConfig {
        output_tokens: 6,
        input_tokens: 1200,
        cache_read_input_tokens: 300,
        cache_creation_5m_tokens: 40,
        cache_creation_1h_tokens: 50,
        token_interval_ms: 150,
        ..FakeConfig::default()
    };
    let gw = TestGateway::start_with(cfg, base_yaml).await;
    let resp = gw.messages(sonnet(true)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert!(resp.headers().get("x-request-id").is_some());
    assert_eq!(resp.headers()["x-gatehouse-upstream"], "primary");
    let mut body = resp.bytes_stream();
    let mut first_delta_at: Option<Instant> = None;
    let mut text = String::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.unwrap();
        let s = String::from_utf8_lossy(&chunk).into_owned();
        if first_delta_at.is_none() && s.contains("content_block_delta") {
            first_delta_at = Some(Instant::now());
        }
        text.push_str(&s);
    }
    assert!(text.contains("event: message_stop"));
    let streams = gw.fake.streams();
    let last_sent = streams[0]
        .last_event_sent_at
        .expect("fake finished the stream");
    // The first delta reached the client before the upstream had even sent its last event:
    // nothing was buffered.
    assert!(
        first_delta_at.unwrap() < last_sent,
        "first event was held back"
    );

    let rows = gw.usage_rows(1).await;
    let row = &rows[0];
    assert_eq!(row.input_tokens, 1200);
    assert_eq!(row.output_tokens, 6);
    assert_eq!(row.cache_read_tokens, 300);
    assert_eq!(row.cache_write_5m_tokens, 40);
    assert_eq!(row.cache_write_1h_tokens, 50);
    assert_eq!(row.usage_source, "reported");
    assert_eq!(row.principal, "key:tester");
    assert_eq!(row.upstream.as_deref(), Some("primary"));
    assert_eq!(row.status, 200);
    assert!(row.stream);
    // Sonnet 4.6: $3 in, $15 out, $0.30 cache read, $3.75 5m write, $6 1h write per MTok.
    // 1200*3 + 6*15 + 300*0.3 + 40*3.75 + 50*6 = 3600 + 90 + 90 + 150 + 300 = 4230 micro-USD
    assert_eq!(row.cost_micro_usd, 4230);
    assert!(
        row.route_reason.starts_with("primary: first in order"),
        "{}",
        row.route_reason
    );
    let ev = gw.events.named("inference");
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["cost_micro_usd"], 4230);
}

#[tokio::test]
async fn upstream_sees_operator_key_never_the_callers() {
    let gw = TestGateway::start().await;
    let resp = gw
        .client
        .post(gw.url("/v1/messages"))
        .header("authorization", format!("Bearer {CLIENT_KEY}"))
        .header("x-api-key", CLIENT_KEY)
        .header(
            "anthropic-beta",
            "claude-code-20250219,interleaved-thinking-2025-05-14",
        )
        .header("anthropic-version", "2023-06-01")
        .header("x-stainless-lang", "js")
        .header("x-claude-code-session-id", "sess-1")
        .header("cookie", "session=abc")
        .header("x-forwarded-for", "6.6.6.6")
        .header("x-app", "cli")
        .json(&sonnet(false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    for gone in [
        "anthropic-ratelimit-requests-limit",
        "anthropic-ratelimit-tokens-remaining",
        "cf-ray",
        "via",
        "anthropic-organization-id",
        "request-id",
    ] {
        assert!(
            resp.headers().get(gone).is_none(),
            "{gone} leaked to the caller"
        );
    }
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["content"][0]["text"], "Hello from the fake upstream.");
    let req = &gw.fake.requests()[0];
    let header = |n: &str| {
        req.headers
            .iter()
            .filter(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(header("x-api-key"), vec![OPERATOR_KEY]);
    assert!(header("authorization").is_empty());
    assert_eq!(
        header("anthropic-beta"),
        vec!["claude-code-20250219,interleaved-thinking-2025-05-14"]
    );
    assert_eq!(header("x-stainless-lang"), vec!["js"]);
    assert_eq!(header("x-claude-code-session-id"), vec!["sess-1"]);
    for gone in ["cookie", "x-forwarded-for", "x-app"] {
        assert!(header(gone).is_empty(), "{gone} reached the upstream");
    }
    assert!(
        req.headers.iter().all(|(_, v)| !v.contains(CLIENT_KEY)),
        "caller key reached the upstream"
    );
    assert_eq!(req.path, "/v1/messages");
    let rows = gw.usage_rows(1).await;
    assert_eq!(rows[0].output_tokens, 8);
    assert!(!rows[0].stream);
    assert_eq!(rows[0].usage_source, "reported");
}

#[tokio::test]
async fn body_fields_and_query_pass_through_unchanged() {
    let gw = TestGateway::start().await;
    let body = json!({
        "model": "claude-opus-4-8",
        "max_tokens": 32000,
        "stream": false,
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "safeguards": {"mode": "auto"},
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}],
        "metadata": {"user_id": "u-1"}
    });
    let resp = gw.messages(body.clone()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let req = &gw.fake.requests()[0];
    assert_eq!(req.query.as_deref(), Some("beta=true"));
    assert_eq!(req.body, body);
}

#[tokio::test]
async fn count_tokens_is_relayed_and_recorded_without_cost() {
    let gw = TestGateway::start().await;
    let resp = gw
        .client
        .post(gw.url("/v1/messages/count_tokens?beta=true"))
        .header("x-api-key", CLIENT_KEY)
        .json(&json!({"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["input_tokens"], 25);
    assert_eq!(gw.fake.requests()[0].path, "/v1/messages/count_tokens");
    let rows = gw.usage_rows(1).await;
    assert_eq!(rows[0].endpoint, "count_tokens");
    assert_eq!(rows[0].cost_micro_usd, 0);
}

#[tokio::test]
async fn operator_mapping_rewrites_the_model_per_upstream() {
    let gw = TestGateway::start_with(FakeConfig::default(), |fake, db| {
        format!(
            "{}models:\n  - id: team-sonnet\n    label: Team Sonnet\n    description: the team default\n    upstream_model: {{primary: claude-sonnet-4-6}}\nauto_include_builtin_models: false\n",
            base_yaml(fake, db)
        )
    })
    .await;
    let mut body = sonnet(false);
    body["model"] = json!("team-sonnet");
    let resp = gw.messages(body).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(gw.fake.requests()[0].body["model"], "claude-sonnet-4-6");
    let rows = gw.usage_rows(1).await;
    assert_eq!(rows[0].model, "team-sonnet");
    assert_eq!(rows[0].upstream_model.as_deref(), Some("claude-sonnet-4-6"));
    // Priced as the upstream model, since the operator's id is unknown to the price table.
    assert_eq!(rows[0].cost_micro_usd, 25 * 3 + 8 * 15);

    // A model outside the operator's list is refused, saying which list refused it.
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(resp.headers()["x-should-retry"], "false");
    let err: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(err["error"]["type"], "invalid_request_error");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("operator's model allowlist")
    );
    assert_eq!(
        gw.fake.requests().len(),
        1,
        "a refused model never reaches the upstream"
    );

    let models: serde_json::Value = gw
        .client
        .get(gw.url("/v1/models?limit=1000"))
        .bearer_auth(CLIENT_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        models["data"],
        json!([{"type": "model", "object": "model", "id": "team-sonnet", "display_name": "Team Sonnet",
                "created_at": "1970-01-01T00:00:00Z", "created": 0, "owned_by": "gatehouse",
                "description": "the team default"}])
    );
}

#[tokio::test]
async fn client_disconnect_mid_stream_still_records_reported_usage() {
    let cfg = FakeConfig {
        output_tokens: 20,
        token_interval_ms: 20,
        ..FakeConfig::default()
    };
    let gw = TestGateway::start_with(cfg, base_yaml).await;
    let resp = gw.messages(sonnet(true)).send().await.unwrap();
    let mut body = resp.bytes_stream();
    // Read until the first text delta, then hang up.
    while let Some(chunk) = body.next().await {
        if String::from_utf8_lossy(&chunk.unwrap()).contains("content_block_delta") {
            break;
        }
    }
    drop(body);
    let rows = gw.usage_rows(1).await;
    assert!(rows[0].client_disconnected);
    assert_eq!(
        rows[0].output_tokens, 20,
        "usage reported at the end of the upstream stream"
    );
    assert_eq!(rows[0].usage_source, "reported");
    assert!(gw.fake.streams()[0].completed);
}

#[tokio::test]
async fn mid_stream_error_event_is_relayed_and_usage_estimated() {
    let gw = TestGateway::start().await;
    gw.fake
        .push_fault(fake_upstream::Fault::MidStreamError { after_deltas: 3 });
    let text = gw
        .messages(sonnet(true))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("event: error"));
    assert!(text.contains("overloaded_error"));
    let rows = gw.usage_rows(1).await;
    assert_eq!(rows[0].usage_source, "estimated");
    assert_eq!(rows[0].input_tokens, 25);
    let ev = &gw.events.named("inference")[0];
    assert_eq!(ev["upstream_error"], true);
}

#[tokio::test]
async fn shutdown_lets_an_open_stream_finish() {
    let cfg = FakeConfig {
        output_tokens: 10,
        token_interval_ms: 30,
        ..FakeConfig::default()
    };
    let gw = TestGateway::start_with(cfg, base_yaml).await;
    let resp = gw.messages(sonnet(true)).send().await.unwrap();
    let reader = tokio::spawn(async move { resp.text().await.unwrap() });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let TestGateway {
        handle, fake, dir, ..
    } = gw;
    let store = handle.store();
    handle.shutdown().await;
    let text = reader.await.unwrap();
    assert!(
        text.contains("event: message_stop"),
        "stream was cut by shutdown"
    );
    let rows = store.recent_usage(10).await.unwrap();
    assert_eq!(rows.len(), 1, "usage flushed before shutdown returned");
    drop((fake, dir));
}

/// A JSON answer read to its last byte is no disconnect, however the server ends it
/// (hyper stops polling a body of known length once its bytes are written); a caller that
/// hangs up mid-body is one.
#[tokio::test]
async fn a_json_answer_read_to_the_end_is_not_a_disconnect_and_a_cut_one_is() {
    let gw = TestGateway::start_with(FakeConfig::default(), base_yaml).await;
    for _ in 0..5 {
        let resp = gw.messages(sonnet(false)).send().await.unwrap();
        assert!(resp.headers().contains_key("content-length"));
        resp.bytes().await.unwrap();
    }
    let rows = gw.usage_rows(5).await;
    assert!(rows.iter().all(|r| !r.client_disconnected), "{rows:?}");
    gatehouse_tests::wait_until("five inference events", || async {
        gw.events.named("inference").len() == 5
    })
    .await;
    for e in gw.events.named("inference") {
        assert_eq!(e["client_disconnected"], false, "{e}");
    }

    // 8 MB of JSON: more than the sockets hold, so the gateway is mid-body when the
    // caller hangs up after the first bytes.
    let big = FakeConfig {
        reply_text: "word ".repeat(1_600_000),
        ..FakeConfig::default()
    };
    gw.fake.set_config(big);
    let resp = gw.messages(sonnet(false)).send().await.unwrap();
    let mut body = resp.bytes_stream();
    body.next().await.unwrap().unwrap();
    drop(body);
    gatehouse_tests::wait_until("the cut answer's row", || async {
        gw.usage_rows(6).await.len() == 6
    })
    .await;
    assert!(gw.usage_rows(1).await[0].client_disconnected);
}
