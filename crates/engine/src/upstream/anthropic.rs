//! The Anthropic Messages API upstream (and Anthropic-compatible proxies): raw HTTP, the
//! caller's allowed headers and query string, bodies and SSE passed through as bytes.
//! With workload-identity federation the token comes from [`super::federation`]; a 401
//! drops it and the request is sent once more with a fresh one.

use std::sync::Arc;

use async_trait::async_trait;
use http::{Method, StatusCode};
use url::Url;

use super::federation::Federated;
use super::http_client::HttpClient;
use super::{Answer, Call, Operation, SendError, Upstream, headers};
use crate::config::{CredentialScheme, CredentialSource, UpstreamConfig};
use crate::deps::Clock;
use crate::secret::Secret;

pub struct Anthropic {
    client: HttpClient,
    base_url: Url,
    /// `forward_user_identity`: the person's identity headers go along.
    forward_identity: bool,
    /// Workload-identity federation: the token exchange and its cache.
    federation: Option<Federated>,
}

impl Anthropic {
    pub fn new(client: HttpClient, config: &UpstreamConfig, clock: Arc<dyn Clock>) -> Self {
        let federation = match config.credential.as_ref().map(|c| &c.source) {
            Some(CredentialSource::Federation(f)) => Some(Federated::new(
                client.shared().clone(),
                &config.base_url,
                f.clone(),
                clock,
            )),
            _ => None,
        };
        Self {
            client,
            base_url: config.base_url.clone(),
            forward_identity: config.forward_user_identity,
            federation,
        }
    }

    /// One attempt with the federated token `token`.
    async fn federated(&self, call: &Call<'_>, token: &Secret) -> Result<Answer, SendError> {
        let attempt = call.with_credential((CredentialScheme::OAuth, token));
        let url = url(&self.base_url, call.op, call.query);
        post(self.client.get(), url, attempt, self.forward_identity).await
    }
}

/// `base` (ending in `/`) joined with the operation's path and the caller's query.
pub fn url(base: &Url, op: Operation, query: Option<&str>) -> Url {
    let mut url = base.clone();
    let path = match op {
        Operation::Messages => "v1/messages",
        Operation::CountTokens => "v1/messages/count_tokens",
    };
    let joined = format!("{}{path}", url.path());
    url.set_path(&joined);
    url.set_query(query);
    url
}

/// Sends `call` to `url` with the caller's allowed headers, the configured ones, the
/// person's identity headers when `forward_identity`, and the credential.
pub async fn post(
    client: &reqwest::Client,
    url: Url,
    call: Call<'_>,
    forward_identity: bool,
) -> Result<Answer, SendError> {
    let mut out = headers::to_upstream(call.headers, call.credential);
    for (name, value) in call.extra_headers {
        out.insert(name.clone(), value.clone());
    }
    if let (true, Some(caller)) = (forward_identity, &call.caller) {
        headers::identity(&mut out, caller);
    }
    let request = client
        .request(Method::POST, url)
        .headers(out)
        .body(call.body)
        .build()
        .map_err(|e| SendError::Build(e.to_string()))?;
    match client.execute(request).await {
        Ok(response) => Ok(Answer::from_http(response)),
        Err(e) if e.is_connect() => Err(SendError::Connect(e.to_string())),
        Err(e) => Err(SendError::Network(e.to_string())),
    }
}

#[async_trait]
impl Upstream for Anthropic {
    async fn send(&self, call: Call<'_>) -> Result<Answer, SendError> {
        let Some(federation) = &self.federation else {
            let url = url(&self.base_url, call.op, call.query);
            return post(self.client.get(), url, call, self.forward_identity).await;
        };
        let token = federation.token().await.map_err(SendError::Credential)?;
        let answer = self.federated(&call, &token).await?;
        if answer.status != StatusCode::UNAUTHORIZED {
            return Ok(answer);
        }
        // The token was refused before it expired: exchange again, once.
        federation.invalidate(&token).await;
        let token = federation.token().await.map_err(SendError::Credential)?;
        self.federated(&call, &token).await
    }
}
