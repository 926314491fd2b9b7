//! Several gateways in this process behind one public origin, as replicas behind a load
//! balancer: each binds its own port 0 listener, all share one OIDC provider, one fake
//! upstream (so what reached the upstream is counted once) and one store (a PostgreSQL
//! database, or one SQLite file for a single gateway).

use std::sync::Arc;

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_engine::Handle;
use gatehouse_engine::deps::{Deps, MapEnvironment, NoCredentialStore, SystemClock};
use gatehouse_engine::events::MemoryEventSink;

use crate::{Idp, SESSION_SECRET_A, load, sign_in_yaml};

pub struct Replica {
    pub handle: Handle,
    pub events: Arc<MemoryEventSink>,
    /// `http://127.0.0.1:<port>` of this replica's own listener.
    pub url: String,
}

pub struct Replicas {
    pub replicas: Vec<Replica>,
    pub fake: FakeUpstream,
    pub idp: Idp,
    /// The shared `listen.public_url` (the first replica's address): session tokens are
    /// minted for it and accepted by every replica.
    pub origin: String,
    pub client: reqwest::Client,
    /// Holds a SQLite file when the store is one.
    pub dir: tempfile::TempDir,
}

/// Starts `n` gateways with the `store: {...}` line `store` (given the temp dir), OIDC,
/// session secret A and `extra` YAML.
pub async fn start(n: usize, store: impl Fn(&std::path::Path) -> String, extra: &str) -> Replicas {
    start_with_idp(n, store, extra, &[]).await
}

/// [`start`] with the IdP started with `idp_env` (e.g. `IDP_ROTATE_REFRESH=0`).
pub async fn start_with_idp(
    n: usize,
    store: impl Fn(&std::path::Path) -> String,
    extra: &str,
    idp_env: &[(&str, &str)],
) -> Replicas {
    let mut listeners = Vec::with_capacity(n);
    for _ in 0..n {
        listeners.push(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap());
    }
    let origin = format!("http://{}", listeners[0].local_addr().unwrap());
    let idp = Idp::start_with(&format!("{origin}/oauth/callback"), idp_env).await;
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let yaml = sign_in_yaml(
        &origin,
        &idp.issuer,
        &fake.url(),
        &store(dir.path()),
        &[SESSION_SECRET_A],
        extra,
    );
    let mut replicas = Vec::with_capacity(n);
    for listener in listeners {
        let url = format!("http://{}", listener.local_addr().unwrap());
        let events = Arc::new(MemoryEventSink::default());
        let deps = Deps {
            clock: Arc::new(SystemClock),
            env: Arc::new(MapEnvironment::default()),
            credentials: Arc::new(NoCredentialStore),
            events: events.clone(),
        };
        let handle = gatehouse_engine::server::start_on_with(
            listener,
            load(&yaml, dir.path()),
            deps,
            crate::SERVING,
        )
        .await
        .unwrap();
        replicas.push(Replica {
            handle,
            events,
            url,
        });
    }
    Replicas {
        replicas,
        fake,
        idp,
        origin,
        client: reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
        dir,
    }
}

impl Replicas {
    /// Stops every replica (drain, flush usage rows).
    pub async fn shutdown(self) {
        for r in self.replicas {
            r.handle.shutdown().await;
        }
    }
}
