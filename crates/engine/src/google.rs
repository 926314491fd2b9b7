//! Google OAuth access tokens (cloud-platform scope) through `gcp_auth`, for Vertex
//! upstreams and OTLP destinations with `auth.google`: a fixed token, a
//! service-account key file (the JWT-bearer grant sent to the file's own `token_uri`), or
//! Application Default Credentials. `gcp_auth` caches each token and fetches a new one
//! shortly before it expires.

use std::path::Path;
use std::sync::Arc;

use gcp_auth::TokenProvider;

use crate::secret::Secret;

const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

pub enum Tokens {
    Fixed(Secret),
    Provider(Arc<dyn TokenProvider>),
}

impl Tokens {
    /// The token source `auth` names (a key file is read now, ADC found now).
    pub async fn for_auth(auth: &crate::config::GoogleAuth) -> Result<Self, String> {
        use crate::config::GoogleAuth;
        Ok(match auth {
            GoogleAuth::AccessToken(t) => Self::fixed(t.clone()),
            GoogleAuth::ServiceAccountFile(path) => Self::service_account(path)?,
            GoogleAuth::ServiceAccountJson(json) => Self::service_account_json(json)?,
            GoogleAuth::ApplicationDefault => Self::application_default().await?,
        })
    }

    pub fn fixed(token: Secret) -> Self {
        Tokens::Fixed(token)
    }

    /// A service-account key file; read now, so a bad file stops start-up with its path.
    pub fn service_account(path: &Path) -> Result<Self, String> {
        let sa = gcp_auth::CustomServiceAccount::from_file(path)
            .map_err(|e| format!("auth.service_account_json {}: {e}", path.display()))?;
        Ok(Tokens::Provider(Arc::new(sa)))
    }

    /// A service-account key given as its JSON (never written to disk).
    pub fn service_account_json(json: &Secret) -> Result<Self, String> {
        let sa = gcp_auth::CustomServiceAccount::from_json(json.expose())
            .map_err(|e| format!("the service-account key is not usable: {e}"))?;
        Ok(Tokens::Provider(Arc::new(sa)))
    }

    /// Application Default Credentials, found now.
    pub async fn application_default() -> Result<Self, String> {
        let provider = gcp_auth::provider()
            .await
            .map_err(|e| format!("no Google Application Default Credentials: {e}"))?;
        Ok(Tokens::Provider(provider))
    }

    /// A token for this call (cached by `gcp_auth` until shortly before it expires).
    pub async fn current(&self) -> Result<Secret, String> {
        match self {
            Tokens::Fixed(t) => Ok(t.clone()),
            Tokens::Provider(p) => p
                .token(&[SCOPE])
                .await
                .map(|t| Secret::new(t.as_str()))
                .map_err(|e| format!("Google token: {e}")),
        }
    }
}
