//! Backups of the SQLite store ([`gatehouse_engine::store::backup`], behind `gatehouse
//! backup` / `gatehouse restore`): taken while a gateway serves requests (which keep
//! succeeding), refused as a restore target while that gateway has the file open, and
//! restored into the stopped instance, which then starts with exactly the usage, caps and
//! audit rows of the backup (later rows gone, the replaced file kept as `.bak`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use chrono::Utc;
use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_engine::spend::{Period, ScopeType};
use gatehouse_engine::store::Store;
use gatehouse_engine::store::backup::{self, BackupError};
use gatehouse_tests::{TestGateway, base_yaml, load, sonnet};

async fn send(g: &TestGateway, n: usize) {
    for _ in 0..n {
        let r = g.messages(sonnet(false)).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
}

/// Usage request ids, cap ids and audit ids, sorted.
async fn contents(store: &dyn Store) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut usage: Vec<String> = store
        .recent_usage(10_000)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.request_id)
        .collect();
    let mut caps: Vec<String> = store
        .list_limits(None, None, None, 100)
        .await
        .unwrap()
        .0
        .into_iter()
        .map(|l| l.id)
        .collect();
    let mut audit: Vec<String> = store
        .audit_page(gatehouse_engine::store::AuditQuery {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap()
        .0
        .into_iter()
        .map(|a| a.id)
        .collect();
    usage.sort();
    caps.sort();
    audit.sort();
    (usage, caps, audit)
}

async fn gateway_on(dir: tempfile::TempDir) -> TestGateway {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let db = dir.path().join("gatehouse.db");
    let config = load(&base_yaml(&fake.url(), &db), dir.path());
    TestGateway::start_config(config, fake, dir).await
}

fn restore_when_closed(backup_file: &Path, live: &Path) -> backup::Summary {
    // The stopped gateway's store threads close their connections shortly after the drop.
    for _ in 0..100 {
        match backup::restore(backup_file, live) {
            Err(BackupError::InUse { .. }) => std::thread::sleep(Duration::from_millis(50)),
            other => return other.unwrap(),
        }
    }
    panic!("{} stayed in use after the gateway stopped", live.display());
}

#[tokio::test]
async fn a_backup_taken_while_serving_restores_usage_caps_and_audit() {
    let g = TestGateway::start().await;
    let store = g.handle.store();
    let now = Utc::now();
    store
        .upsert_limit(
            ScopeType::Organization,
            "",
            Period::Monthly,
            Some(10_000),
            "ops",
            now,
        )
        .await
        .unwrap();
    store
        .upsert_limit(
            ScopeType::User,
            "alice",
            Period::Daily,
            Some(300),
            "ops",
            now,
        )
        .await
        .unwrap();
    send(&g, 5).await;
    g.usage_rows(5).await;
    let before = contents(store.as_ref()).await;

    // Back up while requests keep coming: they all succeed.
    let live = g.db_path();
    let dest = g.dir.path().join("backups").join("gatehouse-backup.db");
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let (live2, dest2) = (live.clone(), dest.clone());
    let copy = tokio::task::spawn_blocking(move || backup::backup(&live2, &dest2));
    let traffic = async {
        let mut ok = 0;
        while !copy.is_finished() && ok < 200 {
            send(&g, 1).await;
            ok += 1;
        }
        ok
    };
    let during = traffic.await;
    let summary = copy.await.unwrap().unwrap();
    assert_eq!((summary.spend_limits, summary.audit_rows), (2, 2));
    assert!(summary.usage_rows >= 5, "{summary:?}");
    assert!(
        matches!(
            backup::backup(&live, &dest),
            Err(BackupError::Exists { .. })
        ),
        "an existing file is never overwritten"
    );
    let in_backup = backup::check(&dest).unwrap();

    // The running gateway's file cannot be replaced.
    let refused = backup::restore(&dest, &live).unwrap_err();
    assert!(matches!(refused, BackupError::InUse { .. }), "{refused}");
    assert!(refused.to_string().contains("stop it first"), "{refused}");

    // After the backup: another cap (and its audit row) and more usage.
    store
        .upsert_limit(
            ScopeType::User,
            "bob",
            Period::Weekly,
            Some(100),
            "ops",
            Utc::now(),
        )
        .await
        .unwrap();
    send(&g, 2).await;
    // Usage rows are written in batches after the answers: wait for every request's row.
    g.usage_rows(5 + during + 2).await;
    let after = contents(store.as_ref()).await;
    assert_eq!(after.1.len(), 3);
    assert!(after.0.len() as i64 > in_backup.usage_rows);

    let TestGateway { handle, dir, .. } = g;
    handle.shutdown().await;
    drop(store);
    let restored = restore_when_closed(&dest, &live);
    assert_eq!(restored, backup::check(&live).unwrap());
    assert_eq!(restored.usage_rows, in_backup.usage_rows);
    let bak = dir.path().join("gatehouse.db.bak");
    assert_eq!(
        backup::check(&bak).unwrap().spend_limits,
        3,
        "the replaced file is kept"
    );

    // The instance starts on the restored file with the backup's rows, and works.
    let g = gateway_on(dir).await;
    let (usage, caps, audit) = contents(g.handle.store().as_ref()).await;
    assert_eq!((caps, audit), (before.1, before.2));
    assert_eq!(usage.len() as i64, in_backup.usage_rows);
    assert!(before.0.iter().all(|id| usage.contains(id)));
    send(&g, 1).await;
    g.usage_rows(usage.len() + 1).await;
}
