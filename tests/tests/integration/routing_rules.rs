//! Request-aware rules: thinking, long context, tools, images and background requests each
//! land on their configured route — checked through the admin-only explain endpoint and
//! with real requests (the fakes record who answered) — and everything else goes
//! cheapest-first.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_tests::caps::{ADMIN, READ_KEY};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, load};
use serde_json::{Value, json};

struct Three {
    gw: TestGateway,
    bedrock: FakeUpstream,
    cheap: FakeUpstream,
}

/// `anthropic` (the gateway's `fake`), `bedrock` and `cheap`, with the README's example
/// rules.
async fn three() -> Three {
    let anthropic = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let bedrock = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let cheap = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - {{name: anthropic, provider: anthropic, base_url: "{a}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
  - {{name: bedrock, provider: anthropic, base_url: "{b}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
  - {{name: cheap, provider: anthropic, base_url: "{c}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
{ADMIN}
routing:
  strategy: cheapest
  upstreams: {{cheap: {{cost_weight: 0.5}}}}
  rules:
    - {{name: thinking, when: {{thinking: true}}, model: claude-opus-4-8, upstreams: [anthropic]}}
    - {{name: long-context, when: {{input_tokens_over: 4000}}, model: claude-opus-4-8, upstreams: [anthropic]}}
    - {{name: background, when: {{background: true}}, model: claude-haiku-4-5, upstreams: [bedrock]}}
    - {{name: web-search, when: {{tools: [web_search]}}, upstreams: [anthropic]}}
    - {{name: images, when: {{images: true}}, upstreams: [bedrock]}}
    - {{name: sdk-scripts, when: {{client: [sdk], family: [opus]}}, model: claude-sonnet-4-6}}
"#,
        db = dir.path().join("g.db").display(),
        a = anthropic.url(),
        b = bedrock.url(),
        c = cheap.url(),
    );
    let config = load(&yaml, dir.path());
    let gw = TestGateway::start_config(config, anthropic, dir).await;
    Three { gw, bedrock, cheap }
}

fn body(model: &str) -> Value {
    json!({"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]})
}

/// The requests the routed-to cases need.
fn cases() -> Vec<(
    &'static str,
    Value,
    Option<&'static str>,
    &'static str,
    &'static str,
)> {
    let sonnet = "claude-sonnet-4-6";
    let mut thinking = body(sonnet);
    thinking["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
    let mut long = body(sonnet);
    long["messages"][0]["content"] = json!("word ".repeat(4000));
    let mut search = body(sonnet);
    search["tools"] = json!([{"type": "web_search_20250305", "name": "web_search", "max_uses": 1}]);
    let mut image = body(sonnet);
    image["messages"][0]["content"] = json!([
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "text", "text": "what is this?"}
    ]);
    // (rule, body, user-agent, upstream, model it is served with)
    vec![
        ("thinking", thinking, None, "anthropic", "claude-opus-4-8"),
        ("long-context", long, None, "anthropic", "claude-opus-4-8"),
        (
            "background",
            body("claude-haiku-4-5"),
            Some("claude-cli/2.1.333 (external, cli)"),
            "bedrock",
            // Sent as its dated first-party id, as the reference sends it.
            "claude-haiku-4-5-20251001",
        ),
        ("web-search", search, None, "anthropic", sonnet),
        ("images", image, None, "bedrock", sonnet),
        (
            "sdk-scripts",
            body("claude-opus-4-8"),
            Some("Anthropic/JS 0.60.0"),
            "cheap",
            sonnet,
        ),
    ]
}

async fn explain(gw: &TestGateway, key: &str, b: &Value, ua: Option<&str>) -> reqwest::Response {
    let mut req = gw
        .client
        .post(gw.url("/v1/gatehouse/route/explain"))
        .header("x-api-key", key)
        .json(b);
    if let Some(ua) = ua {
        req = req.header("user-agent", ua);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn each_rule_lands_on_its_route_in_explain_and_for_real() {
    let t = three().await;
    let gw = &t.gw;
    for (n, (rule, b, ua, upstream, model)) in cases().into_iter().enumerate() {
        // Explained, nothing sent.
        let before = gw.fake.requests().len() + t.bedrock.requests().len();
        let resp = explain(gw, READ_KEY, &b, ua).await;
        assert_eq!(resp.status(), 200, "{rule}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["rule"], rule, "{v}");
        assert_eq!(v["candidates"][0]["upstream"], upstream, "{rule}: {v}");
        assert_eq!(v["candidates"][0]["upstream_model"], model, "{rule}");
        assert_eq!(v["candidates"][0]["health"], "send");
        assert_eq!(
            gw.fake.requests().len() + t.bedrock.requests().len(),
            before,
            "explain sends nothing"
        );
        // For real: the fake that answered saw the served model.
        let mut req = gw.messages(b.clone());
        if let Some(ua) = ua {
            req = req.header("user-agent", ua);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200, "{rule}");
        assert_eq!(resp.headers()["x-gatehouse-upstream"], upstream, "{rule}");
        let fake = match upstream {
            "anthropic" => &gw.fake,
            "bedrock" => &t.bedrock,
            _ => &t.cheap,
        };
        assert_eq!(
            fake.requests().last().unwrap().body["model"],
            model,
            "{rule}"
        );
        let row = &gw.usage_rows(n + 1).await[0];
        assert!(
            row.route_reason.contains(&format!("rule {rule}")),
            "{rule}: {}",
            row.route_reason
        );
        assert_eq!(row.upstream_model.as_deref(), Some(model));
        assert_eq!(row.model, b["model"], "the row keeps the requested model");
    }
}

#[tokio::test]
async fn without_a_rule_everything_else_goes_cheapest_first() {
    let t = three().await;
    let b = body("claude-sonnet-4-6");
    let v: Value = explain(&t.gw, READ_KEY, &b, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["rule"], Value::Null);
    assert_eq!(v["strategy"], "cheapest");
    let order: Vec<&str> = v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["upstream"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["cheap", "anthropic", "bedrock"]);
    let resp = t.gw.messages(b).send().await.unwrap();
    assert_eq!(resp.headers()["x-gatehouse-upstream"], "cheap");
    assert_eq!(t.cheap.requests().len(), 1);
}

#[tokio::test]
async fn explain_is_admin_only() {
    let t = three().await;
    let b = body("claude-sonnet-4-6");
    assert_eq!(explain(&t.gw, CLIENT_KEY, &b, None).await.status(), 401);
    let resp =
        t.gw.client
            .post(t.gw.url("/v1/gatehouse/route/explain"))
            .json(&b)
            .send()
            .await
            .unwrap();
    assert_eq!(resp.status(), 401);
}

/// Claude Code itself: its main requests and its background (haiku) requests are each
/// routed as the rules say, recognised by its user-agent.
#[tokio::test]
async fn claude_codes_main_and_background_requests_follow_the_rules() {
    let claude = gatehouse_tests::e2e_bin("claude");
    assert!(
        claude.exists(),
        "run scripts/test.sh (it installs tests/e2e)"
    );
    let main = FakeUpstream::start(FakeConfig {
        reply_text: "GATEHOUSE-RULES-OK".into(),
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let background = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - {{name: anthropic, provider: anthropic, base_url: "{a}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
  - {{name: bedrock, provider: anthropic, base_url: "{b}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
routing:
  rules:
    - {{name: background, when: {{background: true, client: [claude-code]}}, upstreams: [bedrock]}}
    - {{name: main, when: {{client: [claude-code]}}, upstreams: [anthropic]}}
"#,
        db = dir.path().join("g.db").display(),
        a = main.url(),
        b = background.url(),
    );
    let config = load(&yaml, dir.path());
    let gw = TestGateway::start_config(config, main, dir).await;
    // Print mode makes no background call of its own: the second run asks Claude Code for
    // its small, fast model, which is what its background calls use.
    for model in ["claude-sonnet-4-6", "claude-haiku-4-5"] {
        let home = tempfile::tempdir().unwrap();
        let child = tokio::process::Command::new(&claude)
            .args([
                "-p",
                "Reply with the magic words.",
                "--output-format",
                "json",
            ])
            .args(["--model", model])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", home.path())
            .env("TERM", "dumb")
            .env("ANTHROPIC_BASE_URL", gw.handle.base_url())
            .env("ANTHROPIC_AUTH_TOKEN", CLIENT_KEY)
            .env("ANTHROPIC_SMALL_FAST_MODEL", "claude-haiku-4-5")
            .env("CLAUDE_CODE_MAX_RETRIES", "0")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            child.wait_with_output(),
        )
        .await
        .expect("claude -p finished within 120 s")
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let models = |f: &FakeUpstream| -> Vec<String> {
        f.requests()
            .iter()
            .filter(|r| r.path == "/v1/messages")
            .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let (on_main, on_background) = (models(&gw.fake), models(&background));
    assert!(!on_main.is_empty() && !on_background.is_empty());
    assert!(on_main.iter().all(|m| !m.contains("haiku")), "{on_main:?}");
    assert!(
        on_background.iter().all(|m| m.contains("haiku")),
        "{on_background:?}"
    );
    let rows = gw.usage_rows(on_main.len() + on_background.len()).await;
    for r in &rows {
        let rule = if r.model.contains("haiku") {
            "background"
        } else {
            "main"
        };
        assert!(
            r.route_reason.contains(&format!("rule {rule}")),
            "{}",
            r.route_reason
        );
    }
}
