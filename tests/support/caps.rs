//! Spend-cap helpers shared by the spend tests: the `admin` block with its keys, setting a
//! cap through the admin API, minting a signed-in person's session token, and sending a
//! Messages request as that person. Each takes the gateway's base URL, so it serves a
//! single gateway and each replica of a group alike.

use serde_json::{Value, json};

pub const WRITE_KEY: &str = "admin-write-key-0123456789abcdef0123456789";
pub const READ_KEY: &str = "admin-read-key-0123456789abcdef01234567890";
/// The `admin` block with [`WRITE_KEY`], [`READ_KEY`] and the `platform` admin group.
pub const ADMIN: &str = "admin:\n  write_keys: [{id: ops, key: admin-write-key-0123456789abcdef0123456789}]\n  read_keys: [{id: audit, key: admin-read-key-0123456789abcdef01234567890}]\n  admin_groups: [platform]\n  blocked_message: Ask the platform team for more.\n";

/// A session token for `sub` (email `<sub>@corp.example`) as the gateway at `origin` mints.
pub fn token(origin: &str, sub: &str, groups: &[&str]) -> String {
    crate::session_token(origin, sub, &format!("{sub}@corp.example"), groups)
}

/// Creates or replaces a cap with the write key; the answer must be 200.
pub async fn set_limit(client: &reqwest::Client, base_url: &str, body: Value) -> Value {
    let r = client
        .post(format!("{base_url}/v1/organizations/spend_limits"))
        .header("x-api-key", WRITE_KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "setting {body}");
    r.json().await.unwrap()
}

/// A non-streaming Sonnet request for `max_tokens`.
pub fn msg(max_tokens: u64) -> Value {
    json!({"model": "claude-sonnet-4-6", "max_tokens": max_tokens, "stream": false, "messages": [{"role": "user", "content": "hi"}]})
}

/// `POST /v1/messages` with a session token.
/// `GET /v1/me/spend` for `token`: the daily period's standing.
pub async fn my_daily(client: &reqwest::Client, base_url: &str, token: &str) -> Value {
    let v: Value = client
        .get(format!("{base_url}/v1/me/spend"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["periods"][0].clone()
}

pub async fn infer(
    client: &reqwest::Client,
    base_url: &str,
    token: &str,
    body: &Value,
) -> reqwest::Response {
    client
        .post(format!("{base_url}/v1/messages"))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// The built-in prices (no overrides, multiplier 1).
pub fn list_prices() -> gatehouse_engine::metering::pricing::Pricing {
    gatehouse_engine::metering::pricing::Pricing::new(gatehouse_engine::config::PricingConfig {
        multiplier: 1.0,
        overrides: vec![],
        default: None,
    })
}

/// What admission reserves for `body` (its worst case at list prices).
pub fn worst_case(body: &Value) -> u64 {
    let model = body["model"].as_str().unwrap();
    gatehouse_engine::spend::worst_case_micro(
        &list_prices(),
        &gatehouse_engine::metering::pricing::PricedAs::model(model),
        serde_json::to_vec(body).unwrap().len(),
        body["max_tokens"].as_u64(),
        &Default::default(),
    )
}
