//! Claude on Microsoft Foundry: Anthropic's Messages API under
//! `https://<resource>.services.ai.azure.com/anthropic`, with the Foundry key sent as
//! `x-api-key` or, with `auth.use_azure_ad`, an Entra ID token ([`crate::azure`]) sent as
//! `Authorization: Bearer`. The wire is the Anthropic one, so requests pass through as
//! bytes; only the caller's query string stays behind (the Foundry SDK sends none). Errors
//! are cleaned like every cloud provider's ([`super::errors`]); a `max_tokens` above the
//! model's output limit is answered as the Anthropic API does
//! ([`capabilities::over_output_limit`]). An Entra ID token Foundry refuses (401/403) is
//! dropped and a new one fetched once before the router fails over.

use async_trait::async_trait;
use url::Url;

use super::http_client::HttpClient;
use super::{Answer, Call, Operation, SendError, Upstream, anthropic, capabilities, errors};
use crate::azure;
use crate::config::{CredentialScheme, FoundryConfig, UpstreamConfig};
use crate::deps::Environment;

pub struct Foundry {
    client: HttpClient,
    name: String,
    base_url: Url,
    /// Entra ID tokens (`auth.use_azure_ad`); `None`: the key is the call's credential.
    tokens: Option<azure::Tokens>,
}

impl Foundry {
    /// With `use_azure_ad`, the Azure credential is chosen from `env` now.
    pub fn new(
        client: HttpClient,
        config: &UpstreamConfig,
        foundry: &FoundryConfig,
        env: &dyn Environment,
    ) -> Result<Self, String> {
        let tokens = match foundry.use_azure_ad {
            true => Some(azure::Tokens::from_env(env)?),
            false => None,
        };
        if let Some(t) = &tokens {
            tracing::info!(upstream = %config.name, credential = t.kind(), "Foundry signs in with Entra ID");
        }
        Ok(Self {
            client,
            name: config.name.clone(),
            base_url: config.base_url.clone(),
            tokens,
        })
    }

    /// One request with an Entra ID token; a refused token is renewed and the request sent
    /// once more.
    async fn send_signed_in(
        &self,
        tokens: &azure::Tokens,
        url: Url,
        call: Call<'_>,
    ) -> Result<Answer, SendError> {
        let token = tokens.token().await.map_err(SendError::Credential)?;
        let again = Call {
            body: call.body.clone(),
            credential: None,
            ..call
        };
        let first = with_token(call, &token.value);
        let answer = anthropic::post(self.client.get(), url.clone(), first, false).await?;
        if !matches!(answer.status.as_u16(), 401 | 403) {
            return Ok(answer);
        }
        tracing::warn!(upstream = %self.name, status = answer.status.as_u16(), "Foundry refused the Entra ID token; fetching a new one once");
        tokens.renew(&token).map_err(SendError::Credential)?;
        let token = tokens.token().await.map_err(SendError::Credential)?;
        anthropic::post(
            self.client.get(),
            url,
            with_token(again, &token.value),
            false,
        )
        .await
    }
}

fn with_token<'a>(call: Call<'a>, token: &'a crate::secret::Secret) -> Call<'a> {
    Call {
        credential: Some((CredentialScheme::Bearer, token)),
        ..call
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
        let answer = match &self.tokens {
            Some(tokens) => self.send_signed_in(tokens, url, call).await?,
            None => anthropic::post(self.client.get(), url, call, false).await?,
        };
        Ok(errors::clean(&self.name, answer).await)
    }
}
