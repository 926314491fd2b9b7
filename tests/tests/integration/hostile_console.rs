//! The hostile-input suite's team-console surface, counted into the same figure by
//! `hostile::hostile_inputs_are_answered_right_without_panics_or_secrets`: a flood of
//! `/console/login`, forged and replayed callback states, garbage and oversized session
//! cookies, CSRF headers without a session, every new admin route unauthenticated or with
//! a wrong key, hostile person ids and report parameters with a valid key, and oversized
//! or malformed bodies. Afterwards nothing an unauthenticated caller did changed a cap or
//! readiness.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gatehouse_tests::SignInGateway;
use gatehouse_tests::caps::{READ_KEY, WRITE_KEY};

use super::hostile::{request, send};
use super::hostile_surfaces::Tally;

fn status_line(answer: &[u8]) -> String {
    String::from_utf8_lossy(answer)
        .lines()
        .last()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}

/// Sends `bytes`; right when the status is one of `right`.
async fn one(
    t: &mut Tally,
    s: &SignInGateway,
    name: &str,
    bytes: Vec<u8>,
    right: &[u16],
) -> Vec<u8> {
    let (status, answer) = send(s.gw.handle.local_addr(), &bytes).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    t.input(
        name,
        right.contains(&status),
        format!("{status} (right: {right:?}) {}", status_line(&answer)),
        &text,
    );
    answer
}

const NEW_ROUTES: [(&str, &str); 11] = [
    ("GET", "/v1/organizations/me"),
    ("GET", "/v1/organizations/overview"),
    ("GET", "/v1/organizations/users"),
    ("GET", "/v1/organizations/users/alice"),
    ("POST", "/v1/organizations/users/alice/revoke_sessions"),
    ("GET", "/v1/organizations/upstreams"),
    ("GET", "/v1/organizations/policies"),
    ("GET", "/v1/organizations/policies/preview?user_id=alice"),
    ("GET", "/v1/organizations/analytics/usage"),
    ("POST", "/v1/organizations/spend_limits/preview"),
    ("GET", "/v1/organizations/spend_limits/audit?format=csv"),
];

/// The console's surface, on the suite's sign-in gateway (admin keys, `admin_groups`).
pub(crate) async fn console(s: &SignInGateway, secrets: &[&str]) -> Tally {
    let mut t = Tally::new(secrets);
    unauthenticated(&mut t, s).await;
    sign_in_flow(&mut t, s).await;
    with_a_key(&mut t, s).await;
    // Nothing above changed a cap, and the gateway is ready.
    let answer = one(
        &mut t,
        s,
        "no limit was created",
        request(
            "GET",
            "/v1/organizations/spend_limits",
            &[("x-api-key", READ_KEY)],
            b"",
        ),
        &[200],
    )
    .await;
    let body = String::from_utf8_lossy(&answer);
    t.input(
        "the limit list is empty",
        body.contains("\"data\":[]"),
        body.lines().last().unwrap_or_default().to_owned(),
        "",
    );
    one(
        &mut t,
        s,
        "still ready",
        request("GET", "/readyz", &[], b""),
        &[200],
    )
    .await;
    t
}

async fn unauthenticated(t: &mut Tally, s: &SignInGateway) {
    let huge = format!("gh_console={}", "A".repeat(7000));
    let garbage: [(&str, &str); 7] = [
        ("none", ""),
        ("forged", "gh_console=attacker-chosen-value"),
        ("empty", "gh_console="),
        ("twice", "gh_console=a; gh_console=b"),
        ("secure prefix forged", "__Host-gh_console=x"),
        ("huge", huge.as_str()),
        ("quotes and semicolons", "gh_console=\"x;y\"; ;;=;"),
    ];
    for (method, path) in NEW_ROUTES {
        for (label, cookie) in garbage {
            let mut headers = vec![("x-csrf-token", "x"), ("sec-fetch-site", "same-origin")];
            if !cookie.is_empty() {
                headers.push(("cookie", cookie));
            }
            let name = format!("{method} {path} with cookie {label}");
            one(
                t,
                s,
                &name,
                request(method, path, &headers, b"{}"),
                &[401, 431],
            )
            .await;
        }
        for key in ["wrong-key-0123456789abcdef0123456789", "", "\u{7f}"] {
            let name = format!("{method} {path} with x-api-key {key:?}");
            let bytes = request(method, path, &[("x-api-key", key)], b"{}");
            one(t, s, &name, bytes, &[400, 401]).await;
        }
    }
    for (name, path) in [
        (
            "console page with a payload in the query",
            "/console?q=%3Cscript%3Ealert(1)%3C/script%3E",
        ),
        ("console page", "/console"),
    ] {
        let answer = one(t, s, name, request("GET", path, &[], b""), &[200]).await;
        let text = String::from_utf8_lossy(&answer);
        t.input(
            &format!("{name}: nothing reflected"),
            !text.contains("<script>alert"),
            "the query came back in the page",
            "",
        );
    }
    one(
        t,
        s,
        "logout without a session",
        request("POST", "/console/logout", &[], b""),
        &[200],
    )
    .await;
    one(
        t,
        s,
        "GET logout",
        request("GET", "/console/logout", &[], b""),
        &[405],
    )
    .await;
    one(
        t,
        s,
        "DELETE console",
        request("DELETE", "/console", &[], b""),
        &[405],
    )
    .await;
}

async fn sign_in_flow(t: &mut Tally, s: &SignInGateway) {
    // A real state from /console/login, then the callback without the browser binding,
    // with a made-up code, and replayed.
    let answer = one(
        t,
        s,
        "console login",
        request("GET", "/console/login", &[], b""),
        &[303],
    )
    .await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let state = text
        .lines()
        .find_map(|l| l.strip_prefix("location: "))
        .and_then(|l| l.split("state=").nth(1))
        .map(|s| s.split('&').next().unwrap_or_default().trim().to_owned())
        .unwrap_or_default();
    let binding = text
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .unwrap_or_default()
        .to_owned();
    let cb = |q: &str| format!("/oauth/callback?{q}");
    let with_state = cb(&format!("state={state}&code=made-up"));
    one(
        t,
        s,
        "callback without the binding cookie",
        request("GET", &with_state, &[], b""),
        &[400],
    )
    .await;
    let bound = [("cookie", binding.as_str())];
    for _ in 0..2 {
        one(
            t,
            s,
            "callback with a made-up code",
            request("GET", &with_state, &bound, b""),
            &[403],
        )
        .await;
    }
    for (name, q) in [
        (
            "forged state",
            "state=eyJhbGciOiJub25lIn0&code=x".to_owned(),
        ),
        ("no state", "code=x".to_owned()),
        (
            "truncated state",
            format!("state={}&code=x", &state[..state.len().min(20)]),
        ),
        ("huge state", format!("state={}&code=x", "Q".repeat(6000))),
        ("idp error", format!("state={state}&error=%3Cscript%3E")),
    ] {
        one(
            t,
            s,
            &format!("callback with {name}"),
            request("GET", &cb(&q), &bound, b""),
            &[400, 403, 414],
        )
        .await;
    }
    // The login limit per address: a flood is refused, never served.
    let mut refused = 0;
    for _ in 0..15 {
        let (status, _) = send(
            s.gw.handle.local_addr(),
            &request("GET", "/console/login", &[], b""),
        )
        .await;
        refused += usize::from(status == 429);
    }
    t.input(
        "a login flood is limited",
        refused >= 5,
        format!("{refused} of 15 refused"),
        "",
    );
}

async fn with_a_key(t: &mut Tally, s: &SignInGateway) {
    let key = [("x-api-key", WRITE_KEY)];
    let long = format!("/v1/organizations/users/{}", "a".repeat(300));
    for (name, path, right) in [
        (
            "person id traversal",
            "/v1/organizations/users/..%2F..%2Fetc%2Fpasswd",
            &[404][..],
        ),
        ("person id NUL", "/v1/organizations/users/%00", &[400]),
        ("person id too long", long.as_str(), &[400]),
        ("unknown person", "/v1/organizations/users/ghost", &[404]),
        (
            "usage group_by",
            "/v1/organizations/analytics/usage?group_by=%3Cscript%3E",
            &[400],
        ),
        (
            "usage format",
            "/v1/organizations/analytics/usage?format=xml",
            &[400],
        ),
        (
            "usage time",
            "/v1/organizations/analytics/usage?starting_at=yesterday",
            &[400],
        ),
        (
            "usage range",
            "/v1/organizations/analytics/usage?starting_at=2020-01-01T00:00:00Z",
            &[400],
        ),
        (
            "users page token",
            "/v1/organizations/users?page=%%%",
            &[400],
        ),
        (
            "users limit",
            "/v1/organizations/users?limit=100000",
            &[400],
        ),
        (
            "audit after_id",
            "/v1/organizations/spend_limits/audit?after_id=';DROP",
            &[400],
        ),
        (
            "audit actor too long",
            &format!(
                "/v1/organizations/spend_limits/audit?actor={}",
                "x".repeat(300)
            ),
            &[400],
        ),
        (
            "policy preview without a person",
            "/v1/organizations/policies/preview",
            &[400],
        ),
    ] {
        one(t, s, name, request("GET", path, &key, b""), right).await;
    }
    let preview = "/v1/organizations/spend_limits/preview";
    for (name, body, right) in [
        ("preview not JSON", b"{not json".to_vec(), &[400][..]),
        ("preview of nothing", b"{}".to_vec(), &[400]),
        ("preview oversized", vec![b' '; 70 * 1024], &[413]),
        (
            "preview of a huge amount",
            br#"{"scope":{"type":"organization"},"period":"daily","amount":"99999999999999999999999"}"#.to_vec(),
            &[400],
        ),
    ] {
        one(t, s, name, request("POST", preview, &key, &body), right).await;
    }
    // A read key may preview (a read) and may not revoke (a change).
    let read = [("x-api-key", READ_KEY)];
    let body = br#"{"scope":{"type":"organization"},"period":"daily","amount":"100"}"#;
    one(
        t,
        s,
        "read key previews",
        request("POST", preview, &read, body),
        &[200],
    )
    .await;
    let revoke = "/v1/organizations/users/alice/revoke_sessions";
    one(
        t,
        s,
        "read key revokes",
        request("POST", revoke, &read, b""),
        &[403],
    )
    .await;
}
