//! The console page itself in headless Chromium (`tests/e2e/console.mjs`), against a real
//! gateway, IdP and usage: an admin visits every page, sets a cap through the form (the
//! preview first), the person is then refused with a real 429, the change is in the
//! audit, and both CSV downloads equal what the API exports; names, emails and groups
//! carrying script stay inert; a viewer has no enabled edit control; someone in neither
//! group is refused; revoke and sign-out work from the page. Screenshots land in
//! `docs/screenshots/` with `GATEHOUSE_SCREENSHOTS=1`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gatehouse_engine::identity::UserIdentity;
use gatehouse_tests::*;
use serde_json::{Value, json};

use super::{WRITE_KEY, gateway, groups};

const POLICY: &str = "managed:\n  policies:\n    - match: {groups: [engineering]}\n      cli: {permissions: {deny: [\"WebFetch\"]}}\n    - cli: {cleanupPeriodDays: 20}\n";

/// Payloads as an IdP could hand them over in a name, an email or a group.
const XSS: [&str; 4] = [
    "<img src=x onerror=\"window.__xss=1\">",
    "\"><svg onload=window.__xss=1>",
    "<script>window.__xss=1</script>",
    "javascript:window.__xss=1//",
];

fn screenshot_dir(temp: &tempfile::TempDir) -> std::path::PathBuf {
    if std::env::var("GATEHOUSE_SCREENSHOTS").as_deref() == Ok("1") {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/screenshots")
    } else {
        temp.path().to_owned()
    }
}

async fn console(s: &SignInGateway, login: &str, scenario: &str, env: &[(&str, &str)]) -> Value {
    let url = s.gw.url("/console");
    let mut all: Vec<(&str, &str)> = vec![
        ("CONSOLE_URL", &url),
        ("LOGIN", login),
        ("PASSWORD", PASSWORD),
        ("SCENARIO", scenario),
        ("TIMEOUT_SECS", "85"),
    ];
    all.extend_from_slice(env);
    let out = node_json("console.mjs", &[], &all).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["xss_fired"], false, "{out}");
    assert_eq!(out["onerror_elements"], 0, "{out}");
    assert_eq!(out["csp_violations"], json!([]), "{out}");
    out
}

/// Hostile people in the directory, as sign-ins through the IdP would leave them.
async fn hostile_people(s: &SignInGateway) {
    let store = s.gw.handle.store();
    for (i, p) in XSS.iter().enumerate() {
        let who = UserIdentity {
            sub: format!("x{i}{p}"),
            email: Some(format!("{p}@corp.example")),
            name: Some(format!("{p} {}", "very long name ".repeat(20))),
            groups: vec![(*p).to_owned(), "g".repeat(300)],
        };
        store
            .upsert_principal(who, chrono::Utc::now())
            .await
            .unwrap();
    }
}

async fn api_text(s: &SignInGateway, path: &str) -> String {
    s.gw.client
        .get(s.gw.url(path))
        .header("x-api-key", WRITE_KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_admin_runs_the_team_from_the_console_and_hostile_names_stay_inert() {
    let s = gateway(POLICY).await;
    groups(
        &s,
        "alice",
        &["claude-users", "engineering", "platform", XSS[0]],
    )
    .await;
    let (status, tokens) = device_sign_in(&s, "alice").await;
    assert_eq!(status, 200, "{tokens}");
    let token = tokens["access_token"].as_str().unwrap().to_owned();
    let send = || {
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .bearer_auth(&token)
            .header("x-claude-code-session-id", "sess-browser-1")
            .json(&sonnet(false))
            .send()
    };
    for _ in 0..3 {
        let r = send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    s.gw.usage_rows(3).await;
    hostile_people(&s).await;
    let temp = tempfile::tempdir().unwrap();
    let shots = screenshot_dir(&temp);
    let downloads = temp.path().join("downloads");
    let out = console(
        &s,
        "alice",
        "admin_tour",
        &[
            ("CAP_USER", "alice"),
            ("CAP_DOLLARS", "0.01"),
            ("SCREENSHOT_DIR", shots.to_str().unwrap()),
            ("DOWNLOAD_DIR", downloads.to_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(
        out["role"].as_str().map(|r| r.contains("admin")),
        Some(true),
        "{out}"
    );
    for (page, v) in out["visited"].as_object().unwrap() {
        assert_eq!(v["errors"], json!([]), "{page}: {out}");
    }
    assert!(
        out["limit"]["preview_message"]
            .as_str()
            .unwrap()
            .contains("alice"),
        "{out}"
    );
    assert_eq!(out["limit"]["notice_kind"], "ok", "{out}");

    // The cap the form set binds: alice's next request, whose worst case exceeds a cent,
    // is refused.
    let mut big = sonnet(false);
    big["max_tokens"] = json!(4096);
    let r =
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .bearer_auth(&token)
            .json(&big)
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 429, "{}", r.text().await.unwrap());
    let audit: Value = serde_json::from_str(
        &api_text(&s, "/v1/organizations/spend_limits/audit?actor=oidc:alice").await,
    )
    .unwrap();
    assert_eq!(audit["data"][0]["action"], "spend_limit.upsert", "{audit}");
    assert_eq!(audit["data"][0]["after"]["amount"], "1", "{audit}");

    // The downloads are the API's exports.
    let audit_csv = std::fs::read_to_string(out["audit_csv"].as_str().unwrap()).unwrap();
    assert_eq!(
        audit_csv,
        api_text(&s, "/v1/organizations/spend_limits/audit?format=csv").await
    );
    assert!(audit_csv.contains("oidc:alice"), "{audit_csv}");
    let analytics_csv = std::fs::read_to_string(out["analytics_csv"].as_str().unwrap()).unwrap();
    assert!(
        analytics_csv.starts_with("key,requests,"),
        "{analytics_csv}"
    );
    let total: u64 = analytics_csv
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(1)?.parse::<u64>().ok())
        .sum();
    assert!(total >= 3, "{analytics_csv}");
}

#[tokio::test]
async fn a_viewer_sees_no_enabled_edit_control_and_an_outsider_is_refused() {
    let s = gateway("").await;
    groups(&s, "carol", &["claude-users", "auditors"]).await;
    groups(&s, "alice", &["claude-users", "engineering"]).await;
    hostile_people(&s).await;
    let temp = tempfile::tempdir().unwrap();
    let shots = screenshot_dir(&temp);
    let out = console(
        &s,
        "carol",
        "viewer",
        &[("SCREENSHOT_DIR", shots.to_str().unwrap())],
    )
    .await;
    assert_eq!(out["edit_controls_enabled"], 0, "{out}");
    assert_eq!(out["readonly_badge"], true, "{out}");
    let out = console(
        &s,
        "alice",
        "refused",
        &[("SCREENSHOT_DIR", shots.to_str().unwrap())],
    )
    .await;
    assert_eq!(out["status"], 403, "{out}");
    assert_eq!(out["signed_in"], false, "{out}");
}

#[tokio::test]
async fn revoke_and_sign_out_from_the_page() {
    let s = gateway("").await;
    groups(&s, "alice", &["claude-users", "engineering", "platform"]).await;
    groups(&s, "carol", &["claude-users"]).await;
    let (status, tokens) = device_sign_in(&s, "carol").await;
    assert_eq!(status, 200, "{tokens}");
    let carol = tokens["access_token"].as_str().unwrap().to_owned();
    let me_spend = |token: &str| {
        s.gw.client
            .get(s.gw.url("/v1/me/spend"))
            .bearer_auth(token.to_owned())
            .send()
    };
    // Her first request puts her in the directory.
    assert_eq!(me_spend(&carol).await.unwrap().status(), 200);
    wait_until("carol in the directory", || async {
        s.gw.handle
            .store()
            .principals(Some(vec!["carol".into()]))
            .await
            .unwrap()
            .len()
            == 1
    })
    .await;
    let temp = tempfile::tempdir().unwrap();
    let shots = screenshot_dir(&temp);
    let out = console(
        &s,
        "alice",
        "revoke",
        &[
            ("REVOKE_USER", "carol"),
            ("SCREENSHOT_DIR", shots.to_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(out["notice_kind"], "ok", "{out}");
    let r = me_spend(&carol).await.unwrap();
    assert_eq!(r.status(), 401, "carol's session was revoked from the page");
    let out = console(&s, "alice", "signout", &[]).await;
    assert_eq!(out["signin_shown"], true, "{out}");
    let stolen = format!(
        "{}={}",
        out["cookie"]["name"].as_str().unwrap(),
        out["cookie"]["value"].as_str().unwrap()
    );
    let (status, _) = super::get(&s, "/v1/organizations/me", &stolen).await;
    assert_eq!(status, 401, "the cookie replayed after sign-out");
}
