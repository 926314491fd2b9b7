//! Bedrock Mantle: Anthropic's Messages API at
//! `https://bedrock-mantle.<region>.api.aws/anthropic` (`/v1/messages`,
//! `/v1/messages/count_tokens`), as Anthropic's Mantle client (npm
//! `@anthropic-ai/bedrock-sdk`, `AnthropicBedrockMantle`) speaks it: SigV4 for the service
//! `bedrock-mantle` over every header the request carries, or a Bedrock API key as
//! `Authorization: Bearer`. Credentials are Bedrock's (keys, the AWS default chain, an STS
//! role per person); model ids are `anthropic.<id>` ([`crate::models::IdStyle`]). The
//! request-tags beta and top-level `tags` are dropped (capability table); the rest of the
//! wire is [`super::aws_http`].

use std::time::Duration;

use super::aws::sigv4::{Setup, Signer};
use super::aws_http::{Auth, AwsHttp};
use super::http_client::HttpClient;
use crate::config::{AwsAuth, MantleConfig, UpstreamConfig};

/// The SigV4 service name of Mantle.
pub const SERVICE: &str = "bedrock-mantle";

pub async fn new(
    client: HttpClient,
    config: &UpstreamConfig,
    mantle: &MantleConfig,
    connect: Duration,
    sts_endpoint: Option<String>,
) -> AwsHttp {
    let auth = match &mantle.auth {
        AwsAuth::Bearer(key) => Auth::Bearer(key.clone()),
        auth => Auth::SigV4(Box::new(
            Signer::new(Setup {
                service: SERVICE,
                region: mantle.region.clone(),
                auth: auth.clone(),
                assume_role: mantle.assume_role.clone(),
                connect,
                sts_endpoint,
            })
            .await,
        )),
    };
    AwsHttp {
        client,
        name: config.name.clone(),
        base_url: config.base_url.clone(),
        provider: "mantle",
        auth,
        fixed: Vec::new(),
    }
}
