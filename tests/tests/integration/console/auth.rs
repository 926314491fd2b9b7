//! Console sign-in and its session under attack: PKCE with the real IdP, the cookie's
//! attributes, CSRF and foreign origins, a replayed cookie after sign-out, a forged
//! (fixated) cookie, a non-admin, a viewer, an admin removed from the group, a disabled
//! IdP account, and "revoke sessions" reaching device-flow tokens.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gatehouse_tests::*;
use serde_json::json;

use super::{WRITE_KEY, browser_sign_in, cookie, gateway, get, groups, post, signed_in};

const LIMIT: &str = "/v1/organizations/spend_limits";

fn alice_cap(cents: &str) -> serde_json::Value {
    json!({"scope": {"type": "user", "user_id": "alice"}, "period": "daily", "amount": cents})
}

#[tokio::test]
async fn an_admin_signs_in_through_the_idp_and_gets_a_strict_http_only_cookie() {
    let s = gateway("").await;
    groups(&s, "alice", &["claude-users", "platform"]).await;
    let report = browser_sign_in(&s, "alice").await;
    assert!(
        report["final_url"].as_str().unwrap().ends_with("/console"),
        "{report}"
    );
    let c = report["cookies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "gh_console")
        .unwrap()
        .clone();
    assert_eq!(c["httpOnly"], true, "{c}");
    assert_eq!(c["sameSite"], "Strict", "{c}");
    assert_eq!(c["path"], "/");
    // The login binding cookie is gone once used.
    assert!(
        !report["cookies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "gh_console_login" && c["value"] != ""),
        "{report}"
    );
    let (status, me) = get(&s, "/v1/organizations/me", &cookie(&report)).await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["role"], "admin");
    assert_eq!(me["via"], "console");
    assert_eq!(me["actor"], "oidc:alice");
    assert_eq!(me["user"]["email"], "alice@corp.example");
    assert!(me["csrf_token"].as_str().unwrap().len() >= 40);
    // The IdP requires PKCE (S256) by default: the code exchange went through it.
    let stats = s.idp.stats().await;
    assert!(
        stats["by_grant_type"]["authorization_code"].as_u64() >= Some(1),
        "{stats}"
    );
    let events = s.gw.events.named("console.sign_in");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["role"], "admin");
    s.gw.assert_no_secret(&[cookie(&report).trim_start_matches("gh_console=")]);
}

#[tokio::test]
async fn mutations_need_the_csrf_token_and_this_origin_and_land_in_the_audit() {
    let s = gateway("").await;
    groups(&s, "alice", &["claude-users", "platform"]).await;
    let (cookie, csrf) = signed_in(&s, "alice").await;
    let (status, body) = post(&s, LIMIT, &cookie, None, &alice_cap("500")).await;
    assert_eq!(status, 403, "no token: {body}");
    assert_eq!(body["error"]["type"], "permission_error");
    let (status, _) = post(&s, LIMIT, &cookie, Some("wrong-token"), &alice_cap("500")).await;
    assert_eq!(status, 403, "a wrong token");
    // A foreign page posting with the browser's cookie (if SameSite ever let it through).
    let r =
        s.gw.client
            .post(s.gw.url(LIMIT))
            .header("cookie", &cookie)
            .header("x-csrf-token", &csrf)
            .header("origin", "https://evil.example")
            .header("sec-fetch-site", "cross-site")
            .json(&alice_cap("500"))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 403, "cross-site");
    let (status, body) = post(&s, LIMIT, &cookie, Some(&csrf), &alice_cap("500")).await;
    assert_eq!(status, 200, "{body}");
    let (_, audit) = get(&s, &format!("{LIMIT}/audit"), &cookie).await;
    assert_eq!(audit["data"].as_array().unwrap().len(), 1, "{audit}");
    assert_eq!(audit["data"][0]["actor"], "oidc:alice");
    assert_eq!(audit["data"][0]["action"], "spend_limit.upsert");
}

#[tokio::test]
async fn sign_out_ends_the_session_and_a_replayed_or_forged_cookie_gets_nothing() {
    let s = gateway("").await;
    groups(&s, "alice", &["claude-users", "platform"]).await;
    let (cookie, csrf) = signed_in(&s, "alice").await;
    // Session fixation: a value the attacker chose is not a session.
    let (status, body) = get(
        &s,
        "/v1/organizations/me",
        "gh_console=attacker-chosen-value",
    )
    .await;
    assert_eq!(status, 401, "{body}");
    // Sign-out needs the token too.
    let (status, _) = post(&s, "/console/logout", &cookie, None, &json!({})).await;
    assert_eq!(status, 403);
    let r =
        s.gw.client
            .post(s.gw.url("/console/logout"))
            .header("cookie", &cookie)
            .header("x-csrf-token", &csrf)
            .header("sec-fetch-site", "same-origin")
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    let cleared = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cleared.starts_with("gh_console=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    // The stolen cookie replayed after sign-out.
    let (status, body) = get(&s, "/v1/organizations/me", &cookie).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["type"], "authentication_error");
    let (status, _) = post(&s, LIMIT, &cookie, Some(&csrf), &alice_cap("1")).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn a_viewer_reads_everything_and_changes_nothing_and_others_are_refused() {
    let s = gateway("").await;
    groups(&s, "carol", &["claude-users", "auditors"]).await;
    let (cookie, csrf) = signed_in(&s, "carol").await;
    let (_, me) = get(&s, "/v1/organizations/me", &cookie).await;
    assert_eq!(me["role"], "viewer");
    for path in [
        "/v1/organizations/overview",
        "/v1/organizations/users",
        "/v1/organizations/upstreams",
        "/v1/organizations/policies",
        "/v1/organizations/analytics/usage?group_by=model",
        "/v1/organizations/spend_limits",
        "/v1/organizations/spend_limits/audit",
    ] {
        let (status, body) = get(&s, path, &cookie).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (status, body) = post(&s, LIMIT, &cookie, Some(&csrf), &alice_cap("500")).await;
    assert_eq!(status, 403, "{body}");
    let (status, _) = post(
        &s,
        "/v1/organizations/users/alice/revoke_sessions",
        &cookie,
        Some(&csrf),
        &json!({}),
    )
    .await;
    assert_eq!(status, 403);
    // The decision of a route is a read: a viewer may ask.
    let (status, body) = post(
        &s,
        "/v1/gatehouse/route/explain",
        &cookie,
        Some(&csrf),
        &json!({"model": "claude-sonnet-4-5", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // Someone in neither group gets the refusal page, and no session.
    groups(&s, "alice", &["claude-users"]).await;
    let report = browser_sign_in(&s, "alice").await;
    assert_eq!(report["status"], 403, "{report}");
    assert!(
        report["text"]
            .as_str()
            .unwrap()
            .contains("not in an administrator or viewer group"),
        "{report}"
    );
    assert!(
        !report["cookies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "gh_console" && c["value"] != ""),
        "{report}"
    );
}

#[tokio::test]
async fn an_admin_removed_from_the_group_or_disabled_at_the_idp_is_signed_out_at_the_next_check() {
    let s = gateway("").await;
    groups(&s, "alice", &["claude-users", "platform"]).await;
    groups(&s, "carol", &["claude-users", "platform"]).await;
    let (alice, _) = signed_in(&s, "alice").await;
    let (carol, _) = signed_in(&s, "carol").await;
    groups(&s, "alice", &["claude-users"]).await;
    s.idp.control("disable", json!({"account": "carol"})).await;
    // Within the recheck interval the sessions stand; past it the IdP is asked again.
    let (status, _) = get(&s, "/v1/organizations/me", &alice).await;
    assert_eq!(status, 200);
    s.clock.advance(301);
    let (status, body) = get(&s, "/v1/organizations/me", &alice).await;
    assert_eq!(status, 401, "removed from the group: {body}");
    let (status, body) = get(&s, "/v1/organizations/me", &carol).await;
    assert_eq!(status, 401, "disabled at the IdP: {body}");
    let ended = s.gw.events.named("console.session_ended");
    let reasons: Vec<_> = ended.iter().map(|e| e["reason"].clone()).collect();
    assert!(reasons.contains(&json!("not_admin")), "{ended:?}");
    assert!(reasons.contains(&json!("idp_refused")), "{ended:?}");
}

#[tokio::test]
async fn revoking_a_person_stops_their_device_tokens_refresh_and_console_sessions() {
    let s = gateway("").await;
    groups(&s, "alice", &["claude-users", "platform"]).await;
    let (status, tokens) = device_sign_in(&s, "alice").await;
    assert_eq!(status, 200, "{tokens}");
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    let (console, _) = signed_in(&s, "alice").await;
    let me_spend = |token: String| {
        let s = &s;
        async move {
            s.gw.client
                .get(s.gw.url("/v1/me/spend"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(me_spend(access.clone()).await, 200);
    let r =
        s.gw.client
            .post(s.gw.url("/v1/organizations/users/alice/revoke_sessions"))
            .header("x-api-key", WRITE_KEY)
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["type"], "sessions_revoked");
    assert_eq!(me_spend(access).await, 401, "the access token");
    let r =
        s.gw.client
            .post(s.gw.url("/oauth/token"))
            .form(&[("grant_type", "refresh_token"), ("refresh_token", &refresh)])
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 401, "the refresh token");
    let (status, _) = get(&s, "/v1/organizations/me", &console).await;
    assert_eq!(status, 401, "the console session");
    let r =
        s.gw.client
            .get(s.gw.url("/v1/organizations/spend_limits/audit?action=user.sessions_revoke"))
            .header("x-api-key", WRITE_KEY)
            .send()
            .await
            .unwrap();
    let audit: serde_json::Value = r.json().await.unwrap();
    assert_eq!(audit["data"][0]["target_id"], "alice", "{audit}");
    assert_eq!(audit["data"][0]["actor"], "admin-key:ops");
    // A new sign-in works again.
    let (cookie, _) = signed_in(&s, "alice").await;
    let (status, _) = get(&s, "/v1/organizations/me", &cookie).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn the_console_page_is_served_under_the_strict_csp_and_only_with_admin() {
    let s = gateway("").await;
    let r = s.gw.client.get(s.gw.url("/console")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert!(r.text().await.unwrap().contains("/assets/"));
    let r =
        s.gw.client
            .get(s.gw.url("/console/logout"))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 405);
    let plain = sign_in_gateway(&[SESSION_SECRET_A], "").await;
    let r = plain
        .gw
        .client
        .get(plain.gw.url("/console"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "no admin block, no console");
}

#[tokio::test]
async fn the_console_will_not_sign_in_over_plain_http_off_loopback() {
    let configure = |c: &mut gatehouse_engine::config::Config| {
        if let Some(id) = c.identity.as_mut() {
            id.public_url = "http://gateway.corp.example/".parse().unwrap();
        }
    };
    let opts = SignInOptions {
        configure: Some(&configure),
        ..Default::default()
    };
    let s = sign_in_gateway_opts(&[SESSION_SECRET_A], super::ADMIN_BLOCK, &opts).await;
    let r =
        s.gw.client
            .get(s.gw.url("/console/login"))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.headers().get("set-cookie").is_none());
    assert!(r.text().await.unwrap().contains("only over https"));
}
