//! Amazon Bedrock through the AWS SDK (`aws-sdk-bedrockruntime`): InvokeModel and
//! InvokeModelWithResponseStream, and CountTokens for `count_tokens`.
//!
//! The body is the caller's without `model` and `stream` (and the fields the capability
//! table drops), with `anthropic_version: bedrock-2023-05-31` and the betas Bedrock takes
//! in the body merged into `anthropic_beta`; the betas it takes in the header go there.
//! The event stream is re-emitted as Anthropic SSE with pings during silent gaps
//! ([`stream`]). SDK retries are off: the router does failover. Errors are cleaned
//! ([`super::errors`]); an unknown model id becomes `model X is not available on bedrock`.

mod count;
mod stream;

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::{
    BehaviorVersion, Credentials, Region, StalledStreamProtectionConfig, Token, retry::RetryConfig,
    timeout::TimeoutConfig,
};
use aws_sdk_bedrockruntime::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::primitives::Blob;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use bytes::Bytes;
use http::StatusCode;

use super::capabilities::{self, Plan};
use super::{Answer, Call, Operation, SendError, Upstream, body, errors};
use crate::config::{AwsAuth, BedrockConfig, UpstreamConfig};

const VERSION: &str = "bedrock-2023-05-31";

pub struct Bedrock {
    name: String,
    client: Client,
    ping: Duration,
}

impl Bedrock {
    pub async fn new(
        config: &UpstreamConfig,
        bedrock: &BedrockConfig,
        connect: Duration,
        ping: Duration,
    ) -> Result<Self, String> {
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let endpoint = config.base_url.as_str().trim_end_matches('/').to_owned();
        let region = Region::new(bedrock.region.clone());
        let timeouts = TimeoutConfig::builder().connect_timeout(connect).build();
        let builder = match &bedrock.auth {
            AwsAuth::DefaultChain => {
                let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .http_client(http.clone())
                    .region(region.clone())
                    .retry_config(RetryConfig::disabled())
                    .timeout_config(timeouts.clone())
                    .load()
                    .await;
                aws_sdk_bedrockruntime::config::Builder::from(&sdk)
            }
            AwsAuth::Keys {
                access_key_id,
                secret_access_key,
                session_token,
            } => aws_sdk_bedrockruntime::Config::builder().credentials_provider(Credentials::new(
                access_key_id.expose(),
                secret_access_key.expose(),
                session_token.as_ref().map(|t| t.expose().to_owned()),
                None,
                "gatehouse-config",
            )),
            AwsAuth::Bearer(key) => aws_sdk_bedrockruntime::Config::builder()
                .bearer_token(Token::new(key.expose(), None)),
        };
        let conf = builder
            .behavior_version(BehaviorVersion::latest())
            .http_client(http)
            .region(region)
            .endpoint_url(endpoint)
            .retry_config(RetryConfig::disabled())
            .timeout_config(timeouts)
            // Thinking can pause a stream for minutes; the gateway pings instead.
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
            .build();
        Ok(Self {
            name: config.name.clone(),
            client: Client::from_conf(conf),
            ping,
        })
    }

    /// An SDK failure: an answer when Bedrock answered, else why nothing arrived.
    fn failed<E>(
        &self,
        model: &str,
        e: SdkError<E, aws_smithy_runtime_api::client::orchestrator::HttpResponse>,
    ) -> Result<Answer, SendError>
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        match &e {
            SdkError::ServiceError(se) => {
                let status = StatusCode::from_u16(se.raw().status().as_u16())
                    .unwrap_or(StatusCode::BAD_GATEWAY);
                let message = se.err().message().map(str::to_owned);
                if status == StatusCode::BAD_REQUEST
                    && message.as_deref().is_some_and(unknown_model)
                {
                    tracing::warn!(upstream = %self.name, model, message = ?message,
                        "Bedrock does not know this model id; map it under models[].upstream_model");
                    let text = format!("model `{model}` is not available on bedrock");
                    let body = serde_json::json!({"type": "error", "error": {"type": "invalid_request_error", "message": text}});
                    return Ok(Answer::json(status, Bytes::from(body.to_string())));
                }
                Ok(errors::answer(&self.name, status, message.as_deref()))
            }
            SdkError::ConstructionFailure(_) => {
                Err(SendError::Build(DisplayErrorContext(&e).to_string()))
            }
            SdkError::DispatchFailure(_) => {
                Err(SendError::Connect(DisplayErrorContext(&e).to_string()))
            }
            _ => Err(SendError::Network(DisplayErrorContext(&e).to_string())),
        }
    }

    async fn messages(&self, call: Call<'_>, plan: Plan) -> Result<Answer, SendError> {
        let fields: Vec<&str> = plan.drop_fields.iter().map(String::as_str).collect();
        let dropped: Vec<String> = body::present(&call.body, &fields)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let mut remove = vec!["model", "stream"];
        remove.extend(&fields);
        let mut set = vec![("anthropic_version", format!("\"{VERSION}\""))];
        let mut in_body = body::strings(&call.body, "anthropic_beta");
        for b in &plan.body {
            if !in_body.contains(b) {
                in_body.push(b.clone());
            }
        }
        if !in_body.is_empty() {
            let list =
                serde_json::to_string(&in_body).map_err(|e| SendError::Build(e.to_string()))?;
            set.push(("anthropic_beta", list));
        }
        let payload = body::edit(&call.body, &remove, &set)
            .map_err(|e| SendError::Build(format!("request body: {e}")))?;
        // Header betas and the configured extra headers go on through the SDK's request hook.
        let mut extra: Vec<(String, String)> = call
            .extra_headers
            .iter()
            .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        if !plan.header.is_empty() {
            extra.push(("anthropic-beta".to_owned(), plan.header.join(",")));
        }
        let add = move |r: &mut aws_smithy_runtime_api::client::orchestrator::HttpRequest| {
            for (n, v) in &extra {
                r.headers_mut().insert(n.clone(), v.clone());
            }
        };
        let notes = plan.notes(&dropped);
        let mut answer = if call.stream {
            let req = self
                .client
                .invoke_model_with_response_stream()
                .model_id(call.model)
                .content_type("application/json")
                .accept("application/json")
                .body(Blob::new(payload.to_vec()))
                .customize()
                .mutate_request(add);
            match req.send().await {
                Ok(out) => stream::answer(out, self.ping, self.name.clone()),
                Err(e) => self.failed(call.model, e)?,
            }
        } else {
            let req = self
                .client
                .invoke_model()
                .model_id(call.model)
                .content_type("application/json")
                .accept("application/json")
                .body(Blob::new(payload.to_vec()))
                .customize()
                .mutate_request(add);
            match req.send().await {
                Ok(out) => Answer::json(StatusCode::OK, Bytes::from(out.body.into_inner())),
                Err(e) => self.failed(call.model, e)?,
            }
        };
        answer.notes = notes;
        Ok(answer)
    }
}

/// Bedrock's wording for a model id it does not serve (or that needs an inference profile).
fn unknown_model(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("model identifier is invalid")
        || m.contains("inference profile")
        || m.contains("model id") && m.contains("invalid")
}

#[async_trait]
impl Upstream for Bedrock {
    async fn send(&self, call: Call<'_>) -> Result<Answer, SendError> {
        let plan = capabilities::plan("bedrock", &capabilities::betas(call.headers));
        match call.op {
            Operation::Messages => self.messages(call, plan).await,
            Operation::CountTokens => count::count(self, call).await,
        }
    }
}
