//! Upstreams: one translation module per provider behind the small [`Upstream`] interface,
//! header hygiene, ordered failover and the health that real outcomes give each upstream.
//!
//! The router ([`router`]) hands each provider a [`Call`] (the caller's request with the
//! upstream's model id) and gets back an [`Answer`]: Anthropic-shaped status, headers and a
//! JSON or SSE body, whatever the provider speaks on its wire ([`anthropic`] and
//! [`foundry`]: the Messages API over HTTP; [`bedrock`]: the AWS SDK and its event stream;
//! [`vertex`]: rawPredict; [`anthropic_google_cloud`]: the Messages API under a Google Cloud
//! workspace, Google tokens; [`mantle`] and [`anthropic_aws`]: the Messages API on AWS with
//! SigV4 ([`aws_http`], [`aws`]); [`openai`]: Chat Completions, translated both ways; [`canned`]:
//! `load_test_mode`'s canned replies in place of every upstream; [`user_profile`]: the
//! body's `user_profile_id` as a header for every provider but the raw one). Routing, failover, metering and spend never learn provider
//! names. What a provider keeps, moves or drops of a request is in [`capabilities`]. Every
//! attempt is reported to [`health`] (which the dashboard only reads), whose breaker and
//! cooldown the router obeys; same-upstream retries come out of [`retry`]'s budget.

pub mod anthropic;
pub mod anthropic_aws;
pub mod anthropic_google_cloud;
pub mod aws;
pub mod aws_http;
#[cfg(test)]
mod aws_http_tests;
pub mod bedrock;
pub mod body;
pub mod canned;
pub mod capabilities;
pub mod direct;
pub mod echo;
pub mod errors;
pub mod federation;
pub mod foundry;
pub mod headers;
pub mod health;
pub mod http_client;
pub mod keys;
pub mod mantle;
pub mod model_caps;
pub mod openai;
pub mod retry;
pub mod router;
pub mod shared;
pub mod sse;
pub mod strategy;
pub mod thinking;
pub mod tool_ids;
pub mod user_profile;
pub mod vertex;
pub mod workload_sse;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http::{HeaderMap, StatusCode};

pub(crate) use crate::config::CredentialScheme;
use crate::config::{Config, CredentialSource, Provider, UpstreamConfig};
use crate::deps::Deps;
use crate::secret::Secret;
use http_client::HttpClient;

/// Which Messages operation a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Messages,
    CountTokens,
}

/// Who a call is for, as far as a provider may use it (AWS role sessions named after the
/// person, guardrail trace lines).
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    pub request_id: &'a str,
    pub sub: &'a str,
    pub email: Option<&'a str>,
}

/// One request to one upstream, as the router makes it.
pub struct Call<'a> {
    pub op: Operation,
    /// The caller's query string (`beta=true`), for raw HTTP upstreams.
    pub query: Option<&'a str>,
    /// The caller's headers (providers take what their wire needs, never credentials).
    pub headers: &'a HeaderMap,
    /// The model id this upstream expects.
    pub model: &'a str,
    /// The caller's body with `model` set to [`Call::model`].
    pub body: Bytes,
    pub stream: bool,
    /// The raw HTTP upstream's credential value for this call (read once per attempt).
    pub credential: Option<(CredentialScheme, &'a Secret)>,
    /// The upstream's configured extra headers (`upstreams[].headers`).
    pub extra_headers: &'a [(http::HeaderName, http::HeaderValue)],
    /// The signed-in person, when there is one.
    pub caller: Option<Caller<'a>>,
    /// The conversation's key, when affinity applies: a key pool starts with the key
    /// the conversation ranks first ([`crate::conversation::rendezvous`]).
    pub affinity: Option<u64>,
}

impl<'a> Call<'a> {
    /// The same call with another credential (a federated token, a pooled key's turn).
    pub fn with_credential(&self, credential: (CredentialScheme, &'a Secret)) -> Call<'a> {
        Call {
            op: self.op,
            query: self.query,
            headers: self.headers,
            model: self.model,
            body: self.body.clone(),
            stream: self.stream,
            credential: Some(credential),
            extra_headers: self.extra_headers,
            caller: self.caller,
            affinity: self.affinity,
        }
    }
}

/// A failure reading an upstream body after its headers.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BodyError(pub String);

/// An upstream body: chunks as they arrive.
pub type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, BodyError>> + Send>>;

/// What an upstream answered, in Anthropic's shape.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: BodyStream,
    /// What the translation changed (betas moved or dropped, fields dropped), for
    /// `route_reason`; empty for a pass-through.
    pub notes: Vec<String>,
    /// The gateway computed this answer itself as an estimate (a local `count_tokens`):
    /// the caller gets `x-gatehouse-estimated: true` and the usage row is `estimated`.
    pub estimated: bool,
}

impl Answer {
    /// A reqwest response as it is (its headers moved, not copied).
    pub fn from_http(response: reqwest::Response) -> Self {
        let (parts, body) = http::Response::from(response).into_parts();
        let body = http_body_util::BodyDataStream::new(body)
            .map(|r| r.map_err(|e| BodyError(e.to_string())))
            .boxed();
        Self {
            status: parts.status,
            headers: parts.headers,
            body,
            notes: Vec::new(),
            estimated: false,
        }
    }

    /// A JSON answer made by a translation (an SDK's result or error).
    pub fn json(status: StatusCode, body: Bytes) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        Self {
            status,
            headers,
            body: futures_util::stream::once(async move { Ok(body) }).boxed(),
            notes: Vec::new(),
            estimated: false,
        }
    }

    /// The body, at most `limit` bytes of it (a retained or sanitised error).
    pub async fn read_limited(mut self, limit: usize) -> Bytes {
        let mut buf = Vec::new();
        while let Some(Ok(chunk)) = self.body.next().await {
            let room = limit.saturating_sub(buf.len());
            buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if buf.len() >= limit {
                break;
            }
        }
        Bytes::from(buf)
    }
}

/// Why a call produced no answer.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("connect error: {0}")]
    Connect(String),
    #[error("network error: {0}")]
    Network(String),
    #[error("could not build the request: {0}")]
    Build(String),
    #[error("no credential: {0}")]
    Credential(String),
}

impl SendError {
    /// A short kind for health and `route_reason` (never upstream text).
    pub fn kind(&self) -> &'static str {
        match self {
            SendError::Connect(_) => "connect error",
            SendError::Network(_) => "network error",
            SendError::Build(_) => "bad request",
            SendError::Credential(_) => "credential error",
        }
    }
}

/// One provider's translation: send a [`Call`], answer in Anthropic's shape.
#[async_trait]
pub trait Upstream: Send + Sync {
    async fn send(&self, call: Call<'_>) -> Result<Answer, SendError>;
}

/// The configured upstreams and their translations (the HTTP ones share one client).
pub struct Upstreams {
    pub list: Vec<UpstreamConfig>,
    /// One translation per upstream, in `list` order.
    pub links: Vec<Arc<dyn Upstream>>,
    pub ttfb: Duration,
    /// Per-upstream state from real outcomes, in `list` order (shared with the metered
    /// relay, which reports streams that break after their first byte).
    pub health: Arc<health::UpstreamHealth>,
    /// The gateway's budget for same-upstream retries.
    pub retry: retry::RetryBudget,
    /// Routing attributes per upstream and the random draws of the strategies.
    pub strategist: strategy::Strategist,
    /// Each upstream's key pool (`auth.api_keys`), in `list` order.
    pub key_pools: Vec<Option<Arc<keys::Pool>>>,
}

/// Why the upstreams could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot build the upstream HTTP client: {0}")]
    Client(String),
    #[error("upstream `{name}`: {message}")]
    Provider { name: String, message: String },
}

impl Upstreams {
    /// `deps.events` receives `upstream.state` on every change of an upstream's state;
    /// `deps.env` may point STS elsewhere (`AWS_ENDPOINT_URL_STS`) and holds the Azure
    /// credential settings of Foundry with Entra ID.
    /// `connection_threads`: how many the server runs; each gets its own HTTP client.
    pub async fn new(
        config: &Config,
        deps: &Deps,
        connection_threads: usize,
    ) -> Result<Self, SetupError> {
        let client = HttpClient::build(connection_threads, || {
            reqwest::Client::builder()
                .connect_timeout(config.timeouts.upstream_connect)
                .tcp_nodelay(true)
                .pool_idle_timeout(Duration::from_secs(90))
                .pool_max_idle_per_host(256)
                .redirect(reqwest::redirect::Policy::none())
                .build()
        })
        .map_err(|e| SetupError::Client(e.to_string()))?;
        // The raw Anthropic links' own client, unless a proxy is configured (reqwest's then).
        let raw = config
            .upstreams
            .iter()
            .any(|u| matches!(u.provider, Provider::Anthropic))
            && !direct::proxied(deps.env.as_ref());
        let direct = raw
            .then(|| direct::build(connection_threads, config.timeouts.upstream_connect))
            .transpose()
            .map_err(SetupError::Client)?;
        let mut links: Vec<Arc<dyn Upstream>> = Vec::with_capacity(config.upstreams.len());
        let mut key_pools = Vec::with_capacity(config.upstreams.len());
        for up in &config.upstreams {
            let fail = |message: String| SetupError::Provider {
                name: up.name.clone(),
                message,
            };
            let link: Arc<dyn Upstream> = match &up.provider {
                Provider::Anthropic => Arc::new(anthropic::Anthropic::new(
                    client.clone(),
                    direct.clone(),
                    up,
                    deps.clock.clone(),
                )),
                Provider::AnthropicGoogleCloud(g) => Arc::new(
                    anthropic_google_cloud::AnthropicGoogleCloud::new(client.clone(), up, g)
                        .await
                        .map_err(fail)?,
                ),
                Provider::Foundry(f) => Arc::new(
                    foundry::Foundry::new(client.clone(), up, f, deps.env.as_ref())
                        .map_err(fail)?,
                ),
                Provider::OpenAi(o) => Arc::new(openai::OpenAi::new(
                    client.clone(),
                    up,
                    o,
                    config.timeouts.stream_ping,
                )),
                Provider::Vertex(v) => Arc::new(
                    vertex::Vertex::new(client.clone(), up, v)
                        .await
                        .map_err(fail)?,
                ),
                Provider::Mantle(m) => Arc::new(
                    mantle::new(
                        client.clone(),
                        up,
                        m,
                        config.timeouts.upstream_connect,
                        deps.env.var("AWS_ENDPOINT_URL_STS"),
                    )
                    .await,
                ),
                Provider::AnthropicAws(a) => Arc::new(
                    anthropic_aws::new(client.clone(), up, a, config.timeouts.upstream_connect)
                        .await
                        .map_err(fail)?,
                ),
                Provider::Bedrock(b) => Arc::new(
                    bedrock::Bedrock::new(
                        up,
                        b,
                        bedrock::Timing {
                            connect: config.timeouts.upstream_connect,
                            ping: config.timeouts.stream_ping,
                        },
                        deps.env.as_ref(),
                        deps.clock.clone(),
                    )
                    .await
                    .map_err(fail)?,
                ),
            };
            // Every provider but the raw pass-through moves `user_profile_id` to its header.
            let link: Arc<dyn Upstream> = match &up.provider {
                Provider::Anthropic => link,
                Provider::OpenAi(_) => Arc::new(user_profile::UserProfile::new(link, false)),
                _ => Arc::new(user_profile::UserProfile::new(link, true)),
            };
            let pool = up.credential.as_ref().and_then(|c| match &c.source {
                CredentialSource::Pool(list) => Some(Arc::new(keys::Pool::new(
                    &up.name,
                    c.scheme,
                    list,
                    deps.clock.clone(),
                    deps.events.clone(),
                ))),
                _ => None,
            });
            let link = match &pool {
                Some(pool) => Arc::new(keys::Pooled::new(link, pool.clone())),
                None => link,
            };
            key_pools.push(pool);
            links.push(link);
        }
        // Load-test mode: the upstreams are built (and their credentials fetched) as in
        // production, but every call gets a canned answer.
        if let Some(cfg) = &config.load_test {
            let canned: Arc<dyn Upstream> =
                Arc::new(canned::Canned::new(cfg, canned::Meter::start()));
            links = links.iter().map(|_| canned.clone()).collect();
        }
        Ok(Self {
            list: config.upstreams.clone(),
            links,
            ttfb: config.timeouts.upstream_ttfb,
            health: Arc::new(health::UpstreamHealth::new(
                &config.upstreams,
                config.routing.health.clone(),
                deps.clock.clone(),
                deps.events.clone(),
            )),
            key_pools,
            retry: retry::RetryBudget::new(config.routing.retry.clone(), deps.clock.clone()),
            strategist: strategy::Strategist::new(&config.upstreams, &config.routing.strategies),
        })
    }
}
