//! Load-generator side of HTTP: one raw hyper HTTP/1.1 client connection per
//! worker (keep-alive, TCP_NODELAY), the benchmark's Messages requests, and
//! timing of each exchange (total time and time to the first
//! `content_block_delta` event).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use memchr::memmem;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// The client key configured in Gatehouse (also sent, and ignored, on the
/// direct and proxy paths so every path carries the same bytes).
pub const CLIENT_KEY: &str = "bench-client-key-0123456789abcdef0123456789";

/// Marker of the first token in an Anthropic SSE stream.
const DELTA_MARKER: &[u8] = b"event: content_block_delta";

/// Connect timeout for every benchmark connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Body of the benchmark's Messages request.
pub fn messages_body(stream: bool) -> Bytes {
    let stream = if stream { ",\"stream\":true" } else { "" };
    Bytes::from(format!(
        "{{\"model\":\"claude-sonnet-4-6\",\"max_tokens\":64,\"messages\":[{{\"role\":\"user\",\"content\":\"hi\"}}]{stream}}}"
    ))
}

/// Outcome of one request/response exchange.
#[derive(Clone, Copy, Debug)]
pub struct Exchange {
    pub status: StatusCode,
    /// From just before sending the request to the end of the response body.
    pub total: Duration,
    /// From just before sending to receiving the first `content_block_delta`
    /// (only when asked for and found).
    pub first_delta: Option<Duration>,
}

/// How a connection's requests authenticate.
#[derive(Clone, Debug)]
pub enum Auth {
    /// `x-api-key` (the benchmark's client key, or an admin key).
    ApiKey(String),
    /// `Authorization: Bearer` (a signed-in person's session token).
    Bearer(String),
    /// `x-gatehouse-app-token` (the desktop app window's per-launch token).
    AppToken(String),
}

/// One keep-alive HTTP/1.1 client connection.
pub struct Conn {
    addr: SocketAddr,
    sender: SendRequest<Full<Bytes>>,
    driver: JoinHandle<()>,
    auth: Auth,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl Conn {
    /// Opens a connection to `addr` (TCP_NODELAY set) sending the client key.
    pub async fn connect(addr: SocketAddr) -> anyhow::Result<Conn> {
        Self::connect_as(addr, Auth::ApiKey(CLIENT_KEY.to_owned())).await
    }

    /// Opens a connection whose requests carry `auth`.
    pub async fn connect_as(addr: SocketAddr, auth: Auth) -> anyhow::Result<Conn> {
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .with_context(|| format!("connecting to {addr} timed out"))?
            .with_context(|| format!("cannot connect to {addr}"))?;
        tcp.set_nodelay(true)?;
        let (sender, conn) = http1::handshake(TokioIo::new(tcp)).await?;
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            addr,
            sender,
            driver,
            auth,
        })
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> anyhow::Result<Request<Full<Bytes>>> {
        let (name, value) = match &self.auth {
            Auth::ApiKey(key) => ("x-api-key", key.clone()),
            Auth::Bearer(token) => ("authorization", format!("Bearer {token}")),
            Auth::AppToken(token) => ("x-gatehouse-app-token", token.clone()),
        };
        Ok(Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.addr.to_string())
            .header(name, value)
            .header("content-type", "application/json")
            .header("anthropic-version", "2023-06-01")
            // Claude Code sends a random UUID per request; Gatehouse keeps it as the
            // request id, so its usage rows carry ids in no order, as in real traffic.
            .header("x-client-request-id", uuid::Uuid::new_v4().to_string())
            .body(Full::new(body))?)
    }

    /// Sends `POST path` with `body` and reads the whole response within
    /// `timeout`; with `want_first_delta`, also times the first delta event.
    pub async fn exchange(
        &mut self,
        path: &str,
        body: Bytes,
        want_first_delta: bool,
        timeout: Duration,
    ) -> anyhow::Result<Exchange> {
        let req = self.request(Method::POST, path, body)?;
        let start = Instant::now();
        let fut = async {
            self.sender.ready().await?;
            let resp = self.sender.send_request(req).await?;
            let status = resp.status();
            let mut body = resp.into_body();
            let mut first_delta = None;
            let mut seen: Vec<u8> = Vec::new();
            while let Some(frame) = body.frame().await {
                let frame = frame?;
                let Some(data) = frame.data_ref() else {
                    continue;
                };
                if want_first_delta && first_delta.is_none() {
                    seen.extend_from_slice(data);
                    if memmem::find(&seen, DELTA_MARKER).is_some() {
                        first_delta = Some(start.elapsed());
                        seen = Vec::new();
                    }
                }
            }
            anyhow::Ok(Exchange {
                status,
                total: start.elapsed(),
                first_delta,
            })
        };
        tokio::time::timeout(timeout, fut)
            .await
            .with_context(|| format!("request to {} timed out after {timeout:?}", self.addr))?
    }

    /// Sends a streaming request and returns as soon as the first delta event
    /// arrived, handing back the still-open response body (the stream stays
    /// open for as long as the caller holds it).
    pub async fn open_stream(
        &mut self,
        timeout: Duration,
    ) -> anyhow::Result<hyper::body::Incoming> {
        let req = self.request(Method::POST, "/v1/messages", messages_body(true))?;
        let fut = async {
            self.sender.ready().await?;
            let resp = self.sender.send_request(req).await?;
            if resp.status() != StatusCode::OK {
                bail!("stream answered {}", resp.status());
            }
            let mut body = resp.into_body();
            let mut seen: Vec<u8> = Vec::new();
            while let Some(frame) = body.frame().await {
                if let Some(data) = frame?.data_ref() {
                    seen.extend_from_slice(data);
                    if memmem::find(&seen, DELTA_MARKER).is_some() {
                        return Ok(body);
                    }
                }
            }
            bail!("stream ended before its first content_block_delta")
        };
        tokio::time::timeout(timeout, fut)
            .await
            .context("opening a stream timed out")?
    }

    /// Sends `POST path` with a JSON body and returns status and body text
    /// (control API calls, preflight checks).
    pub async fn post_collect(
        &mut self,
        path: &str,
        json: Bytes,
    ) -> anyhow::Result<(StatusCode, String)> {
        self.collect(Method::POST, path, json).await
    }

    /// Sends `GET path` and reads the whole response (a control request).
    pub async fn get_collect(&mut self, path: &str) -> anyhow::Result<(StatusCode, String)> {
        self.collect(Method::GET, path, Bytes::new()).await
    }

    /// Sends `GET path` and reads the whole response within `timeout`.
    pub async fn get_collect_within(
        &mut self,
        path: &str,
        timeout: Duration,
    ) -> anyhow::Result<(StatusCode, String)> {
        self.collect_within(Method::GET, path, Bytes::new(), timeout)
            .await
    }

    async fn collect(
        &mut self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> anyhow::Result<(StatusCode, String)> {
        self.collect_within(method, path, body, Duration::from_secs(10))
            .await
    }

    async fn collect_within(
        &mut self,
        method: Method,
        path: &str,
        body: Bytes,
        timeout: Duration,
    ) -> anyhow::Result<(StatusCode, String)> {
        let req = self.request(method, path, body)?;
        let fut = async {
            self.sender.ready().await?;
            let resp = self.sender.send_request(req).await?;
            let status = resp.status();
            let body = resp.into_body().collect().await?.to_bytes();
            anyhow::Ok((status, String::from_utf8_lossy(&body).into_owned()))
        };
        tokio::time::timeout(timeout, fut)
            .await
            .with_context(|| format!("control request {path} timed out after {timeout:?}"))?
    }
}

/// Parses `http://HOST:PORT[/]` into a socket address.
pub fn parse_url(url: &str) -> anyhow::Result<SocketAddr> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("not an http:// URL: {url}"))?;
    let rest = rest.trim_end_matches('/');
    rest.parse()
        .with_context(|| format!("not an IP:PORT URL: {url}"))
}

/// One keep-alive HTTP/1.1 connection for a phase's own requests; its driver task ends
/// with it.
pub struct KeepAlive {
    pub sender: SendRequest<Full<Bytes>>,
    driver: JoinHandle<()>,
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl KeepAlive {
    /// Connects (within `limit`), no Nagle delay.
    pub async fn connect(addr: SocketAddr, limit: Duration) -> anyhow::Result<KeepAlive> {
        let tcp = tokio::time::timeout(limit, TcpStream::connect(addr))
            .await
            .with_context(|| format!("connecting to {addr} timed out"))??;
        tcp.set_nodelay(true)?;
        let (sender, conn) = http1::handshake(TokioIo::new(tcp)).await?;
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(KeepAlive { sender, driver })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_listen_urls() {
        let a = parse_url("http://127.0.0.1:8080/").unwrap();
        assert_eq!(a.port(), 8080);
        assert!(parse_url("https://127.0.0.1:1").is_err());
    }

    #[test]
    fn request_bodies_are_json() {
        let v: serde_json::Value = serde_json::from_slice(&messages_body(true)).unwrap();
        assert_eq!(v["stream"], true);
        let v: serde_json::Value = serde_json::from_slice(&messages_body(false)).unwrap();
        assert!(v.get("stream").is_none());
    }
}
