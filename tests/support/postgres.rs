//! A fresh PostgreSQL database per test, in the throwaway cluster `scripts/test.sh` starts
//! (`scripts/postgres.sh`) and names in `GATEHOUSE_TEST_POSTGRES_URL`. Each test gets its
//! own uniquely named database, so tests run in parallel; it is dropped (`WITH (FORCE)`)
//! when the [`TestDatabase`] goes out of scope. Without the variable the test fails and
//! says how to get one: PostgreSQL tests are never skipped silently.

use std::sync::atomic::{AtomicU64, Ordering};

use gatehouse_engine::config::PostgresConfig;
use gatehouse_engine::secret::Secret;

pub const URL_VAR: &str = "GATEHOUSE_TEST_POSTGRES_URL";

/// The cluster's URL (its `postgres` maintenance database).
pub fn server_url() -> String {
    std::env::var(URL_VAR).unwrap_or_else(|_| {
        panic!(
            "{URL_VAR} is not set: run the tests with scripts/test.sh, which starts a \
             throwaway PostgreSQL (scripts/postgres.sh) and exports it \
             (or: export {URL_VAR}=\"$(scripts/postgres.sh)\")"
        )
    })
}

/// Connects to `url` and drives the connection on this runtime.
pub async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the test PostgreSQL: {e}"));
    tokio::spawn(connection);
    client
}

pub struct TestDatabase {
    pub name: String,
    /// URL of this database (same user and password as the cluster's).
    pub url: String,
    server: String,
}

impl TestDatabase {
    pub async fn create() -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let server = server_url();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            "gh_test_{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        connect(&server)
            .await
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .unwrap();
        let mut url = url::Url::parse(&server).unwrap();
        url.set_path(&format!("/{name}"));
        Self {
            name,
            url: url.to_string(),
            server,
        }
    }

    /// The validated store config for this database (pool of 5, 5 s connect timeout).
    pub fn config(&self) -> PostgresConfig {
        PostgresConfig {
            url: Secret::new(self.url.clone()),
            username: None,
            password: None,
            max_connections: 5,
            connect_timeout: std::time::Duration::from_secs(5),
        }
    }

    /// The `store:` line of a gateway YAML using this database.
    pub fn store_yaml(&self) -> String {
        format!(
            "store: {{postgres_url: \"{}\", max_connections: 8}}",
            self.url
        )
    }

    pub async fn client(&self) -> tokio_postgres::Client {
        connect(&self.url).await
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Drop runs inside the test's runtime, which must not block on itself: a short
        // thread with its own runtime ends the remaining sessions and drops the database.
        let (server, name) = (self.server.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let (client, connection) = tokio_postgres::connect(&server, tokio_postgres::NoTls)
                    .await
                    .ok()?;
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                    .await
                    .ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            eprintln!(
                "could not drop test database {} (left for the next cluster reset)",
                self.name
            );
        }
    }
}
