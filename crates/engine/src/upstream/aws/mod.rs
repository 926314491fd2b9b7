//! AWS plumbing shared by the AWS upstreams — Bedrock through its SDK, Bedrock Mantle and
//! Claude Platform on AWS over raw HTTP with SigV4: the SDK configuration an upstream's
//! [`AwsAuth`] gives ([`sdk_config`]: the default chain, a profile, static keys; SDK
//! retries off, the router fails over), STS role sessions ([`roles`]), a credentials cache
//! ([`Cached`]) and SigV4 signing of raw requests with credentials built anew once after a
//! 401/403 ([`sigv4`]).

pub mod roles;
pub mod sigv4;

use std::time::{Duration, SystemTime};

use aws_config::SdkConfig;
use aws_credential_types::Credentials;
use aws_credential_types::provider::{
    ProvideCredentials, SharedCredentialsProvider, error::CredentialsError, future,
};
use aws_sdk_bedrockruntime::config::{
    Region, StalledStreamProtectionConfig, retry::RetryConfig, timeout::TimeoutConfig,
};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

use crate::config::AwsAuth;

/// Credentials this close to their expiry are fetched anew.
const EXPIRY_MARGIN: Duration = Duration::from_secs(300);

/// The SDK configuration for `region` and `auth` (rustls with ring, SDK retries off, no
/// stalled-stream protection: thinking pauses a stream and the gateway pings instead). A
/// Bedrock API key (`AwsAuth::Bearer`) gives a configuration without credentials.
pub async fn sdk_config(region: &str, auth: &AwsAuth, connect: Duration) -> SdkConfig {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(http)
        .region(Region::new(region.to_owned()))
        .retry_config(RetryConfig::disabled())
        .timeout_config(TimeoutConfig::builder().connect_timeout(connect).build())
        .stalled_stream_protection(StalledStreamProtectionConfig::disabled());
    let loader = match auth {
        // The chain (environment, profile, SSO, web identity, containers, instances).
        AwsAuth::DefaultChain => loader,
        AwsAuth::Profile(name) => loader.profile_name(name),
        AwsAuth::Keys {
            access_key_id,
            secret_access_key,
            session_token,
        } => loader.credentials_provider(Credentials::new(
            access_key_id.expose(),
            secret_access_key.expose(),
            session_token.as_ref().map(|t| t.expose().to_owned()),
            None,
            "gatehouse-config",
        )),
        AwsAuth::Bearer(_) => loader.no_credentials(),
    };
    loader.load().await
}

/// The configuration STS is called with: `sdk`, at `AWS_ENDPOINT_URL_STS` when set.
pub fn sts_config(sdk: &SdkConfig, endpoint: Option<&str>) -> SdkConfig {
    match endpoint {
        Some(url) => sdk.to_builder().endpoint_url(url.to_owned()).build(),
        None => sdk.clone(),
    }
}

/// A credentials provider whose answer is kept until shortly before it expires (the
/// SDK's clients cache in their own identity cache; raw SigV4 signing has none).
#[derive(Debug)]
pub struct Cached {
    inner: SharedCredentialsProvider,
    last: tokio::sync::Mutex<Option<Credentials>>,
}

impl Cached {
    pub fn shared(inner: SharedCredentialsProvider) -> SharedCredentialsProvider {
        SharedCredentialsProvider::new(Self {
            inner,
            last: tokio::sync::Mutex::new(None),
        })
    }

    async fn get(&self) -> Result<Credentials, CredentialsError> {
        let mut last = self.last.lock().await;
        let fresh = |c: &Credentials| {
            c.expiry()
                .is_none_or(|at| at > SystemTime::now() + EXPIRY_MARGIN)
        };
        if let Some(c) = last.as_ref().filter(|c| fresh(c)) {
            return Ok(c.clone());
        }
        let c = self.inner.provide_credentials().await?;
        *last = Some(c.clone());
        Ok(c)
    }
}

impl ProvideCredentials for Cached {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(self.get())
    }
}
