//! The store fails under a running gateway (its file is overwritten): `/readyz` answers 503,
//! inference for capped sessions follows `enforcement.fail_closed_on_error`, and sign-in
//! rate limits fail closed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Seek, Write};

use gatehouse_tests::{SESSION_SECRET_A, session_token, sign_in_gateway, sonnet};

/// Destroys the database under the open connection: the file is emptied and the WAL and
/// its index are overwritten, so the next read finds no database.
fn wreck(path: &std::path::Path) {
    let db = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    db.set_len(0).unwrap();
    for ext in ["db-wal", "db-shm"] {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .write(true)
            .open(path.with_extension(ext))
        {
            f.seek(std::io::SeekFrom::Start(0)).unwrap();
            f.write_all(&[0xA5; 32768]).unwrap();
            f.sync_all().unwrap();
        }
    }
}

#[tokio::test]
async fn store_failure_is_visible_and_fails_as_configured() {
    for fail_closed in [true, false] {
        let extra = format!(
            "admin: {{write_keys: [{{id: ops, key: admin-write-key-0123456789abcdef0123456789}}]}}\nenforcement: {{fail_closed_on_error: {fail_closed}}}\n"
        );
        let s = sign_in_gateway(&[SESSION_SECRET_A], &extra).await;
        let alice = session_token(&s.origin, "alice", "alice@corp.example", &["engineering"]);
        let infer = || {
            s.gw.client
                .post(s.gw.url("/v1/messages"))
                .bearer_auth(&alice)
                .json(&sonnet(false))
                .send()
        };
        assert_eq!(
            s.gw.client
                .get(s.gw.url("/readyz"))
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
        assert_eq!(infer().await.unwrap().status(), 200);
        wreck(&s.gw.db_path());
        let r = s.gw.client.get(s.gw.url("/readyz")).send().await.unwrap();
        assert_eq!(
            r.status(),
            503,
            "a failed store read makes the gateway unready"
        );
        assert_eq!(
            s.gw.client
                .get(s.gw.url("/healthz"))
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
        let r = infer().await.unwrap();
        if fail_closed {
            assert_eq!(r.status(), 429);
            assert_eq!(r.headers()["x-should-retry"], "false");
            assert_eq!(
                r.headers()["anthropic-ratelimit-unified-overage-disabled-reason"],
                "fetch_error"
            );
            let v: serde_json::Value = r.json().await.unwrap();
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("spend limit unavailable")
            );
        } else {
            assert_eq!(r.status(), 200, "fail open: inference goes on without caps");
        }
        assert_eq!(s.gw.events.named("spend.unavailable").len(), 1);
    }
}

/// A sign-in rate counter that cannot be read refuses (fail closed) instead of letting the
/// attempt through: 503 on the device authorization endpoint and on the `/device` form.
#[tokio::test]
async fn sign_in_rate_limits_fail_closed_when_the_store_fails() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], "").await;
    wreck(&s.gw.db_path());
    let r =
        s.gw.client
            .post(s.gw.url("/oauth/device_authorization"))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 503);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"], "temporarily_unavailable");
    let r =
        s.gw.client
            .post(s.gw.url("/device"))
            .header("origin", s.origin.clone())
            .form(&[("user_code", "WDJB-MJHT")])
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 503);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("Sign-in is unavailable right now")
    );
    assert_eq!(s.gw.events.named("device.rate_limit_unavailable").len(), 2);
}
