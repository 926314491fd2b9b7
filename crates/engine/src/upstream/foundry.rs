//! Claude on Microsoft Foundry: Anthropic's Messages API under
//! `https://<resource>.services.ai.azure.com/anthropic`, with the Foundry key sent as
//! `x-api-key`. The wire is the Anthropic one, so requests pass through as bytes; only the
//! caller's query string stays behind (the Foundry SDK sends none). Errors are cleaned
//! like every cloud provider's ([`super::errors`]).

use async_trait::async_trait;
use url::Url;

use super::{Answer, Call, SendError, Upstream, anthropic, errors};
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
        let url = anthropic::url(&self.base_url, call.op, None);
        let answer = anthropic::post(&self.client, url, call).await?;
        Ok(errors::clean(&self.name, answer).await)
    }
}
