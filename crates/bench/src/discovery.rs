//! A minimal OpenID Connect issuer on loopback for the reservation benchmark: Gatehouse
//! needs sign-in configured (it reads the issuer's discovery document and key set at
//! start) to admit session callers, whose requests are the ones that reserve spend. Nobody
//! signs in through it: the benchmark mints session tokens with Gatehouse's own signing
//! code, so the discovery document and an empty key set are all it serves.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The running issuer; stops when dropped.
pub struct Issuer {
    pub url: String,
    task: JoinHandle<()>,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Issuer {
    pub async fn start() -> anyhow::Result<Issuer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr: SocketAddr = listener.local_addr()?;
        let url = format!("http://{addr}");
        let issuer = url.clone();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let issuer = issuer.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| answer(req, issuer.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        Ok(Issuer { url, task })
    }
}

/// `gatehouse-bench issuer`: the issuer, its URL printed, until stdin is closed.
pub async fn serve_until_stdin_eof() -> anyhow::Result<()> {
    use tokio::io::AsyncReadExt;
    let issuer = Issuer::start().await?;
    println!("issuer listening on {}", issuer.url);
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 256];
    while stdin.read(&mut buf).await? > 0 {}
    Ok(())
}

async fn answer(
    req: Request<Incoming>,
    issuer: String,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match req.uri().path() {
        "/.well-known/openid-configuration" => serde_json::json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "jwks_uri": format!("{issuer}/jwks"),
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
        }),
        "/jwks" => serde_json::json!({"keys": []}),
        _ => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"not found")));
            *r.status_mut() = StatusCode::NOT_FOUND;
            return Ok(r);
        }
    };
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(r)
}
