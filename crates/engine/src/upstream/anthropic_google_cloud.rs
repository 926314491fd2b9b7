//! Claude Platform on Google Cloud, as Anthropic's `AnthropicGoogleCloud` SDK speaks it:
//! the first-party Messages API with no URL or body rewriting under the workspace's base
//! (`https://claude.googleapis.com/v1/projects/<p>/locations/<l>/workspaces/<w>/invoke`,
//! then `/v1/messages` and `/v1/messages/count_tokens`, the caller's query kept), with a
//! Google access token (scope cloud-platform) as `Authorization: Bearer` and no workspace
//! header (the path carries it). The caller's `anthropic-beta` and model id go as sent.
//! Tokens come from [`crate::google`] (a fixed token, a service-account key file or
//! Application Default Credentials; cached and refreshed before they expire). Errors are
//! cleaned like every cloud provider's ([`super::errors`]: no project ids reach the
//! caller); a top-level `workspace_id` in the body is refused, as the reference does for
//! every SDK upstream.

use async_trait::async_trait;
use url::Url;

use super::http_client::HttpClient;
use super::{Answer, Call, CredentialScheme, Operation, SendError, Upstream};
use super::{anthropic, capabilities, errors};
use crate::config::{GoogleCloudConfig, UpstreamConfig};
use crate::google;

/// The capability table's name for this provider.
const CAPS: &str = "anthropicGoogleCloud";

pub struct AnthropicGoogleCloud {
    client: HttpClient,
    name: String,
    base_url: Url,
    tokens: google::Tokens,
}

impl AnthropicGoogleCloud {
    pub async fn new(
        client: HttpClient,
        config: &UpstreamConfig,
        cloud: &GoogleCloudConfig,
    ) -> Result<Self, String> {
        Ok(Self {
            client,
            name: config.name.clone(),
            base_url: config.base_url.clone(),
            tokens: google::Tokens::for_auth(&cloud.auth).await?,
        })
    }
}

#[async_trait]
impl Upstream for AnthropicGoogleCloud {
    async fn send(&self, call: Call<'_>) -> Result<Answer, SendError> {
        if let Some(refused) = errors::workspace_id_in_body(&call.body) {
            return Ok(refused);
        }
        if call.op == Operation::Messages
            && let Some(refused) = capabilities::over_output_limit(CAPS, call.model, &call.body)
        {
            return Ok(refused);
        }
        let token = self.tokens.current().await.map_err(SendError::Credential)?;
        let url = anthropic::url(&self.base_url, call.op, call.query);
        let call = Call {
            credential: Some((CredentialScheme::Bearer, &token)),
            ..call
        };
        let answer = anthropic::post(self.client.get(), url, call, false).await?;
        Ok(errors::clean(&self.name, answer).await)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn paths_are_the_first_party_ones_under_the_workspace() {
        let base = Url::parse(
            "https://claude.googleapis.com/v1/projects/p-1/locations/global/workspaces/w_1/invoke/",
        )
        .unwrap();
        assert_eq!(
            anthropic::url(&base, Operation::Messages, Some("beta=true")).as_str(),
            "https://claude.googleapis.com/v1/projects/p-1/locations/global/workspaces/w_1/invoke/v1/messages?beta=true"
        );
        assert_eq!(
            anthropic::url(&base, Operation::CountTokens, None).as_str(),
            "https://claude.googleapis.com/v1/projects/p-1/locations/global/workspaces/w_1/invoke/v1/messages/count_tokens"
        );
        assert!(
            capabilities::plan(CAPS, &["claude-code-20250219".into()])
                .header
                .len()
                == 1
        );
    }
}
