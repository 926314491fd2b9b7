//! Upstreams as configured: the provider with its own settings, where it is and the one
//! credential type of the raw HTTP providers.
//!
//! A credential is a [`CredentialScheme`] (how it is sent) with a [`CredentialSource`]
//! (a value from the config, a value read at each request, or none yet) and a
//! [`CredentialRole`] that says whether the upstream is a provider or the central
//! Gatehouse the desktop is signed in to. Cloud providers carry their own credentials in
//! their settings ([`AwsAuth`], [`GoogleAuth`]); Foundry's key is a `credential`.

use std::path::PathBuf;
use std::sync::Arc;

use std::collections::{BTreeMap, HashSet};

use url::Url;

use super::ConfigError;
use super::check::{http_url, non_empty_secret};
use super::raw::{
    RawAssumeRole, RawGuardrail, RawPoolKey, RawProvider, RawUpstream, RawUpstreamAuth,
};
use crate::deps::TokenSource;
use crate::secret::Secret;

mod platform;
pub use platform::{Federation, GoogleCloudConfig};

/// Which API an upstream speaks, with what it needs beyond `base_url`.
#[derive(Debug, Clone)]
pub enum Provider {
    /// The Anthropic API or an Anthropic-compatible proxy: raw HTTP pass-through.
    Anthropic,
    /// Amazon Bedrock's runtime (InvokeModel) through the AWS SDK.
    Bedrock(BedrockConfig),
    /// Claude on Vertex AI (rawPredict / streamRawPredict).
    Vertex(VertexConfig),
    /// Claude on Microsoft Foundry (the Messages API under `/anthropic`).
    Foundry(FoundryConfig),
    /// Any OpenAI-compatible Chat Completions API, translated both ways.
    OpenAi(OpenAiConfig),
    /// Claude Platform on Google Cloud: the Messages API under a workspace's `/invoke`
    /// base, with a Google access token.
    AnthropicGoogleCloud(GoogleCloudConfig),
    /// Bedrock Mantle: the Messages API on `bedrock-mantle`, SigV4 or a Bedrock API key.
    Mantle(MantleConfig),
    /// Claude Platform on AWS (`aws-external-anthropic`): the Messages API in a workspace,
    /// SigV4 or an API key (the upstream's `credential`).
    AnthropicAws(AnthropicAwsConfig),
}

impl Provider {
    pub fn as_str(&self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::Bedrock(_) => "bedrock",
            Provider::Vertex(_) => "vertex",
            Provider::Foundry(_) => "foundry",
            Provider::OpenAi(_) => "openai",
            Provider::AnthropicGoogleCloud(_) => "anthropicGoogleCloud",
            Provider::Mantle(_) => "mantle",
            Provider::AnthropicAws(_) => "anthropicAws",
        }
    }
}

#[derive(Debug, Clone)]
pub struct BedrockConfig {
    pub region: String,
    pub auth: AwsAuth,
    /// STS AssumeRole on top of `auth` (or the chain).
    pub assume_role: Option<AssumeRole>,
    pub guardrail: Option<Guardrail>,
    /// Ask Bedrock for the guardrail trace and log it for the operator.
    pub guardrail_trace: bool,
}

/// `provider: mantle`: AWS credentials as Bedrock's (no guardrail).
#[derive(Debug, Clone)]
pub struct MantleConfig {
    pub region: String,
    pub auth: AwsAuth,
    pub assume_role: Option<AssumeRole>,
}

/// `provider: anthropicAws`: the workspace every request names; `sigv4` is `None` when
/// the upstream's `credential` (an API key, sent as `Authorization: Bearer`) authenticates
/// instead.
#[derive(Debug, Clone)]
pub struct AnthropicAwsConfig {
    pub region: String,
    pub workspace_id: String,
    pub sigv4: Option<AwsAuth>,
}

#[derive(Debug, Clone)]
pub struct AssumeRole {
    pub role_arn: String,
    pub external_id: Option<String>,
    /// `None`: one shared role session; else one per person, named from this claim.
    pub session_name: Option<SessionName>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionName {
    Email,
    Sub,
}

#[derive(Debug, Clone)]
pub struct Guardrail {
    pub id: String,
    pub version: String,
    pub input_tagging: Option<InputTagging>,
}

/// Which content a guardrail checks (the rest is left out of its evaluation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputTagging {
    LastMessage,
    UserMessages,
    AllMessages,
    AllMessagesAndSystem,
}

/// How Gatehouse authenticates to AWS.
#[derive(Debug, Clone)]
pub enum AwsAuth {
    /// The AWS default credential chain (environment, profile, SSO, web identity, ECS,
    /// instance metadata), refreshed by the SDK.
    DefaultChain,
    /// The chain with this named profile (`~/.aws/config`; the desktop's "AWS profile").
    Profile(String),
    /// SigV4 with static keys.
    Keys {
        access_key_id: Secret,
        secret_access_key: Secret,
        session_token: Option<Secret>,
    },
    /// A Bedrock API key, sent as `Authorization: Bearer`.
    Bearer(Secret),
}

#[derive(Debug, Clone)]
pub struct VertexConfig {
    pub region: String,
    pub project_id: String,
    pub auth: GoogleAuth,
}

/// How Gatehouse gets Google OAuth access tokens.
#[derive(Debug, Clone)]
pub enum GoogleAuth {
    /// Application Default Credentials.
    ApplicationDefault,
    /// A service-account key file (its `token_uri` is honoured).
    ServiceAccountFile(PathBuf),
    /// A service-account key's JSON itself (the desktop keeps it in the keychain).
    ServiceAccountJson(Secret),
    /// A fixed access token.
    AccessToken(Secret),
}

/// Foundry's key is the upstream's `credential` (sent as `x-api-key`); with
/// `use_azure_ad` there is none and Entra ID tokens from the environment's Azure
/// credential are sent as `Authorization: Bearer` ([`crate::azure`]).
#[derive(Debug, Clone)]
pub struct FoundryConfig {
    pub resource: String,
    pub use_azure_ad: bool,
}

/// `provider: openai`: the key is the upstream's `credential` (sent as
/// `Authorization: Bearer`); `base_url` includes the version path.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Which request field carries the output limit; `None`: by model id
    /// ([`TokenField::for_model`]).
    pub token_field: Option<TokenField>,
    /// The upstream's output limit (`max_output_tokens`): a larger `max_tokens` is lowered.
    pub max_output_tokens: Option<u64>,
}

/// The Chat Completions field that carries `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenField {
    /// `max_tokens` (most OpenAI-compatible servers, older OpenAI models).
    MaxTokens,
    /// `max_completion_tokens` (OpenAI's reasoning models: o1, o3, o4, gpt-5).
    MaxCompletionTokens,
}

impl TokenField {
    /// OpenAI's o-series and gpt-5 models refuse `max_tokens`; everything else takes it.
    pub fn for_model(model: &str) -> Self {
        let id = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        let reasoning = ["o1", "o3", "o4"]
            .iter()
            .any(|p| id == *p || id.starts_with(&format!("{p}-")))
            || id.starts_with("gpt-5");
        if reasoning {
            TokenField::MaxCompletionTokens
        } else {
            TokenField::MaxTokens
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TokenField::MaxTokens => "max_tokens",
            TokenField::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

/// The Anthropic API's origin (the default `base_url` of `provider: anthropic`).
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    pub name: String,
    pub provider: Provider,
    pub base_url: Url,
    /// `None`: requests go without a credential.
    pub credential: Option<UpstreamCredential>,
    /// Extra headers sent on every request to this upstream (`headers`).
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// Only people in one of these groups are routed here (`groups`).
    pub groups: Option<Vec<String>>,
    /// Only these model ids are sent here (`models`; one `*` wildcard).
    pub models: Option<Vec<String>>,
    /// `model_map`: the id sent here for a Claude family (`"*"`: any other family).
    pub model_map: BTreeMap<String, String>,
    /// `forward_user_identity`: the signed-in person's sub and email go along as headers
    /// (an operator-owned proxy only; refused toward Anthropic-run hosts), and a 429 for
    /// a person with an email is that person's, relayed rather than failed over.
    pub forward_user_identity: bool,
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
            CredentialSource::Static(_)
            | CredentialSource::Pool(_)
            | CredentialSource::Federation(_) => None,
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
    /// `Authorization: Bearer` and the `oauth-2025-04-20` beta (an Anthropic OAuth token).
    OAuth,
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
    /// `auth.api_keys`: the upstream's link takes one in turn per attempt
    /// (`upstream::keys`); [`UpstreamCredential::current`] gives the first.
    Pool(Arc<[PoolKey]>),
    /// Workload-identity federation: the upstream's link exchanges the identity token
    /// for short-lived Anthropic tokens (`upstream::federation`); the router sends none.
    Federation(Arc<Federation>),
}

/// One key of a pool: its id (shown in events and the dashboard) and its value.
#[derive(Debug, Clone)]
pub struct PoolKey {
    pub id: String,
    pub value: Secret,
}

impl std::fmt::Debug for CredentialSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CredentialSource::Static(_) => "Static(..)",
            CredentialSource::Dynamic(_) => "Dynamic(..)",
            CredentialSource::Missing => "Missing",
            CredentialSource::Pool(_) => "Pool(..)",
            CredentialSource::Federation(_) => "Federation(..)",
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

    /// The upstream's link gets and applies the value itself (a federation exchange):
    /// callers of the link send none.
    pub fn applied_by_link(&self) -> bool {
        matches!(self.source, CredentialSource::Federation(_))
    }

    /// The value to send now, if there is one.
    pub fn current(&self) -> Option<Secret> {
        match &self.source {
            CredentialSource::Static(s) => Some(s.clone()),
            CredentialSource::Dynamic(source) => source.current(),
            CredentialSource::Missing | CredentialSource::Federation(_) => None,
            CredentialSource::Pool(keys) => keys.first().map(|k| k.value.clone()),
        }
    }
}

/// `upstreams[]`, validated: names unique, each provider with exactly the keys it takes,
/// and the file's rules the reference adds (the desktop app's own upstreams, built through
/// [`from_raw`], may point at local servers and carry no key): a `base_url` never targets
/// a metadata endpoint, nor a loopback address unless `allow_loopback`
/// (`CLAUDE_GATEWAY_ALLOW_LOOPBACK`), and an `anthropic` upstream has its `auth`.
pub(super) fn validate(
    raw: &[RawUpstream],
    allow_loopback: bool,
) -> Result<Vec<UpstreamConfig>, ConfigError> {
    let mut names = HashSet::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, u) in raw.iter().enumerate() {
        if !names.insert(u.name()) {
            let hint = if u.name.is_none() {
                " (an upstream without a name is named after its provider; name them)"
            } else {
                ""
            };
            return Err(ConfigError::at(
                &format!("upstreams[{i}].name"),
                format!("duplicate upstream name `{}`{hint}", u.name()),
            ));
        }
        let up = from_raw(u, i)?;
        if u.base_url.is_some() {
            super::targets::check(&up.base_url, allow_loopback)
                .map_err(|m| ConfigError::at(&format!("upstreams[{i}].base_url"), m))?;
        }
        if u.provider == RawProvider::Anthropic && up.credential.is_none() {
            return Err(ConfigError::at(
                &format!("upstreams[{i}].auth"),
                "required for provider anthropic: set api_key, oauth_token, or the federation keys (federation_rule_id, organization_id, identity_token_file); Gatehouse also takes auth_token and api_keys",
            ));
        }
        out.push(up);
    }
    guardrails_agree(&out)?;
    Ok(out)
}

/// One `upstreams[index]` entry, validated (the desktop app builds its cloud upstreams
/// through here too, so its rules are the server's).
pub fn from_raw(u: &RawUpstream, i: usize) -> Result<UpstreamConfig, ConfigError> {
    let at = |field: &str| format!("upstreams[{i}].{field}");
    // Any text names an upstream, as in the reference (an empty or spaced name is
    // accepted there too); names stay unique (checked by the caller).
    let name = u.name();
    if u.provider == RawProvider::Mantle && u.models.is_none() {
        return Err(ConfigError::at(
            &at("models"),
            "is required for provider mantle (the models this upstream serves)",
        ));
    }
    let cloud_only = [
        (
            "workspace_id",
            u.workspace_id.is_some() && u.provider != RawProvider::AnthropicAws,
        ),
        ("location", u.location.is_some()),
    ];
    if let Some((key, _)) = cloud_only.iter().find(|(_, set)| *set)
        && u.provider != RawProvider::AnthropicGoogleCloud
    {
        return Err(ConfigError::at(
            &at(key),
            "only anthropicAws and anthropicGoogleCloud upstreams take it",
        ));
    }
    let bedrock_only = [
        ("guardrail", u.guardrail.is_some()),
        ("guardrail_trace", u.guardrail_trace.is_some()),
        ("assume_role", u.assume_role.is_some()),
    ];
    let openai_only = [
        ("max_tokens_field", u.max_tokens_field.is_some()),
        ("max_output_tokens", u.max_output_tokens.is_some()),
    ];
    if let Some((key, _)) = openai_only.iter().find(|(_, set)| *set)
        && u.provider != RawProvider::OpenAi
    {
        return Err(ConfigError::at(&at(key), "only openai upstreams take it"));
    }
    if let Some((key, _)) = bedrock_only.iter().find(|(_, set)| *set)
        && u.provider != RawProvider::Bedrock
        && !(*key == "assume_role" && u.provider == RawProvider::Mantle)
    {
        return Err(ConfigError::at(&at(key), "only bedrock upstreams take it"));
    }
    platform::federation_only_on_anthropic(u, &at)?;
    let (provider, default_base, credential) = provider(u, &at)?;
    let base_url = base_url(
        u.base_url.as_deref().unwrap_or(&default_base),
        &at("base_url"),
    )?;
    let forward_user_identity = u.forward_user_identity == Some(true);
    if forward_user_identity {
        identity_target(&provider, &base_url, &at("forward_user_identity"))?;
    }
    Ok(UpstreamConfig {
        name: name.to_owned(),
        provider,
        base_url,
        credential,
        headers: extra_headers(u.headers.as_ref(), &at)?,
        groups: name_list(u.groups.as_deref(), &at("groups"), false)?,
        models: name_list(u.models.as_deref(), &at("models"), true)?,
        model_map: model_map(u.model_map.as_ref(), &at)?,
        forward_user_identity,
    })
}

/// `forward_user_identity` goes only to an operator's own proxy: a raw `anthropic`
/// upstream whose host Anthropic (or a cloud's Anthropic service) does not run, so emails
/// never reach Anthropic.
fn identity_target(provider: &Provider, base: &Url, path: &str) -> Result<(), ConfigError> {
    if !matches!(provider, Provider::Anthropic) {
        return Err(ConfigError::at(path, "only anthropic upstreams take it"));
    }
    let host = base.host_str().unwrap_or_default();
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let aws_anthropic = host
        .strip_prefix("aws-external-anthropic.")
        .is_some_and(|rest| rest.ends_with(".api.aws"));
    if host == "anthropic.com"
        || host.ends_with(".anthropic.com")
        || aws_anthropic
        || host == "claude.googleapis.com"
    {
        return Err(ConfigError::at(
            path,
            format!(
                "refused toward {host}, an Anthropic-run host: identity headers (emails) go only to a proxy you run; set base_url to it"
            ),
        ));
    }
    Ok(())
}

/// The provider's settings, its default base URL and the raw HTTP credential, each key
/// checked against what this provider takes.
fn provider(
    u: &RawUpstream,
    at: &dyn Fn(&str) -> String,
) -> Result<(Provider, String, Option<UpstreamCredential>), ConfigError> {
    let keys = Keys::of(u);
    Ok(match u.provider {
        RawProvider::Anthropic => {
            keys.only(at, &["api_key", "api_keys", "auth_token", "oauth_token"])?;
            (
                Provider::Anthropic,
                ANTHROPIC_BASE_URL.to_owned(),
                anthropic_credential(u, at)?,
            )
        }
        RawProvider::Bedrock => bedrock(u, &keys, at)?,
        RawProvider::Vertex => vertex(u, &keys, at)?,
        RawProvider::Foundry => foundry(u, &keys, at)?,
        RawProvider::OpenAi => openai(u, &keys, at)?,
        RawProvider::AnthropicGoogleCloud => platform::google_cloud(u, &keys, at)?,
        RawProvider::Mantle => mantle(u, &keys, at)?,
        RawProvider::AnthropicAws => anthropic_aws(u, &keys, at)?,
    })
}

/// The keys `bedrock` and `mantle` take beside their own.
const AWS_KEYS: &[&str] = &[
    "region",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "aws_bearer_token",
];

/// AWS credentials and an assumed role, as `bedrock` and `mantle` take them (a Bedrock API
/// key cannot assume a role).
fn aws_credentials(
    u: &RawUpstream,
    at: &dyn Fn(&str) -> String,
) -> Result<(AwsAuth, Option<AssumeRole>), ConfigError> {
    let auth = aws_auth(&u.auth, at)?;
    let assume_role = u
        .assume_role
        .as_ref()
        .map(|r| assume_role(r, at))
        .transpose()?;
    if assume_role.is_some() && matches!(auth, AwsAuth::Bearer(_)) {
        return Err(ConfigError::at(
            &at("auth.aws_bearer_token"),
            "not with assume_role",
        ));
    }
    Ok((auth, assume_role))
}

/// `provider: bedrock`: region, AWS credentials, an assumed role, a guardrail.
fn bedrock(
    u: &RawUpstream,
    keys: &Keys,
    at: &dyn Fn(&str) -> String,
) -> Result<(Provider, String, Option<UpstreamCredential>), ConfigError> {
    keys.only(at, AWS_KEYS)?;
    let region = required_name(u.region.as_deref(), &at("region"))?;
    let base = format!("https://bedrock-runtime.{region}.amazonaws.com");
    let (auth, assume_role) = aws_credentials(u, at)?;
    let guardrail = u.guardrail.as_ref().map(|g| guardrail(g, at)).transpose()?;
    let cfg = BedrockConfig {
        region,
        auth,
        assume_role,
        guardrail,
        guardrail_trace: u.guardrail_trace.unwrap_or(false),
    };
    Ok((Provider::Bedrock(cfg), base, None))
}

/// `provider: mantle`: region (`[a-z0-9-]`), AWS credentials as Bedrock's, an assumed
/// role; `models` is required (checked before).
fn mantle(
    u: &RawUpstream,
    keys: &Keys,
    at: &dyn Fn(&str) -> String,
) -> Result<(Provider, String, Option<UpstreamCredential>), ConfigError> {
    keys.only(at, AWS_KEYS)?;
    let region = aws_region(u.region.as_deref(), &at("region"))?;
    let base = format!("https://bedrock-mantle.{region}.api.aws/anthropic");
    let (auth, assume_role) = aws_credentials(u, at)?;
    let cfg = MantleConfig {
        region,
        auth,
        assume_role,
    };
    Ok((Provider::Mantle(cfg), base, None))
}

/// `provider: anthropicAws`: region (`[a-z0-9-]`), the workspace (printable ASCII without
/// spaces), and an API key or AWS keys (neither: the AWS default chain).
fn anthropic_aws(
    u: &RawUpstream,
    keys: &Keys,
    at: &dyn Fn(&str) -> String,
) -> Result<(Provider, String, Option<UpstreamCredential>), ConfigError> {
    keys.only(
        at,
        &[
            "region",
            "api_key",
            "aws_access_key_id",
            "aws_secret_access_key",
            "aws_session_token",
        ],
    )?;
    let region = aws_region(u.region.as_deref(), &at("region"))?;
    let workspace_id = match u.workspace_id.as_deref() {
        Some(w) if !w.is_empty() && w.bytes().all(|b| b.is_ascii_graphic()) => w.to_owned(),
        Some(_) => {
            return Err(ConfigError::at(
                &at("workspace_id"),
                "printable ASCII without spaces",
            ));
        }
        None => {
            return Err(ConfigError::at(
                &at("workspace_id"),
                "required for provider anthropicAws (the workspace on AWS)",
            ));
        }
    };
    let base = format!("https://aws-external-anthropic.{region}.api.aws");
    let sigv4 = aws_auth(&u.auth, at)?;
    let (sigv4, credential) = match (&u.auth.api_key, sigv4) {
        (Some(k), AwsAuth::DefaultChain) => {
            // `Authorization: Bearer`, as `AnthropicAws` sends an API key.
            let key = non_empty_secret(k, &at("auth.api_key"))?;
            (
                None,
                Some(UpstreamCredential::fixed(CredentialScheme::Bearer, key)),
            )
        }
        (Some(_), _) => {
            return Err(ConfigError::at(
                &at("auth.api_key"),
                "not together with AWS access keys",
            ));
        }
        (None, auth) => (Some(auth), None),
    };
    let cfg = AnthropicAwsConfig {
        region,
        workspace_id,
        sigv4,
    };
    Ok((Provider::AnthropicAws(cfg), base, credential))
}

/// An AWS region as the reference takes it for mantle and anthropicAws: `^[a-z0-9-]+$`.
fn aws_region(v: Option<&str>, path: &str) -> Result<String, ConfigError> {
    match v {
        None => Err(ConfigError::at(path, "required for this provider")),
        Some(r)
            if !r.is_empty()
                && r.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') =>
        {
            Ok(r.to_owned())
        }
        Some(_) => Err(ConfigError::at(
            path,
            "lower-case letters, digits and `-` only (an AWS region such as us-east-1)",
        )),
    }
}

/// `provider: vertex`: region, project and Google credentials.
fn vertex(
    u: &RawUpstream,
    keys: &Keys,
    at: &dyn Fn(&str) -> String,
) -> Result<(Provider, String, Option<UpstreamCredential>), ConfigError> {
    keys.only(
        at,
        &[
            "region",
            "project_id",
            "service_account_json",
            "access_token",
        ],
    )?;
    let region = required_name(u.region.as_deref(), &at("region"))?;
    let project_id = required_name(u.project_id.as_deref(), &at("project_id"))?;
    let base = vertex_base(&region);
    let auth = google_auth(&u.auth, at)?;
    let cfg = VertexConfig {
        region,
        project_id,
        auth,
    };
    Ok((Provider::Vertex(cfg), base, None))
}

/// Google credentials (vertex, anthropicGoogleCloud): a key file's path, a fixed token,
/// or Application Default Credentials.
fn google_auth(
    a: &RawUpstreamAuth,
    at: &dyn Fn(&str) -> String,
) -> Result<GoogleAuth, ConfigError> {
    Ok(match (&a.service_account_json, &a.access_token) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::at(
                &at("auth"),
                "set either service_account_json or access_token, not both",
            ));
        }
        (Some(p), None) if !p.trim().is_empty() => {
            GoogleAuth::ServiceAccountFile(PathBuf::from(p.trim()))
        }
        (None, Some(t)) => GoogleAuth::AccessToken(non_empty_secret(t, &at("auth.access_token"))?),
        _ => GoogleAuth::ApplicationDefault,
    })
}

/// `provider: foundry`: the Azure resource and its key, or Entra ID (`use_azure_ad`).
fn foundry(
    u: &RawUpstream,
    keys: &Keys,
    at: &dyn Fn(&str) -> String,
) -> Result<(Provider, String, Option<UpstreamCredential>), ConfigError> {
    keys.only(at, &["resource", "api_key", "api_keys", "use_azure_ad"])?;
    let resource = foundry_resource(u.resource.as_deref(), &at("resource"))?;
    let base = format!("https://{resource}.services.ai.azure.com/anthropic");
    let settings = |use_azure_ad| {
        Provider::Foundry(FoundryConfig {
            resource: resource.clone(),
            use_azure_ad,
        })
    };
    if u.auth.api_key.is_none()
        && u.auth.use_azure_ad != Some(true)
        && let Some(pool) = key_pool(&u.auth, CredentialScheme::ApiKey, at)?
    {
        return Ok((settings(false), base, Some(pool)));
    }
    let key = match (&u.auth.api_key, u.auth.use_azure_ad) {
        (Some(k), None | Some(false)) => non_empty_secret(k, &at("auth.api_key"))?,
        (None, Some(true)) if u.auth.api_keys.is_none() => return Ok((settings(true), base, None)),
        _ => {
            return Err(ConfigError::at(
                &at("auth"),
                "set exactly one of api_key or use_azure_ad: true",
            ));
        }
    };
    let credential = UpstreamCredential::fixed(CredentialScheme::ApiKey, key);
    Ok((settings(false), base, Some(credential)))
}

/// `provider: openai`: a Chat Completions base URL (required: there is no default
/// provider), the key sent as Bearer, the output-limit field.
fn openai(
    u: &RawUpstream,
    keys: &Keys,
    at: &dyn Fn(&str) -> String,
) -> Result<(Provider, String, Option<UpstreamCredential>), ConfigError> {
    keys.only(at, &["api_key", "api_keys"])?;
    if u.auth.api_key.is_some() && u.auth.api_keys.is_some() {
        return Err(ConfigError::at(
            &at("auth"),
            "set one of api_key or api_keys",
        ));
    }
    let Some(base) = u.base_url.as_deref() else {
        return Err(ConfigError::at(
            &at("base_url"),
            "required for openai upstreams (with the version path, e.g. https://api.deepseek.com/v1)",
        ));
    };
    let token_field = match u.max_tokens_field.as_deref() {
        None => None,
        Some("max_tokens") => Some(TokenField::MaxTokens),
        Some("max_completion_tokens") => Some(TokenField::MaxCompletionTokens),
        Some(_) => {
            return Err(ConfigError::at(
                &at("max_tokens_field"),
                "must be `max_tokens` or `max_completion_tokens`",
            ));
        }
    };
    if u.max_output_tokens == Some(0) {
        return Err(ConfigError::at(
            &at("max_output_tokens"),
            "must be at least 1",
        ));
    }
    // Local servers (Ollama, LM Studio, vLLM) often take no key.
    let credential = u
        .auth
        .api_key
        .as_deref()
        .map(|k| non_empty_secret(k, &at("auth.api_key")))
        .transpose()?
        .map(|k| UpstreamCredential::fixed(CredentialScheme::Bearer, k));
    let credential = match credential {
        Some(c) => Some(c),
        None => key_pool(&u.auth, CredentialScheme::Bearer, at)?,
    };
    Ok((
        Provider::OpenAi(OpenAiConfig {
            token_field,
            max_output_tokens: u.max_output_tokens,
        }),
        base.to_owned(),
        credential,
    ))
}

/// Header names the gateway or the provider's SDK sets or signs.
const RESERVED_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "host",
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "content-type",
    "accept",
    "accept-encoding",
    "user-agent",
    "x-litellm-end-user-id",
];
const RESERVED_PREFIXES: &[&str] = &[
    "anthropic-",
    "x-stainless-",
    "x-claude-gateway-",
    "x-goog-",
    "x-amz-",
    "x-amzn-",
];

fn extra_headers(
    raw: Option<&std::collections::BTreeMap<String, String>>,
    at: &dyn Fn(&str) -> String,
) -> Result<Vec<(http::HeaderName, http::HeaderValue)>, ConfigError> {
    let mut out: Vec<(http::HeaderName, http::HeaderValue)> = Vec::new();
    for (name, value) in raw.into_iter().flatten() {
        let path = at(&format!("headers.{name}"));
        let n = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ConfigError::at(&path, "not a valid header name"))?;
        let lower = n.as_str();
        if RESERVED_HEADERS.contains(&lower)
            || RESERVED_PREFIXES.iter().any(|p| lower.starts_with(p))
        {
            return Err(ConfigError::at(
                &path,
                "set by the gateway or the provider; not configurable",
            ));
        }
        if out.iter().any(|(o, _)| o == n) {
            return Err(ConfigError::at(
                &path,
                "duplicate header (names ignore case)",
            ));
        }
        let printable = value.bytes().all(|b| (0x20..0x7f).contains(&b));
        if !printable || value.trim() != value {
            return Err(ConfigError::at(
                &path,
                "printable ASCII without leading or trailing spaces",
            ));
        }
        let v = http::HeaderValue::from_str(value)
            .map_err(|_| ConfigError::at(&path, "not a valid header value"))?;
        out.push((n, v));
    }
    Ok(out)
}

/// A non-empty list of non-empty names (`models` may hold one `*` each).
fn name_list(
    raw: Option<&[String]>,
    path: &str,
    wildcard: bool,
) -> Result<Option<Vec<String>>, ConfigError> {
    let Some(list) = raw else { return Ok(None) };
    if list.is_empty() {
        return Err(ConfigError::at(
            path,
            "must list at least one entry (or leave it out)",
        ));
    }
    for (i, n) in list.iter().enumerate() {
        // One `*` is the wildcard; an entry with more matches no model (the reference
        // accepts it and warns, and so does `models::warnings`).
        let stars = n.matches('*').count();
        if n.trim().is_empty() || n.trim() != n || (!wildcard && stars > 0) {
            let rule = if wildcard {
                "a non-empty name"
            } else {
                "a non-empty name without `*`"
            };
            return Err(ConfigError::at(&format!("{path}[{i}]"), rule));
        }
    }
    Ok(Some(list.to_vec()))
}

/// Which provider-specific keys an upstream sets.
struct Keys(Vec<&'static str>);

impl Keys {
    fn of(u: &RawUpstream) -> Self {
        let a = &u.auth;
        let set = [
            ("region", u.region.is_some()),
            ("project_id", u.project_id.is_some()),
            ("resource", u.resource.is_some()),
            ("api_key", a.api_key.is_some()),
            ("api_keys", a.api_keys.is_some()),
            ("auth_token", a.auth_token.is_some()),
            ("oauth_token", a.oauth_token.is_some()),
            ("aws_access_key_id", a.aws_access_key_id.is_some()),
            ("aws_secret_access_key", a.aws_secret_access_key.is_some()),
            ("aws_session_token", a.aws_session_token.is_some()),
            ("aws_bearer_token", a.aws_bearer_token.is_some()),
            ("service_account_json", a.service_account_json.is_some()),
            ("access_token", a.access_token.is_some()),
            ("use_azure_ad", a.use_azure_ad.is_some()),
        ];
        Keys(set.iter().filter(|(_, s)| *s).map(|(k, _)| *k).collect())
    }

    /// Refuses a key the provider does not take, naming its path.
    fn only(&self, at: &dyn Fn(&str) -> String, allowed: &[&str]) -> Result<(), ConfigError> {
        match self.0.iter().find(|k| !allowed.contains(k)) {
            None => Ok(()),
            Some(k) => {
                let path = if matches!(*k, "region" | "project_id" | "resource") {
                    at(k)
                } else {
                    at(&format!("auth.{k}"))
                };
                Err(ConfigError::at(&path, "not a key of this provider"))
            }
        }
    }
}

fn anthropic_credential(
    u: &RawUpstream,
    at: &dyn Fn(&str) -> String,
) -> Result<Option<UpstreamCredential>, ConfigError> {
    let a = &u.auth;
    if let Some(federation) = platform::federation(u, at)? {
        return Ok(Some(federation));
    }
    let given = [
        (&a.api_key, "api_key", CredentialScheme::ApiKey),
        (&a.auth_token, "auth_token", CredentialScheme::Bearer),
        (&a.oauth_token, "oauth_token", CredentialScheme::OAuth),
    ];
    let mut set = given
        .iter()
        .filter_map(|(v, k, s)| v.as_ref().map(|v| (v, *k, *s)));
    let first = set.next();
    if set.next().is_some() || (first.is_some() && a.api_keys.is_some()) {
        return Err(ConfigError::at(
            &at("auth"),
            "set one of api_key, api_keys, auth_token or oauth_token",
        ));
    }
    let Some((value, key, scheme)) = first else {
        return key_pool(a, CredentialScheme::ApiKey, at);
    };
    let secret = non_empty_secret(value, &at(&format!("auth.{key}")))?;
    Ok(Some(UpstreamCredential::fixed(scheme, secret)))
}

/// `model_map`: family names (or `*`) to non-empty model ids.
fn model_map(
    raw: Option<&BTreeMap<String, String>>,
    at: &dyn Fn(&str) -> String,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(BTreeMap::new());
    };
    for (family, model) in raw {
        let path = at(&format!("model_map.{family}"));
        if family != "*" && !crate::config::CLAUDE_FAMILIES.contains(&family.as_str()) {
            return Err(ConfigError::at(
                &path,
                format!(
                    "not a Claude family (one of {}, or `*`)",
                    crate::config::CLAUDE_FAMILIES.join(", ")
                ),
            ));
        }
        let id_like = !model.is_empty()
            && model.len() <= 256
            && !model.chars().any(|c| c.is_whitespace() || c.is_control());
        if !id_like {
            return Err(ConfigError::at(
                &path,
                "must be a model id (no spaces, at most 256 characters)",
            ));
        }
    }
    Ok(raw.clone())
}

/// Most keys one pool takes.
const POOL_MAX_KEYS: usize = 64;

/// `auth.api_keys`, when set: at least one key, ids unique and safe to show.
fn key_pool(
    a: &RawUpstreamAuth,
    scheme: CredentialScheme,
    at: &dyn Fn(&str) -> String,
) -> Result<Option<UpstreamCredential>, ConfigError> {
    let Some(list) = &a.api_keys else {
        return Ok(None);
    };
    if list.is_empty() || list.len() > POOL_MAX_KEYS {
        return Err(ConfigError::at(
            &at("auth.api_keys"),
            format!("must list 1 to {POOL_MAX_KEYS} keys"),
        ));
    }
    let mut ids = HashSet::new();
    let mut keys = Vec::with_capacity(list.len());
    for (n, entry) in list.iter().enumerate() {
        let path = at(&format!("auth.api_keys[{n}]"));
        let (id, value) = match entry {
            RawPoolKey::Key(k) => (format!("key-{}", n + 1), k),
            RawPoolKey::Named { id, key } => (id.clone(), key),
        };
        let id_ok = !id.is_empty()
            && id.len() <= 64
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !id_ok {
            return Err(ConfigError::at(
                &format!("{path}.id"),
                "must be 1 to 64 letters, digits, `-`, `_` or `.`",
            ));
        }
        if !ids.insert(id.clone()) {
            return Err(ConfigError::at(
                &format!("{path}.id"),
                format!("duplicate key id `{id}`"),
            ));
        }
        let value = non_empty_secret(value, &format!("{path}.key"))?;
        keys.push(PoolKey { id, value });
    }
    Ok(Some(UpstreamCredential {
        scheme,
        source: CredentialSource::Pool(keys.into()),
        role: CredentialRole::Provider,
        missing_hint: String::new(),
    }))
}

fn aws_auth(a: &RawUpstreamAuth, at: &dyn Fn(&str) -> String) -> Result<AwsAuth, ConfigError> {
    let secret = |v: &Option<String>, k: &str| {
        v.as_deref()
            .map(|v| non_empty_secret(v, &at(&format!("auth.{k}"))))
            .transpose()
    };
    let id = secret(&a.aws_access_key_id, "aws_access_key_id")?;
    let key = secret(&a.aws_secret_access_key, "aws_secret_access_key")?;
    let session = secret(&a.aws_session_token, "aws_session_token")?;
    let bearer = secret(&a.aws_bearer_token, "aws_bearer_token")?;
    match (id, key, session, bearer) {
        (None, None, None, None) => Ok(AwsAuth::DefaultChain),
        (None, None, None, Some(b)) => Ok(AwsAuth::Bearer(b)),
        (Some(access_key_id), Some(secret_access_key), session_token, None) => Ok(AwsAuth::Keys {
            access_key_id,
            secret_access_key,
            session_token,
        }),
        (_, _, _, Some(_)) => Err(ConfigError::at(
            &at("auth.aws_bearer_token"),
            "not together with AWS access keys",
        )),
        _ => Err(ConfigError::at(
            &at("auth"),
            "aws_access_key_id and aws_secret_access_key go together (a session token needs both)",
        )),
    }
}

fn assume_role(r: &RawAssumeRole, at: &dyn Fn(&str) -> String) -> Result<AssumeRole, ConfigError> {
    let arn_ok = r
        .role_arn
        .strip_prefix("arn:aws:iam::")
        .or_else(|| r.role_arn.strip_prefix("arn:aws-us-gov:iam::"))
        .and_then(|rest| rest.split_once(":role/"))
        .is_some_and(|(account, name)| {
            account.len() == 12
                && account.bytes().all(|b| b.is_ascii_digit())
                && !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-/".contains(&b))
        });
    if !arn_ok {
        return Err(ConfigError::at(
            &at("assume_role.role_arn"),
            "must be an IAM role ARN: arn:aws:iam::<12 digits>:role/<name>",
        ));
    }
    if let Some(id) = &r.external_id {
        let ok = (2..=1224).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@:/-".contains(&b));
        if !ok {
            return Err(ConfigError::at(
                &at("assume_role.external_id"),
                "2-1224 letters, digits or _+=,.@:/-",
            ));
        }
    }
    let session_name = match r.session_name.as_deref() {
        None => None,
        Some("email") => Some(SessionName::Email),
        Some("sub") => Some(SessionName::Sub),
        Some(_) => {
            return Err(ConfigError::at(
                &at("assume_role.session_name"),
                "must be `email` or `sub`",
            ));
        }
    };
    Ok(AssumeRole {
        role_arn: r.role_arn.clone(),
        external_id: r.external_id.clone(),
        session_name,
    })
}

fn guardrail(g: &RawGuardrail, at: &dyn Fn(&str) -> String) -> Result<Guardrail, ConfigError> {
    let token = |v: &str, key: &str| -> Result<String, ConfigError> {
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ConfigError::at(
                &at(&format!("guardrail.{key}")),
                "printable ASCII without spaces",
            ));
        }
        Ok(v.to_owned())
    };
    let input_tagging = match g.input_tagging.as_deref() {
        None => None,
        Some("last_message") => Some(InputTagging::LastMessage),
        Some("user_messages") => Some(InputTagging::UserMessages),
        Some("all_messages") => Some(InputTagging::AllMessages),
        Some("all_messages_and_system") => Some(InputTagging::AllMessagesAndSystem),
        Some(_) => {
            return Err(ConfigError::at(
                &at("guardrail.input_tagging"),
                "last_message, user_messages, all_messages or all_messages_and_system",
            ));
        }
    };
    Ok(Guardrail {
        id: token(&g.id, "id")?,
        version: token(&g.version, "version")?,
        input_tagging,
    })
}

/// Guardrails are all or nothing across Bedrock upstreams, with one `input_tagging`.
fn guardrails_agree(out: &[UpstreamConfig]) -> Result<(), ConfigError> {
    let bedrock: Vec<(usize, &BedrockConfig)> = out
        .iter()
        .enumerate()
        .filter_map(|(i, u)| match &u.provider {
            Provider::Bedrock(b) => Some((i, b)),
            _ => None,
        })
        .collect();
    if bedrock.iter().any(|(_, b)| b.guardrail.is_some())
        && let Some((i, _)) = bedrock.iter().find(|(_, b)| b.guardrail.is_none())
    {
        return Err(ConfigError::at(
            &format!("upstreams[{i}].guardrail"),
            "every bedrock upstream needs a guardrail when one has it",
        ));
    }
    if bedrock.iter().any(|(_, b)| b.guardrail.is_some())
        && let Some(i) = out
            .iter()
            .position(|u| matches!(u.provider, Provider::Mantle(_)))
    {
        return Err(ConfigError::at(
            &format!("upstreams[{i}].provider"),
            "a mantle upstream cannot stand beside a bedrock upstream with a guardrail (Mantle applies no guardrail)",
        ));
    }
    let taggings: HashSet<Option<InputTagging>> = bedrock
        .iter()
        .filter_map(|(_, b)| b.guardrail.as_ref().map(|g| g.input_tagging))
        .collect();
    if taggings.len() > 1 {
        return Err(ConfigError::at(
            "upstreams[].guardrail.input_tagging",
            "must be the same on every bedrock upstream",
        ));
    }
    Ok(())
}

/// A region or project: letters, digits, `-` and `_`.
fn required_name(v: Option<&str>, path: &str) -> Result<String, ConfigError> {
    let v = v.map(str::trim).unwrap_or_default();
    if v.is_empty() {
        return Err(ConfigError::at(path, "required for this provider"));
    }
    if !v
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(ConfigError::at(path, "letters, digits, `-` and `_` only"));
    }
    Ok(v.to_owned())
}

/// 2-64 letters, digits or hyphens, no hyphen at either end.
fn foundry_resource(v: Option<&str>, path: &str) -> Result<String, ConfigError> {
    let v = v.unwrap_or_default();
    let ok = (2..=64).contains(&v.len())
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !v.starts_with('-')
        && !v.ends_with('-');
    if !ok {
        return Err(ConfigError::at(
            path,
            "required: 2-64 letters, digits or hyphens, no hyphen at either end",
        ));
    }
    Ok(v.to_owned())
}

/// Vertex's host for a region, as Anthropic's Vertex SDK builds it.
fn vertex_base(region: &str) -> String {
    match region {
        "global" => "https://aiplatform.googleapis.com/v1".to_owned(),
        "us" | "eu" => format!("https://aiplatform.{region}.rep.googleapis.com/v1"),
        r => format!("https://{r}-aiplatform.googleapis.com/v1"),
    }
}

/// An http(s) origin with an optional path prefix, always ending in `/`.
fn base_url(s: &str, path: &str) -> Result<Url, ConfigError> {
    let mut url = http_url(s, path)?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(ConfigError::at(path, "must not have a query or fragment"));
    }
    if !url.path().ends_with('/') {
        let p = format!("{}/", url.path());
        url.set_path(&p);
    }
    Ok(url)
}
