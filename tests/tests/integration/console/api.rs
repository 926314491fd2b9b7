//! The admin API calls the console makes, against real usage: the directory and a
//! person's page, the overview, analytics that agree with the cost report, CSV exports
//! (with formula-looking names defused), audit filters, the limit preview, upstreams and
//! the policies as served.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gatehouse_tests::*;
use serde_json::{Value, json};

use super::{WRITE_KEY, gateway, groups};

const POLICY: &str = "managed:\n  policies:\n    - match: {groups: [engineering]}\n      cli: {permissions: {deny: [\"WebFetch\"]}}\n    - cli: {cleanupPeriodDays: 20}\n";

async fn admin(s: &SignInGateway, path: &str) -> (u16, Value) {
    let r =
        s.gw.client
            .get(s.gw.url(path))
            .header("x-api-key", WRITE_KEY)
            .send()
            .await
            .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn admin_text(s: &SignInGateway, path: &str) -> (u16, String, String) {
    let r =
        s.gw.client
            .get(s.gw.url(path))
            .header("x-api-key", WRITE_KEY)
            .send()
            .await
            .unwrap();
    let status = r.status().as_u16();
    let kind = r
        .headers()
        .get("content-disposition")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, kind, r.text().await.unwrap())
}

/// Alice signs in (device flow) and sends `n` requests; waits for their usage rows.
async fn alice_uses(s: &SignInGateway, n: usize) -> String {
    let (status, tokens) = device_sign_in(s, "alice").await;
    assert_eq!(status, 200, "{tokens}");
    let token = tokens["access_token"].as_str().unwrap().to_owned();
    for _ in 0..n {
        let r =
            s.gw.client
                .post(s.gw.url("/v1/messages"))
                .bearer_auth(&token)
                .header("x-claude-code-session-id", "sess-console-1")
                .json(&sonnet(false))
                .send()
                .await
                .unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    s.gw.usage_rows(n).await;
    token
}

#[tokio::test]
async fn the_directory_a_person_and_the_overview_show_real_usage() {
    let s = gateway(POLICY).await;
    groups(
        &s,
        "alice",
        &["claude-users", "engineering", "=cmd|' /C calc'!A0"],
    )
    .await;
    alice_uses(&s, 3).await;
    let (status, users) = admin(&s, "/v1/organizations/users?q=ALICE").await;
    assert_eq!(status, 200, "{users}");
    assert_eq!(users["data"][0]["id"], "alice", "{users}");
    assert!(users["data"][0]["last_seen_at"].is_string());
    let (_, none) = admin(&s, "/v1/organizations/users?q=nobody").await;
    assert_eq!(none["data"], json!([]));
    let (status, one) = admin(&s, "/v1/organizations/users/alice").await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["email"], "alice@corp.example");
    assert_eq!(one["models"][0]["requests"], 3, "{one}");
    assert!(one["models"][0]["cost_micro_usd"].as_u64().unwrap() > 0);
    assert_eq!(one["sessions"][0]["session_id"], "sess-console-1", "{one}");
    assert_eq!(one["standings"].as_array().unwrap().len(), 3, "{one}");
    let (status, _) = admin(&s, "/v1/organizations/users/nobody").await;
    assert_eq!(status, 404);
    let (status, ov) = admin(&s, "/v1/organizations/overview").await;
    assert_eq!(status, 200, "{ov}");
    assert_eq!(ov["requests"]["last_24h"], 3, "{ov}");
    assert_eq!(ov["daily"].as_array().unwrap().len(), 30);
    assert_eq!(ov["daily"][29]["requests"], 3, "{ov}");
    assert_eq!(ov["by_upstream"][0]["upstream"], "primary", "{ov}");
    assert_eq!(ov["upstreams"][0]["name"], "primary");
    assert!(ov["spend"]["today_micro_usd"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn analytics_agree_with_the_cost_report_and_export_as_defused_csv() {
    let s = gateway("").await;
    groups(
        &s,
        "alice",
        &["claude-users", "engineering", "=cmd|' /C calc'!A0"],
    )
    .await;
    alice_uses(&s, 2).await;
    let (status, by_user) = admin(&s, "/v1/organizations/analytics/usage?group_by=user").await;
    assert_eq!(status, 200, "{by_user}");
    let alice = by_user["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "alice")
        .unwrap_or_else(|| panic!("{by_user}"))
        .clone();
    assert_eq!(alice["requests"], 2);
    let today = chrono::Utc::now().date_naive();
    let (status, cost) = admin(
        &s,
        &format!("/v1/organizations/analytics/cost?starting_at={today}T00:00:00Z&group_by[]=actor"),
    )
    .await;
    assert_eq!(status, 200, "{cost}");
    let cents: f64 = cost["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["group"]["actor"]["user_id"] == "alice")
        .map(|r| {
            r["cost"]["amount"]
                .as_str()
                .unwrap()
                .parse::<f64>()
                .unwrap()
        })
        .sum();
    let micro = alice["cost_micro_usd"].as_u64().unwrap();
    assert!(micro > 0);
    assert!(
        (cents * 10_000.0 - micro as f64).abs() < 1.0,
        "cost report {cents} cents, analytics {micro} micro-USD: {cost}"
    );
    let (_, by_day) = admin(&s, "/v1/organizations/analytics/usage?group_by=day").await;
    let day = by_day["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == today.to_string())
        .unwrap()
        .clone();
    assert_eq!(day["cost_micro_usd"].as_u64(), Some(micro), "{by_day}");
    // CSV: the same rows, and a group named like a formula is defused.
    let (status, disposition, csv) = admin_text(
        &s,
        "/v1/organizations/analytics/usage?group_by=group&format=csv",
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        disposition.starts_with("attachment; filename=\"gatehouse-usage-by-group-"),
        "{disposition}"
    );
    assert!(csv.starts_with("key,requests,errors,"), "{csv}");
    assert!(
        csv.contains("\"'=cmd|' /C calc'!A0\"") || csv.contains("'=cmd|' /C calc'!A0"),
        "{csv}"
    );
    assert!(!csv.contains("\n=cmd"), "{csv}");
    for (by, key) in [
        ("model", "claude-sonnet-4"),
        ("upstream", "primary"),
        ("session", "sess-console-1"),
    ] {
        let (status, r) = admin(
            &s,
            &format!("/v1/organizations/analytics/usage?group_by={by}"),
        )
        .await;
        assert_eq!(status, 200, "{r}");
        assert!(
            r["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["key"].as_str().unwrap().starts_with(key)),
            "{by}: {r}"
        );
    }
    let (status, bad) = admin(&s, "/v1/organizations/analytics/usage?group_by=planet").await;
    assert_eq!(status, 400, "{bad}");
    let (status, _) = admin(
        &s,
        "/v1/organizations/analytics/usage?starting_at=2026-01-01T00:00:00Z&ending_at=2026-03-01T00:00:00Z",
    )
    .await;
    assert_eq!(status, 400, "more than 31 days");
}

#[tokio::test]
async fn the_limit_preview_says_what_saving_would_do_and_the_audit_filters_and_exports() {
    let s = gateway("").await;
    groups(&s, "alice", &["claude-users", "engineering"]).await;
    alice_uses(&s, 1).await;
    let post = |path: &'static str, body: Value| {
        let s = &s;
        async move {
            let r =
                s.gw.client
                    .post(s.gw.url(path))
                    .header("x-api-key", WRITE_KEY)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    let group_cap = json!({"scope": {"type": "rbac_group", "rbac_group_id": "engineering"}, "period": "monthly", "amount": "10000"});
    let (status, p) = post("/v1/organizations/spend_limits/preview", group_cap.clone()).await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(p["action"], "create");
    assert_eq!(p["binds"]["people"], 1, "{p}");
    assert_eq!(p["binds"]["sample"], json!(["alice"]));
    assert!(p["message"].as_str().unwrap().contains("$100.00"), "{p}");
    let (_, listed) = admin(&s, "/v1/organizations/spend_limits").await;
    assert_eq!(listed["data"], json!([]), "a preview saves nothing");
    let (status, _) = post("/v1/organizations/spend_limits", group_cap).await;
    assert_eq!(status, 200);
    let (_, p) = post(
        "/v1/organizations/spend_limits/preview",
        json!({"scope": {"type": "rbac_group", "rbac_group_id": "engineering"}, "period": "monthly", "amount": "20000"}),
    )
    .await;
    assert_eq!(p["action"], "update");
    assert_eq!(p["replaces"]["amount"], "10000", "{p}");
    let (status, bad) = post(
        "/v1/organizations/spend_limits/preview",
        json!({"period": "daily"}),
    )
    .await;
    assert_eq!(status, 400, "{bad}");
    let (status, _) = post(
        "/v1/organizations/spend_limits",
        json!({"scope": {"type": "user", "user_id": "=HYPERLINK(\"x\")"}, "period": "daily", "amount": "1"}),
    )
    .await;
    assert_eq!(status, 200);
    let (_, audit) = admin(
        &s,
        "/v1/organizations/spend_limits/audit?actor=admin-key:ops",
    )
    .await;
    assert_eq!(audit["data"].as_array().unwrap().len(), 2, "{audit}");
    let (_, audit) = admin(&s, "/v1/organizations/spend_limits/audit?actor=oidc:nobody").await;
    assert_eq!(audit["data"], json!([]));
    let (_, audit) = admin(
        &s,
        "/v1/organizations/spend_limits/audit?action=spend_limit.upsert&limit=1",
    )
    .await;
    assert_eq!(audit["has_more"], true, "{audit}");
    let (status, disposition, csv) =
        admin_text(&s, "/v1/organizations/spend_limits/audit?format=csv").await;
    assert_eq!(status, 200);
    assert!(disposition.contains("gatehouse-audit.csv"));
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(
        csv.starts_with("id,created_at,actor,action,change,target_id,before,after"),
        "{csv}"
    );
    assert!(!csv.contains(",=HYPERLINK"), "{csv}");
}

#[tokio::test]
async fn upstreams_and_policies_are_shown_as_served() {
    let s = gateway(POLICY).await;
    groups(&s, "alice", &["claude-users", "engineering"]).await;
    alice_uses(&s, 1).await;
    let (status, ups) = admin(&s, "/v1/organizations/upstreams").await;
    assert_eq!(status, 200, "{ups}");
    assert_eq!(ups["data"][0]["name"], "primary");
    assert_eq!(ups["data"][0]["state"], "healthy", "{ups}");
    assert!(ups["data"][0]["ttfb_p99_ms"].is_number(), "{ups}");
    assert_eq!(ups["strategy"], "ordered");
    let (status, pol) = admin(&s, "/v1/organizations/policies").await;
    assert_eq!(status, 200, "{pol}");
    assert_eq!(pol["data"].as_array().unwrap().len(), 2);
    assert_eq!(pol["data"][0]["match"]["groups"], json!(["engineering"]));
    assert!(pol["data"][0]["etag"].as_str().unwrap().starts_with('"'));
    let (status, p) = admin(&s, "/v1/organizations/policies/preview?user_id=alice").await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(p["matched"], json!([0]), "{p}");
    assert_eq!(
        p["settings"]["permissions"]["deny"],
        json!(["WebFetch"]),
        "{p}"
    );
    assert_eq!(p["checksum"], pol["data"][0]["checksum"]);
    // What alice's Claude Code gets is exactly that.
    let (status, _) = admin(&s, "/v1/organizations/policies/preview?user_id=ghost").await;
    assert_eq!(status, 404);
}
