//! The HTTP client the Azure identity credentials send through: the gateway's own
//! `reqwest` (rustls with the public roots, no proxy from the environment, no redirects),
//! so `azure_identity` needs none of its own. `SSL_CERT_FILE` from the gateway's
//! environment adds certificates to trust (a company's TLS-inspecting proxy, or a test's
//! token endpoint on loopback); the public roots stay.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use azure_core::error::{Error, ErrorKind};
use azure_core::http::headers::{HeaderName, HeaderValue, Headers};
use azure_core::http::request::{Body, Request};
use azure_core::http::{AsyncRawResponse, HttpClient, Method};
use futures_util::TryStreamExt;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use crate::deps::Environment;

/// `reqwest` behind `azure_core`'s [`HttpClient`].
#[derive(Debug, Clone)]
pub struct Transport(reqwest::Client);

impl Transport {
    /// The client, with the certificates of `SSL_CERT_FILE` (when set) trusted as well.
    pub fn new(env: &dyn Environment) -> Result<Self, String> {
        let mut builder = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30));
        if let Some(path) = env.var("SSL_CERT_FILE").filter(|p| !p.trim().is_empty()) {
            let pem = env
                .read_file(Path::new(path.trim()))
                .map_err(|e| format!("SSL_CERT_FILE {path}: {e}"))?;
            let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("SSL_CERT_FILE {path}: unreadable PEM: {e}"))?;
            if certs.is_empty() {
                return Err(format!("SSL_CERT_FILE {path}: holds no certificate"));
            }
            for der in certs {
                let cert = reqwest::Certificate::from_der(&der)
                    .map_err(|e| format!("SSL_CERT_FILE {path}: {e}"))?;
                builder = builder.add_root_certificate(cert);
            }
        }
        builder
            .build()
            .map(Self)
            .map_err(|e| format!("cannot build the Entra ID HTTP client: {e}"))
    }
}

#[async_trait]
impl HttpClient for Transport {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let method = match request.method() {
            Method::Get => reqwest::Method::GET,
            Method::Post => reqwest::Method::POST,
            other => {
                return Err(Error::with_message(
                    ErrorKind::Other,
                    format!("unexpected method {other:?} for an Entra ID token request"),
                ));
            }
        };
        let mut req = self.0.request(method, request.url().clone());
        for (name, value) in request.headers().iter() {
            req = req.header(name.as_str(), value.as_str());
        }
        let body = match request.body() {
            Body::Bytes(bytes) => bytes.clone(),
            #[allow(unreachable_patterns)]
            _ => {
                return Err(Error::with_message(
                    ErrorKind::Other,
                    "streamed bodies are not used for Entra ID token requests",
                ));
            }
        };
        let response = req.body(body).send().await.map_err(|e| {
            let kind = if e.is_connect() {
                ErrorKind::Connection
            } else {
                ErrorKind::Io
            };
            // reqwest's text names the URL (no credential is ever in it) and the cause.
            Error::with_message(kind, format!("Entra ID request failed: {e}"))
        })?;
        let status = response.status().as_u16();
        let headers: HashMap<HeaderName, HeaderValue> = response
            .headers()
            .iter()
            .filter_map(|(k, v)| {
                let v = v.to_str().ok()?;
                Some((
                    HeaderName::from(k.as_str().to_owned()),
                    HeaderValue::from(v.to_owned()),
                ))
            })
            .collect();
        let body = response
            .bytes_stream()
            .map_err(|e| Error::with_message(ErrorKind::Io, format!("Entra ID response: {e}")));
        Ok(AsyncRawResponse::new(
            status.into(),
            Headers::from(headers),
            Box::pin(body),
        ))
    }
}
