//! Microsoft Entra ID access tokens for Foundry upstreams with `auth.use_azure_ad`, through
//! Microsoft's `azure_identity` crate, for the scope
//! `https://cognitiveservices.azure.com/.default` (what the reference's
//! `DefaultAzureCredential` asks for).
//!
//! `azure_identity` 1.x has no `DefaultAzureCredential`, so [`Source::from_env`] picks the
//! credential the way it does, from the gateway's environment ([`Environment`], so tests
//! pass their own): client secret (`AZURE_TENANT_ID`, `AZURE_CLIENT_ID`,
//! `AZURE_CLIENT_SECRET`), else workload identity (`AZURE_FEDERATED_TOKEN_FILE` with the
//! tenant and client ids), else managed identity (App Service / Container Apps through
//! `IDENTITY_ENDPOINT` + `IDENTITY_HEADER`, the VM metadata service otherwise; a set
//! `AZURE_CLIENT_ID` names a user-assigned identity). `AZURE_AUTHORITY_HOST` points the
//! first two at another Entra ID (the crate requires https). The managed-identity
//! credential reads `IDENTITY_ENDPOINT`/`IDENTITY_HEADER` itself from the process
//! environment: the crate offers no way to pass them.
//!
//! The crate caches each token and fetches a new one five minutes before it expires.
//! [`Tokens::renew`] drops the cache (a new credential) after Foundry refused a token.

mod transport;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use azure_core::cloud::{CloudConfiguration, CustomConfiguration};
use azure_core::credentials::TokenCredential;
use azure_core::http::{ClientOptions, Transport as CoreTransport};
use azure_identity::{
    ClientAssertionCredentialOptions, ClientSecretCredential, ClientSecretCredentialOptions,
    ManagedIdentityCredential, ManagedIdentityCredentialOptions, UserAssignedId,
    WorkloadIdentityCredential, WorkloadIdentityCredentialOptions,
};

use crate::deps::Environment;
use crate::secret::Secret;

pub use transport::Transport;

/// The Entra ID scope of Azure AI services (Foundry).
pub const SCOPE: &str = "https://cognitiveservices.azure.com/.default";

/// Which Entra ID credential the environment calls for.
#[derive(Clone)]
pub enum Source {
    ClientSecret {
        tenant_id: String,
        client_id: String,
        secret: Secret,
    },
    WorkloadIdentity {
        tenant_id: String,
        client_id: String,
        token_file: PathBuf,
    },
    /// `client_id`: a user-assigned identity; `None`: the system-assigned one.
    ManagedIdentity { client_id: Option<String> },
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind())
    }
}

impl Source {
    /// The credential `DefaultAzureCredential` would use with this environment.
    pub fn from_env(env: &dyn Environment) -> Result<Self, String> {
        let var = |n: &str| env.var(n).filter(|v| !v.trim().is_empty());
        let (tenant, client) = (var("AZURE_TENANT_ID"), var("AZURE_CLIENT_ID"));
        let needs = |what: &str| {
            format!("{what} is set, so AZURE_TENANT_ID and AZURE_CLIENT_ID must be set too")
        };
        if let Some(secret) = var("AZURE_CLIENT_SECRET") {
            let (Some(tenant_id), Some(client_id)) = (tenant, client) else {
                return Err(needs("AZURE_CLIENT_SECRET"));
            };
            return Ok(Source::ClientSecret {
                tenant_id,
                client_id,
                secret: Secret::new(secret),
            });
        }
        if let Some(file) = var("AZURE_FEDERATED_TOKEN_FILE") {
            let (Some(tenant_id), Some(client_id)) = (tenant, client) else {
                return Err(needs("AZURE_FEDERATED_TOKEN_FILE"));
            };
            return Ok(Source::WorkloadIdentity {
                tenant_id,
                client_id,
                token_file: PathBuf::from(file),
            });
        }
        Ok(Source::ManagedIdentity { client_id: client })
    }

    /// The credential's name, for logs and errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::ClientSecret { .. } => "client secret",
            Source::WorkloadIdentity { .. } => "workload identity",
            Source::ManagedIdentity { .. } => "managed identity",
        }
    }
}

/// Everything a credential is built from.
struct Setup {
    source: Source,
    /// `AZURE_AUTHORITY_HOST`.
    authority_host: Option<String>,
    transport: Transport,
}

impl Setup {
    fn client_options(&self) -> ClientOptions {
        ClientOptions {
            transport: Some(CoreTransport::new(Arc::new(self.transport.clone()))),
            cloud: self.authority_host.as_ref().map(|host| {
                let mut custom = CustomConfiguration::default();
                custom.authority_host = host.clone();
                Arc::new(CloudConfiguration::Custom(custom))
            }),
            ..ClientOptions::default()
        }
    }

    fn credential(&self) -> Result<Arc<dyn TokenCredential>, String> {
        let client_options = self.client_options();
        let built: azure_core::Result<Arc<dyn TokenCredential>> = match &self.source {
            Source::ClientSecret {
                tenant_id,
                client_id,
                secret,
            } => ClientSecretCredential::new(
                tenant_id,
                client_id.clone(),
                secret.expose().to_owned().into(),
                Some(ClientSecretCredentialOptions { client_options }),
            )
            .map(|c| c as Arc<dyn TokenCredential>),
            Source::WorkloadIdentity {
                tenant_id,
                client_id,
                token_file,
            } => WorkloadIdentityCredential::new(Some(WorkloadIdentityCredentialOptions {
                credential_options: ClientAssertionCredentialOptions { client_options },
                client_id: Some(client_id.clone()),
                tenant_id: Some(tenant_id.clone()),
                token_file_path: Some(token_file.clone()),
            }))
            .map(|c| c as Arc<dyn TokenCredential>),
            Source::ManagedIdentity { client_id } => {
                ManagedIdentityCredential::new(Some(ManagedIdentityCredentialOptions {
                    user_assigned_id: client_id.clone().map(UserAssignedId::ClientId),
                    client_options,
                }))
                .map(|c| c as Arc<dyn TokenCredential>)
            }
        };
        built.map_err(|e| format!("Entra ID {}: {e}", self.source.kind()))
    }
}

/// Entra ID tokens for one upstream: the current credential and how many times it was
/// replaced.
pub struct Tokens {
    setup: Setup,
    current: RwLock<(u64, Arc<dyn TokenCredential>)>,
}

/// A token and the credential generation that gave it (for [`Tokens::renew`]).
pub struct Token {
    pub value: Secret,
    generation: u64,
}

impl Tokens {
    /// The credential the environment calls for, built now (so a bad setting stops
    /// start-up); no token is fetched yet.
    pub fn from_env(env: &dyn Environment) -> Result<Self, String> {
        let source = Source::from_env(env)?;
        let authority_host = env
            .var("AZURE_AUTHORITY_HOST")
            .filter(|h| !h.trim().is_empty());
        let setup = Setup {
            source,
            authority_host,
            transport: Transport::new(env)?,
        };
        let credential = setup.credential()?;
        Ok(Self {
            setup,
            current: RwLock::new((0, credential)),
        })
    }

    /// Which credential kind is in use.
    pub fn kind(&self) -> &'static str {
        self.setup.source.kind()
    }

    fn snapshot(&self) -> (u64, Arc<dyn TokenCredential>) {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// A token for Foundry (the crate's cached one while it is good for five more minutes).
    pub async fn token(&self) -> Result<Token, String> {
        let (generation, credential) = self.snapshot();
        let token = credential
            .get_token(&[SCOPE], None)
            .await
            .map_err(|e| format!("Entra ID {} token: {e}", self.kind()))?;
        Ok(Token {
            value: Secret::new(token.token.secret()),
            generation,
        })
    }

    /// Drops the cached token `refused` came from: the next [`Tokens::token`] asks Entra ID
    /// again. Concurrent callers refused with the same token renew only once.
    pub fn renew(&self, refused: &Token) -> Result<(), String> {
        let fresh = self.setup.credential()?;
        let mut current = match self.current.write() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        if current.0 == refused.generation {
            *current = (refused.generation + 1, fresh);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
