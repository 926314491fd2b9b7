//! The one accept loop, for plain HTTP and HTTPS: every connection is served by hyper's
//! HTTP/1 or HTTP/2 connection (the version found by [`protocol`]: ALPN, or a peek for
//! HTTP/2's preface), each request handed straight to the app (the pipeline's `handle`, with
//! no router in between), and held to the limits that keep a slow or silent client from
//! holding the gateway's resources.
//!
//! | limit | what it cuts | config |
//! |---|---|---|
//! | connection cap | accepting past N open connections: the rest wait in the kernel's accept queue until one closes (a warning is logged at most once a minute) | `listen.max_connections` |
//! | TLS handshake | a handshake that does not finish | `timeouts.tls_handshake_ms` |
//! | request head | a head not complete this long after its first byte (for the first request: after the connection opened) | `timeouts.header_read_ms` |
//! | keep-alive idle | a connection with no request in progress and no byte of a new one | `timeouts.keep_alive_idle_ms` |
//! | request body | while the body is being read, less than 1 KiB arriving in this long: `408` | `timeouts.request_body_idle_ms` |
//! | HTTP/2 liveness | a peer that stops answering PINGs | fixed ([`H2_PING_INTERVAL`], [`H2_PING_TIMEOUT`]) |
//!
//! None of them runs while the gateway works on a request: a model's first byte may take
//! minutes and a stream may run for an hour, and neither is cut here (the upstream's own
//! limits are `timeouts.upstream_*`). hyper's HTTP/1 `header_read_timeout` is not used: it
//! starts as soon as a connection is between requests, so it would also close every idle
//! keep-alive connection after the (short) head timeout; the phases in [`watch`] start the
//! head clock at the first byte of a head instead, as nginx does.
//!
//! Shutdown: `stop` closes the listener and shuts each connection down gracefully
//! (requests in flight finish, idle connections close); when the serving task is dropped
//! (`Handle::shutdown` after `timeouts.shutdown_drain_ms`), every connection is closed.

mod body;
mod protocol;
pub mod threads;
mod watch;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use body::{BodyTimeout, MIN_PROGRESS, is_body_timeout};
use protocol::Protocol;
pub use threads::Threads;
use watch::{Activity, Expiry, Tracked, Watched};

use crate::config::Config;

/// How often an HTTP/2 connection is PINGed, and how long the answer may take before the
/// connection counts as dead (a live client's HTTP/2 stack answers at once).
pub const H2_PING_INTERVAL: Duration = Duration::from_secs(20);
pub const H2_PING_TIMEOUT: Duration = Duration::from_secs(20);

/// A warning is logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The listener's limits, from `listen.*` and `timeouts.*`.
#[derive(Debug, Clone)]
pub struct Settings {
    pub max_connections: usize,
    pub tls_handshake: Duration,
    pub header_read: Duration,
    pub keep_alive_idle: Duration,
    pub request_body_idle: Duration,
}

impl Settings {
    pub fn from_config(config: &Config) -> Self {
        let t = &config.timeouts;
        Settings {
            max_connections: config.listen.max_connections,
            tls_handshake: t.tls_handshake,
            header_read: t.header_read,
            keep_alive_idle: t.keep_alive_idle,
            request_body_idle: t.request_body_idle,
        }
    }
}

/// What serves each request: given the request and the socket's peer, its response.
pub trait App: Clone + Send + Sync + 'static {
    type Answer: Future<Output = http::Response<Body>> + Send + 'static;
    fn call(&self, req: http::Request<Body>, peer: SocketAddr) -> Self::Answer;
}

impl<F, Fut> App for F
where
    F: Fn(http::Request<Body>, SocketAddr) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = http::Response<Body>> + Send + 'static,
{
    type Answer = Fut;
    fn call(&self, req: http::Request<Body>, peer: SocketAddr) -> Fut {
        self(req, peer)
    }
}

/// What every connection task shares.
struct Shared<A> {
    app: A,
    tls: Option<TlsAcceptor>,
    settings: Settings,
    builders: Builders,
    /// Graceful: finish what is in flight.
    stop: CancellationToken,
    /// Immediate: the serving task is gone.
    kill: CancellationToken,
}

/// hyper's connection builders: one per protocol, and the automatic one for connections
/// whose protocol [`protocol`] could not tell.
struct Builders {
    h1: http1::Builder,
    h2: http2::Builder<TokioExecutor>,
    auto: Builder<TokioExecutor>,
}

/// Serves `app` on `listener` (TLS when `tls` is given) until `stop`, then waits for the
/// open connections to finish. Connections are served on `threads` when it has any, else on
/// this runtime.
pub async fn serve<A: App>(
    listener: TcpListener,
    tls: Option<rustls::ServerConfig>,
    app: A,
    settings: Settings,
    threads: Arc<Threads>,
    stop: CancellationToken,
) {
    let kill = CancellationToken::new();
    // Dropping this future (an aborted drain) closes every connection it opened.
    let _kill_on_drop = kill.clone().drop_guard();
    let slots = Arc::new(Semaphore::new(settings.max_connections));
    let shared = Arc::new(Shared {
        app,
        tls: tls.map(|cfg| TlsAcceptor::from(Arc::new(cfg))),
        builders: builders(),
        settings,
        stop: stop.clone(),
        kill,
    });
    let connections = TaskTracker::new();
    let (mut cap_warned, mut accept_warned) = (Throttle::default(), Throttle::default());
    loop {
        let Some(slot) = take_slot(&slots, &shared, &mut cap_warned).await else {
            break;
        };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    if accept_warned.ready() {
                        tracing::warn!(error = %e, "accepting a connection failed");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        // Nagle's algorithm would hold small SSE events back for up to 40 ms.
        let _ = tcp.set_nodelay(true);
        let Some(claim) = threads.claim() else {
            connections.spawn(connection(shared.clone(), tcp, peer, slot));
            continue;
        };
        // The socket moves to the thread's own reactor, so its readiness wakes that thread.
        let Ok(tcp) = tcp.into_std() else { continue };
        let on = claim.handle.clone();
        let shared = shared.clone();
        connections.spawn_on(
            async move {
                let _claim = claim;
                match TcpStream::from_std(tcp) {
                    Ok(tcp) => connection(shared, tcp, peer, slot).await,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "handing a connection over failed")
                    }
                }
            },
            &on,
        );
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// A free connection slot; at the cap, waits for one (the kernel queues new connections
/// meanwhile). `None` once the gateway stops.
async fn take_slot<A>(
    slots: &Arc<Semaphore>,
    shared: &Shared<A>,
    warned: &mut Throttle,
) -> Option<OwnedSemaphorePermit> {
    if let Ok(slot) = slots.clone().try_acquire_owned() {
        return Some(slot);
    }
    if warned.ready() {
        tracing::warn!(
            max_connections = shared.settings.max_connections,
            "connection cap reached (listen.max_connections): new connections wait until one closes"
        );
    }
    tokio::select! {
        slot = slots.clone().acquire_owned() => slot.ok(),
        () = shared.stop.cancelled() => None,
    }
}

/// HTTP/1 and HTTP/2 (the version found by [`protocol`]), with the HTTP/2 liveness PINGs.
fn builders() -> Builders {
    let mut auto = Builder::new(TokioExecutor::new());
    auto.http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(H2_PING_INTERVAL))
        .keep_alive_timeout(H2_PING_TIMEOUT);
    let mut h2 = http2::Builder::new(TokioExecutor::new());
    h2.timer(TokioTimer::new())
        .keep_alive_interval(Some(H2_PING_INTERVAL))
        .keep_alive_timeout(H2_PING_TIMEOUT);
    Builders {
        h1: http1::Builder::new(),
        h2,
        auto,
    }
}

/// One connection, holding its slot until it closes.
async fn connection<A: App>(
    shared: Arc<Shared<A>>,
    tcp: TcpStream,
    peer: SocketAddr,
    _slot: OwnedSemaphorePermit,
) {
    let Some(acceptor) = shared.tls.clone() else {
        // The first request's head clock runs from the connection's opening: the wait for
        // its first byte is part of it.
        let opened = Instant::now();
        let protocol = tokio::select! {
            seen = tokio::time::timeout_at(opened + shared.settings.header_read, protocol::peek(&tcp)) => seen,
            () = shared.stop.cancelled() => return,
            () = shared.kill.cancelled() => return,
        };
        return match protocol {
            Ok(Ok(Some(protocol))) => drive(&shared, tcp, peer, opened, protocol).await,
            Ok(Ok(None)) => {}
            Ok(Err(e)) => tracing::debug!(%peer, error = %e, "reading the connection failed"),
            Err(_) => tracing::debug!(%peer, "request head not received in time; closing"),
        };
    };
    // A TLS connection's state (the handshake, the rustls session inline in its stream) is
    // its own allocation: inline, every plain connection's task would be sized for it too
    // (heaptrack: a plain HTTP/1 task is 2.5 KiB; 5.1 with TLS and hyper-util's builder).
    Box::pin(tls(&shared, acceptor, tcp, peer)).await;
}

/// Completes the TLS handshake (within `timeouts.tls_handshake_ms`), then serves.
async fn tls<A: App>(shared: &Shared<A>, acceptor: TlsAcceptor, tcp: TcpStream, peer: SocketAddr) {
    let handshake = tokio::time::timeout(shared.settings.tls_handshake, acceptor.accept(tcp));
    let tls = tokio::select! {
        done = handshake => match done {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => return tracing::debug!(%peer, error = %e, "TLS handshake failed"),
            Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
        },
        () = shared.kill.cancelled() => return,
    };
    let protocol = protocol::from_alpn(tls.get_ref().1.alpn_protocol());
    drive(shared, tls, peer, Instant::now(), protocol).await
}

/// Serves requests on `io` with `protocol` until the client closes, a limit cuts it, or the
/// gateway stops. `opened`: when the first request's head clock started.
async fn drive<A: App, IO>(
    shared: &Shared<A>,
    io: IO,
    peer: SocketAddr,
    opened: Instant,
    protocol: Protocol,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::new(opened));
    let app = shared.app.clone();
    let body_window = shared.settings.request_body_idle;
    let conn_activity = activity.clone();
    let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
        let in_flight = conn_activity.begin(req.version());
        let req = req.map(|b| Body::new(body::Watched::new(b, body_window)));
        let answer = app.call(req, peer);
        async move {
            let resp = answer.await;
            Ok::<_, Infallible>(resp.map(|b| Tracked::new(b, in_flight)))
        }
    });
    let io = TokioIo::new(Watched::new(io, activity.clone()));
    let b = &shared.builders;
    // HTTP/1 inline; the others boxed, so an HTTP/1 connection's task is sized for its own.
    match protocol {
        Protocol::Http1 => {
            let conn = b.h1.serve_connection(io, service).with_upgrades();
            until_closed(shared, &activity, peer, conn, |c| c.graceful_shutdown()).await;
        }
        Protocol::Http2 => {
            let conn = b.h2.serve_connection(io, service);
            Box::pin(until_closed(shared, &activity, peer, conn, |c| {
                c.graceful_shutdown()
            }))
            .await;
        }
        Protocol::Detect => {
            let conn = b.auto.serve_connection_with_upgrades(io, service);
            Box::pin(until_closed(shared, &activity, peer, conn, |c| {
                c.graceful_shutdown()
            }))
            .await;
        }
    }
}

/// Drives `conn` to its end, closing it on the head and keep-alive limits and at shutdown.
async fn until_closed<A: App, C, E>(
    shared: &Shared<A>,
    activity: &Activity,
    peer: SocketAddr,
    conn: C,
    graceful_shutdown: fn(Pin<&mut C>),
) where
    C: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    tokio::pin!(conn);
    let s = &shared.settings;
    let mut closing = false;
    loop {
        tokio::select! {
            done = conn.as_mut() => {
                if let Err(e) = done {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            expiry = activity.expired(s.header_read, s.keep_alive_idle) => match expiry {
                Expiry::Head => {
                    return tracing::debug!(%peer, "request head not received in time; closing");
                }
                // Idle: a graceful close (HTTP/2 GOAWAY); if it is still open one more idle
                // period later, it is dropped.
                Expiry::Idle if !closing => {
                    closing = true;
                    activity.restart_idle(Instant::now());
                    graceful_shutdown(conn.as_mut());
                }
                Expiry::Idle => return,
            },
            () = shared.stop.cancelled(), if !closing => {
                closing = true;
                graceful_shutdown(conn.as_mut());
            }
            () = shared.kill.cancelled() => return,
        }
    }
}

/// Lets a repeated warning through at most once per [`WARN_EVERY`].
#[derive(Default)]
struct Throttle {
    last: Option<Instant>,
}

impl Throttle {
    fn ready(&mut self) -> bool {
        let now = Instant::now();
        if self.last.is_some_and(|t| now < t + WARN_EVERY) {
            return false;
        }
        self.last = Some(now);
        true
    }
}
