//! Any OpenAI-compatible Chat Completions API (OpenAI, DeepSeek, Kimi, GLM, Qwen,
//! OpenRouter, Ollama, vLLM, LM Studio) behind Anthropic's Messages wire.
//!
//! `POST <base_url>/chat/completions` with the key as `Authorization: Bearer`, the
//! upstream's extra headers and nothing of the caller's (its headers are Anthropic's). The
//! request is translated by [`request`], a JSON answer by [`response`], a stream by
//! [`stream`] (with pings on silence), errors by [`errors`]. What the translation had to
//! drop is named in [`Answer::notes`] (and so in `route_reason`). `count_tokens` is never
//! sent upstream: [`count`] estimates it locally.

pub mod count;
pub mod errors;
pub mod ids;
pub mod request;
pub mod response;
pub mod stream;

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Value, json};
use url::Url;

use super::http_client::HttpClient;
use super::{Answer, Call, Operation, SendError, Upstream, sse};
use crate::config::{OpenAiConfig, TokenField, UpstreamConfig};

/// Largest JSON completion read before it is translated.
const MAX_COMPLETION: usize = 32 * 1024 * 1024;

pub struct OpenAi {
    client: HttpClient,
    name: String,
    url: Url,
    token_field: Option<TokenField>,
    max_output_tokens: Option<u64>,
    ping: Duration,
}

impl OpenAi {
    pub fn new(
        client: HttpClient,
        config: &UpstreamConfig,
        openai: &OpenAiConfig,
        ping: Duration,
    ) -> Self {
        let mut url = config.base_url.clone();
        let path = format!("{}chat/completions", url.path());
        url.set_path(&path);
        Self {
            client,
            name: config.name.clone(),
            url,
            token_field: openai.token_field,
            max_output_tokens: openai.max_output_tokens,
            ping,
        }
    }

    /// Lowers the output limit to `max_output_tokens`; the note says from what.
    fn lower_max_tokens(&self, body: &mut Value, field: TokenField) -> Option<String> {
        let cap = self.max_output_tokens?;
        let asked = body[field.as_str()].as_u64().filter(|n| *n > cap)?;
        body[field.as_str()] = json!(cap);
        Some(format!("openai: max_tokens {asked} lowered to {cap}"))
    }

    fn headers(&self, call: &Call<'_>) -> HeaderMap {
        let mut out = HeaderMap::new();
        out.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let accept = if call.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        out.insert(header::ACCEPT, HeaderValue::from_static(accept));
        out.insert(header::USER_AGENT, HeaderValue::from_static("gatehouse"));
        for (name, value) in call.extra_headers {
            out.insert(name.clone(), value.clone());
        }
        // Chat Completions takes its key as Bearer whatever scheme the credential names.
        if let Some((_, key)) = call.credential {
            super::headers::bearer(&mut out, key);
        }
        out
    }
}

impl OpenAi {
    /// A server that ignored `stream: true` and answered JSON: its Message as events.
    async fn whole_as_stream(&self, answer: Answer, model: &str) -> Answer {
        let translated = completion(&self.name, answer, model).await;
        if !translated.status.is_success() {
            return translated;
        }
        let bytes = translated.read_limited(MAX_COMPLETION).await;
        let message: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let frames: Vec<Result<Bytes, super::BodyError>> = stream::from_message(&message)
            .iter()
            .map(|e| Ok(sse::frame(e.to_string().as_bytes())))
            .collect();
        sse_answer(futures_util::stream::iter(frames).boxed())
    }
}

/// A JSON body (anything else, SSE or an unlabelled body, is read as a stream).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("json"))
}

fn sse_answer(body: super::BodyStream) -> Answer {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Answer {
        status: StatusCode::OK,
        headers,
        body,
        notes: Vec::new(),
        estimated: false,
    }
}

/// The notes for `route_reason`: what had no equivalent upstream.
fn notes(dropped: &std::collections::BTreeSet<String>) -> Vec<String> {
    if dropped.is_empty() {
        return Vec::new();
    }
    let names: Vec<&str> = dropped.iter().map(String::as_str).collect();
    vec![format!("openai: dropped {}", names.join(", "))]
}

fn bad_request(message: &str) -> Answer {
    super::errors::envelope(StatusCode::BAD_REQUEST, "invalid_request_error", message)
}

#[async_trait]
impl Upstream for OpenAi {
    async fn send(&self, call: Call<'_>) -> Result<Answer, SendError> {
        let Ok(body) = serde_json::from_slice::<Value>(&call.body) else {
            return Ok(bad_request("the request body is not JSON"));
        };
        let field = self
            .token_field
            .unwrap_or_else(|| TokenField::for_model(call.model));
        let stream = call.stream && call.op == Operation::Messages;
        let mut translated = match request::translate(&body, call.model, field, stream) {
            Ok(t) => t,
            Err(e) => return Ok(bad_request(&e.0)),
        };
        if call.op == Operation::CountTokens {
            return Ok(count_answer(translated.body).await);
        }
        let mut notes = notes(&translated.dropped);
        let betas = super::capabilities::betas(call.headers);
        notes.extend(super::capabilities::plan("openai", &betas).notes(&[]));
        if let Some(lowered) = self.lower_max_tokens(&mut translated.body, field) {
            notes.push(lowered);
        }
        let bytes = Bytes::from(translated.body.to_string());
        let request = self
            .client
            .get()
            .post(self.url.clone())
            .headers(self.headers(&call))
            .body(bytes)
            .build()
            .map_err(|e| SendError::Build(e.to_string()))?;
        let response = match self.client.get().execute(request).await {
            Ok(r) => r,
            Err(e) if e.is_connect() => return Err(SendError::Connect(e.to_string())),
            Err(e) => return Err(SendError::Network(e.to_string())),
        };
        let answer = Answer::from_http(response);
        let mut out = if !answer.status.is_success() {
            errors::clean(&self.name, answer).await
        } else if stream && is_json(&answer.headers) {
            self.whole_as_stream(answer, call.model).await
        } else if stream {
            let body = stream::translate(answer.body, call.model);
            sse_answer(sse::with_pings(body, self.ping))
        } else {
            completion(&self.name, answer, call.model).await
        };
        out.notes = notes;
        Ok(out)
    }
}

/// A JSON completion translated into a Message (read whole: it is one JSON value).
async fn completion(name: &str, answer: Answer, model: &str) -> Answer {
    let body = answer.read_limited(MAX_COMPLETION).await;
    match serde_json::from_slice::<Value>(&body) {
        Ok(v) if v["choices"].is_array() => {
            let message = response::translate(&v, model);
            Answer::json(StatusCode::OK, Bytes::from(message.to_string()))
        }
        _ => {
            tracing::warn!(upstream = %name, bytes = body.len(), "openai upstream answered something that is not a completion");
            super::errors::envelope(
                StatusCode::BAD_GATEWAY,
                "api_error",
                "the upstream answered something that is not a chat completion",
            )
        }
    }
}

/// `{"input_tokens": N}` estimated locally (off the async workers: tokenising a long
/// prompt takes a while).
async fn count_answer(openai: Value) -> Answer {
    let n = tokio::task::spawn_blocking(move || count::estimate(&openai)).await;
    let Ok(n) = n else {
        return super::errors::envelope(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            "the token estimate failed",
        );
    };
    let mut answer = Answer::json(
        StatusCode::OK,
        Bytes::from(json!({"input_tokens": n}).to_string()),
    );
    answer.estimated = true;
    answer.notes = vec!["count_tokens estimated locally (o200k_base)".to_owned()];
    answer
}

#[cfg(test)]
mod golden;
