//! Sign-in end to end: a real OIDC provider (npm `oidc-provider`) on loopback, headless
//! Chromium (Playwright, Debian's chromium) for the browser part, and the token endpoint
//! polled like Claude Code does. Then sessions at work: inference, refresh, revocation,
//! rotation, and every forged or stale token refused with its reason.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;

use gatehouse_engine::identity::keys::KeyRing;
use gatehouse_engine::identity::session::{self, UserIdentity};
use gatehouse_engine::secret::Secret;
use gatehouse_tests::{
    CLIENT_KEY, PASSWORD, SESSION_SECRET_A, SESSION_SECRET_B, SignInGateway, SignInOptions,
    browser_login, sign_in_gateway, sign_in_gateway_opts, sonnet,
};
use serde_json::{Value, json};

struct Device {
    device_code: String,
    user_code: String,
    complete: String,
}

async fn authorize(s: &SignInGateway) -> Device {
    let r =
        s.gw.client
            .post(s.gw.url("/oauth/device_authorization"))
            .header("user-agent", "claude-code/2.1.332")
            .form(&[("surface", "claude_code"), ("unknown_param", "ignored")])
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let user_code = v["user_code"].as_str().unwrap().to_owned();
    assert_eq!(user_code.len(), 9);
    assert!(
        user_code.chars().enumerate().all(|(i, c)| if i == 4 {
            c == '-'
        } else {
            "BCDFGHJKLMNPQRSTVWXZ".contains(c)
        }),
        "{user_code}"
    );
    assert!(
        v["device_code"].as_str().unwrap().len() >= 43,
        "device code carries at least 256 bits"
    );
    assert_eq!(v["expires_in"], 600);
    assert_eq!(v["interval"], 5);
    assert_eq!(v["verification_uri"], format!("{}/device", s.origin));
    assert_eq!(v["login_notice"], "Use your corp account.");
    Device {
        device_code: v["device_code"].as_str().unwrap().to_owned(),
        complete: v["verification_uri_complete"].as_str().unwrap().to_owned(),
        user_code,
    }
}

async fn poll(s: &SignInGateway, device_code: &str) -> (u16, Value) {
    let r =
        s.gw.client
            .post(s.gw.url("/oauth/token"))
            .form(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", device_code),
            ])
            .send()
            .await
            .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn form(s: &SignInGateway, path: &str, pairs: &[(&str, &str)]) -> (u16, Value) {
    let r =
        s.gw.client
            .post(s.gw.url(path))
            .form(pairs)
            .send()
            .await
            .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// Full sign-in for `login`; returns the token response.
async fn sign_in(s: &SignInGateway, login: &str) -> Value {
    let d = authorize(s).await;
    let page = browser_login(&d.complete, login, PASSWORD, None).await;
    assert_eq!(page["result"], "Signed in", "{page}");
    s.clock.advance(6);
    let (status, body) = poll(s, &d.device_code).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn infer(s: &SignInGateway, token: &str) -> reqwest::Response {
    s.gw.client
        .post(s.gw.url("/v1/messages"))
        .bearer_auth(token)
        .json(&sonnet(false))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn person_signs_in_through_the_browser_and_the_session_works() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], "").await;
    let meta: Value =
        s.gw.client
            .get(s.gw.url("/.well-known/oauth-authorization-server"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(meta["issuer"], s.origin);
    assert_eq!(
        meta["device_authorization_endpoint"],
        format!("{}/oauth/device_authorization", s.origin)
    );
    assert_eq!(meta["token_endpoint"], format!("{}/oauth/token", s.origin));
    assert_eq!(
        meta["revocation_endpoint"],
        format!("{}/oauth/revoke", s.origin)
    );
    assert!(meta.get("authorization_endpoint").is_none());
    // The fields the reference's discovery carries (2.1.333).
    assert_eq!(
        meta["scopes_supported"],
        json!(["openid", "profile", "email"])
    );
    assert_eq!(meta["gateway_protocol_version"], 1);
    assert_eq!(meta["response_types_supported"], json!([]));
    assert!(meta.get("cri_enabled").is_none(), "no workload tokens here");

    let d = authorize(&s).await;
    assert_eq!(
        poll(&s, &d.device_code).await,
        (
            400,
            json!({"error": "authorization_pending", "error_description": "waiting for the user to approve in the browser"})
        )
    );
    let (status, body) = poll(&s, &d.device_code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (429, Some("slow_down")),
        "a poll within the interval slows the client down"
    );

    let shots =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/screenshots/sign-in");
    let page = browser_login(&d.complete, "alice", PASSWORD, Some(&shots)).await;
    assert_eq!(
        page["prefilled"], d.user_code,
        "the code is pre-filled, not auto-submitted"
    );
    assert_eq!(page["result"], "Signed in", "{page}");
    assert!(
        page["detail"]
            .as_str()
            .unwrap()
            .contains("alice@corp.example")
    );

    s.clock.advance(11);
    // Four polls at once: exactly one gets the tokens.
    let results = futures_util::future::join_all((0..4).map(|_| poll(&s, &d.device_code))).await;
    let winners: Vec<&(u16, Value)> = results.iter().filter(|(st, _)| *st == 200).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    assert!(
        results
            .iter()
            .filter(|(st, _)| *st != 200)
            .all(|(_, b)| b["error"] == "invalid_grant"),
        "{results:?}"
    );
    let (status, tokens) = winners[0].clone();
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["email"], "alice@corp.example");
    assert_eq!(tokens["expires_in"], 3600);
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    assert!(
        !access.contains(&s.idp.issuer),
        "the IdP's token is never handed out"
    );
    // Success happens once: a replayed device code is refused.
    s.clock.advance(6);
    assert_eq!(poll(&s, &d.device_code).await.1["error"], "invalid_grant");

    // The session token is Gatehouse's own JWT with the person's identity.
    let claims: Value =
        serde_json::from_slice(&base64_decode(access.split('.').nth(1).unwrap())).unwrap();
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["iss"], s.origin);
    assert_eq!(claims["groups"], json!(["engineering", "claude-users"]));

    let r = infer(&s, &access).await;
    assert_eq!(r.status(), 200);
    let rows = s.gw.usage_rows(1).await;
    assert_eq!(rows[0].principal, "user:alice");
    let models =
        s.gw.client
            .get(s.gw.url("/v1/models"))
            .bearer_auth(&access)
            .send()
            .await
            .unwrap();
    assert_eq!(models.status(), 200);

    // Refresh: a new session, and the spent refresh token cannot be used again.
    let (status, refreshed) = form(
        &s,
        "/oauth/token",
        &[("grant_type", "refresh_token"), ("refresh_token", &refresh)],
    )
    .await;
    assert_eq!(status, 200, "{refreshed}");
    let access2 = refreshed["access_token"].as_str().unwrap().to_owned();
    let refresh2 = refreshed["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(access2, access);
    assert_eq!(infer(&s, &access2).await.status(), 200);
    let (status, body) = form(
        &s,
        "/oauth/token",
        &[("grant_type", "refresh_token"), ("refresh_token", &refresh)],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("invalid_grant"))
    );

    // Revocation ends the session on its next request.
    assert_eq!(
        form(&s, "/oauth/revoke", &[("token", &access2)]).await.0,
        200
    );
    let r = infer(&s, &access2).await;
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["x-should-retry"], "false");
    assert_eq!(
        form(
            &s,
            "/oauth/revoke",
            &[("token", &refresh2), ("token_type_hint", "refresh_token")]
        )
        .await
        .0,
        200
    );
    let (status, body) = form(
        &s,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &refresh2),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("invalid_grant"))
    );
    // Unknown tokens revoke fine (RFC 7009).
    assert_eq!(
        form(&s, "/oauth/revoke", &[("token", "whatever")]).await.0,
        200
    );

    let reasons: Vec<String> =
        s.gw.events
            .named("auth.denied")
            .iter()
            .map(|e| e["reason"].as_str().unwrap_or_default().to_owned())
            .collect();
    assert!(reasons.contains(&"revoked".to_owned()), "{reasons:?}");
    let all = serde_json::to_string(&s.gw.events.events()).unwrap();
    for secret in [&access, &refresh, &d.device_code] {
        assert!(!all.contains(secret.as_str()), "a token reached the events");
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .unwrap()
}

#[tokio::test]
async fn gates_refuse_the_wrong_people() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], "").await;
    for (login, detail) in [
        ("bob", "none of the user's groups"),
        ("eve", "email domain"),
        ("mallory", "not verified"),
        ("carol", "none of the user's groups"),
    ] {
        let d = authorize(&s).await;
        let page = browser_login(&d.complete, login, PASSWORD, None).await;
        assert_eq!(page["result"], "Sign-in failed", "{login}: {page}");
        assert!(
            page["detail"].as_str().unwrap().contains(detail),
            "{login}: {page}"
        );
        s.clock.advance(6);
        let (status, body) = poll(&s, &d.device_code).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("access_denied")),
            "{login}"
        );
    }
}

#[tokio::test]
async fn refresh_follows_the_identity_provider() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], "").await;
    let tokens = sign_in(&s, "alice").await;
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();

    // A transient IdP failure keeps the refresh token usable.
    s.idp
        .control("fail-token", json!({"count": 1, "status": 503}))
        .await;
    let (status, body) = form(
        &s,
        "/oauth/token",
        &[("grant_type", "refresh_token"), ("refresh_token", &refresh)],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("temporarily_unavailable")),
        "{body}"
    );

    // Group changes apply at refresh.
    s.idp
        .control(
            "groups",
            json!({"account": "alice", "groups": ["claude-users", "platform"]}),
        )
        .await;
    let (status, body) = form(
        &s,
        "/oauth/token",
        &[("grant_type", "refresh_token"), ("refresh_token", &refresh)],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let claims: Value = serde_json::from_slice(&base64_decode(
        body["access_token"]
            .as_str()
            .unwrap()
            .split('.')
            .nth(1)
            .unwrap(),
    ))
    .unwrap();
    assert_eq!(claims["groups"], json!(["claude-users", "platform"]));

    // Deprovisioned at the IdP: the next refresh forces a new sign-in.
    let refresh = body["refresh_token"].as_str().unwrap().to_owned();
    s.idp.control("disable", json!({"account": "alice"})).await;
    let (status, body) = form(
        &s,
        "/oauth/token",
        &[("grant_type", "refresh_token"), ("refresh_token", &refresh)],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("invalid_grant")),
        "{body}"
    );
    // Leaving the allowed groups does the same.
}

/// An IdP that does not rotate refresh tokens accepts its token any number of times, so
/// only the gateway can keep its own refresh token single use: of concurrent redemptions
/// exactly one gets a session, the rest `invalid_grant`, and only one reaches the IdP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_token_is_redeemed_once_under_concurrency() {
    let opts = SignInOptions {
        idp_env: &[("IDP_ROTATE_REFRESH", "0")],
        ..SignInOptions::default()
    };
    let s = sign_in_gateway_opts(&[SESSION_SECRET_A], "", &opts).await;
    let tokens = sign_in(&s, "alice").await;
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    // Every IdP token call takes a while, so all redemptions are in flight together.
    s.idp.control("delay-token", json!({"ms": 400})).await;
    s.idp.control("reset-stats", json!({})).await;
    let pairs = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh.as_str()),
    ];
    let results =
        futures_util::future::join_all((0..4).map(|_| form(&s, "/oauth/token", &pairs))).await;
    let won: Vec<&Value> = results
        .iter()
        .filter(|(st, _)| *st == 200)
        .map(|(_, b)| b)
        .collect();
    let statuses: Vec<u16> = results.iter().map(|(st, _)| *st).collect();
    assert_eq!(won.len(), 1, "{statuses:?}");
    for (status, body) in results.iter().filter(|(st, _)| *st != 200) {
        assert_eq!(
            (*status, body["error"].as_str()),
            (401, Some("invalid_grant"))
        );
    }
    let stats = s.idp.stats().await;
    assert_eq!(stats["by_grant_type"]["refresh_token"], 1, "{stats}");
    // The winner's new refresh token works once more; the spent one never again.
    s.idp.control("delay-token", json!({"ms": 0})).await;
    let next = won[0]["refresh_token"].as_str().unwrap();
    let (status, _) = form(
        &s,
        "/oauth/token",
        &[("grant_type", "refresh_token"), ("refresh_token", next)],
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = form(&s, "/oauth/token", &pairs).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn forged_stale_and_rotated_tokens() {
    let s = sign_in_gateway(&[SESSION_SECRET_B, SESSION_SECRET_A], "").await;
    let alice = UserIdentity {
        sub: "alice".into(),
        email: Some("alice@corp.example".into()),
        name: None,
        groups: vec!["claude-users".into()],
    };
    let ring = |secrets: &[&str]| {
        KeyRing::new(&secrets.iter().map(|x| Secret::new(*x)).collect::<Vec<_>>())
    };
    let now = chrono::Utc::now();
    let mint = |secrets: &[&str], iss: &str, ttl: i64, at: chrono::DateTime<chrono::Utc>| {
        session::mint(&ring(secrets), iss, ttl, at, &alice)
            .unwrap()
            .0
    };

    // Signed under the old secret while it is still listed: accepted.
    let old = mint(&[SESSION_SECRET_A], &s.origin, 3600, now);
    assert_eq!(infer(&s, &old).await.status(), 200);
    let new = mint(&[SESSION_SECRET_B], &s.origin, 3600, now);
    assert_eq!(infer(&s, &new).await.status(), 200);

    let removed = mint(
        &["session-secret-C-0123456789abcdefghijklmnop"],
        &s.origin,
        3600,
        now,
    );
    let expired = mint(
        &[SESSION_SECRET_B],
        &s.origin,
        60,
        now - chrono::Duration::hours(2),
    );
    let future = mint(
        &[SESSION_SECRET_B],
        &s.origin,
        3600,
        now + chrono::Duration::hours(2),
    );
    let wrong_iss = mint(&[SESSION_SECRET_B], "https://elsewhere.example", 3600, now);
    let parts: Vec<&str> = new.split('.').collect();
    let b64 = |v: &str| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v)
    };
    let kid = ring(&[SESSION_SECRET_B]).signing().unwrap().0.to_owned();
    let alg_none = format!(
        "{}.{}.",
        b64(&format!(r#"{{"alg":"none","typ":"JWT","kid":"{kid}"}}"#)),
        parts[1]
    );
    let alg_hs512 = format!(
        "{}.{}.{}",
        b64(&format!(r#"{{"alg":"HS512","typ":"JWT","kid":"{kid}"}}"#)),
        parts[1],
        parts[2]
    );
    let bad_sig = format!(
        "{}.{}.{}",
        parts[0],
        parts[1],
        b64("not-the-signature-at-all-0123456789")
    );
    let mut claims: Value = serde_json::from_slice(&base64_decode(parts[1])).unwrap();
    claims["sub"] = "mallory".into();
    let tampered = format!("{}.{}.{}", parts[0], b64(&claims.to_string()), parts[2]);
    let cases = [
        (removed, "unknown_kid"),
        (expired, "expired"),
        (future, "not_yet_valid"),
        (wrong_iss, "wrong_issuer"),
        (alg_none, "bad_algorithm"),
        (alg_hs512, "bad_algorithm"),
        (bad_sig, "bad_signature"),
        (tampered, "bad_signature"),
    ];
    for (token, _) in &cases {
        let r = infer(&s, token).await;
        assert_eq!(r.status(), 401, "{token}");
        assert_eq!(r.headers()["x-should-retry"], "false");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["type"], "authentication_error");
    }
    let reasons: Vec<String> =
        s.gw.events
            .named("auth.denied")
            .iter()
            .map(|e| e["reason"].as_str().unwrap().to_owned())
            .collect();
    let expected: Vec<String> = cases.iter().map(|(_, r)| (*r).to_owned()).collect();
    assert!(
        reasons == expected
            || reasons
                .iter()
                .zip(&expected)
                .all(|(a, b)| a == b || (b == "bad_algorithm" && a == "malformed")),
        "got {reasons:?}, expected {expected:?}"
    );
    assert_eq!(
        s.gw.fake.requests().len(),
        2,
        "no refused token reached the upstream"
    );

    // A session expires with the clock.
    s.clock.advance(2 * 3600);
    assert_eq!(infer(&s, &new).await.status(), 401);
    // Static client keys keep working next to sessions.
    let r =
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .header("x-api-key", CLIENT_KEY)
            .json(&sonnet(false))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn device_codes_expire_and_sealed_values_do_not_cross_kinds() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], "").await;
    // POST /device (same origin) answers with the IdP redirect whose state is sealed.
    let d = authorize(&s).await;
    let r =
        s.gw.client
            .post(s.gw.url("/device"))
            .header("sec-fetch-site", "same-origin")
            .form(&[("user_code", d.user_code.as_str())])
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 303);
    let location = r.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with(&s.idp.issuer), "{location}");
    let set_cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        set_cookie.starts_with("gw_dev=")
            && set_cookie.contains("HttpOnly")
            && set_cookie.contains("SameSite=Lax"),
        "{set_cookie}"
    );
    let url = url::Url::parse(&location).unwrap();
    let q: HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!(q["code_challenge_method"], "S256");
    assert!(q.contains_key("nonce"));
    let state = q["state"].clone();

    // The sealed state is not a device code, and a device code is not a state.
    assert_eq!(poll(&s, &state).await.1["error"], "invalid_grant");
    let r =
        s.gw.client
            .get(s.gw.url(&format!("/oauth/callback?code=x&state={}", d.device_code)))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 400);
    // The right state without the browser's cookie is refused.
    let r =
        s.gw.client
            .get(s.gw.url(&format!("/oauth/callback?code=x&state={state}")))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("different browser"));

    // Ten minutes later the device code has expired.
    s.clock.advance(601);
    assert_eq!(poll(&s, &d.device_code).await.1["error"], "expired_token");
    // And the state with it.
    let r =
        s.gw.client
            .get(s.gw.url(&format!("/oauth/callback?code=x&state={state}")))
            .header("cookie", set_cookie.split(';').next().unwrap())
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("took too long"));
    assert_eq!(poll(&s, "no-such-code").await.1["error"], "invalid_grant");
    assert_eq!(
        form(&s, "/oauth/token", &[("grant_type", "password")])
            .await
            .1["error"],
        "unsupported_grant_type"
    );
}

/// Behind a trusted proxy, device authorizations are counted per IPv4 address (an
/// IPv4-mapped IPv6 one included) and per IPv6 /64: hopping addresses inside one /64 does
/// not buy more attempts.
#[tokio::test]
async fn sign_in_rate_limits_count_an_ipv6_network_as_one() {
    let opts = SignInOptions {
        listen: "trusted_proxies: [127.0.0.0/8]",
        ..SignInOptions::default()
    };
    let extra = "rate_limits: {device_authorization: {limit: 2, window_seconds: 600}}\n";
    let s = &sign_in_gateway_opts(&[SESSION_SECRET_A], extra, &opts).await;
    let from = |ip: &'static str| async move {
        s.gw.client
            .post(s.gw.url("/oauth/device_authorization"))
            .header("x-forwarded-for", ip)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(from("2001:db8:1:2::a").await, 200);
    assert_eq!(from("2001:db8:1:2:ffff:ffff:ffff:ffff").await, 200);
    assert_eq!(from("2001:db8:1:2::b").await, 429);
    assert_eq!(from("2001:db8:1:3::1").await, 200, "another /64");
    assert_eq!(from("203.0.113.5").await, 200);
    assert_eq!(from("::ffff:203.0.113.5").await, 200);
    assert_eq!(from("203.0.113.5").await, 429);
    assert_eq!(
        from("203.0.113.6").await,
        200,
        "IPv4 counts the whole address"
    );
}

#[tokio::test]
async fn device_page_is_same_origin_only_and_rate_limited() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], "rate_limits: {device_authorization: {limit: 3, window_seconds: 600}, device_verify: {limit: 2, window_seconds: 600}}\n").await;
    let page =
        s.gw.client
            .get(s.gw.url("/device?user_code=wdjb-mjht"))
            .send()
            .await
            .unwrap();
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("default-src 'none'")
            && csp.contains(&format!("form-action 'self' {}", s.idp.issuer)),
        "{csp}"
    );
    let html = page.text().await.unwrap();
    assert!(
        html.contains("value=\"WDJB-MJHT\"") && !html.contains("<script"),
        "{html}"
    );

    for (header, value) in [
        ("sec-fetch-site", "cross-site"),
        ("origin", "https://evil.example"),
    ] {
        let r =
            s.gw.client
                .post(s.gw.url("/device"))
                .header(header, value)
                .form(&[("user_code", "WDJB-MJHT")])
                .send()
                .await
                .unwrap();
        assert_eq!(r.status(), 403, "{header}: {value}");
    }
    let same = |code: &str| {
        s.gw.client
            .post(s.gw.url("/device"))
            .header("origin", s.origin.clone())
            .form(&[("user_code", code.to_owned())])
            .send()
    };
    assert_eq!(
        same("BBBB-BBBB").await.unwrap().status(),
        400,
        "unknown code"
    );
    assert_eq!(
        same("CCCC-CCCC").await.unwrap().status(),
        400,
        "unknown code"
    );
    assert_eq!(
        same("DDDD-DDDD").await.unwrap().status(),
        429,
        "third try from this address in the window"
    );

    for _ in 0..3 {
        assert_eq!(form(&s, "/oauth/device_authorization", &[]).await.0, 200);
    }
    let r =
        s.gw.client
            .post(s.gw.url("/oauth/device_authorization"))
            .form(&[("surface", "claude_code")])
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().get("retry-after").is_some());
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "slow_down");
}

#[tokio::test]
async fn sign_in_routes_are_404_without_oidc() {
    let gw = gatehouse_tests::TestGateway::start().await;
    for (m, p) in [
        ("GET", "/.well-known/oauth-authorization-server"),
        ("POST", "/oauth/device_authorization"),
        ("GET", "/device"),
        ("POST", "/oauth/token"),
    ] {
        let r = gw
            .client
            .request(m.parse().unwrap(), gw.url(p))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{m} {p}");
    }
}

#[tokio::test]
async fn claude_code_uses_a_gatehouse_session() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], "").await;
    let tokens = sign_in(&s, "alice").await;
    let access = tokens["access_token"].as_str().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = gatehouse_tests::claude_print(
        "hello",
        home.path(),
        &[
            ("CLAUDE_CODE_USE_GATEWAY", "1"),
            ("CLAUDE_CODE_ENABLE_GATEWAY_MODEL_DISCOVERY", "1"),
            ("ANTHROPIC_BASE_URL", s.origin.as_str()),
            ("ANTHROPIC_AUTH_TOKEN", access),
            ("CLAUDE_CODE_MAX_RETRIES", "0"),
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .contains("Hello from the fake upstream"),
        "{stdout}"
    );
    let rows = s.gw.usage_rows(1).await;
    assert!(rows.iter().all(|r| r.principal == "user:alice"));
    let denied = s.gw.events.named("auth.denied");
    assert!(
        denied.is_empty(),
        "Claude Code's requests were all admitted: {denied:?}"
    );
    // Model discovery went through the session too.
    let listed = s.gw.events.named("models.list");
    assert!(
        listed.iter().any(|e| e["principal"] == "user:alice"),
        "{listed:?}"
    );
}
