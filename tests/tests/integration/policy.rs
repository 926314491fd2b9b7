//! Managed policy per role: `/managed/settings` (checksum, ETag, 304), `/user/bootstrap`,
//! and the policy model allowlist on `/v1/models` and inference.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gatehouse_tests::{
    CLIENT_KEY, SESSION_SECRET_A, SignInGateway, e2e_dir, sign_in_gateway, sonnet,
};
use serde_json::{Value, json};

const POLICIES: &str = r#"
managed:
  policies:
    - match: {groups: [engineering]}
      cli:
        availableModels: [opus, claude-sonnet-4-6]
        permissions: {deny: ["Bash(rm:*)", "WebFetch"], ask: ["Bash(git push:*)"]}
        env: {TEAM: eng}
      desktop: {disabledBuiltinTools: [computer], desktopHome: standard, builtinToolPolicy: {WebSearch: ask}, someNewDesktopKey: 1}
    - match: {email_domain: corp.example}
      cli:
        availableModels: [haiku]
        permissions: {deny: []}
    - match: {}
      cli:
        permissions: {deny: [WebFetch, "mcp__evil__x"]}
        env: {CLAUDE_CODE_ENABLE_GATEWAY_MODEL_DISCOVERY: "1", TEAM: base}
        sandbox: {network: {allowedDomains: [github.com]}}
"#;

fn token(s: &SignInGateway, sub: &str, email: &str, groups: &[&str]) -> String {
    gatehouse_tests::session_token(&s.origin, sub, email, groups)
}

async fn get(s: &SignInGateway, path: &str, bearer: &str, inm: Option<&str>) -> reqwest::Response {
    let mut r = s.gw.client.get(s.gw.url(path)).bearer_auth(bearer);
    if let Some(v) = inm {
        r = r.header("if-none-match", v);
    }
    r.send().await.unwrap()
}

/// The checksum as Claude Code computes it: JavaScript, keys sorted at every level.
fn js_checksum(settings: &Value) -> String {
    let script = r#"
const sort = (v) => Array.isArray(v) ? v.map(sort) : (v && typeof v === 'object')
  ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort(v[k])])) : v;
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
console.log('sha256:' + require('crypto').createHash('sha256').update(JSON.stringify(sort(input))).digest('hex'));
"#;
    let mut child = std::process::Command::new("node")
        .args(["-e", script])
        .current_dir(e2e_dir())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut child.stdin.take().unwrap(),
        settings.to_string().as_bytes(),
    )
    .unwrap();
    String::from_utf8(child.wait_with_output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_owned()
}

#[tokio::test]
async fn two_roles_get_different_settings_and_models() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], POLICIES).await;
    let alice = token(
        &s,
        "alice",
        "alice@corp.example",
        &["engineering", "claude-users"],
    );
    let bob = token(&s, "bob", "bob@corp.example", &["sales"]);
    let zed = token(&s, "zed", "zed@partner.example", &["contractors"]);

    let r = get(&s, "/managed/settings", &alice, None).await;
    assert_eq!(r.status(), 200);
    let etag = r.headers()["etag"].to_str().unwrap().to_owned();
    let body: Value = r.json().await.unwrap();
    let settings = &body["settings"];
    assert_eq!(
        settings["availableModels"],
        json!(["opus", "claude-sonnet-4-6"])
    );
    assert_eq!(
        settings["permissions"]["deny"],
        json!(["WebFetch", "mcp__evil__x", "Bash(rm:*)"])
    );
    assert_eq!(settings["permissions"]["ask"], json!(["Bash(git push:*)"]));
    assert_eq!(
        settings["env"],
        json!({"CLAUDE_CODE_ENABLE_GATEWAY_MODEL_DISCOVERY": "1", "TEAM": "eng"})
    );
    assert_eq!(
        settings["sandbox"]["network"]["allowedDomains"],
        json!(["github.com"])
    );
    // Checksum and ETag byte for byte as Claude Code computes them.
    let expected = js_checksum(settings);
    assert_eq!(body["checksum"], expected);
    assert_eq!(etag, format!("\"{expected}\""));
    assert!(body["uuid"].as_str().unwrap().len() == 36);

    let r = get(&s, "/managed/settings", &alice, Some(&etag)).await;
    assert_eq!(r.status(), 304);
    assert_eq!(r.headers()["etag"].to_str().unwrap(), etag);
    assert!(r.bytes().await.unwrap().is_empty());
    assert_eq!(
        get(&s, "/managed/settings", &alice, Some("\"sha256:0000\""))
            .await
            .status(),
        200
    );
    assert_eq!(
        get(&s, "/managed/settings", &alice, Some("*"))
            .await
            .status(),
        200,
        "`*` is answered as without the header"
    );

    // A role that tries to drop the base deny keeps it.
    let bob_settings: Value = get(&s, "/managed/settings", &bob, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        bob_settings["settings"]["permissions"]["deny"],
        json!(["WebFetch", "mcp__evil__x"])
    );
    assert_eq!(
        bob_settings["settings"]["availableModels"],
        json!(["haiku"])
    );
    assert_ne!(bob_settings["checksum"], body["checksum"]);
    let zed_settings: Value = get(&s, "/managed/settings", &zed, None)
        .await
        .json()
        .await
        .unwrap();
    assert!(
        zed_settings["settings"].get("availableModels").is_none(),
        "catch-all only"
    );

    // Model lists follow the policy.
    let ids = |v: Value| {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let a_models = ids(get(&s, "/v1/models", &alice, None)
        .await
        .json()
        .await
        .unwrap());
    assert!(
        a_models.contains(&"claude-opus-4-8".to_owned())
            && a_models.contains(&"claude-sonnet-4-6".to_owned())
    );
    assert!(
        !a_models
            .iter()
            .any(|m| m.contains("haiku") || m == "claude-sonnet-4-5"),
        "{a_models:?}"
    );
    let b_models = ids(get(&s, "/v1/models", &bob, None)
        .await
        .json()
        .await
        .unwrap());
    assert!(
        !b_models.is_empty() && b_models.iter().all(|m| m.contains("haiku")),
        "{b_models:?}"
    );

    // Inference: the policy layer refuses first, and says so.
    let infer = |t: String, model: &str| {
        let mut body = sonnet(false);
        body["model"] = model.into();
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .bearer_auth(t)
            .json(&body)
            .send()
    };
    let r = infer(bob.clone(), "claude-sonnet-4-6").await.unwrap();
    assert_eq!(r.status(), 400);
    let err: Value = r.json().await.unwrap();
    assert_eq!(
        err["error"]["message"],
        "model claude-sonnet-4-6 is not in your role's availableModels allowlist",
        "the reference's wording"
    );
    assert_eq!(err["error"]["type"], "invalid_request_error");
    assert_eq!(
        infer(bob.clone(), "claude-haiku-4-5")
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        infer(alice.clone(), "claude-opus-4-8")
            .await
            .unwrap()
            .status(),
        200
    );
    let r = infer(zed.clone(), "gpt-4o").await.unwrap();
    let err: Value = r.json().await.unwrap();
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("operator's model allowlist"),
        "{err}"
    );
    assert_eq!(
        s.gw.fake.requests().len(),
        2,
        "refused models never reach the upstream"
    );
    let layers: Vec<Value> =
        s.gw.events
            .named("access.denied")
            .iter()
            .map(|e| e["layer"].clone())
            .collect();
    assert_eq!(layers, vec![json!("policy"), json!("operator")]);

    // Static keys get no managed settings.
    let r =
        s.gw.client
            .get(s.gw.url("/managed/settings"))
            .header("x-api-key", CLIENT_KEY)
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 403);
}

#[tokio::test]
async fn desktop_bootstrap_needs_a_desktop_block() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], POLICIES).await;
    let alice = token(&s, "alice", "alice@corp.example", &["engineering"]);
    let bob = token(&s, "bob", "bob@corp.example", &["sales"]);
    let r = get(&s, "/user/bootstrap", &alice, None).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-gateway-spend-admin"], "false");
    let doc: Value = r.json().await.unwrap();
    assert_eq!(doc["inferenceProvider"], "gateway");
    assert_eq!(doc["inferenceGatewayBaseUrl"], s.origin);
    assert_eq!(doc["inferenceCredentialKind"], "interactive");
    assert_eq!(
        doc["disabledBuiltinTools"],
        json!(["WebFetch", "computer"]),
        "argument-less, non-MCP deny rules plus the overlay"
    );
    assert_eq!(doc["coworkEgressAllowedHosts"], json!(["github.com"]));
    // The whole overlay is served: every servable key, and keys newer than the gateway's
    // Desktop schema as written.
    assert_eq!(doc["desktopHome"], "standard");
    assert_eq!(doc["builtinToolPolicy"], json!({"WebSearch": "ask"}));
    assert_eq!(doc["someNewDesktopKey"], 1);
    assert!(
        doc["models"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| !m["id"].as_str().unwrap().contains("haiku"))
    );
    let expires = chrono::DateTime::parse_from_rfc3339(doc["expiresAt"].as_str().unwrap()).unwrap();
    let ttl = expires.with_timezone(&chrono::Utc) - chrono::Utc::now();
    assert!(ttl.num_minutes() > 55 && ttl.num_minutes() <= 60, "{ttl}");
    assert!(
        doc.get("otlpEndpoint").is_none(),
        "no telemetry forwarding configured"
    );

    let r = get(&s, "/user/bootstrap", &bob, None).await;
    assert_eq!(r.status(), 404);
    assert_eq!(
        s.gw.events.named("desktop_bootstrap.denied")[0]["reason"],
        "policy_has_no_desktop_block"
    );
}

const RULES: &str = r#"
managed:
  policy_mode: layered
  policies:
    - match: {groups: [exact]}
      code:
        availableModels: [claude-opus-4, sonnet]
        availableModelsMatch: exact
    - match: {groups: [no-haiku]}
      code:
        deniedModels: [haiku]
    - match: {}
      code:
        deniedModels: [claude-opus-4-6]
"#;

/// `deniedModels` (merged with the base's, and with `layered` with every matching
/// policy's) and `availableModelsMatch: exact`, on the top-level model and on nested
/// `model` fields, with the reference's errors; `code:` policies reach Claude Desktop.
#[tokio::test]
async fn denied_models_and_exact_matching_are_enforced() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], RULES).await;
    let exact = token(&s, "e", "e@corp.example", &["exact"]);
    let both = token(&s, "b", "b@corp.example", &["exact", "no-haiku"]);
    let base = token(&s, "z", "z@corp.example", &[]);
    let infer = |t: &str, body: Value| {
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .bearer_auth(t)
            .json(&body)
            .send()
    };
    let ask = |model: &str| {
        let mut body = sonnet(false);
        body["model"] = model.into();
        body
    };
    let message = |r: reqwest::Response| async move {
        assert_eq!(r.status(), 400);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["type"], "invalid_request_error");
        v["error"]["message"].as_str().unwrap().to_owned()
    };

    // The catch-all's denylist applies to everyone, merged under each role.
    assert_eq!(
        message(infer(&base, ask("claude-opus-4-6")).await.unwrap()).await,
        "model claude-opus-4-6 is blocked by your role's deniedModels denylist"
    );
    assert_eq!(
        infer(&base, ask("claude-haiku-4-5"))
            .await
            .unwrap()
            .status(),
        200
    );
    // exact: `claude-opus-4` allows Opus 4 only, not Opus 4.8; the family alias allows
    // every Sonnet.
    assert_eq!(
        message(infer(&exact, ask("claude-opus-4-8")).await.unwrap()).await,
        "model claude-opus-4-8 is not in your role's availableModels allowlist"
    );
    assert_eq!(
        infer(&exact, ask("claude-sonnet-4-6"))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        message(infer(&exact, ask("claude-opus-4-6")).await.unwrap()).await,
        "model claude-opus-4-6 is blocked by your role's deniedModels denylist"
    );
    // layered: both roles' rules apply.
    assert_eq!(
        message(infer(&both, ask("claude-haiku-4-5")).await.unwrap()).await,
        "model claude-haiku-4-5 is blocked by your role's deniedModels denylist"
    );
    // A model named inside the body is checked too.
    let mut nested = ask("claude-sonnet-4-6");
    nested["context_management"] = json!({"edits": [{"type": "x", "model": "claude-haiku-4-5"}]});
    assert_eq!(
        message(infer(&both, nested.clone()).await.unwrap()).await,
        "context_management.edits.0.model: model claude-haiku-4-5 is blocked by your role's deniedModels denylist"
    );
    assert_eq!(
        s.gw.fake.requests().len(),
        2,
        "refused requests never reach the upstream"
    );

    // /v1/models leaves out what the role may not use.
    let ids: Vec<String> = get(&s, "/v1/models", &both, None)
        .await
        .json::<Value>()
        .await
        .unwrap()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        ids.iter().any(|m| m.starts_with("claude-sonnet")),
        "{ids:?}"
    );
    assert!(
        !ids.iter()
            .any(|m| m.contains("haiku") || m == "claude-opus-4-8" || m == "claude-opus-4-6"),
        "{ids:?}"
    );

    // The merged layered settings, and `code:` settings served to a Claude Desktop session.
    let desktop_ua = "claude-cli/2.1.333 (external, claude-desktop-3p)";
    let r =
        s.gw.client
            .get(s.gw.url("/managed/settings"))
            .bearer_auth(&both)
            .header("user-agent", desktop_ua)
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["settings"]["deniedModels"],
        json!(["claude-opus-4-6", "haiku"])
    );
    assert_eq!(body["settings"]["availableModelsMatch"], "exact");
    // `If-None-Match: *` under a code policy: settings that must not be missing.
    let r = get(&s, "/managed/settings", &both, Some("*")).await;
    assert_eq!(r.status(), 304);
    assert_eq!(r.headers()["cache-control"], "no-store");
    assert!(r.headers().contains_key("x-cc-gateway-version"));
}

/// A `cli:` policy is not served to Claude Desktop sessions unless `serve_to_desktop`.
#[tokio::test]
async fn cli_policies_are_withheld_from_desktop_sessions() {
    let s = sign_in_gateway(
        &[SESSION_SECRET_A],
        "managed:\n  policies:\n    - match: {groups: [served]}\n      cli: {model: claude-opus-4-8}\n      serve_to_desktop: true\n    - cli: {model: claude-sonnet-4-6}\n",
    )
    .await;
    let desktop_ua = "claude-cli/2.1.333 (external, claude-desktop-3p)";
    let fetch = |t: String, ua: &'static str| {
        s.gw.client
            .get(s.gw.url("/managed/settings"))
            .bearer_auth(t)
            .header("user-agent", ua)
            .send()
    };
    let plain = token(&s, "p", "p@corp.example", &[]);
    let served = token(&s, "s", "s@corp.example", &["served"]);
    assert_eq!(
        fetch(plain.clone(), "claude-cli/2.1.333 (external, cli)")
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(fetch(plain, desktop_ua).await.unwrap().status(), 404);
    let r = fetch(served, desktop_ua).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.json::<Value>().await.unwrap()["settings"]["model"],
        "claude-opus-4-8"
    );
}
