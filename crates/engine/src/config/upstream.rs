//! Upstreams as configured: the provider, where it is and the one credential type.
//!
//! A credential is a [`CredentialScheme`] (how it is sent) with a [`CredentialSource`]
//! (a value from the config, a value read at each request, or none yet) and a
//! [`CredentialRole`] that says whether the upstream is a provider or the central
//! Gatehouse the desktop is signed in to.

use std::sync::Arc;

use url::Url;

use crate::deps::TokenSource;
use crate::secret::Secret;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Anthropic,
}

impl Provider {
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
        }
    }
}

#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    pub name: String,
    pub provider: Provider,
    pub base_url: Url,
    /// `None`: requests go without a credential.
    pub credential: Option<UpstreamCredential>,
}

impl UpstreamConfig {
    /// The upstream is the central Gatehouse of a connected desktop.
    pub fn is_central(&self) -> bool {
        self.credential
            .as_ref()
            .is_some_and(|c| c.role == CredentialRole::CentralSession)
    }

    /// Why the upstream cannot be used now (its credential has no value), if so.
    pub fn missing_credential(&self) -> Option<&str> {
        let c = self.credential.as_ref()?;
        match &c.source {
            CredentialSource::Static(_) => None,
            CredentialSource::Dynamic(source) if source.current().is_some() => None,
            _ => Some(&c.missing_hint),
        }
    }
}

/// How a credential is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialScheme {
    /// `x-api-key`
    ApiKey,
    /// `Authorization: Bearer`
    Bearer,
}

/// Where a credential's value comes from.
#[derive(Clone)]
pub enum CredentialSource {
    /// Written in the config (or the environment of the embedded default).
    Static(Secret),
    /// Read at each request: the desktop's provider keys (changed without a restart) and
    /// its session with a central Gatehouse.
    Dynamic(Arc<dyn TokenSource>),
    /// Not there: the upstream is skipped and inference answers 503 with the hint.
    Missing,
}

impl std::fmt::Debug for CredentialSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CredentialSource::Static(_) => "Static(..)",
            CredentialSource::Dynamic(_) => "Dynamic(..)",
            CredentialSource::Missing => "Missing",
        })
    }
}

/// What holds the credential's upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialRole {
    /// A model provider (the operator's or the person's own key).
    Provider,
    /// The central Gatehouse a connected desktop forwards to, with its session token; its
    /// spend refusals are shown as the desktop's own.
    CentralSession,
}

#[derive(Debug, Clone)]
pub struct UpstreamCredential {
    pub scheme: CredentialScheme,
    pub source: CredentialSource,
    pub role: CredentialRole,
    /// Shown when the source has no value, e.g. "sign in to https://gw.example".
    pub missing_hint: String,
}

impl UpstreamCredential {
    /// A provider credential written in the config.
    pub fn fixed(scheme: CredentialScheme, value: Secret) -> Self {
        Self {
            scheme,
            source: CredentialSource::Static(value),
            role: CredentialRole::Provider,
            missing_hint: String::new(),
        }
    }

    /// The value to send now, if there is one.
    pub fn current(&self) -> Option<Secret> {
        match &self.source {
            CredentialSource::Static(s) => Some(s.clone()),
            CredentialSource::Dynamic(source) => source.current(),
            CredentialSource::Missing => None,
        }
    }
}
