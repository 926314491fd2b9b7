//! Claude Platform on AWS: Anthropic's Messages API at
//! `https://aws-external-anthropic.<region>.api.aws` (`/v1/messages`,
//! `/v1/messages/count_tokens`) in one workspace, as Anthropic's client for it (npm
//! `@anthropic-ai/aws-sdk`, `AnthropicAws`) speaks it: every request names the workspace in
//! `anthropic-workspace-id` and is signed with SigV4 for the service
//! `aws-external-anthropic` (the workspace header among the signed ones), or carries the
//! upstream's API key as `Authorization: Bearer` (as `AnthropicAws` 1.1.2 on the Anthropic
//! SDK 1.x sends it; the reference's bundled, older client sends `X-Api-Key`). Model ids
//! and betas are Anthropic's, the `anthropic-beta` header kept as sent; the rest of the
//! wire is [`super::aws_http`].

use std::time::Duration;

use http::{HeaderName, HeaderValue};

use super::aws::sigv4::{Setup, Signer};
use super::aws_http::{Auth, AwsHttp};
use super::http_client::HttpClient;
use crate::config::{AnthropicAwsConfig, UpstreamConfig};

/// The SigV4 service name of Claude Platform on AWS.
pub const SERVICE: &str = "aws-external-anthropic";
/// The header naming the workspace.
pub const WORKSPACE_HEADER: &str = "anthropic-workspace-id";

pub async fn new(
    client: HttpClient,
    config: &UpstreamConfig,
    aws: &AnthropicAwsConfig,
    connect: Duration,
) -> Result<AwsHttp, String> {
    let auth = match &aws.sigv4 {
        None => Auth::Credential,
        Some(auth) => Auth::SigV4(Box::new(
            Signer::new(Setup {
                service: SERVICE,
                region: aws.region.clone(),
                auth: auth.clone(),
                assume_role: None,
                connect,
                sts_endpoint: None,
            })
            .await,
        )),
    };
    let workspace = HeaderValue::from_str(&aws.workspace_id)
        .map_err(|_| "workspace_id is not a header value".to_owned())?;
    Ok(AwsHttp {
        client,
        name: config.name.clone(),
        base_url: config.base_url.clone(),
        provider: "anthropicAws",
        auth,
        fixed: vec![(HeaderName::from_static(WORKSPACE_HEADER), workspace)],
    })
}
