//! The Anthropic Messages API upstream (and Anthropic-compatible proxies): raw HTTP, the
//! caller's allowed headers and query string, bodies and SSE passed through as bytes.
//! With workload-identity federation the token comes from [`super::federation`]; a 401
//! drops it and the request is sent once more with a fresh one. Requests go out through
//! the [`super::direct`] client when there is one for this link (no proxy configured),
//! else through reqwest.

use std::sync::Arc;

use async_trait::async_trait;
use http::{Method, StatusCode};
use url::Url;

use super::direct::Direct;
use super::federation::Federated;
use super::http_client::HttpClient;
use super::{Answer, Call, Operation, SendError, Upstream, headers};
use crate::config::{CredentialScheme, CredentialSource, UpstreamConfig};
use crate::deps::Clock;
use crate::secret::Secret;

pub struct Anthropic {
    client: HttpClient,
    /// The raw client and each operation's URI without a query, when it serves this link.
    direct: Option<(Direct, Uris)>,
    base_url: Url,
    /// `forward_user_identity`: the person's identity headers go along.
    forward_identity: bool,
    /// Workload-identity federation: the token exchange and its cache.
    federation: Option<Federated>,
}

impl Anthropic {
    /// `direct` serves the link unless its base URL carries user info (reqwest turns that
    /// into basic auth).
    pub fn new(
        client: HttpClient,
        direct: Option<Direct>,
        config: &UpstreamConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let base = &config.base_url;
        let direct = direct
            .filter(|_| base.username().is_empty() && base.password().is_none())
            .and_then(|d| Uris::new(base).map(|uris| (d, uris)));
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
            direct,
            base_url: config.base_url.clone(),
            forward_identity: config.forward_user_identity,
            federation,
        }
    }

    /// One attempt with the federated token `token`.
    async fn federated(&self, call: &Call<'_>, token: &Secret) -> Result<Answer, SendError> {
        let attempt = call.with_credential((CredentialScheme::OAuth, token));
        self.post(attempt).await
    }

    /// One attempt, through the raw client when it serves this link.
    async fn post(&self, call: Call<'_>) -> Result<Answer, SendError> {
        let Some((direct, uris)) = &self.direct else {
            let url = url(&self.base_url, call.op, call.query);
            return post(self.client.get(), url, call, self.forward_identity).await;
        };
        let uri = uris.get(call.op, call.query)?;
        let out = outgoing(&call, self.forward_identity);
        super::direct::post(direct.get(), uri, out, call.body).await
    }
}

/// Each operation's URI without a query, parsed once.
struct Uris {
    messages: http::Uri,
    count_tokens: http::Uri,
}

impl Uris {
    fn new(base: &Url) -> Option<Self> {
        let parse = |op| url(base, op, None).as_str().parse::<http::Uri>().ok();
        Some(Self {
            messages: parse(Operation::Messages)?,
            count_tokens: parse(Operation::CountTokens)?,
        })
    }

    /// The URI of `op` with the caller's query.
    fn get(&self, op: Operation, query: Option<&str>) -> Result<http::Uri, SendError> {
        let base = match op {
            Operation::Messages => &self.messages,
            Operation::CountTokens => &self.count_tokens,
        };
        let Some(query) = query else {
            return Ok(base.clone());
        };
        format!("{base}?{query}")
            .parse()
            .map_err(|e: http::uri::InvalidUri| SendError::Build(e.to_string()))
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
    let out = outgoing(&call, forward_identity);
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

/// The caller's allowed headers, the configured ones, the person's identity headers when
/// `forward_identity`, and the credential.
fn outgoing(call: &Call<'_>, forward_identity: bool) -> http::HeaderMap {
    let mut out = headers::to_upstream(call.headers, call.credential);
    for (name, value) in call.extra_headers {
        out.insert(name.clone(), value.clone());
    }
    if let (true, Some(caller)) = (forward_identity, &call.caller) {
        headers::identity(&mut out, caller);
    }
    out
}

#[async_trait]
impl Upstream for Anthropic {
    async fn send(&self, call: Call<'_>) -> Result<Answer, SendError> {
        let Some(federation) = &self.federation else {
            return self.post(call).await;
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
