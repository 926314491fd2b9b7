//! Starting and stopping the engine: [`start`] builds the shared [`Gateway`] state, opens
//! the store, starts the recorder and serves the pipeline; the returned [`Handle`] reports
//! the bound address and shuts down gracefully (in-flight streams drain, usage is flushed).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::{ClientKeys, local_key};
use crate::config::{Config, StoreConfig};
use crate::deps::Deps;
use crate::events::Event;
use crate::inference::blocks::Refusals;
use crate::local_control::LocalControls;
use crate::metering::pricing::Pricing;
use crate::metering::recorder;
use crate::models::Catalog;
use crate::outbound::{FetchPolicy, SafeFetch};
use crate::pipeline;
use crate::secret::Secret;
use crate::store::{PostgresStore, SqliteStore, Store, StoreError};
use crate::upstream::Upstreams;

pub use crate::gateway::Gateway;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot start the connection threads: {0}")]
    Threads(std::io::Error),
    #[error("cannot build the upstream HTTP client: {0}")]
    Client(String),
    #[error(transparent)]
    Upstream(crate::upstream::SetupError),
    #[error(transparent)]
    Oidc(#[from] crate::identity::oidc::OidcError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(
        "load_test_mode is on, but the store already holds real spend (usage priced above \
         zero). A load test writes made-up developers into it, so it must not share a \
         database with real developers: point the store at its own empty database"
    )]
    LoadTestRealSpend,
}

/// A running gateway.
pub struct Handle {
    addr: SocketAddr,
    gateway: Arc<Gateway>,
    stop: CancellationToken,
    serve: JoinHandle<()>,
    recorder_stop: CancellationToken,
    recorder: JoinHandle<()>,
    issued_local_key: Option<Secret>,
    /// The separate metrics listener's address (`metrics.listen`).
    metrics_addr: Option<SocketAddr>,
    /// The connection threads; they stop when the last owner (this, or the serving task)
    /// is dropped, after `shutdown` has drained what runs on them.
    threads: Arc<crate::edge::listener::Threads>,
}

/// What start would refuse in a validated config beyond the config's own rules (today the
/// managed policies' merged results), else every startup warning: the config's own
/// (`config.warnings`) and those that need the model and price tables. `check-config` runs
/// it, so it refuses the same files and prints the same warnings `serve` logs.
pub fn check_config(
    config: &Config,
) -> Result<Vec<crate::config::warnings::ConfigWarning>, crate::config::ConfigError> {
    crate::policy::Policies::new(
        &config.policies,
        &crate::policy::extras::for_config(config, None),
    )
    .map_err(|e| config.hide(e))?;
    crate::metering::price_warnings::duplicate_overrides(config)?;
    let mut warnings = config.warnings.clone();
    warnings.extend(crate::models::warnings::check(config));
    warnings.extend(crate::metering::price_warnings::check(config));
    Ok(warnings)
}

/// How the gateway serves its connections (the binaries' choice, not the config's).
#[derive(Debug, Clone, Copy, Default)]
pub struct Serving {
    /// Connections are served on this many single-threaded runtimes of their own
    /// (`edge::listener::threads`); 0 serves them on the caller's runtime.
    pub connection_threads: usize,
}

/// Binds `config.listen` and starts serving.
pub async fn start(config: Config, deps: Deps) -> Result<Handle, StartError> {
    start_with(config, deps, Serving::default()).await
}

/// [`start`] with a choice of how connections are served.
pub async fn start_with(
    config: Config,
    deps: Deps,
    serving: Serving,
) -> Result<Handle, StartError> {
    let mut addr = SocketAddr::new(config.listen.host, config.listen.port);
    if let Some(name) = &config.listen.host_name {
        let resolved = tokio::net::lookup_host((name.as_str(), config.listen.port))
            .await
            .and_then(|mut all| {
                all.next().ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("`{name}` has no address"),
                    )
                })
            });
        addr = resolved.map_err(|source| StartError::Bind { addr, source })?;
    }
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { addr, source })?;
    start_on_with(listener, config, deps, serving).await
}

/// Starts serving on a listener the caller bound (tests bind port 0).
pub async fn start_on(
    listener: TcpListener,
    config: Config,
    deps: Deps,
) -> Result<Handle, StartError> {
    start_on_with(listener, config, deps, Serving::default()).await
}

/// [`start_on`] with a choice of how connections are served.
pub async fn start_on_with(
    listener: TcpListener,
    config: Config,
    deps: Deps,
    serving: Serving,
) -> Result<Handle, StartError> {
    start_on_controlled(listener, config, deps, serving, LocalControls::default()).await
}

/// [`start_on_with`] with the desktop app's controls (paused, the cached allowlist, the app
/// API) set before the first connection is accepted, so no request is served without them.
pub async fn start_on_controlled(
    listener: TcpListener,
    config: Config,
    deps: Deps,
    serving: Serving,
    local: LocalControls,
) -> Result<Handle, StartError> {
    let threads = std::sync::Arc::new(
        crate::edge::listener::Threads::start(serving.connection_threads)
            .map_err(StartError::Threads)?,
    );
    let addr = listener.local_addr().map_err(|source| StartError::Bind {
        addr: SocketAddr::new(config.listen.host, config.listen.port),
        source,
    })?;
    // Port 0 asked for a free port: the configuration says which one (for the status).
    let mut config = config;
    config.listen.port = addr.port();
    // No `public_url` on a loopback listener: the bound address is the origin.
    if let Some(id) = config.identity.as_mut().filter(|i| i.public_url_derived) {
        let _ = id.public_url.set_port(Some(addr.port()));
    }
    // The separate metrics listener (`metrics.listen`) is bound before anything starts.
    let metrics_listener = match config.metrics_listen {
        Some(addr) => {
            let l = TcpListener::bind(addr)
                .await
                .map_err(|source| StartError::Bind { addr, source })?;
            let bound = l.local_addr().unwrap_or(addr);
            Some((l, bound))
        }
        None => None,
    };
    // Every event also reaches live subscribers (the desktop, dashboard streams).
    let (deps, live) = crate::events::live::tap(deps);
    // ... and is counted for `/metrics`.
    let (deps, metrics) = crate::metrics::tap(deps);
    let store: Arc<dyn Store> = match &config.store {
        StoreConfig::Sqlite { path } => {
            let path = path.clone();
            let now = deps.clock.now();
            let opened = tokio::task::spawn_blocking(move || SqliteStore::open(&path, now))
                .await
                .map_err(|e| StoreError::Database(e.to_string()))??;
            Arc::new(opened)
        }
        StoreConfig::Postgres(pg) => Arc::new(PostgresStore::open(pg, deps.clock.now()).await?),
    };
    // Every store operation is timed for `/metrics`.
    let store: Arc<dyn Store> = Arc::new(crate::store::timed::Timed::new(
        store,
        metrics.store_observer(),
    ));
    if config.load_test.is_some() {
        let since = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
        if store.usage_totals(since).await?.cost_micro_usd > 0 {
            return Err(StartError::LoadTestRealSpend);
        }
    }
    let mut key_entries: Vec<(String, [u8; 32])> = config
        .client_keys
        .iter()
        .map(|k| (k.id.clone(), k.hash))
        .collect();
    let mut issued_local_key = None;
    if config.local_key {
        let (hash, issued) = local_key::ensure(store.as_ref(), deps.clock.now()).await?;
        if issued.is_some() {
            deps.emit(Event::new("local_key.issued").with("key_id", local_key::LOCAL_KEY_ID));
        }
        issued_local_key = issued;
        key_entries.push((local_key::LOCAL_KEY_ID.into(), hash));
    }
    let upstreams = Upstreams::new(&config, &deps, threads.len())
        .await
        .map_err(StartError::Upstream)?;
    // Every outbound call to an operator-configured URL goes through the safe-fetch helper.
    let fetch = |allow_loopback: bool, timeout: Duration| {
        SafeFetch::try_new(FetchPolicy {
            allow_loopback,
            timeout,
        })
        .map_err(|e| StartError::Client(e.to_string()))
    };
    // IdP traffic: the extra CAs of `oidc.ca_cert_pem`, and the proxy `oidc.use_proxy` picks.
    let idp_fetch = |cfg: &crate::config::IdentityConfig, env: &dyn crate::deps::Environment| {
        let choice = crate::identity::proxy::decide(cfg.oidc.extras.use_proxy, env);
        for w in &choice.warnings {
            tracing::warn!("{w}");
        }
        if let Some((url, _)) = &choice.proxy {
            tracing::info!(proxy = %crate::outbound::redact_url(url), "oidc: IdP requests use the proxy; hosts in NO_PROXY go direct");
        }
        SafeFetch::try_with_proxy(
            FetchPolicy {
                allow_loopback: cfg.oidc.allow_loopback,
                timeout: Duration::from_secs(10),
            },
            &cfg.oidc.extras.ca_certs,
            choice.proxy.as_ref().map(|(u, n)| (u, n.as_str())),
        )
        .map_err(|e| StartError::Client(e.to_string()))
    };
    let identity = match &config.identity {
        Some(cfg) => Some(
            crate::identity::Identity::start(
                cfg.clone(),
                store.as_ref(),
                &deps,
                idp_fetch(cfg, deps.env.as_ref())?,
            )
            .await?,
        ),
        None => None,
    };
    // Clients are told to send OTLP here only when it goes somewhere and the public URL is known.
    let otlp_endpoint = config
        .listen
        .public_url
        .as_ref()
        .filter(|_| !config.telemetry.destinations.is_empty())
        .map(|u| u.as_str().trim_end_matches('/').to_owned());
    let policies = crate::policy::Policies::new(
        &crate::policy::extras::served_policies(&config, otlp_endpoint.is_some()),
        &crate::policy::extras::for_config(&config, otlp_endpoint.as_deref()),
    )?;
    let webhook = match config.webhook.clone() {
        Some(cfg) => {
            let f = fetch(cfg.allow_loopback, cfg.timeout)?;
            Some(crate::policy::webhook::Webhook::new(cfg, f))
        }
        None => None,
    };
    let relay = crate::telemetry::Relay::new(
        config.telemetry.clone(),
        fetch(
            config.telemetry.allow_loopback,
            crate::telemetry::DESTINATION_TIMEOUT,
        )?,
        deps.events.clone(),
    );
    let workload = match &config.workload {
        Some(cfg) => {
            let loopback = cfg
                .jwks_url
                .host_str()
                .is_some_and(|h| h == "127.0.0.1" || h == "localhost" || h == "[::1]");
            let v = Arc::new(crate::workload::WorkloadVerifier::new(
                cfg.clone(),
                fetch(loopback, Duration::from_secs(10))?,
                deps.clock.clone(),
            ));
            v.prime().await;
            Some(v)
        }
        None => None,
    };
    let pricing = Arc::new(Pricing::new(config.pricing.clone()));
    let recorder_stop = CancellationToken::new();
    let stop_jobs = recorder_stop.clone();
    let conversations = Arc::new(crate::conversation::Tracker::new());
    let (recorder, recorder_task) = recorder::spawn(
        store.clone(),
        pricing.clone(),
        deps.events.clone(),
        conversations.clone(),
        recorder_stop.clone(),
    );
    let tracker = TaskTracker::new();
    let ledger = crate::spend::ledger::Ledger::new(store.clone(), tracker.clone());
    let limits = Arc::new(crate::limits::Limiter::new(
        config.inference_limits.clone(),
        store.clone(),
        tracker.clone(),
    ));
    let gateway = Arc::new(Gateway {
        limits,
        catalog: Catalog::new(&config.models, &config.upstreams),
        keys: ClientKeys::new(key_entries),
        started_at: deps.clock.now(),
        local,
        live,
        metrics,
        refusals: Refusals::default(),
        model_caps: crate::upstream::model_caps::Memo::new(
            &config.routing.capabilities,
            &config.upstreams,
        ),
        conversations,
        readiness: crate::memo::Memo::new(Duration::ZERO),
        ready_grace: crate::readiness::Readiness::new(config.readiness_grace),
        snapshots: [Duration::from_secs(1), Duration::ZERO].map(crate::memo::Memo::new),
        admin_overview: crate::admin::Overview::default(),
        admin_reports: crate::memo::MemoMap::new(std::time::Duration::from_secs(15)),
        config,
        deps,
        store,
        upstreams,
        recorder,
        identity,
        workload,
        policies,
        otlp_endpoint,
        webhook,
        relay,
        directory: Default::default(),
        pricing,
        tracker,
        ledger,
    });
    spawn_kv_cleanup(gateway.clone(), stop_jobs.clone());
    spawn_retention(gateway.clone(), stop_jobs.clone());
    // Reservations a crash left open are charged as estimated (one that was settled has
    // its usage row).
    crate::spend::admission::reconcile(&gateway).await;
    spawn_replica_reconcile(gateway.clone(), stop_jobs.clone());
    if gateway.config.spend.is_some() {
        spawn_lease_sweep(gateway.clone(), stop_jobs.clone());
    }
    crate::inference::probe::spawn(gateway.clone(), stop_jobs.clone());
    // Replicas share upstream breakers and cooldowns through PostgreSQL.
    if gateway.store.backend() == "postgres" {
        crate::upstream::shared::spawn(
            gateway.store.clone(),
            gateway.upstreams.health.clone(),
            gateway.deps.clock.clone(),
            stop_jobs.clone(),
        );
    }
    spawn_revocation_sync(gateway.clone(), stop_jobs.clone());
    let stop = CancellationToken::new();
    let app = {
        let gw = gateway.clone();
        // Boxed: the pipeline's future is large, and unboxed it would sit inside every
        // connection's task for the connection's whole life, idle or not.
        move |req, peer| Box::pin(pipeline::handle(gw.clone(), peer, req))
    };
    let tls = match &gateway.config.listen.tls {
        Some(tls) => Some(
            tls.server_config()
                .map_err(|e| StartError::Config(crate::config::ConfigError::at("listen.tls", e)))?,
        ),
        None => None,
    };
    let metrics_addr = match metrics_listener {
        Some((listener, bound)) => {
            tokio::spawn(crate::metrics::serve_listener(
                listener,
                gateway.clone(),
                stop.clone(),
            ));
            Some(bound)
        }
        None => None,
    };
    let serve = tokio::spawn(crate::edge::listener::serve(
        listener,
        tls,
        app,
        crate::edge::listener::Settings::from_config(&gateway.config),
        threads.clone(),
        stop.clone(),
    ));
    gateway.deps.emit(
        Event::new("gateway.start")
            .with("addr", addr.to_string())
            .with("store", gateway.store.backend())
            .with("upstreams", gateway.upstreams.list.len()),
    );
    Ok(Handle {
        addr,
        gateway,
        stop,
        serve,
        recorder_stop,
        recorder: recorder_task,
        issued_local_key,
        metrics_addr,
        threads,
    })
}

/// Retires idle and aged spend leases and releases the finished ones.
fn spawn_lease_sweep(gw: Arc<Gateway>, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => gw.ledger.sweep(),
            }
        }
    });
}

/// Expired kv rows are invisible at once; this removes them physically every 30 s.
fn spawn_kv_cleanup(gw: Arc<Gateway>, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(30));
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if let Err(e) = gw.store.kv_purge_expired(gw.deps.clock.now()).await {
                        tracing::warn!(error = %e, "kv cleanup failed");
                    }
                }
                () = stop.cancelled() => break,
            }
        }
    });
}

/// On a shared store, sessions revoked through another replica are picked up within
/// [`REVOCATION_SYNC`]; a single SQLite process knows its own revocations at once.
fn spawn_revocation_sync(gw: Arc<Gateway>, stop: CancellationToken) {
    if gw.store.backend() != "postgres" || gw.identity.is_none() {
        return;
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(REVOCATION_SYNC);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if let Some(identity) = &gw.identity {
                        identity.sync_revoked(gw.store.as_ref(), gw.deps.clock.now()).await;
                    }
                }
                () = stop.cancelled() => break,
            }
        }
    });
}

/// How often a replica on a shared store reloads revoked sessions.
pub const REVOCATION_SYNC: Duration = Duration::from_secs(5);

/// On a shared store a replica can die while the others keep serving: every minute, open
/// reservations whose gateway is gone (see `Store::open_reservations`) are reconciled
/// without waiting for a restart, and its concurrency slots freed (with limit rows idle
/// for two days). SQLite has one process per file, so start-up suffices.
fn spawn_replica_reconcile(gw: Arc<Gateway>, stop: CancellationToken) {
    if gw.store.backend() != "postgres" {
        return;
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    crate::spend::admission::reconcile(&gw).await;
                    gw.limits.reap(gw.deps.clock.now()).await;
                }
                () = stop.cancelled() => break,
            }
        }
    });
}

/// Retention at start and then hourly: admin audit, spend and usage, identities, each as
/// long as `admin.*_retention_*` says (365 days, 13 months, 90 days by default). A failure
/// is logged once until a sweep succeeds again.
fn spawn_retention(gw: Arc<Gateway>, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(3600));
        let mut warned = false;
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let now = gw.deps.clock.now();
                    let keep = gw.config.spend.as_ref().map(|s| s.retention).unwrap_or_default();
                    let days = |n: u32| now - chrono::Duration::days(i64::from(n));
                    let spend_cut = now
                        .checked_sub_months(chrono::Months::new(keep.spend_months))
                        .unwrap_or(now);
                    match gw.store.retention(days(keep.audit_days), spend_cut, days(keep.identity_days)).await {
                        Ok(n) => {
                            warned = false;
                            if n > 0 {
                                tracing::info!(rows = n, "retention removed old rows");
                            }
                        }
                        Err(e) if !warned => {
                            warned = true;
                            tracing::warn!(error = %e, "retention sweep failed; old rows are kept until it succeeds");
                        }
                        Err(_) => {}
                    }
                }
                () = stop.cancelled() => break,
            }
        }
    });
}

impl Handle {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many connection threads serve the listener (0: the caller's runtime does).
    pub fn connection_threads(&self) -> usize {
        self.threads.len()
    }

    /// `http(s)://host:port` of the listener.
    pub fn base_url(&self) -> String {
        let scheme = if self.gateway.config.listen.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// The separate metrics listener's address, when `metrics.listen` is set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    pub fn store(&self) -> Arc<dyn Store> {
        self.gateway.store.clone()
    }

    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    /// The local key, only on the start that created it (shown to the user once).
    pub fn issued_local_key(&self) -> Option<&Secret> {
        self.issued_local_key.as_ref()
    }

    /// Desktop controls: pause, the cached central allowlist, the app API.
    pub fn local(&self) -> &LocalControls {
        &self.gateway.local
    }

    /// Every event the engine emits from now on (plus [`Handle::publish`]ed ones, and
    /// `block.recorded` for each refused request). A receiver that falls more than 256
    /// events behind gets `RecvError::Lagged` and continues with the newest.
    pub fn subscribe_events(&self) -> tokio::sync::broadcast::Receiver<Event> {
        self.gateway.live.subscribe()
    }

    /// Caps changed outside the admin API (the desktop's budgets): spend leases reserved
    /// before admit no more requests.
    pub fn caps_changed(&self) {
        self.gateway.ledger.retire_all();
    }

    /// Sends an event (e.g. `app.state`) to live subscribers and dashboards; not logged.
    pub fn publish(&self, event: Event) {
        self.gateway.live.publish(event);
    }

    /// Stops accepting, lets in-flight requests finish (at most `timeouts.shutdown_drain`),
    /// then flushes usage rows.
    pub async fn shutdown(self) {
        let drain = self.gateway.config.timeouts.shutdown_drain;
        self.stop.cancel();
        self.gateway.live.close();
        let mut serve = self.serve;
        if tokio::time::timeout(drain, &mut serve).await.is_err() {
            tracing::warn!(
                ms = drain.as_millis() as u64,
                "in-flight requests did not finish in time; closing them"
            );
            serve.abort();
        }
        self.gateway.tracker.close();
        if tokio::time::timeout(drain, self.gateway.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("disconnect drains did not finish in time");
        }
        self.gateway.relay.drain(drain).await;
        self.recorder_stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.recorder).await;
        // Every usage row is written: leases with nothing in flight are released.
        if tokio::time::timeout(Duration::from_secs(10), self.gateway.ledger.close())
            .await
            .is_err()
        {
            tracing::warn!(
                "spend leases could not be released in time; they are charged as estimated at the next start"
            );
        }
        self.gateway.deps.emit(Event::new("gateway.stop"));
    }
}
