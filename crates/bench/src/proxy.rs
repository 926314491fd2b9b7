//! The bare pass-through proxy (`gatehouse-bench proxy`): the baseline a
//! gateway is compared to.
//!
//! hyper 1 HTTP/1.1 server + hyper-util legacy (pooled, keep-alive) client,
//! TCP_NODELAY on accepted and upstream sockets, request and response bodies
//! streamed through frame by frame without buffering, end-to-end headers
//! copied and hop-by-hop headers dropped. No auth, no metering, no parsing.

use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use http::header::{CONNECTION, HOST, HeaderMap, HeaderName};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpSocket};

/// Accept queue length (tokio's `TcpListener::bind` uses 128, which a burst
/// of new connections overflows).
const LISTEN_BACKLOG: u32 = 1024;

/// Response body: the upstream's body, or a small local error body.
type ProxyBody = Either<Incoming, Full<Bytes>>;

/// Headers that describe one hop, never forwarded (RFC 9110 §7.6.1).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
];

struct State {
    client: Client<HttpConnector, Incoming>,
    /// `scheme://authority` of the upstream.
    upstream: Uri,
}

/// Runs the proxy until SIGTERM/SIGINT (or stdin EOF when asked).
pub async fn run(listen: &str, upstream: &str, exit_on_stdin_eof: bool) -> anyhow::Result<()> {
    let upstream: Uri = upstream.parse().context("invalid --upstream URL")?;
    if upstream.scheme_str() != Some("http") || upstream.authority().is_none() {
        bail!("--upstream must be an http://HOST:PORT URL");
    }
    let addr: SocketAddr = listen.parse().context("invalid --listen address")?;
    if !addr.ip().is_loopback() {
        bail!("refusing to listen on non-loopback address {addr}");
    }
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket
        .bind(addr)
        .with_context(|| format!("cannot bind {addr}"))?;
    let listener = socket.listen(LISTEN_BACKLOG)?;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(connector);
    let state = Arc::new(State { client, upstream });
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "proxy listening on http://{}", listener.local_addr()?)?;
        out.flush()?;
    }
    tokio::select! {
        () = accept_loop(listener, state) => {}
        () = stop_signal(exit_on_stdin_eof) => {}
    }
    Ok(())
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // E.g. out of file descriptors: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| forward(state.clone(), req));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

async fn stop_signal(exit_on_stdin_eof: bool) {
    let stdin_eof = async {
        if !exit_on_stdin_eof {
            return std::future::pending().await;
        }
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 256];
        while let Ok(n) = stdin.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    let term = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
        () = stdin_eof => {}
    }
}

/// Removes hop-by-hop headers, including those named by `Connection`.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove("upgrade");
}

fn bad_gateway(msg: String) -> Response<ProxyBody> {
    let mut resp = Response::new(Either::Right(Full::new(Bytes::from(msg))));
    *resp.status_mut() = StatusCode::BAD_GATEWAY;
    resp
}

async fn forward(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let (mut parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let mut uri = Uri::builder().path_and_query(path);
    if let Some(scheme) = state.upstream.scheme() {
        uri = uri.scheme(scheme.clone());
    }
    if let Some(authority) = state.upstream.authority() {
        uri = uri.authority(authority.clone());
    }
    parts.uri = match uri.build() {
        Ok(u) => u,
        Err(e) => return Ok(bad_gateway(format!("bad request target: {e}"))),
    };
    strip_hop_by_hop(&mut parts.headers);
    // The client sets Host from the upstream URI.
    parts.headers.remove(HOST);
    let upstream_req = Request::from_parts(parts, body);
    match state.client.request(upstream_req).await {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Ok(Response::from_parts(parts, Either::Left(body)))
        }
        Err(e) => Ok(bad_gateway(format!("upstream error: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_hop_by_hop_and_connection_named_headers() {
        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            http::HeaderValue::from_static("keep-alive, x-foo"),
        );
        h.insert("keep-alive", http::HeaderValue::from_static("timeout=5"));
        h.insert("x-foo", http::HeaderValue::from_static("1"));
        h.insert(
            "transfer-encoding",
            http::HeaderValue::from_static("chunked"),
        );
        h.insert("x-api-key", http::HeaderValue::from_static("k"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("x-api-key"));
    }
}
