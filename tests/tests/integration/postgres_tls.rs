//! PostgreSQL over TLS against a real TLS-only cluster with a CA made here
//! ([`gatehouse_tests::postgres_tls`]): `verify-full` with the right CA meters a request
//! end to end (over an encrypted session), a wrong CA stops the gateway at start with an
//! error naming the store and never the password, `verify-full` checks the host name
//! where `verify-ca` does not, `require` and libpq's default `prefer` encrypt without a CA
//! while plain TCP (`disable`) is refused by the server, and a client certificate signs in
//! where the server asks for one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use chrono::Utc;
use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_engine::config::PostgresConfig;
use gatehouse_engine::deps::{Deps, MapEnvironment, NoCredentialStore, SystemClock};
use gatehouse_engine::events::MemoryEventSink;
use gatehouse_engine::secret::Secret;
use gatehouse_engine::store::{PostgresStore, Store};
use gatehouse_tests::postgres_tls::{CERT_USER, PASSWORD, TlsCluster};
use gatehouse_tests::{TestGateway, base_yaml, load, sonnet};

/// The base config with `store.postgres_url: url` instead of SQLite.
fn yaml_with_store(fake_url: &str, db: &std::path::Path, url: &str) -> String {
    let sqlite = format!("store: {{sqlite_path: \"{}\"}}", db.display());
    let yaml = base_yaml(fake_url, db);
    assert!(yaml.contains(&sqlite));
    yaml.replace(&sqlite, &format!("store: {{postgres_url: \"{url}\"}}"))
}

fn store_config(url: &str) -> PostgresConfig {
    PostgresConfig {
        url: Secret::new(url),
        username: None,
        password: None,
        max_connections: 2,
        connect_timeout: std::time::Duration::from_secs(5),
    }
}

async fn open(url: &str) -> Result<PostgresStore, String> {
    match PostgresStore::open(&store_config(url), Utc::now()).await {
        Ok(store) => Ok(store),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test]
async fn verify_full_with_the_right_ca_meters_a_request_over_tls() {
    let cluster = TlsCluster::start();
    let url = cluster.named_url(&format!(
        "sslmode=verify-full&sslrootcert={}",
        cluster.ca_file.display()
    ));
    let g = TestGateway::start_with(FakeConfig::default(), |fake, db| {
        yaml_with_store(fake, db, &url)
    })
    .await;
    assert_eq!(g.handle.store().backend(), "postgres");
    let r = g.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let rows = g.usage_rows(1).await;
    assert_eq!(rows[0].model, "claude-sonnet-4-6");
    assert_eq!(cluster.psql("SELECT count(*) FROM usage_events"), "1");
    // Every gateway session is encrypted (the cluster refuses plain TCP anyway).
    let sessions = cluster.psql(
        "SELECT count(*), bool_and(s.ssl) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
         WHERE a.application_name = 'gatehouse'",
    );
    let (count, all_ssl) = sessions.split_once('|').unwrap();
    assert!(count.parse::<u32>().unwrap() >= 1, "{sessions}");
    assert_eq!(all_ssl, "t", "{sessions}");
}

#[tokio::test]
async fn a_wrong_ca_is_refused_at_start_naming_the_store() {
    let cluster = TlsCluster::start();
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = cluster.url(&format!(
        "sslmode=verify-full&sslrootcert={}",
        cluster.other_ca_file.display()
    ));
    let config = load(
        &yaml_with_store(&fake.url(), &dir.path().join("x.db"), &url),
        dir.path(),
    );
    let deps = Deps {
        clock: Arc::new(SystemClock),
        env: Arc::new(MapEnvironment::default()),
        credentials: Arc::new(NoCredentialStore),
        events: Arc::new(MemoryEventSink::default()),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let Err(e) = gatehouse_engine::server::start_on(listener, config, deps).await else {
        panic!("started with a CA that did not sign the server's certificate");
    };
    let msg = e.to_string();
    let target = format!(
        "cannot connect to PostgreSQL at 127.0.0.1:{}/postgres",
        cluster.port
    );
    assert!(msg.contains(&target), "{msg}");
    assert!(msg.contains("UnknownIssuer"), "{msg}");
    assert!(!msg.contains(PASSWORD), "{msg}");
    // verify-ca checks the chain too.
    let verify_ca = cluster.url(&format!(
        "sslmode=verify-ca&sslrootcert={}",
        cluster.other_ca_file.display()
    ));
    let msg = open(&verify_ca)
        .await
        .err()
        .expect("verify-ca with a wrong CA");
    assert!(msg.contains("UnknownIssuer"), "{msg}");
}

#[tokio::test]
async fn verify_full_checks_the_host_name_and_verify_ca_does_not() {
    let cluster = TlsCluster::start();
    let ca = cluster.ca_file.display().to_string();
    // The certificate names `localhost`; the URL says 127.0.0.1.
    let msg = open(&cluster.url(&format!("sslmode=verify-full&sslrootcert={ca}")))
        .await
        .err()
        .expect("verify-full with a certificate for another name");
    assert!(msg.contains("certificate not valid for name"), "{msg}");
    assert!(!msg.contains(PASSWORD), "{msg}");
    let store = open(&cluster.url(&format!("sslmode=verify-ca&sslrootcert={ca}")))
        .await
        .unwrap();
    store.ready().await.unwrap();
    // With sslrootcert, `require` verifies the chain as libpq does.
    let msg = open(&cluster.url(&format!(
        "sslmode=require&sslrootcert={}",
        cluster.other_ca_file.display()
    )))
    .await
    .err()
    .expect("require with a CA that did not sign the server");
    assert!(msg.contains("UnknownIssuer"), "{msg}");
}

#[tokio::test]
async fn require_and_prefer_encrypt_without_a_ca_and_the_server_refuses_plain_tcp() {
    let cluster = TlsCluster::start();
    let store = open(&cluster.url("sslmode=require")).await.unwrap();
    store.ready().await.unwrap();
    // With the right CA, verify-ca works as well.
    let store = open(&cluster.url(&format!(
        "sslmode=verify-ca&sslrootcert={}",
        cluster.ca_file.display()
    )))
    .await
    .unwrap();
    store.ready().await.unwrap();
    let msg = open(&cluster.url("sslmode=disable"))
        .await
        .err()
        .expect("plain TCP");
    assert!(msg.contains("no encryption"), "{msg}");
    assert!(!msg.contains(PASSWORD), "{msg}");
    // libpq's default (`prefer`) takes the TLS the server offers.
    for prefer in ["sslmode=prefer", "sslmode=allow", ""] {
        let store = open(&cluster.url(prefer))
            .await
            .unwrap_or_else(|e| panic!("{prefer}: {e}"));
        store.ready().await.unwrap();
    }
}

#[tokio::test]
async fn a_client_certificate_signs_in_where_the_server_asks_for_one() {
    let cluster = TlsCluster::start();
    let base = format!(
        "postgres://{CERT_USER}@localhost:{}/postgres?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={}",
        cluster.port,
        cluster.ca_file.display()
    );
    let with_cert = format!(
        "{base}&sslcert={}&sslkey={}",
        cluster.client_cert_file.display(),
        cluster.client_key_file.display()
    );
    let store = open(&with_cert).await.unwrap();
    store.ready().await.unwrap();
    assert_eq!(
        cluster.psql(&format!(
            "SELECT count(*) > 0 FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.usename = '{CERT_USER}' AND s.client_dn = '/CN={CERT_USER}'"
        )),
        "t"
    );
    let msg = open(&base).await.err().expect("no client certificate");
    assert!(msg.contains("localhost"), "{msg}");
    assert!(
        msg.contains("certificate") || msg.contains("authentication"),
        "{msg}\n{}",
        cluster.log()
    );
}
