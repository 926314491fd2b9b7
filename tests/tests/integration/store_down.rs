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
        assert_eq!(ready(&s).await, 200);
        assert_eq!(infer().await.unwrap().status(), 200);
        wreck(&s.gw.db_path());
        assert_eq!(
            ready(&s).await,
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

#[tokio::test]
async fn a_readiness_grace_keeps_readyz_ready_but_never_the_caps() {
    let extra = "admin: {write_keys: [{id: ops, key: admin-write-key-0123456789abcdef0123456789}]}\nenforcement: {fail_closed_on_error: true}\n";
    let opts = gatehouse_tests::SignInOptions {
        store: "readiness_grace_seconds: \"60\"",
        ..Default::default()
    };
    let s = gatehouse_tests::sign_in_gateway_opts(&[SESSION_SECRET_A], extra, &opts).await;
    let alice = session_token(&s.origin, "alice", "alice@corp.example", &["engineering"]);
    assert_eq!(capped_call(&s, &alice).await.0, 200);
    wreck(&s.gw.db_path());
    let r = s.gw.client.get(s.gw.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 200, "within the grace the gateway stays ready");
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["status"], "ready");
    assert_eq!(v["store_failing"], "store failed");
    // The grace keeps only the answer: capped inference still fails closed.
    let (status, body) = capped_call(&s, &alice).await;
    assert_eq!(status, 429, "{body}");
    // Past the grace (on the gateway's clock) the probe tells the truth.
    s.clock.advance(61);
    assert_eq!(ready(&s).await, 503);
}

/// A capped person's request; `(status, body)`.
async fn capped_call(s: &gatehouse_tests::SignInGateway, token: &str) -> (u16, serde_json::Value) {
    let r =
        s.gw.client
            .post(s.gw.url("/v1/messages"))
            .bearer_auth(token)
            .json(&sonnet(false))
            .send()
            .await
            .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or_default())
}

async fn ready(s: &gatehouse_tests::SignInGateway) -> u16 {
    s.gw.client
        .get(s.gw.url("/readyz"))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The books balance: nothing reserved, and what each person spent is the sum of their
/// usage rows' cost.
async fn books_balance(s: &gatehouse_tests::SignInGateway, sub: &str) {
    let store = s.gw.handle.store();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let open = store.open_reservations().await.unwrap();
        if open.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "reservations stay open: {open:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let rows = store.recent_usage(100_000).await.unwrap();
    let cost: u64 = rows
        .iter()
        .filter(|r| r.principal == format!("user:{sub}"))
        .map(|r| r.cost_micro_usd)
        .sum();
    let st = store
        .standings(
            sub,
            &[],
            gatehouse_engine::spend::GroupMode::Min,
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    assert_eq!((st[0].spent_micro, st[0].reserved_micro), (cost, 0));
}

const CAPS: &str =
    "admin: {write_keys: [{id: ops, key: admin-write-key-0123456789abcdef0123456789}]}\n";

/// Fault drill: another process holds the database's write lock (a paused store). The
/// gateway is unready, capped inference is refused (fail closed by default) and never
/// reaches an upstream; once the lock is gone everything recovers and the books balance.
#[tokio::test]
async fn a_paused_store_fails_closed_and_recovers_intact() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], CAPS).await;
    let alice = session_token(&s.origin, "alice", "alice@corp.example", &[]);
    assert_eq!(capped_call(&s, &alice).await.0, 200);
    let lock = rusqlite::Connection::open(s.gw.db_path()).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let upstream_calls = s.gw.fake.requests().len();
    assert_eq!(ready(&s).await, 503, "a store that cannot write is unready");
    let (status, body) = capped_call(&s, &alice).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(s.gw.fake.requests().len(), upstream_calls);
    lock.execute_batch("COMMIT").unwrap();
    drop(lock);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while ready(&s).await != 200 {
        assert!(std::time::Instant::now() < deadline, "never ready again");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(capped_call(&s, &alice).await.0, 200);
    s.gw.usage_rows(2).await;
    books_balance(&s, "alice").await;
}

/// Mounts a small tmpfs (needs root, as CI runs); `None` when not root.
fn small_disk(dir: &std::path::Path) -> Option<Mount> {
    let uid = std::process::Command::new("id").arg("-u").output().unwrap();
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        eprintln!("not root: the disk-full drill needs a tmpfs mount and is skipped");
        return None;
    }
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=6m", "tmpfs"])
        .arg(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mount a tmpfs for the disk-full drill");
    Some(Mount(dir.to_owned()))
}

struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .args(["-l"])
            .arg(&self.0)
            .status();
    }
}

/// Fault drill: the disk under the database fills up. Writes fail, so the gateway goes
/// unready and capped inference is refused; freeing space recovers it, the database passes
/// an integrity check and the books balance.
#[tokio::test]
async fn a_full_disk_fails_closed_and_recovers_intact() {
    let disk = tempfile::tempdir().unwrap();
    let Some(_mount) = small_disk(disk.path()) else {
        return;
    };
    let db = disk.path().join("gatehouse.db");
    let s = gatehouse_tests::sign_in_gateway_at(&[SESSION_SECRET_A], CAPS, &db).await;
    let alice = session_token(&s.origin, "alice", "alice@corp.example", &[]);
    assert_eq!(capped_call(&s, &alice).await.0, 200);
    // Fill the disk.
    let filler = disk.path().join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let block = vec![0u8; 64 * 1024];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
    // Traffic until the store needs space it cannot get (bounded).
    let mut refused = 0;
    for _ in 0..400 {
        let (status, body) = capped_call(&s, &alice).await;
        match status {
            200 => {}
            429 | 503 => {
                refused += 1;
                break;
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert!(refused > 0, "a full disk made writes fail");
    assert_eq!(ready(&s).await, 503);
    // Free the space: the gateway recovers.
    drop(f);
    std::fs::remove_file(&filler).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while ready(&s).await != 200 {
        assert!(std::time::Instant::now() < deadline, "never ready again");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(capped_call(&s, &alice).await.0, 200);
    books_balance(&s, "alice").await;
    let check = rusqlite::Connection::open(&db).unwrap();
    let verdict: String = check
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(verdict, "ok");
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
