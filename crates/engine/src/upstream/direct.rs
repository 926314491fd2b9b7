//! The raw Anthropic link's own HTTP client: hyper's pooled client over rustls (ring, the
//! webpki roots, ALPN h2 and http/1.1: what the reqwest client of the other links uses),
//! without reqwest's layers. Measured on the capped path at c=16, reqwest's redirect
//! policy (which parses each request's URL again, host and IDNA included), its proxy
//! matcher, its decompression service and its URL conversions cost about 7% of a request's
//! CPU.
//!
//! What reqwest did for this link is kept: the connect timeout, TCP_NODELAY, a 90 s idle
//! pool of up to 256 connections per host, no redirects followed, `Accept-Encoding` sent
//! when the caller sent none, and an answer in gzip, brotli, zstd or deflate decoded (its
//! `Content-Encoding` and `Content-Length` dropped), so metering always reads plain bytes.
//! reqwest also honours the proxy environment variables; this client does not, so it is
//! used only where none is set ([`proxied`]) and the base URL has no user info.

use std::time::Duration;

use async_compression::tokio::bufread::{BrotliDecoder, GzipDecoder, ZlibDecoder, ZstdDecoder};
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH};
use http::{HeaderMap, HeaderValue, Method, Request, Uri};
use http_body_util::{BodyDataStream, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio_util::io::{ReaderStream, StreamReader};

use super::http_client::PerThread;
use super::{Answer, BodyError, BodyStream, SendError};
use crate::outbound::error_chain;

pub type Raw = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// One raw client per connection thread (see [`PerThread`]).
pub type Direct = PerThread<Raw>;

/// The encodings asked for when the caller names none (reqwest's, with the same features).
const ACCEPTED: &str = "gzip, deflate, br, zstd";

/// The proxy variables reqwest reads; with any of them set, reqwest's client serves.
const PROXY_VARS: [&str; 6] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// Whether the environment names a proxy (then outbound calls go through reqwest).
pub fn proxied(env: &dyn crate::deps::Environment) -> bool {
    PROXY_VARS
        .iter()
        .any(|v| env.var(v).is_some_and(|s| !s.trim().is_empty()))
}

/// `threads` raw clients besides the shared one.
pub fn build(threads: usize, connect_timeout: Duration) -> Result<Direct, String> {
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    })
    .with_no_client_auth();
    PerThread::build(threads, || {
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(connect_timeout));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls.clone())
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(tcp);
        Ok(Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(256)
            .build(https))
    })
}

/// POSTs `body` with `headers` to `uri` and answers as it arrives.
pub async fn post(
    client: &Raw,
    uri: Uri,
    mut headers: HeaderMap,
    body: Bytes,
) -> Result<Answer, SendError> {
    if !headers.contains_key(ACCEPT_ENCODING) {
        headers.insert(ACCEPT_ENCODING, HeaderValue::from_static(ACCEPTED));
    }
    let mut request = Request::new(Full::new(body));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    match client.request(request).await {
        Ok(response) => Ok(answer(response)),
        Err(e) if e.is_connect() => Err(SendError::Connect(error_chain(&e))),
        Err(e) => Err(SendError::Network(error_chain(&e))),
    }
}

/// The response as an [`Answer`], its body decoded when it came encoded.
fn answer(response: http::Response<hyper::body::Incoming>) -> Answer {
    let (mut parts, body) = response.into_parts();
    let data = BodyDataStream::new(body);
    let encoding = parts
        .headers
        .get(CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase());
    let body: BodyStream = match encoding.as_deref().and_then(Coding::from_header) {
        None => data.map_err(|e| BodyError(e.to_string())).boxed(),
        Some(coding) => {
            parts.headers.remove(CONTENT_ENCODING);
            parts.headers.remove(CONTENT_LENGTH);
            let reader = StreamReader::new(data.map_err(std::io::Error::other));
            coding.decode(reader)
        }
    };
    Answer {
        status: parts.status,
        headers: parts.headers,
        body,
        notes: Vec::new(),
        estimated: false,
    }
}

/// A content coding this client decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coding {
    Gzip,
    Deflate,
    Brotli,
    Zstd,
}

impl Coding {
    fn from_header(value: &str) -> Option<Self> {
        match value {
            "gzip" | "x-gzip" => Some(Coding::Gzip),
            "deflate" => Some(Coding::Deflate),
            "br" => Some(Coding::Brotli),
            "zstd" => Some(Coding::Zstd),
            _ => None,
        }
    }

    fn decode<R>(self, reader: R) -> BodyStream
    where
        R: tokio::io::AsyncBufRead + Send + 'static,
    {
        fn chunks(r: impl tokio::io::AsyncRead + Send + 'static) -> BodyStream {
            ReaderStream::new(r)
                .map_err(|e| BodyError(format!("could not decode the upstream body: {e}")))
                .boxed()
        }
        match self {
            Coding::Gzip => chunks(GzipDecoder::new(reader)),
            // HTTP's "deflate" is the zlib format (RFC 9110 §8.4.1.2).
            Coding::Deflate => chunks(ZlibDecoder::new(reader)),
            Coding::Brotli => chunks(BrotliDecoder::new(reader)),
            Coding::Zstd => chunks(ZstdDecoder::new(reader)),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::HashMap;

    struct Env(HashMap<&'static str, &'static str>);

    impl crate::deps::Environment for Env {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|v| (*v).to_owned())
        }
        fn read_file(&self, path: &std::path::Path) -> std::io::Result<String> {
            std::fs::read_to_string(path)
        }
    }

    #[test]
    fn any_proxy_variable_hands_the_link_to_reqwest() {
        assert!(!proxied(&Env(HashMap::new())));
        assert!(!proxied(&Env(HashMap::from([("HTTPS_PROXY", " ")]))));
        for var in PROXY_VARS {
            assert!(proxied(&Env(HashMap::from([(var, "http://proxy:3128")]))));
        }
    }

    /// A one-connection server answering `body` with `Content-Encoding: encoding`; it
    /// sends back the `Accept-Encoding` it received.
    async fn serve_once(
        encoding: &'static str,
        body: Vec<u8>,
    ) -> (Uri, tokio::task::JoinHandle<()>) {
        use hyper::service::service_fn;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}/v1/messages", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let task = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let body = body.clone();
                async move {
                    let asked = req.headers().get(ACCEPT_ENCODING).cloned();
                    let mut resp = http::Response::new(Full::new(Bytes::from(body)));
                    resp.headers_mut()
                        .insert(CONTENT_ENCODING, HeaderValue::from_static(encoding));
                    if let Some(asked) = asked {
                        resp.headers_mut().insert("x-asked", asked);
                    }
                    Ok::<_, std::convert::Infallible>(resp)
                }
            });
            let io = hyper_util::rt::TokioIo::new(tcp);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
        (uri, task)
    }

    async fn collect(answer: Answer) -> Vec<u8> {
        let chunks: Vec<_> = answer.body.collect().await;
        chunks
            .into_iter()
            .flat_map(|c| c.unwrap().to_vec())
            .collect()
    }

    async fn compress(coding: Coding, plain: &[u8]) -> Vec<u8> {
        use async_compression::tokio::bufread::{
            BrotliEncoder, GzipEncoder, ZlibEncoder, ZstdEncoder,
        };
        use tokio::io::AsyncReadExt;
        let mut out = Vec::new();
        match coding {
            Coding::Gzip => GzipEncoder::new(plain).read_to_end(&mut out).await,
            Coding::Deflate => ZlibEncoder::new(plain).read_to_end(&mut out).await,
            Coding::Brotli => BrotliEncoder::new(plain).read_to_end(&mut out).await,
            Coding::Zstd => ZstdEncoder::new(plain).read_to_end(&mut out).await,
        }
        .unwrap();
        out
    }

    #[tokio::test]
    async fn encoded_answers_are_decoded_and_the_callers_accept_encoding_is_kept() {
        let plain = br#"{"type":"message","usage":{"input_tokens":3,"output_tokens":5}}"#;
        let client = build(0, Duration::from_secs(2)).unwrap();
        for (name, coding) in [
            ("gzip", Coding::Gzip),
            ("deflate", Coding::Deflate),
            ("br", Coding::Brotli),
            ("zstd", Coding::Zstd),
        ] {
            let (uri, server) = serve_once(name, compress(coding, plain).await).await;
            let answer = post(client.get(), uri, HeaderMap::new(), Bytes::new())
                .await
                .unwrap();
            assert_eq!(answer.headers["x-asked"], ACCEPTED, "{name}");
            assert!(answer.headers.get(CONTENT_ENCODING).is_none(), "{name}");
            assert!(answer.headers.get(CONTENT_LENGTH).is_none(), "{name}");
            assert_eq!(collect(answer).await, plain, "{name}");
            server.abort();
        }
        // The caller's own Accept-Encoding goes as it is; an unknown coding is passed on.
        let (uri, server) = serve_once("identity", plain.to_vec()).await;
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
        let answer = post(client.get(), uri, headers, Bytes::new())
            .await
            .unwrap();
        assert_eq!(answer.headers["x-asked"], "identity");
        assert_eq!(answer.headers[CONTENT_ENCODING], "identity");
        assert_eq!(collect(answer).await, plain);
        server.abort();
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error_with_its_cause() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let uri: Uri = format!("http://{}/v1/messages", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        drop(listener);
        let client = build(0, Duration::from_secs(2)).unwrap();
        let result = post(client.get(), uri, HeaderMap::new(), Bytes::new()).await;
        assert!(
            matches!(&result, Err(SendError::Connect(text)) if text.contains("refused")),
            "{:?}",
            result.err()
        );
    }

    #[test]
    fn codings_are_read_from_the_header() {
        assert_eq!(Coding::from_header("gzip"), Some(Coding::Gzip));
        assert_eq!(Coding::from_header("x-gzip"), Some(Coding::Gzip));
        assert_eq!(Coding::from_header("br"), Some(Coding::Brotli));
        assert_eq!(Coding::from_header("zstd"), Some(Coding::Zstd));
        assert_eq!(Coding::from_header("deflate"), Some(Coding::Deflate));
        assert_eq!(Coding::from_header("identity"), None);
        assert_eq!(Coding::from_header("gzip, br"), None);
    }
}
