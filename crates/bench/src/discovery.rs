//! A minimal OpenID Connect issuer on loopback for the reservation and soak benchmarks:
//! Gatehouse needs sign-in configured (it reads the issuer's discovery document and key set
//! at start) to admit session callers, whose requests are the ones that reserve spend. Nobody
//! signs in through it: the benchmark mints session tokens with Gatehouse's own signing
//! code. Besides discovery and an empty key set it answers the refresh grant at `/token`
//! (no ID token: an access token `bench-at:<sub>` and the refresh token it was given) and
//! `/userinfo` for such an access token, so Gatehouse's own refresh grant can run against it
//! (the soak phase's refreshes).

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
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
    let path = req.uri().path().to_owned();
    let body = match path.as_str() {
        "/.well-known/openid-configuration" => serde_json::json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "jwks_uri": format!("{issuer}/jwks"),
            "userinfo_endpoint": format!("{issuer}/userinfo"),
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
        }),
        "/jwks" => serde_json::json!({"keys": []}),
        "/token" => match refresh(req).await {
            Some(body) => body,
            None => return Ok(status(StatusCode::BAD_REQUEST, "invalid_grant")),
        },
        "/userinfo" => {
            let sub = req
                .headers()
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer bench-at:"))
                .map(str::to_owned);
            match sub {
                Some(sub) => {
                    serde_json::json!({"sub": sub, "email": format!("{sub}@bench.example")})
                }
                None => return Ok(status(StatusCode::UNAUTHORIZED, "invalid_token")),
            }
        }
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

/// The refresh grant for an IdP refresh token `bench-rt:<sub>`: an access token naming the
/// subject and the same refresh token (no ID token: Gatehouse then asks `/userinfo`).
async fn refresh(req: Request<Incoming>) -> Option<serde_json::Value> {
    let body = req.into_body().collect().await.ok()?.to_bytes();
    let form = String::from_utf8(body.to_vec()).ok()?;
    let mut grant = None;
    let mut token = None;
    for pair in form.split('&') {
        match pair.split_once('=') {
            Some(("grant_type", v)) => grant = Some(v.to_owned()),
            Some(("refresh_token", v)) => token = Some(v.replace("%3A", ":")),
            _ => {}
        }
    }
    let sub = token.as_deref()?.strip_prefix("bench-rt:")?.to_owned();
    (grant.as_deref() == Some("refresh_token")).then(|| {
        serde_json::json!({
            "access_token": format!("bench-at:{sub}"),
            "token_type": "Bearer",
            "expires_in": 3600,
            "refresh_token": format!("bench-rt:{sub}"),
        })
    })
}

fn status(code: StatusCode, error: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(
        serde_json::json!({ "error": error }).to_string(),
    )));
    *r.status_mut() = code;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}
