//! The reference's Anthropic-platform upstream forms: `provider: anthropicGoogleCloud`
//! (Claude Platform on Google Cloud: project, workspace, location and Google credentials)
//! and workload-identity federation for `provider: anthropic` (`auth.federation_rule_id`,
//! `organization_id`, `identity_token_file`, optional `service_account_id` and
//! `workspace_id`). As in the reference, the identity token file is read at each token
//! exchange, not at start-up (such files are mounted and rotated by the platform).

use std::path::PathBuf;
use std::sync::Arc;

use super::{
    ConfigError, CredentialRole, CredentialScheme, CredentialSource, Keys, Provider,
    UpstreamCredential, google_auth,
};
use crate::config::GoogleAuth;
use crate::config::raw::{RawProvider, RawUpstream};

/// `provider: anthropicGoogleCloud`, validated.
#[derive(Debug, Clone)]
pub struct GoogleCloudConfig {
    pub project_id: String,
    pub workspace_id: String,
    /// Default `global`.
    pub location: String,
    pub auth: GoogleAuth,
}

/// Workload-identity federation with Anthropic: what the token exchange sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Federation {
    pub rule_id: String,
    pub organization_id: String,
    /// The identity (OIDC JWT) token file, read at each exchange.
    pub identity_token_file: PathBuf,
    pub service_account_id: Option<String>,
    pub workspace_id: Option<String>,
}

/// `project_id`, `workspace_id`, `location`: the reference's `^[A-Za-z0-9_-]+$`.
fn id(v: Option<&str>, path: &str, what: &str) -> Result<String, ConfigError> {
    let Some(v) = v else {
        return Err(ConfigError::at(path, "required for anthropicGoogleCloud"));
    };
    let ok = !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ok {
        return Err(ConfigError::at(
            path,
            format!("must be a {what} (letters, digits, `-` and `_`)"),
        ));
    }
    Ok(v.to_owned())
}

/// `provider: anthropicGoogleCloud`: the default base URL is the workspace's
/// `https://claude.googleapis.com/v1/projects/<p>/locations/<l>/workspaces/<w>/invoke`.
pub(super) fn google_cloud(
    u: &RawUpstream,
    keys: &Keys,
    at: &dyn Fn(&str) -> String,
) -> Result<(Provider, String, Option<UpstreamCredential>), ConfigError> {
    keys.only(at, &["project_id", "service_account_json", "access_token"])?;
    let project_id = id(u.project_id.as_deref(), &at("project_id"), "GCP project id");
    let workspace_id = id(
        u.workspace_id.as_deref(),
        &at("workspace_id"),
        "workspace id",
    );
    let (project_id, workspace_id) = match (project_id, workspace_id) {
        (Ok(p), Ok(w)) => (p, w),
        (Err(a), Err(b)) => return Err(a.and(b)),
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    let location = match u.location.as_deref() {
        None => "global".to_owned(),
        l => id(l, &at("location"), "GCP location")?,
    };
    let auth = google_auth(&u.auth, at)?;
    let base = format!(
        "https://claude.googleapis.com/v1/projects/{project_id}/locations/{location}/workspaces/{workspace_id}/invoke"
    );
    let cfg = GoogleCloudConfig {
        project_id,
        workspace_id,
        location,
        auth,
    };
    Ok((Provider::AnthropicGoogleCloud(cfg), base, None))
}

/// The federation keys are `provider: anthropic`'s only.
pub(super) fn federation_only_on_anthropic(
    u: &RawUpstream,
    at: &dyn Fn(&str) -> String,
) -> Result<(), ConfigError> {
    if u.provider == RawProvider::Anthropic {
        return Ok(());
    }
    match set_keys(u).first() {
        Some(k) => Err(ConfigError::at(
            &at(&format!("auth.{k}")),
            "only anthropic upstreams take it (workload-identity federation)",
        )),
        None => Ok(()),
    }
}

fn set_keys(u: &RawUpstream) -> Vec<&'static str> {
    let a = &u.auth;
    [
        ("federation_rule_id", a.federation_rule_id.is_some()),
        ("organization_id", a.organization_id.is_some()),
        ("identity_token_file", a.identity_token_file.is_some()),
        ("service_account_id", a.service_account_id.is_some()),
        ("workspace_id", a.workspace_id.is_some()),
    ]
    .iter()
    .filter(|(_, s)| *s)
    .map(|(k, _)| *k)
    .collect()
}

/// `provider: anthropic` with the federation shape: `None` when no federation key is set.
pub(super) fn federation(
    u: &RawUpstream,
    at: &dyn Fn(&str) -> String,
) -> Result<Option<UpstreamCredential>, ConfigError> {
    if set_keys(u).is_empty() {
        return Ok(None);
    }
    let a = &u.auth;
    let other = [
        ("api_key", a.api_key.is_some()),
        ("api_keys", a.api_keys.is_some()),
        ("auth_token", a.auth_token.is_some()),
        ("oauth_token", a.oauth_token.is_some()),
    ];
    if let Some((k, _)) = other.iter().find(|(_, s)| *s) {
        return Err(ConfigError::at(
            &at(&format!("auth.{k}")),
            "not together with workload-identity federation (federation_rule_id, organization_id, identity_token_file)",
        ));
    }
    let required = |v: &Option<String>, key: &str| -> Result<String, ConfigError> {
        match v.as_deref().map(str::trim) {
            Some(v) if !v.is_empty() => Ok(v.to_owned()),
            _ => Err(ConfigError::at(
                &at(&format!("auth.{key}")),
                "required for workload-identity federation (with federation_rule_id, organization_id and identity_token_file)",
            )),
        }
    };
    // As in the SDK, an empty optional value is left out of the exchange.
    let optional = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let federation = Federation {
        rule_id: required(&a.federation_rule_id, "federation_rule_id")?,
        organization_id: required(&a.organization_id, "organization_id")?,
        identity_token_file: PathBuf::from(required(
            &a.identity_token_file,
            "identity_token_file",
        )?),
        service_account_id: optional(&a.service_account_id),
        workspace_id: optional(&a.workspace_id),
    };
    Ok(Some(UpstreamCredential {
        scheme: CredentialScheme::OAuth,
        source: CredentialSource::Federation(Arc::new(federation)),
        role: CredentialRole::Provider,
        missing_hint: String::new(),
    }))
}
