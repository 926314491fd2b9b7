//! Pricing per upstream model: a non-Claude model behind a Claude id costs its own
//! override (scoped to the upstream that served it), an unpriced one `pricing.default`,
//! flagged once. The `modelPricing` pushed in managed settings carries each override as
//! the reference (2.1.334 and later) writes it: the 1-hour cache-write rate beside the
//! 5-minute one when they differ, and the long-prompt prices.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use fake_upstream::FakeConfig;
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, SESSION_SECRET_A, TestGateway, sign_in_gateway};
use serde_json::{Value, json};

async fn gateway() -> TestGateway {
    TestGateway::start_with(FakeConfig::default(), |url: &str, db: &Path| {
        format!(
            r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - {{name: cheap, provider: anthropic, base_url: "{url}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
models:
  - {{id: claude-sonnet-4-6, upstream_model: {{cheap: deepseek-chat}}}}
  - {{id: claude-haiku-4-5, upstream_model: {{cheap: qwen3-coder}}}}
pricing:
  overrides:
    - {{upstream: cheap, model: deepseek-chat, input: 1, output: 2, cache_write: 1}}
    - {{model: deepseek-chat, input: 100, output: 100, cache_write: 100}}
  default: {{input: 7, output: 9}}
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
"#,
            db = db.display()
        )
    })
    .await
}

fn ask(model: &str) -> serde_json::Value {
    json!({"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test]
async fn upstream_models_cost_what_their_operator_priced_them() {
    let gw = gateway().await;
    for model in ["claude-sonnet-4-6", "claude-haiku-4-5", "claude-haiku-4-5"] {
        let resp = gw.messages(ask(model)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        resp.bytes().await.unwrap();
    }
    let rows = gw.usage_rows(3).await;
    let cost = |model: &str| -> Vec<u64> {
        rows.iter()
            .filter(|r| r.model == model)
            .map(|r| r.cost_micro_usd)
            .collect()
    };
    // The fake reports 25 input and 8 output tokens.
    // deepseek-chat on `cheap`: $1 and $2 per million (the upstream's own override).
    assert_eq!(cost("claude-sonnet-4-6"), [25 + 16]);
    // qwen3-coder: nobody priced it, so `pricing.default`, $7 and $9 per million.
    assert_eq!(cost("claude-haiku-4-5"), [175 + 72, 175 + 72]);
    let flagged = gw.events.named("pricing.unknown_model");
    assert_eq!(flagged.len(), 1, "flagged once: {flagged:?}");
    assert_eq!(flagged[0]["model"], "qwen3-coder");
}

#[tokio::test]
async fn pushed_model_pricing_carries_one_hour_writes_and_long_prompts() {
    let extra = "managed:\n  policies:\n    - match: {}\n      cli: {env: {TEAM: all}}\npricing:\n  multiplier: '0.9'\n  overrides:\n    - {upstream: primary, model: claude-sonnet-4-6, input: 3, output: 15, cache_read: 0.3, cache_write_5m: 3.75, cache_write_1h: 6, long_prompt: {above_prompt_tokens: 200000, input: 6, output: 22.5, cache_read: 0.6, cache_write_5m: 7.5, cache_write_1h: 12}}\n    - {upstream: primary, model: claude-haiku-4-5, input: '1', output: 5, cache_read: 0.1, cache_write: 1.25}\n    - {upstream: primary, model: claude-opus-4-7, input: 5, output: 25, cache_read: 0.5, cache_write: 10, cache_write_5m: 6.25}\n";
    let s = sign_in_gateway(&[SESSION_SECRET_A], extra).await;
    let token =
        gatehouse_tests::session_token(&s.origin, "alice", "alice@corp.example", &["engineering"]);
    let settings: Value =
        s.gw.client
            .get(s.gw.url("/managed/settings"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let pricing = &settings["settings"]["modelPricing"];
    assert_eq!(pricing["multiplier"], 0.9, "{settings}");
    let rows = &pricing["overrides"];
    // Different 5-minute and 1-hour rates: both, beside `cacheWrite` (the 5-minute one).
    assert_eq!(
        rows["claude-sonnet-4-6"],
        json!({
            "input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75,
            "cacheWrite5m": 3.75, "cacheWrite1h": 6.0,
            "longPrompt": {"abovePromptTokens": 200000, "input": 6.0, "output": 22.5,
                "cacheRead": 0.6, "cacheWrite5m": 7.5, "cacheWrite1h": 12.0}
        })
    );
    // One rate for both: `cacheWrite` alone.
    assert_eq!(
        rows["claude-haiku-4-5"],
        json!({"input": 1.0, "output": 5.0, "cacheRead": 0.1, "cacheWrite": 1.25})
    );
    // `cache_write` is the 1-hour rate when only `cache_write_5m` is set.
    assert_eq!(rows["claude-opus-4-7"]["cacheWrite"], 6.25);
    assert_eq!(rows["claude-opus-4-7"]["cacheWrite5m"], 6.25);
    assert_eq!(rows["claude-opus-4-7"]["cacheWrite1h"], 10.0);
}

/// The fake reports 25 input, 8 output, 1000 five-minute and 2000 one-hour cache-write
/// tokens: a prompt of 3025 tokens. Each kind is charged at the override's own rate, and
/// the long-prompt rates once the prompt passes `above_prompt_tokens`.
#[tokio::test]
async fn one_hour_writes_and_long_prompts_are_charged_at_their_own_rates() {
    let fake = FakeConfig {
        cache_creation_5m_tokens: 1000,
        cache_creation_1h_tokens: 2000,
        ..FakeConfig::default()
    };
    let gw = TestGateway::start_with(fake, |url: &str, db: &Path| {
        let rates = "input: 3, output: 15, cache_read: 0.3, cache_write_5m: 3.75, cache_write_1h: 6";
        let long = "input: 6, output: 22.5, cache_read: 0.6, cache_write_5m: 7.5, cache_write_1h: 12";
        format!(
            r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - {{name: main, provider: anthropic, base_url: "{url}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
pricing:
  overrides:
    - {{upstream: main, model: claude-sonnet-4-6, {rates}, long_prompt: {{above_prompt_tokens: 3025, {long}}}}}
    - {{upstream: main, model: claude-haiku-4-5, {rates}, long_prompt: {{above_prompt_tokens: "3024", {long}}}}}
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
"#,
            db = db.display()
        )
    })
    .await;
    for model in ["claude-sonnet-4-6", "claude-haiku-4-5"] {
        let resp = gw.messages(ask(model)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        resp.bytes().await.unwrap();
    }
    let rows = gw.usage_rows(2).await;
    let cost = |model: &str| {
        rows.iter()
            .find(|r| r.model == model)
            .unwrap()
            .cost_micro_usd
    };
    // 3025 is not above 3025: $3, $15, $3.75 (5 min) and $6 (1 h) per million.
    assert_eq!(cost("claude-sonnet-4-6"), 75 + 120 + 3_750 + 12_000);
    // Above 3024: every token at the long-prompt rates.
    assert_eq!(cost("claude-haiku-4-5"), 150 + 180 + 7_500 + 24_000);
}
