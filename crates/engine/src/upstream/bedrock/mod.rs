//! Amazon Bedrock through the AWS SDK (`aws-sdk-bedrockruntime`): InvokeModel and
//! InvokeModelWithResponseStream, and CountTokens for `count_tokens`.
//!
//! The body is the caller's without `model` and `stream` (and the fields the capability
//! table drops), with `anthropic_version: bedrock-2023-05-31` and the betas Bedrock takes
//! in the body merged into `anthropic_beta`; the betas it takes in the header go there.
//! The event stream is re-emitted as Anthropic SSE with pings during silent gaps
//! ([`stream`]). SDK retries are off: the router does failover. Errors are cleaned
//! ([`super::errors`]); an unknown model id becomes `model X is not available on bedrock`.

mod client;
mod count;
mod guardrail;
mod stream;
mod trace;

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_bedrockruntime::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::types::Trace;
use bytes::Bytes;
use http::StatusCode;

use super::capabilities::{self, Plan};
use super::{Answer, Call, Operation, SendError, Upstream, body, errors};
use crate::config::{BedrockConfig, Guardrail, UpstreamConfig};
use crate::deps::Environment;

const VERSION: &str = "bedrock-2023-05-31";

pub struct Bedrock {
    name: String,
    ping: Duration,
    guardrail: Option<Guardrail>,
    trace: bool,
    clients: client::Clients,
    /// Models whose CountTokens failed lately.
    count_skips: count::Skips,
}

/// The timeouts a Bedrock upstream uses.
pub struct Timing {
    pub connect: Duration,
    /// Silence after which the re-emitted stream gets a ping.
    pub ping: Duration,
}

impl Bedrock {
    pub async fn new(
        config: &UpstreamConfig,
        bedrock: &BedrockConfig,
        timing: Timing,
        env: &dyn Environment,
        clock: std::sync::Arc<dyn crate::deps::Clock>,
    ) -> Result<Self, String> {
        let setup = client::Setup {
            endpoint: config.base_url.as_str().trim_end_matches('/').to_owned(),
            bedrock: bedrock.clone(),
            connect: timing.connect,
            sts_endpoint: env.var("AWS_ENDPOINT_URL_STS"),
        };
        Ok(Self {
            name: config.name.clone(),
            ping: timing.ping,
            guardrail: bedrock.guardrail.clone(),
            trace: bedrock.guardrail_trace,
            clients: client::Clients::new(setup).await,
            count_skips: count::Skips::new(clock),
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
                    return Ok(errors::envelope(status, "invalid_request_error", &text));
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

    /// The InvokeModel body: no `model` or `stream` (nor the fields the table drops),
    /// `anthropic_version`, the body betas merged into `anthropic_beta`, guard tags.
    fn payload(&self, call: &Call<'_>, plan: &Plan) -> Result<(Vec<u8>, Vec<String>), SendError> {
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
        let edited = body::edit(&call.body, &remove, &set)
            .map_err(|e| SendError::Build(format!("request body: {e}")))?;
        let tagging = self.guardrail.as_ref().and_then(|g| g.input_tagging);
        let payload = match tagging {
            Some(how) => guardrail::tag(&edited, how).map_err(SendError::Build)?,
            None => edited.to_vec(),
        };
        Ok((payload, dropped))
    }

    async fn messages(&self, call: Call<'_>, plan: Plan) -> Result<Answer, SendError> {
        if self.guardrail.is_some()
            && let Some(key) = guardrail::caller_guardrail_key(&call.body)
        {
            let message =
                format!("{key}: not accepted here; the gateway applies its own Bedrock guardrail");
            return Ok(errors::envelope(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &message,
            ));
        }
        if let Some(refused) = capabilities::over_output_limit("bedrock", call.model, &call.body) {
            return Ok(refused);
        }
        let (payload, dropped) = self.payload(&call, &plan)?;
        // Header betas and the configured extra headers go on through the SDK's request hook.
        let mut headers: Vec<(String, String)> = call
            .extra_headers
            .iter()
            .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        if !plan.header.is_empty() {
            headers.push(("anthropic-beta".to_owned(), plan.header.join(",")));
        }
        let mut answer = self.invoke(&call, &payload, &headers).await?;
        // Credentials the chain or STS gave may have gone stale: drop them once and try
        // again before the router fails over.
        if matches!(answer.status.as_u16(), 401 | 403) && self.clients.refreshable() {
            tracing::warn!(upstream = %self.name, status = answer.status.as_u16(), "Bedrock refused the credentials; fetching new ones once");
            self.clients.refresh().await;
            answer = self.invoke(&call, &payload, &headers).await?;
        }
        answer.notes = plan.notes(&dropped);
        Ok(answer)
    }

    /// One InvokeModel (streaming or not) with the current client and, when the role is
    /// named after people, the caller's own role session.
    async fn invoke(
        &self,
        call: &Call<'_>,
        payload: &[u8],
        headers: &[(String, String)],
    ) -> Result<Answer, SendError> {
        let clients = self.clients.current();
        let mut overrides = aws_sdk_bedrockruntime::config::Builder::default();
        if let (Some(roles), Some(c)) = (&clients.roles, call.caller) {
            overrides = overrides.credentials_provider(roles.for_caller(c.sub, c.email).await);
        }
        let headers = headers.to_vec();
        let add = move |r: &mut aws_smithy_runtime_api::client::orchestrator::HttpRequest| {
            for (n, v) in &headers {
                r.headers_mut().insert(n.clone(), v.clone());
            }
        };
        let guard_id = self.guardrail.as_ref().map(|g| g.id.clone());
        let guard_version = self.guardrail.as_ref().map(|g| g.version.clone());
        let trace = self.trace.then_some(Trace::Enabled);
        let who = call.caller.map(|c| trace::Who::of(&c)).unwrap_or_default();
        // Both InvokeModel operations take the same inputs (their builders are two types).
        macro_rules! invoke {
            ($op:expr) => {
                $op.model_id(call.model)
                    .content_type("application/json")
                    .accept("application/json")
                    .set_guardrail_identifier(guard_id)
                    .set_guardrail_version(guard_version)
                    .set_trace(trace)
                    .body(Blob::new(payload.to_vec()))
                    .customize()
                    .mutate_request(add)
                    .config_override(overrides)
                    .send()
                    .await
            };
        }
        if call.stream {
            match invoke!(clients.client.invoke_model_with_response_stream()) {
                Ok(out) => {
                    let who = self.trace.then_some(who);
                    Ok(stream::answer(out, self.ping, self.name.clone(), who))
                }
                Err(e) => self.failed(call.model, e),
            }
        } else {
            match invoke!(clients.client.invoke_model()) {
                Ok(out) => {
                    let bytes = out.body.into_inner();
                    if self.trace {
                        trace::log_json(&self.name, &who, &bytes);
                    }
                    Ok(Answer::json(StatusCode::OK, Bytes::from(bytes)))
                }
                Err(e) => self.failed(call.model, e),
            }
        }
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
