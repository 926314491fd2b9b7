//! The AWS SDK client of a Bedrock upstream (its configuration from [`aws::sdk_config`])
//! and its role sessions. Credentials from the AWS chain or STS can go stale or be revoked: on a 401/403
//! the client and its credential caches are built anew once ([`Clients::refresh`]); static
//! keys and Bedrock API keys cannot get better by asking again.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::Token;

use crate::config::{AwsAuth, BedrockConfig};
use crate::upstream::aws::{self, roles::Roles};

/// What a client is built from.
pub struct Setup {
    /// Bedrock's endpoint (the upstream's `base_url`, without the trailing `/`).
    pub endpoint: String,
    pub bedrock: BedrockConfig,
    pub connect: Duration,
    /// `AWS_ENDPOINT_URL_STS` from the gateway's environment.
    pub sts_endpoint: Option<String>,
}

/// A built client and its role sessions.
pub struct Built {
    pub client: Client,
    pub roles: Option<Roles>,
}

/// The current client, replaced as a whole by [`Clients::refresh`].
pub struct Clients {
    setup: Setup,
    current: RwLock<Arc<Built>>,
}

impl Clients {
    pub async fn new(setup: Setup) -> Self {
        let built = build(&setup).await;
        Self {
            setup,
            current: RwLock::new(Arc::new(built)),
        }
    }

    pub fn current(&self) -> Arc<Built> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Whether asking again can give other credentials (the chain or a role).
    pub fn refreshable(&self) -> bool {
        self.setup.bedrock.assume_role.is_some()
            || matches!(
                self.setup.bedrock.auth,
                AwsAuth::DefaultChain | AwsAuth::Profile(_)
            )
    }

    /// Builds the client anew: fresh credential caches, fresh role sessions.
    pub async fn refresh(&self) {
        let built = Arc::new(build(&self.setup).await);
        match self.current.write() {
            Ok(mut c) => *c = built,
            Err(poisoned) => *poisoned.into_inner() = built,
        }
    }
}

async fn build(setup: &Setup) -> Built {
    let b = &setup.bedrock;
    let sdk = aws::sdk_config(&b.region, &b.auth, setup.connect).await;
    let mut conf =
        aws_sdk_bedrockruntime::config::Builder::from(&sdk).endpoint_url(setup.endpoint.clone());
    if let AwsAuth::Bearer(key) = &b.auth {
        conf = conf.bearer_token(Token::new(key.expose(), None));
    }
    let roles = match &b.assume_role {
        Some(role) => {
            let sts = aws::sts_config(&sdk, setup.sts_endpoint.as_deref());
            let roles = Roles::new(role.clone(), sts).await;
            conf = conf.credentials_provider(roles.shared());
            Some(roles)
        }
        None => None,
    };
    Built {
        client: Client::from_conf(conf.build()),
        roles,
    }
}
