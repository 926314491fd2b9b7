//! Claude on Microsoft Foundry: Anthropic's Messages API under
//! `https://<resource>.services.ai.azure.com/anthropic`, with the Foundry key sent as
//! `x-api-key`. The wire is the Anthropic one, so requests pass through as bytes; only the
//! caller's query string stays behind (the Foundry SDK sends none). Errors are cleaned
//! like every cloud provider's ([`super::errors`]); a `max_tokens` above the model's
//! output limit is answered as the Anthropic API does ([`capabilities::over_output_limit`]).

use async_trait::async_trait;
use url::Url;

use super::{Answer, Call, Operation, SendError, Upstream, anthropic, capabilities, errors};
use crate::config::UpstreamConfig;

pub struct Foundry {
    client: reqwest::Client,
    name: String,
    base_url: Url,
}

impl Foundry {
    pub fn new(client: reqwest::Client, config: &UpstreamConfig) -> Self {
        Self {
            client,
            name: config.name.clone(),
            base_url: config.base_url.clone(),
        }
    }
}

#[async_trait]
impl Upstream for Foundry {
    async fn send(&self, call: Call<'_>) -> Result<Answer, SendError> {
        if call.op == Operation::Messages
            && let Some(refused) =
                capabilities::over_output_limit("foundry", call.model, &call.body)
        {
            return Ok(refused);
        }
        let url = anthropic::url(&self.base_url, call.op, None);
        let answer = anthropic::post(&self.client, url, call, false).await?;
        Ok(errors::clean(&self.name, answer).await)
    }
}
