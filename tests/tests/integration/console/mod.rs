//! The team console on a central server: sign-in with the real IdP in Chromium
//! (`tests/e2e/console_login.mjs`), the session cookie, CSRF, roles, revocation
//! (`auth`), the admin API calls the console makes (`api`) and the console page itself
//! driven in Chromium (`browser`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod api;
mod auth;
mod browser;

use gatehouse_tests::*;
use serde_json::{Value, json};

pub const ADMIN_BLOCK: &str = "admin:\n  write_keys: [{id: ops, key: admin-write-key-0123456789abcdef0123456789}]\n  read_keys: [{id: audit, key: admin-read-key-0123456789abcdef01234567890}]\n  admin_groups: [platform]\n  viewer_groups: [auditors]\n";
pub const WRITE_KEY: &str = "admin-write-key-0123456789abcdef0123456789";

/// A sign-in gateway with the admin block (admins: `platform`, viewers: `auditors`).
pub async fn gateway(extra: &str) -> SignInGateway {
    sign_in_gateway(&[SESSION_SECRET_A], &format!("{ADMIN_BLOCK}{extra}")).await
}

/// Gives an IdP account these groups (the sign-in gates want `claude-users`).
pub async fn groups(s: &SignInGateway, account: &str, groups: &[&str]) {
    s.idp
        .control("groups", json!({"account": account, "groups": groups}))
        .await;
}

/// Signs `login` in to the console in Chromium: the browser's report.
pub async fn browser_sign_in(s: &SignInGateway, login: &str) -> Value {
    node_json(
        "console_login.mjs",
        &[],
        &[
            ("CONSOLE_URL", &s.gw.url("/console")),
            ("LOGIN", login),
            ("PASSWORD", PASSWORD),
        ],
    )
    .await
}

/// The console cookie (`name=value`) of a browser report.
pub fn cookie(report: &Value) -> String {
    let c = report["cookies"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == "gh_console"))
        .unwrap_or_else(|| panic!("no console cookie: {report}"));
    format!("gh_console={}", c["value"].as_str().unwrap())
}

/// Signs `login` in and returns the cookie and the CSRF token from `me`.
pub async fn signed_in(s: &SignInGateway, login: &str) -> (String, String) {
    let report = browser_sign_in(s, login).await;
    let cookie = cookie(&report);
    let (status, me) = get(s, "/v1/organizations/me", &cookie).await;
    assert_eq!(status, 200, "{me}");
    (cookie, me["csrf_token"].as_str().unwrap().to_owned())
}

pub async fn get(s: &SignInGateway, path: &str, cookie: &str) -> (u16, Value) {
    let r =
        s.gw.client
            .get(s.gw.url(path))
            .header("cookie", cookie)
            .send()
            .await
            .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// A same-origin POST as the console's page sends it.
pub async fn post(
    s: &SignInGateway,
    path: &str,
    cookie: &str,
    csrf: Option<&str>,
    body: &Value,
) -> (u16, Value) {
    let mut req =
        s.gw.client
            .post(s.gw.url(path))
            .header("cookie", cookie)
            .header("sec-fetch-site", "same-origin")
            .header("origin", s.origin.clone())
            .json(body);
    if let Some(t) = csrf {
        req = req.header("x-csrf-token", t);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}
