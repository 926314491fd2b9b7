//! A cheap, in-repo fake of the Anthropic Messages API, used by tests and the
//! benchmark instead of `api.anthropic.com`.
//!
//! It serves `POST /v1/messages` (SSE or JSON), `POST /v1/messages/count_tokens`
//! and `GET /v1/models`, an OpenAI-compatible `POST /v1/chat/completions` that scripts a
//! tool call (the `openai` module), cloud faces (the `clouds` module), the Anthropic
//! platform faces (Claude Platform on Google Cloud, the federation token exchange: the
//! `platform` module) and an Entra ID token endpoint (over https with
//! [`FakeUpstream::serve_tls`]); everything else gets a 404 Anthropic error envelope.
//! Answers are shaped by a [`FakeConfig`], one-shot failures are injected with
//! [`Fault`]s, and every request is recorded ([`RecordedRequest`],
//! [`StreamRecord`]). With `FakeConfig::strict` (and its `context_window`,
//! `text_only_models` and `mistral_tool_ids`) every face refuses what its real provider
//! refuses, in that provider's words (the `strict` module); [`FakeUpstream::refusals`] lists
//! them. Out-of-process users drive the same knobs through the `/_fake/*` control API (see
//! the `control` module docs).
//!
//! Built directly on hyper 1 + hyper-util with pre-rendered bytes and no task
//! per stream so that it costs much less than the gateway in front of it.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use fake_upstream::{FakeConfig, FakeUpstream, Fault};
//! let fake = FakeUpstream::start(FakeConfig::default()).await?;
//! fake.push_fault(Fault::Status { status: 529, retry_after: Some(1), error_type: None, message: None });
//! println!("point the gateway at {}", fake.url());
//! fake.shutdown().await;
//! # Ok(()) }
//! ```

mod aws_faces;
mod clouds;
mod config;
mod control;
mod entra;
mod openai;
mod platform;
mod prompt_cache;
mod record;
mod render;
mod server;
mod server_tools;
mod sse;
mod strict;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::{FakeConfig, Fault, ToolUse, default_error_type};
pub use entra::FOUNDRY_SCOPE;
pub use openai::{TEXT_ANSWER, TOOL_COMMAND, TOOL_OUTPUT};
pub use platform::FEDERATED_PREFIX;
pub use record::{MAX_RECORDS, RecordedRequest, Refusal, StreamRecord};
pub use server_tools::ANSWER_PREFIX as SEARCHER_ANSWER_PREFIX;

use server::Shared;

/// A running fake upstream. Dropping it stops the server too (without
/// waiting); [`FakeUpstream::shutdown`] stops it and waits.
pub struct FakeUpstream {
    addr: SocketAddr,
    shared: Arc<Shared>,
    token: CancellationToken,
    tracker: TaskTracker,
    accept: Option<JoinHandle<()>>,
}

impl FakeUpstream {
    /// Binds `127.0.0.1:0` and serves on the current tokio runtime.
    pub async fn start(config: FakeConfig) -> anyhow::Result<FakeUpstream> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        Self::start_on(listener, config).await
    }

    /// Serves on an already bound listener.
    pub async fn start_on(
        listener: TcpListener,
        config: FakeConfig,
    ) -> anyhow::Result<FakeUpstream> {
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(config));
        let token = CancellationToken::new();
        let tracker = TaskTracker::new();
        let accept = tokio::spawn(server::accept_loop(
            listener,
            shared.clone(),
            token.clone(),
            tracker.clone(),
            None,
        ));
        Ok(FakeUpstream {
            addr,
            shared,
            token,
            tracker,
            accept: Some(accept),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL, e.g. `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves the same fake over https as well, on another loopback port, with the PEM
    /// certificate chain and key given (Entra ID's token endpoint must be https). Returns
    /// the https origin; the listener stops with the fake.
    pub async fn serve_tls(&self, cert_chain_pem: &str, key_pem: &str) -> anyhow::Result<String> {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer};
        let certs = CertificateDer::pem_slice_iter(cert_chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        self.tracker.spawn(server::accept_loop(
            listener,
            self.shared.clone(),
            self.token.clone(),
            self.tracker.clone(),
            Some(tokio_rustls::TlsAcceptor::from(Arc::new(tls))),
        ));
        Ok(format!("https://{addr}"))
    }

    /// Entra ID access tokens the fake issued, oldest first.
    pub fn entra_tokens(&self) -> Vec<String> {
        self.shared
            .entra_tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// Replaces the config; requests already being answered keep the old one.
    pub fn set_config(&self, config: FakeConfig) {
        self.shared.set_config(config);
    }

    /// The current config.
    pub fn config(&self) -> FakeConfig {
        self.shared.rendered().config.clone()
    }

    /// Queues a fault; each inference request (`/v1/messages` or
    /// `/v1/messages/count_tokens`) consumes the oldest queued fault.
    pub fn push_fault(&self, fault: Fault) {
        self.shared.push_fault(fault);
    }

    /// Answers every request carrying `key` (as `x-api-key` or a bearer token) with
    /// `status` and an error envelope, with `retry-after` when given: a revoked or
    /// rate-limited key.
    pub fn refuse_key(&self, key: &str, status: u16, retry_after: Option<u32>) {
        self.shared.refuse_key(key, status, retry_after);
    }

    /// Turns body recording on (default) or off. When off, requests are still
    /// recorded (method, path, headers, size) but `body` is `Value::Null` and
    /// the body is never parsed into a `serde_json::Value` — use this for
    /// benchmarks.
    pub fn set_recording(&self, on: bool) {
        self.shared.set_recording(on);
    }

    /// Recorded requests, oldest first (at most [`MAX_RECORDS`]).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.records.lock().requests()
    }

    /// One record per `/v1/messages` answer, oldest first (at most [`MAX_RECORDS`]).
    pub fn streams(&self) -> Vec<StreamRecord> {
        self.shared.records.lock().streams()
    }

    /// Requests refused as their provider refuses them (`FakeConfig::strict` and the other
    /// rules of the `strict` module), oldest first.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.shared.records.lock().refusals()
    }

    /// Forgets recorded requests, streams and refusals; indices restart at 0.
    pub fn clear_records(&self) {
        self.shared.records.lock().clear();
    }

    /// Stops accepting, closes every connection and waits for them to end.
    pub async fn shutdown(mut self) {
        self.token.cancel();
        if let Some(accept) = self.accept.take() {
            let _ = accept.await;
        }
        self.tracker.close();
        self.tracker.wait().await;
    }
}

impl Drop for FakeUpstream {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

impl std::fmt::Debug for FakeUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeUpstream")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}
