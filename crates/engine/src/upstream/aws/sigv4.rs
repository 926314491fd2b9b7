//! SigV4 for raw HTTP upstreams (Bedrock Mantle, Claude Platform on AWS), signed with the
//! maintained `aws-sigv4` crate as Anthropic's AWS SDKs sign: every header the request
//! carries (but those SigV4 leaves out: `authorization`, `user-agent`, ...) and the host,
//! for the upstream's service name and region. Credentials come from the upstream's keys,
//! the AWS default chain or an STS role (per person when `session_name` is set), cached
//! until shortly before they expire; [`Signer::refresh`] builds them anew (after a 401/403).

use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use http::{HeaderMap, HeaderName, HeaderValue};
use url::Url;

use super::roles::Roles;
use crate::config::{AssumeRole, AwsAuth};
use crate::upstream::{Caller, SendError};

/// What a signer is built from.
#[derive(Clone)]
pub struct Setup {
    /// The SigV4 service name (`bedrock-mantle`, `aws-external-anthropic`).
    pub service: &'static str,
    pub region: String,
    /// Keys, a profile or the default chain (never a bearer token).
    pub auth: AwsAuth,
    pub assume_role: Option<AssumeRole>,
    pub connect: Duration,
    /// `AWS_ENDPOINT_URL_STS` from the gateway's environment.
    pub sts_endpoint: Option<String>,
}

/// Where credentials come from now.
struct Source {
    credentials: SharedCredentialsProvider,
    roles: Option<Roles>,
}

pub struct Signer {
    setup: Setup,
    current: RwLock<Arc<Source>>,
}

impl Signer {
    pub async fn new(setup: Setup) -> Self {
        let source = build(&setup).await;
        Self {
            setup,
            current: RwLock::new(Arc::new(source)),
        }
    }

    fn current(&self) -> Arc<Source> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Whether asking again can give other credentials (the chain or a role); static keys
    /// cannot get better.
    pub fn refreshable(&self) -> bool {
        self.setup.assume_role.is_some()
            || matches!(self.setup.auth, AwsAuth::DefaultChain | AwsAuth::Profile(_))
    }

    /// Fresh credential caches and role sessions.
    pub async fn refresh(&self) {
        let source = Arc::new(build(&self.setup).await);
        match self.current.write() {
            Ok(mut c) => *c = source,
            Err(poisoned) => *poisoned.into_inner() = source,
        }
    }

    /// Signs a `POST` of `body` to `url` with `headers`, adding `authorization`,
    /// `x-amz-date` and (temporary credentials) `x-amz-security-token` to `headers`. The
    /// caller's own role session is used when the role is named after people.
    pub async fn sign(
        &self,
        caller: Option<Caller<'_>>,
        url: &Url,
        headers: &mut HeaderMap,
        body: &[u8],
    ) -> Result<(), SendError> {
        let source = self.current();
        let provider = match (&source.roles, caller) {
            (Some(roles), Some(c)) => roles.for_caller(c.sub, c.email).await,
            _ => source.credentials.clone(),
        };
        let credentials = provider
            .provide_credentials()
            .await
            .map_err(|e| SendError::Credential(format!("AWS credentials: {e}")))?;
        let identity = Identity::from(credentials);
        let at = Scope {
            service: self.setup.service,
            region: &self.setup.region,
            time: SystemTime::now(),
        };
        sign_with(&identity, &at, url, headers, body)
    }
}

/// For whom and when a request is signed.
pub struct Scope<'a> {
    pub service: &'a str,
    pub region: &'a str,
    pub time: SystemTime,
}

/// Signs with fixed credentials (see [`Signer::sign`]).
pub fn sign_with(
    identity: &Identity,
    at: &Scope<'_>,
    url: &Url,
    headers: &mut HeaderMap,
    body: &[u8],
) -> Result<(), SendError> {
    let failed = |e: &dyn std::fmt::Display| SendError::Build(format!("SigV4: {e}"));
    let params = v4::SigningParams::builder()
        .identity(identity)
        .region(at.region)
        .name(at.service)
        .time(at.time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| failed(&e))?
        .into();
    let pairs: Vec<(&str, &str)> = headers
        .iter()
        .filter_map(|(n, v)| Some((n.as_str(), v.to_str().ok()?)))
        .collect();
    let request = SignableRequest::new(
        "POST",
        url.as_str(),
        pairs.into_iter(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| failed(&e))?;
    let (instructions, _) = sign(request, &params).map_err(|e| failed(&e))?.into_parts();
    let (added, _) = instructions.into_parts();
    for h in added {
        let mut value = HeaderValue::from_str(h.value()).map_err(|e| failed(&e))?;
        value.set_sensitive(h.sensitive() || h.name() == "authorization");
        let name = HeaderName::from_bytes(h.name().as_bytes()).map_err(|e| failed(&e))?;
        headers.insert(name, value);
    }
    Ok(())
}

async fn build(setup: &Setup) -> Source {
    let sdk = super::sdk_config(&setup.region, &setup.auth, setup.connect).await;
    let chain = sdk
        .credentials_provider()
        .map(super::Cached::shared)
        .unwrap_or_else(|| SharedCredentialsProvider::new(NoCredentials));
    match &setup.assume_role {
        Some(role) => {
            let sts = super::sts_config(&sdk, setup.sts_endpoint.as_deref());
            let roles = Roles::new(role.clone(), sts).await;
            Source {
                credentials: roles.shared(),
                roles: Some(roles),
            }
        }
        None => Source {
            credentials: chain,
            roles: None,
        },
    }
}

/// A configuration without credentials (not reached: a signer is never built for a
/// bearer token) still answers, with an error.
#[derive(Debug)]
struct NoCredentials;

impl ProvideCredentials for NoCredentials {
    fn provide_credentials<'a>(
        &'a self,
    ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        aws_credential_types::provider::future::ProvideCredentials::ready(Err(
            aws_credential_types::provider::error::CredentialsError::not_loaded(
                "no AWS credentials are configured",
            ),
        ))
    }
}
