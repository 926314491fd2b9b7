//! Pricing per upstream model: a non-Claude model behind a Claude id costs its own
//! override (scoped to the upstream that served it), an unpriced one `pricing.default`,
//! flagged once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use fake_upstream::FakeConfig;
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway};
use serde_json::json;

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
