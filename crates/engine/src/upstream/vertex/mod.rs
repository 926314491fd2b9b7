//! Claude on Vertex AI: the model moves from the body into the URL
//! (`.../publishers/anthropic/models/<model>:streamRawPredict` or `:rawPredict`; counting at
//! `.../models/count-tokens:rawPredict` with the model kept in the body), the body carries
//! `anthropic_version: vertex-2023-10-16` and keeps `stream`, the betas stay in the header
//! except those the capability table drops. Answers are Anthropic's shape already (SSE or
//! JSON); errors are cleaned ([`super::errors`]). Access tokens come from a fixed token or
//! from Google credentials ([`crate::google`]), cached and refreshed before they expire.

use crate::google;

use async_trait::async_trait;
use http::{HeaderMap, HeaderValue, Method, header};
use url::Url;

use super::http_client::HttpClient;
use super::{Answer, Call, Operation, SendError, Upstream, body, capabilities, errors};
use crate::config::{UpstreamConfig, VertexConfig};

const VERSION: &str = "vertex-2023-10-16";

pub struct Vertex {
    client: HttpClient,
    name: String,
    /// `<base>/projects/<project>/locations/<region>/publishers/anthropic/models/`
    models_url: Url,
    tokens: google::Tokens,
}

impl Vertex {
    pub async fn new(
        client: HttpClient,
        config: &UpstreamConfig,
        vertex: &VertexConfig,
    ) -> Result<Self, String> {
        let path = format!(
            "{}projects/{}/locations/{}/publishers/anthropic/models/",
            config.base_url.path(),
            vertex.project_id,
            vertex.region
        );
        let mut models_url = config.base_url.clone();
        models_url.set_path(&path);
        let tokens = google::Tokens::for_auth(&vertex.auth).await?;
        Ok(Self {
            client,
            name: config.name.clone(),
            models_url,
            tokens,
        })
    }

    fn url(&self, op: Operation, model: &str, stream: bool) -> Result<Url, SendError> {
        let tail = match op {
            Operation::CountTokens => "count-tokens:rawPredict".to_owned(),
            Operation::Messages if stream => format!("{model}:streamRawPredict"),
            Operation::Messages => format!("{model}:rawPredict"),
        };
        if tail.contains(['/', '?', '#']) {
            return Err(SendError::Build(format!(
                "model id `{model}` cannot be part of a Vertex URL"
            )));
        }
        // Not `Url::join`: `model:verb` would read as a URL with a scheme.
        let mut url = self.models_url.clone();
        url.set_path(&format!("{}{tail}", self.models_url.path()));
        Ok(url)
    }
}

#[async_trait]
impl Upstream for Vertex {
    async fn send(&self, call: Call<'_>) -> Result<Answer, SendError> {
        if call.op == Operation::Messages
            && let Some(refused) = capabilities::over_output_limit("vertex", call.model, &call.body)
        {
            return Ok(refused);
        }
        let url = self.url(call.op, call.model, call.stream)?;
        let plan = capabilities::plan("vertex", &capabilities::betas(call.headers));
        let fields: Vec<&str> = plan.drop_fields.iter().map(String::as_str).collect();
        let dropped = body::present(&call.body, &fields);
        let mut remove = fields.clone();
        if call.op == Operation::Messages {
            remove.push("model");
        }
        let version = ("anthropic_version", format!("\"{VERSION}\""));
        let payload = body::edit(&call.body, &remove, &[version])
            .map_err(|e| SendError::Build(format!("request body: {e}")))?;
        let token = self.tokens.current().await.map_err(SendError::Credential)?;
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        super::headers::bearer(&mut headers, &token);
        if !plan.header.is_empty()
            && let Ok(v) = HeaderValue::from_str(&plan.header.join(","))
        {
            headers.insert("anthropic-beta", v);
        }
        super::headers::copy_stainless(call.headers, &mut headers);
        for (name, value) in call.extra_headers {
            headers.insert(name.clone(), value.clone());
        }
        let sent = self
            .client
            .get()
            .request(Method::POST, url)
            .headers(headers)
            .body(payload)
            .send()
            .await;
        let answer = match sent {
            Ok(r) => Answer::from_http(r),
            Err(e) if e.is_connect() => return Err(SendError::Connect(e.to_string())),
            Err(e) => return Err(SendError::Network(e.to_string())),
        };
        let mut answer = errors::clean(&self.name, answer).await;
        answer.notes = plan.notes(&dropped.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        Ok(answer)
    }
}
