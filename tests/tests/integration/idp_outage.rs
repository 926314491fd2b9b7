//! Fault drill: the identity provider goes away. People already signed in keep working
//! (gateway sessions are verified locally) until their session expires; then they are
//! refused with the normal 401, and nothing else about the gateway changes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gatehouse_tests::{SESSION_SECRET_A, session_token, sign_in_gateway, sonnet};

#[tokio::test]
async fn signed_in_people_keep_working_through_an_idp_outage_until_expiry() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], "").await;
    let alice = session_token(&s.origin, "alice", "alice@corp.example", &["eng"]);
    let call = || {
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .bearer_auth(&alice)
            .json(&sonnet(false))
            .send()
    };
    assert_eq!(call().await.unwrap().status(), 200);
    let gatehouse_tests::SignInGateway { gw, idp, clock, .. } = s;
    let issuer = idp.issuer.clone();
    drop(idp);
    // The IdP is really gone.
    assert!(
        gw.client
            .get(format!("{issuer}/.well-known/openid-configuration"))
            .send()
            .await
            .is_err()
    );
    let call = || {
        gw.client
            .post(gw.url("/v1/messages"))
            .bearer_auth(&alice)
            .json(&sonnet(false))
            .send()
    };
    for _ in 0..5 {
        assert_eq!(call().await.unwrap().status(), 200);
    }
    let r = gw.client.get(gw.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 200, "readiness does not depend on the IdP");
    // The session lasts one hour; past it the person must sign in again.
    clock.advance(2 * 3600);
    let r = call().await.unwrap();
    assert_eq!(r.status(), 401);
}
