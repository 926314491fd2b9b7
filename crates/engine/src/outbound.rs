//! Safe outbound fetch: the one way the engine calls a URL it was configured with (IdP
//! discovery, JWKS, the policy webhook, OTLP destinations).
//!
//! Rules (SPEC 1.3): only `http`/`https`; every address of the host is resolved and the
//! request is refused if *any* of them is blocked by [`check_ip`] (cloud metadata,
//! link-local, loopback/unspecified unless allowed, multicast, broadcast, and IPv4 embedded
//! in IPv6 judged by the embedded address); no automatic redirects; a timeout on the whole
//! exchange; no environment proxy (a proxy would resolve the host itself).
//!
//! Pinning: the client's DNS resolver *is* the check. It resolves the name once, refuses
//! the whole set if any address is blocked, and hands exactly the checked addresses to the
//! connector, so there is no second lookup a rebinding DNS server could answer differently.
//! The URL is never rewritten, so the `Host` header and the TLS server name stay the
//! configured host name. Literal-IP hosts never reach a resolver and are checked before
//! the request is sent.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use url::{Host, Url};

/// What outbound calls may reach, and how long they may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchPolicy {
    /// Allow loopback and unspecified addresses (tests and local development only).
    pub allow_loopback: bool,
    /// Limit on the whole exchange: connect, request, response headers and body.
    pub timeout: Duration,
}

impl FetchPolicy {
    /// Production policy: no loopback, the given timeout.
    pub fn strict(timeout: Duration) -> Self {
        Self {
            allow_loopback: false,
            timeout,
        }
    }
}

/// Why an outbound call did not produce a response.
///
/// Messages never contain URL credentials or query strings.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("bad URL: {0}")]
    BadUrl(String),
    #[error("refused to connect to {host} ({addr}): {why}")]
    Blocked {
        host: String,
        addr: IpAddr,
        why: &'static str,
    },
    #[error("could not resolve: {0}")]
    Resolve(String),
    #[error("timed out")]
    Timeout,
    #[error("{0}")]
    Http(String),
}

/// The safe-fetch client. Cheap to clone (one shared `reqwest::Client`).
#[derive(Clone)]
pub struct SafeFetch {
    inner: Arc<Inner>,
}

struct Inner {
    policy: FetchPolicy,
    client: Result<reqwest::Client, String>,
}

impl std::fmt::Debug for SafeFetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SafeFetch")
            .field("policy", &self.inner.policy)
            .finish_non_exhaustive()
    }
}

impl SafeFetch {
    /// Builds the client. If the HTTP client cannot be built (TLS backend failure), every
    /// call returns [`FetchError::Http`]; use [`SafeFetch::try_new`] to fail at start instead.
    pub fn new(policy: FetchPolicy) -> Self {
        Self::with_roots(policy, &[])
    }

    /// Like [`SafeFetch::new`], also trusting `extra_roots` (DER) besides the built-in roots.
    pub fn with_roots(
        policy: FetchPolicy,
        extra_roots: &[rustls_pki_types::CertificateDer<'_>],
    ) -> Self {
        let client = build_client(policy, extra_roots).map_err(|e| e.without_url().to_string());
        Self {
            inner: Arc::new(Inner { policy, client }),
        }
    }

    /// [`SafeFetch::try_with_roots`] sending through `proxy` (an http(s) forward proxy)
    /// except to hosts `no_proxy` matches. Proxied requests hand the proxy the host name:
    /// the proxy is the egress boundary for them, and only literal-IP URLs are checked here.
    pub fn try_with_proxy(
        policy: FetchPolicy,
        extra_roots: &[rustls_pki_types::CertificateDer<'_>],
        proxy: Option<(&Url, &str)>,
    ) -> Result<Self, FetchError> {
        let client = build_client_via(policy, extra_roots, proxy)
            .map_err(|e| FetchError::Http(e.without_url().to_string()))?;
        Ok(Self {
            inner: Arc::new(Inner {
                policy,
                client: Ok(client),
            }),
        })
    }

    /// Like [`SafeFetch::new`], but reports a client that cannot be built.
    pub fn try_new(policy: FetchPolicy) -> Result<Self, FetchError> {
        Self::try_with_roots(policy, &[])
    }

    /// [`SafeFetch::with_roots`], reporting a client that cannot be built.
    pub fn try_with_roots(
        policy: FetchPolicy,
        extra_roots: &[rustls_pki_types::CertificateDer<'_>],
    ) -> Result<Self, FetchError> {
        let fetch = Self::with_roots(policy, extra_roots);
        match &fetch.inner.client {
            Ok(_) => Ok(fetch),
            Err(e) => Err(FetchError::Http(e.clone())),
        }
    }

    pub fn policy(&self) -> FetchPolicy {
        self.inner.policy
    }

    /// The underlying client, for code that insists on a `reqwest::Client`. Its resolver
    /// checks every name it resolves and it never follows redirects, but a literal-IP URL
    /// never reaches the resolver: check every URL with [`SafeFetch::check_url`] before
    /// using it, or better, use [`SafeFetch::send`] / [`SafeFetch::execute`], which do.
    pub fn client(&self) -> Option<&reqwest::Client> {
        self.inner.client.as_ref().ok()
    }

    /// Checks what can be checked without DNS: the scheme, a host, a literal-IP host.
    pub fn check_url(&self, url: &Url) -> Result<(), FetchError> {
        check_url(url, self.inner.policy.allow_loopback)
    }

    /// POSTs `body` to `url`; never follows redirects (a 3xx is returned as is).
    pub async fn post(
        &self,
        url: &Url,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<reqwest::Response, FetchError> {
        self.send(http::Method::POST, url, headers, Some(body))
            .await
    }

    /// GETs `url`; never follows redirects (a 3xx is returned as is).
    pub async fn get(
        &self,
        url: &Url,
        headers: HeaderMap,
    ) -> Result<reqwest::Response, FetchError> {
        self.send(http::Method::GET, url, headers, None).await
    }

    /// Any method, with an optional body.
    pub async fn send(
        &self,
        method: http::Method,
        url: &Url,
        headers: HeaderMap,
        body: Option<Bytes>,
    ) -> Result<reqwest::Response, FetchError> {
        self.check_url(url)?;
        let client = self
            .inner
            .client
            .as_ref()
            .map_err(|e| FetchError::Http(e.clone()))?;
        let mut request = client.request(method, url.clone()).headers(headers);
        if let Some(body) = body {
            request = request.body(body);
        }
        request.send().await.map_err(map_error)
    }

    /// One exchange in plain `http` types, the response body read whole (at most
    /// `max_body` bytes). Fits libraries that take an HTTP function, e.g. `openidconnect`'s
    /// `AsyncHttpClient`, which is implemented for any `Fn(http::Request<Vec<u8>>) -> Future`:
    /// `let http = |req| { let f = fetch.clone(); async move { f.execute(req, 1 << 20).await } };`
    pub async fn execute(
        &self,
        request: http::Request<Vec<u8>>,
        max_body: usize,
    ) -> Result<http::Response<Vec<u8>>, FetchError> {
        let (parts, body) = request.into_parts();
        let url =
            Url::parse(&parts.uri.to_string()).map_err(|e| FetchError::BadUrl(e.to_string()))?;
        let body =
            (!body.is_empty() || parts.method != http::Method::GET).then(|| Bytes::from(body));
        let mut resp = self.send(parts.method, &url, parts.headers, body).await?;
        let mut out = http::Response::builder().status(resp.status());
        if let Some(h) = out.headers_mut() {
            *h = std::mem::take(resp.headers_mut());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(map_error)? {
            if bytes.len() + chunk.len() > max_body {
                return Err(FetchError::Http(format!(
                    "response body larger than {max_body} bytes"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        out.body(bytes).map_err(|e| FetchError::Http(e.to_string()))
    }
}

fn build_client(
    policy: FetchPolicy,
    extra_roots: &[rustls_pki_types::CertificateDer<'_>],
) -> Result<reqwest::Client, reqwest::Error> {
    build_client_via(policy, extra_roots, None)
}

fn build_client_via(
    policy: FetchPolicy,
    extra_roots: &[rustls_pki_types::CertificateDer<'_>],
    proxy: Option<(&Url, &str)>,
) -> Result<reqwest::Client, reqwest::Error> {
    let mut builder = match proxy {
        None => reqwest::Client::builder().no_proxy(),
        Some((url, no_proxy)) => reqwest::Client::builder().proxy(
            reqwest::Proxy::all(url.as_str())?.no_proxy(reqwest::NoProxy::from_string(no_proxy)),
        ),
    };
    for der in extra_roots {
        builder = builder.add_root_certificate(reqwest::Certificate::from_der(der)?);
    }
    builder
        .dns_resolver(Arc::new(CheckedResolver {
            allow_loopback: policy.allow_loopback,
        }))
        .redirect(reqwest::redirect::Policy::none())
        .timeout(policy.timeout)
        .connect_timeout(policy.timeout)
        .tcp_nodelay(true)
        .user_agent(concat!("gatehouse/", env!("CARGO_PKG_VERSION")))
        .build()
}

fn check_url(url: &Url, allow_loopback: bool) -> Result<(), FetchError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(FetchError::BadUrl(format!(
            "scheme `{}` is not allowed (http or https only)",
            url.scheme()
        )));
    }
    let ip = match url.host() {
        None => return Err(FetchError::BadUrl("no host".into())),
        Some(Host::Domain(_)) => return Ok(()),
        Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
    };
    check_ip(ip, allow_loopback).map_err(|why| FetchError::Blocked {
        host: ip.to_string(),
        addr: ip,
        why,
    })
}

/// The resolver installed in the client: resolve once, check all, return what was checked.
struct CheckedResolver {
    allow_loopback: bool,
}

/// Error type carried through reqwest's error chain from [`CheckedResolver`].
#[derive(Debug, thiserror::Error)]
enum ResolveFailure {
    #[error("refused to connect to {host} ({addr}): {why}")]
    Blocked {
        host: String,
        addr: IpAddr,
        why: &'static str,
    },
    #[error("{0}")]
    Lookup(String),
}

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        let allow_loopback = self.allow_loopback;
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(|e| ResolveFailure::Lookup(format!("{host}: {e}")))?
                .collect();
            if addrs.is_empty() {
                return Err(ResolveFailure::Lookup(format!("{host}: no addresses")).into());
            }
            for a in &addrs {
                check_ip(a.ip(), allow_loopback).map_err(|why| ResolveFailure::Blocked {
                    host: host.clone(),
                    addr: a.ip(),
                    why,
                })?;
            }
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

fn map_error(e: reqwest::Error) -> FetchError {
    if e.is_timeout() {
        return FetchError::Timeout;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(&e);
    let mut depth = 0;
    while let Some(s) = source {
        if let Some(f) = s.downcast_ref::<ResolveFailure>() {
            return match f {
                ResolveFailure::Blocked { host, addr, why } => FetchError::Blocked {
                    host: host.clone(),
                    addr: *addr,
                    why,
                },
                ResolveFailure::Lookup(m) => FetchError::Resolve(m.clone()),
            };
        }
        depth += 1;
        if depth > 16 {
            break;
        }
        source = s.source();
    }
    FetchError::Http(error_chain(&e.without_url()))
}

/// An error with its causes, each once, at most eight deep (HTTP clients' own texts name
/// only the step that failed, e.g. "client error (Connect)").
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    for _ in 0..8 {
        let Some(s) = source else { break };
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// Whether an outbound connection to `ip` is allowed; `Err` says which class blocked it.
pub fn check_ip(ip: IpAddr, allow_loopback: bool) -> Result<(), &'static str> {
    match ip {
        IpAddr::V4(v4) => check_v4(v4, allow_loopback),
        IpAddr::V6(v6) => check_v6(v6, allow_loopback),
    }
}

fn check_v4(ip: Ipv4Addr, allow_loopback: bool) -> Result<(), &'static str> {
    let o = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) || ip == Ipv4Addr::new(100, 100, 100, 200) {
        return Err("cloud metadata address");
    }
    if ip.is_link_local() {
        return Err("link-local address");
    }
    if ip.is_loopback() {
        return if allow_loopback {
            Ok(())
        } else {
            Err("loopback address")
        };
    }
    if ip.is_unspecified() {
        return if allow_loopback {
            Ok(())
        } else {
            Err("unspecified address")
        };
    }
    if o[0] == 0 {
        return Err("\"this network\" address");
    }
    if ip.is_multicast() {
        return Err("multicast address");
    }
    if ip.is_broadcast() {
        return Err("broadcast address");
    }
    if o[0] >= 240 {
        return Err("reserved address");
    }
    Ok(())
}

fn check_v6(ip: Ipv6Addr, allow_loopback: bool) -> Result<(), &'static str> {
    let s = ip.segments();
    if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
        return Err("cloud metadata address");
    }
    if ip.is_loopback() {
        return if allow_loopback {
            Ok(())
        } else {
            Err("loopback address")
        };
    }
    if ip.is_unspecified() {
        return if allow_loopback {
            Ok(())
        } else {
            Err("unspecified address")
        };
    }
    if s[0] & 0xffc0 == 0xfe80 {
        return Err("link-local address");
    }
    if ip.is_multicast() {
        return Err("multicast address");
    }
    if let Some(v4) = crate::config::targets::embedded_v4(ip) {
        return check_v4(v4, allow_loopback);
    }
    Ok(())
}

/// `scheme://host[:port]/path` of `url`: no user name, password, query or fragment.
/// Use it wherever a configured URL is logged or put in an event.
pub fn redact_url(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{}://{host}:{port}{}", url.scheme(), url.path()),
        None => format!("{}://{host}{}", url.scheme(), url.path()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use axum::Router;
    use axum::response::{IntoResponse, Redirect};
    use axum::routing::get;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn public_addresses_pass() {
        for a in [
            "8.8.8.8",
            "10.1.2.3",
            "192.168.1.1",
            "100.64.0.1",
            "2606:4700::1111",
            "fd12::1",
        ] {
            assert_eq!(check_ip(ip(a), false), Ok(()), "{a}");
        }
    }

    #[test]
    fn each_blocked_class() {
        let cases = [
            ("169.254.169.254", "cloud metadata address"),
            ("100.100.100.200", "cloud metadata address"),
            ("fd00:ec2::254", "cloud metadata address"),
            ("169.254.1.1", "link-local address"),
            ("fe80::1", "link-local address"),
            ("febf::1", "link-local address"),
            ("127.0.0.1", "loopback address"),
            ("127.9.9.9", "loopback address"),
            ("::1", "loopback address"),
            ("0.0.0.0", "unspecified address"),
            ("::", "unspecified address"),
            ("0.1.2.3", "\"this network\" address"),
            ("224.0.0.1", "multicast address"),
            ("239.255.255.250", "multicast address"),
            ("ff02::1", "multicast address"),
            ("255.255.255.255", "broadcast address"),
            ("240.0.0.1", "reserved address"),
        ];
        for (a, why) in cases {
            assert_eq!(check_ip(ip(a), false), Err(why), "{a}");
        }
    }

    #[test]
    fn loopback_and_unspecified_only_when_allowed() {
        for a in ["127.0.0.1", "::1", "0.0.0.0", "::", "::ffff:127.0.0.1"] {
            assert!(check_ip(ip(a), false).is_err(), "{a}");
            assert_eq!(check_ip(ip(a), true), Ok(()), "{a}");
        }
        // The exemption never covers metadata or link-local.
        for a in [
            "169.254.169.254",
            "fe80::1",
            "::ffff:169.254.169.254",
            "224.0.0.1",
        ] {
            assert!(check_ip(ip(a), true).is_err(), "{a}");
        }
    }

    #[test]
    fn ipv4_embedded_in_ipv6_is_judged_by_the_ipv4_address() {
        let blocked = [
            "::ffff:169.254.169.254",
            "::ffff:127.0.0.1",
            "::169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::7f00:1",
            "2002:a9fe:a9fe::1",
            "2002:7f00:1::",
            "::ffff:100.100.100.200",
            "::ffff:224.0.0.1",
            "::ffff:0:7f00:1",
        ];
        for a in blocked {
            assert!(check_ip(ip(a), false).is_err(), "{a}");
        }
        assert_eq!(
            check_ip(ip("::ffff:169.254.169.254"), false),
            Err("cloud metadata address")
        );
        for a in [
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "::ffff:10.0.0.1",
        ] {
            assert_eq!(check_ip(ip(a), false), Ok(()), "{a}");
        }
    }

    #[test]
    fn redact_url_drops_userinfo_query_and_fragment() {
        let cases = [
            (
                "https://user:secret@otel.example/otlp?k=v#f",
                "https://otel.example/otlp",
            ),
            (
                "http://user@otel.example:4318/",
                "http://otel.example:4318/",
            ),
            ("https://otel.example:443/x", "https://otel.example/x"),
            ("http://[::1]:8080/a/b", "http://[::1]:8080/a/b"),
            ("http://127.0.0.1:9/", "http://127.0.0.1:9/"),
        ];
        for (input, want) in cases {
            assert_eq!(redact_url(&Url::parse(input).unwrap()), want);
        }
    }

    async fn server() -> SocketAddr {
        let app = Router::new()
            .route(
                "/ok",
                get(|| async { "hello" }).post(|body: Bytes| async move { body }),
            )
            .route(
                "/redirect",
                get(|| async { Redirect::to("/ok").into_response() }),
            )
            .route(
                "/hang",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    "late"
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        addr
    }

    fn fetch(allow_loopback: bool, timeout: Duration) -> SafeFetch {
        SafeFetch::try_new(FetchPolicy {
            allow_loopback,
            timeout,
        })
        .unwrap()
    }

    fn url(s: String) -> Url {
        Url::parse(&s).unwrap()
    }

    #[tokio::test]
    async fn loopback_allowed_when_the_policy_says_so() {
        let addr = server().await;
        let f = fetch(true, Duration::from_secs(5));
        let resp = f
            .get(&url(format!("http://{addr}/ok")), HeaderMap::new())
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.text().await.unwrap(), "hello");
        // Through the resolver: a name that resolves to loopback.
        let by_name = url(format!("http://localhost:{}/ok", addr.port()));
        let resp = f
            .post(&by_name, HeaderMap::new(), Bytes::from_static(b"ping"))
            .await
            .unwrap();
        assert_eq!(resp.text().await.unwrap(), "ping");
    }

    #[tokio::test]
    async fn loopback_refused_by_default() {
        let addr = server().await;
        let f = fetch(false, Duration::from_secs(5));
        match f
            .get(&url(format!("http://{addr}/ok")), HeaderMap::new())
            .await
        {
            Err(FetchError::Blocked { addr: a, why, .. }) => {
                assert_eq!(a, addr.ip());
                assert_eq!(why, "loopback address");
            }
            other => panic!("expected Blocked, got {other:?}"),
        }
        // A name resolving to loopback is refused by the resolver, with the same error.
        let by_name = url(format!("http://localhost:{}/ok", addr.port()));
        match f.get(&by_name, HeaderMap::new()).await {
            Err(FetchError::Blocked { host, addr, .. }) => {
                assert_eq!(host, "localhost");
                assert!(addr.is_loopback());
            }
            other => panic!("expected Blocked, got {other:?}"),
        }
        let v6 = url(format!("http://[::ffff:127.0.0.1]:{}/ok", addr.port()));
        assert!(matches!(
            f.get(&v6, HeaderMap::new()).await,
            Err(FetchError::Blocked { .. })
        ));
        let meta = url("http://169.254.169.254/latest/meta-data/".into());
        let loose = fetch(true, Duration::from_secs(5));
        assert!(matches!(
            loose.get(&meta, HeaderMap::new()).await,
            Err(FetchError::Blocked { .. })
        ));
    }

    #[tokio::test]
    async fn execute_speaks_plain_http_types() {
        let addr = server().await;
        let f = fetch(true, Duration::from_secs(5));
        let req = http::Request::post(format!("http://{addr}/ok"))
            .body(b"abc".to_vec())
            .unwrap();
        fn send<T: Send>(t: T) -> T {
            t
        }
        let resp = send(f.execute(req, 1024)).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.body(), b"abc");
        let req = http::Request::post(format!("http://{addr}/ok"))
            .body(vec![b'x'; 100])
            .unwrap();
        assert!(matches!(f.execute(req, 10).await, Err(FetchError::Http(_))));
        let strict = fetch(false, Duration::from_secs(5));
        let req = http::Request::get(format!("http://{addr}/ok"))
            .body(Vec::new())
            .unwrap();
        assert!(matches!(
            strict.execute(req, 1024).await,
            Err(FetchError::Blocked { .. })
        ));
    }

    #[tokio::test]
    async fn redirects_are_returned_not_followed() {
        let addr = server().await;
        let f = fetch(true, Duration::from_secs(5));
        let resp = f
            .get(&url(format!("http://{addr}/redirect")), HeaderMap::new())
            .await
            .unwrap();
        assert!(resp.status().is_redirection());
        assert_eq!(resp.headers()["location"], "/ok");
    }

    #[tokio::test]
    async fn slow_servers_time_out() {
        let addr = server().await;
        let f = fetch(true, Duration::from_millis(200));
        let r = f
            .get(&url(format!("http://{addr}/hang")), HeaderMap::new())
            .await;
        assert!(matches!(r, Err(FetchError::Timeout)), "{r:?}");
    }

    #[tokio::test]
    async fn other_schemes_and_bad_names_are_refused() {
        let f = fetch(true, Duration::from_secs(5));
        let r = f
            .get(&url("ftp://example.com/x".into()), HeaderMap::new())
            .await;
        assert!(matches!(r, Err(FetchError::BadUrl(_))), "{r:?}");
        let r = f
            .get(&url("file:///etc/passwd".into()), HeaderMap::new())
            .await;
        assert!(matches!(r, Err(FetchError::BadUrl(_))), "{r:?}");
        // `.invalid` never resolves (a resolver that does not answer at all times out).
        let r = f
            .get(&url("http://name.invalid/".into()), HeaderMap::new())
            .await;
        assert!(
            matches!(r, Err(FetchError::Resolve(_) | FetchError::Timeout)),
            "{r:?}"
        );
    }
}
