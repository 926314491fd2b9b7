//! Configuration in two phases: the file as written ([`raw`]) and the validated form
//! ([`Config`]) that the rest of the engine uses.
//!
//! Loading is `YAML text -> tree -> reference expansion -> typed raw structs -> validation`.
//! Every error names the field path (`upstreams[1].base_url: ...`); the binary prints it
//! with a `gatehouse:` prefix and exits with status 1.

mod check;
mod default;
mod desktop_overlay;
mod drop_in_warnings;
pub(crate) mod expand;
mod identity;
pub mod jsonpath;
mod lenient;
pub mod limits;
pub mod load_test;
pub mod managed;
mod managed_layered;
mod managed_mcp;
mod managed_policy_helpers;
pub mod managed_warnings;
pub mod oidc;
mod parse;
pub mod postgres;
pub mod postgres_tls;
mod pricing_rules;
pub mod raw;
pub mod routing;
pub mod server_tools;
pub mod settings_schema;
pub mod shaping;
mod spend;
pub mod targets;
pub mod telemetry;
mod telemetry_labels;
pub mod upstream;
mod validate;
pub mod warnings;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod warnings_tests;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;
use url::Url;

use crate::deps::{CredentialStore, Environment};
use crate::secret::Secret;

pub use default::{DEFAULT_LOCAL_PORT, embedded_default};
use expand::Expander;
pub use upstream::{
    AnthropicAwsConfig, AssumeRole, AwsAuth, BedrockConfig, CredentialRole, CredentialScheme,
    CredentialSource, Federation, FoundryConfig, GoogleAuth, GoogleCloudConfig, Guardrail,
    InputTagging, MantleConfig, OpenAiConfig, Provider, SessionName, TokenField, UpstreamConfig,
    UpstreamCredential, VertexConfig,
};

/// One problem in a configuration file: where, and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl ConfigIssue {
    /// The path as the reference's issue lists write it: `models[0].upstream_model.a` is
    /// `["models", 0, "upstream_model", "a"]`.
    pub fn segments(&self) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        for part in self.path.split('.').filter(|p| !p.is_empty()) {
            let (key, indexes) = part.split_once('[').unwrap_or((part, ""));
            if !key.is_empty() {
                out.push(serde_json::Value::from(key));
            }
            for index in indexes.split('[').filter(|i| !i.is_empty()) {
                let index = index.trim_end_matches(']');
                out.push(
                    index
                        .parse::<u64>()
                        .map_or_else(|_| serde_json::Value::from(index), serde_json::Value::from),
                );
            }
        }
        out
    }
}

impl ConfigError {
    /// Every issue as the reference prints a refused file: a JSON list of
    /// `{code, message, path}` (`path` as [`ConfigIssue::segments`]), pretty-printed.
    pub fn issue_list(&self) -> String {
        let list: Vec<serde_json::Value> = self
            .issues()
            .iter()
            .map(|i| {
                serde_json::json!({
                    "code": "custom",
                    "message": i.message,
                    "path": i.segments(),
                })
            })
            .collect();
        serde_json::to_string_pretty(&list).unwrap_or_default()
    }
}

/// A refused configuration: its first problem (`path`, `message`) and every further one
/// found in the same file (`more`), so an operator sees them all at once, as the reference
/// lists them. Displayed one issue per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
    /// The problems after the first, in the order validation found them.
    pub more: Vec<ConfigIssue>,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut first = true;
        for issue in self.issues() {
            if !first {
                f.write_str("\n")?;
            }
            first = false;
            write!(f, "{issue}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    pub fn at(path: &str, message: impl Into<String>) -> Self {
        Self {
            path: path.to_owned(),
            message: message.into(),
            more: Vec::new(),
        }
    }

    /// Every issue, the first one first.
    pub fn issues(&self) -> Vec<ConfigIssue> {
        let first = ConfigIssue {
            path: self.path.clone(),
            message: self.message.clone(),
        };
        std::iter::once(first).chain(self.more.clone()).collect()
    }

    /// `self` followed by `other`'s issues.
    pub fn and(mut self, other: ConfigError) -> Self {
        self.more.extend(other.issues());
        self
    }

    /// An error of `issues` (`None` when there are none).
    pub fn from_issues(issues: Vec<ConfigIssue>) -> Option<Self> {
        let mut it = issues.into_iter();
        let first = it.next()?;
        Some(Self {
            path: first.path,
            message: first.message,
            more: it.collect(),
        })
    }

    /// Every issue's message passed through `f` (paths unchanged).
    pub fn map_messages(self, f: impl Fn(ConfigIssue) -> ConfigIssue) -> Self {
        Self::from_issues(self.issues().into_iter().map(f).collect()).unwrap_or(self)
    }
}

/// What loading needs from the outside world.
pub struct LoadContext<'a> {
    pub env: &'a dyn Environment,
    pub credentials: &'a dyn CredentialStore,
    /// Where the SQLite file goes when `store.sqlite_path` is absent.
    pub default_data_dir: PathBuf,
}

/// Client keys shorter than this are refused: they must not be guessable.
pub const MIN_CLIENT_KEY_LEN: usize = 32;

/// The Claude model families (`claude-<family>-<version>`).
pub const CLAUDE_FAMILIES: &[&str] = &["opus", "sonnet", "haiku", "fable", "mythos"];

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: Listen,
    pub access: AccessControl,
    pub limits: Limits,
    pub timeouts: Timeouts,
    pub store: StoreConfig,
    pub upstreams: Vec<UpstreamConfig>,
    pub models: ModelsConfig,
    pub client_keys: Vec<ClientKeyConfig>,
    pub pricing: PricingConfig,
    pub logging: LoggingConfig,
    /// Accept the per-install local key whose hash is kept in the store (embedded default).
    pub local_key: bool,
    /// OIDC sign-in and sessions, when configured.
    pub identity: Option<IdentityConfig>,
    /// Workload-token admission, when `cri.enabled`.
    pub workload: Option<WorkloadConfig>,
    /// Managed-settings policies in match order (empty: no managed settings).
    pub policies: Vec<managed::PolicyConfig>,
    /// The policy webhook, when configured.
    pub webhook: Option<WebhookConfig>,
    /// OTLP forwarding (no destinations: the relay answers 200 and discards).
    pub telemetry: telemetry::TelemetryConfig,
    /// Spend caps and the admin API, when `admin` is configured.
    pub spend: Option<SpendConfig>,
    /// `dashboard.public`: the status page's data is readable by anyone past the edge.
    pub dashboard_public: bool,
    /// Upstream health (breaker, cooldown) and same-upstream retry (`routing`).
    pub routing: routing::RoutingConfig,
    /// `rate_limits.inference` and the per-key default concurrency.
    pub inference_limits: limits::InferenceLimits,
    /// `Idempotency-Key` replays (`None`: switched off).
    pub idempotency: Option<limits::IdempotencyConfig>,
    /// `metrics.listen`: a separate listener serving only `GET /metrics`.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// `load_test_mode`, when enabled: canned replies instead of upstream calls.
    pub load_test: Option<load_test::LoadTestConfig>,
    /// `server_tools`: the Anthropic server tools the gateway runs itself.
    pub server_tools: server_tools::ServerToolsConfig,
    /// `store.readiness_grace_seconds`: how long a failing store still reads as ready.
    pub readiness_grace: std::time::Duration,
    /// Risky but valid choices in the file, printed at start and by `check-config`
    /// ([`warnings`]).
    pub warnings: Vec<warnings::ConfigWarning>,
    /// Where the file relies on a default in which Gatehouse is deliberately safer than the
    /// reference (`drop_in_warnings::safer_defaults`): said by `check-config` and at start
    /// as notes, apart from the warnings.
    pub differing_defaults: Vec<warnings::ConfigWarning>,
    /// What the file's `${...}` references resolved to, kept only so that a later check
    /// of this config ([`Config::hide`], `check-config`'s managed-policy merge) names
    /// references, never their values.
    pub resolved: Vec<crate::secret::Secret>,
}

#[derive(Debug, Clone)]
pub struct SpendConfig {
    pub write_keys: Vec<ClientKeyConfig>,
    pub read_keys: Vec<ClientKeyConfig>,
    pub admin_groups: Vec<String>,
    /// `admin.viewer_groups`: read-only admin API and console.
    pub viewer_groups: Vec<String>,
    pub blocked_message: Option<String>,
    pub group_mode: GroupMode,
    /// Which shared group budget pays when a person is in several
    /// (`admin.pooled_conflict_rule`, `admin.pooled_priority_order`).
    pub pool_rule: PoolRule,
    pub fail_closed: bool,
    pub retention: Retention,
}

/// Which shared group budget (pool) pays when a person is in several pooled groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PoolRule {
    /// `default_order`: the pool with the largest budget first (ties by group name).
    #[default]
    DefaultOrder,
    /// `priority_list`: the groups in this order first (ties and unlisted groups by name).
    PriorityList(std::sync::Arc<[String]>),
}

/// How long old rows are kept (`admin.*_retention_*`; these defaults without `admin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub audit_days: u32,
    pub spend_months: u32,
    pub identity_days: u32,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            audit_days: 365,
            spend_months: 13,
            identity_days: 90,
        }
    }
}

/// Which group cap binds a person in several capped groups (`enforcement.group_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupMode {
    /// The smallest group cap binds (default).
    #[default]
    Min,
    /// The largest binds; an unlimited group wins.
    Max,
}

/// The policy webhook (`managed.webhook`), validated.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    pub url: Url,
    pub timeout: Duration,
    pub fail_closed: bool,
    pub allow_loopback: bool,
}

#[derive(Debug, Clone)]
pub struct WorkloadConfig {
    pub issuer: String,
    pub jwks_url: Url,
    pub audience: Vec<String>,
    /// Lower-case.
    pub org_allowlist: Vec<String>,
}

/// Sign-in: the IdP, session tokens and the sign-in rate limits.
#[derive(Debug, Clone)]
pub struct IdentityConfig {
    /// The gateway's public origin: issuer of session tokens, base of the callback URL.
    pub public_url: Url,
    /// `public_url` was not configured (loopback listener): it is the bound address,
    /// filled in when the listener is bound.
    pub public_url_derived: bool,
    pub session_secrets: Vec<Secret>,
    pub session_ttl: Duration,
    pub oidc: OidcConfig,
    pub device_authorization_limit: RateLimit,
    pub device_verify_limit: RateLimit,
    /// `admin.billing_group_tag`: the request-tag name put in session tokens as the
    /// `billing_group_tag` claim (checked by `config::spend`).
    pub billing_group_tag: Option<String>,
}

#[derive(Debug, Clone)]
pub struct OidcConfig {
    pub issuer: String,
    pub client_id: String,
    /// Client authentication, claim selection and ID-token checks (the reference's knobs).
    pub extras: oidc::OidcExtras,
    pub scopes: Vec<String>,
    pub use_pkce: bool,
    /// Lower-case.
    pub allowed_email_domains: Vec<String>,
    pub allowed_groups: Vec<String>,
    pub groups_claim: String,
    pub email_claims: Vec<String>,
    pub userinfo_fallback: bool,
    pub extra_auth_params: Vec<(String, String)>,
    pub login_notice: Option<String>,
    /// The IdP may be on a loopback address (tests only).
    pub allow_loopback: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub limit: u32,
    pub window: Duration,
}

#[derive(Debug, Clone)]
pub struct Listen {
    /// The bind address; the unspecified address when `host_name` is set.
    pub host: IpAddr,
    /// `listen.host` given as a host name: resolved when the listener binds.
    pub host_name: Option<String>,
    pub port: u16,
    /// Origin without trailing slash, e.g. `https://gw.corp.example`.
    pub public_url: Option<Url>,
    pub trusted_proxies: Vec<IpNet>,
    /// HTTPS, when configured: PEM certificate chain and key.
    pub tls: Option<TlsConfig>,
    /// Open client connections at most (`listen.max_connections`).
    pub max_connections: usize,
}

#[derive(Debug, Clone)]
pub struct TlsConfig {
    pub cert_pem: String,
    pub key_pem: Secret,
}

impl TlsConfig {
    /// The rustls server configuration (HTTP/1.1 and HTTP/2 by ALPN).
    pub fn server_config(&self) -> Result<rustls::ServerConfig, String> {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer};
        let certs = CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("cert: {e}"))?;
        if certs.is_empty() {
            return Err("cert: no certificate in the PEM".into());
        }
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.expose().as_bytes())
            .map_err(|_| "key: no usable private key in the PEM".to_owned())?;
        let mut cfg = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("cert/key: {e}"))?;
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(cfg)
    }
}

#[derive(Debug, Clone, Default)]
pub struct AccessControl {
    pub allow: Vec<IpNet>,
    pub deny: Vec<IpNet>,
}

#[derive(Debug, Clone)]
pub struct Limits {
    pub max_request_bytes: u64,
    pub max_header_bytes: usize,
    pub max_url_length: usize,
}

#[derive(Debug, Clone)]
pub struct Timeouts {
    pub upstream_ttfb: Duration,
    pub upstream_connect: Duration,
    pub shutdown_drain: Duration,
    pub disconnect_drain: Duration,
    /// Silence after which a translated stream gets an `event: ping`.
    pub stream_ping: Duration,
    /// A request head must arrive within this from its first byte (or the connection's start).
    pub header_read: Duration,
    /// While a request body is read: each 1 KiB of it (or its rest) must arrive within this.
    pub request_body_idle: Duration,
    /// A connection with no request in progress is closed after this.
    pub keep_alive_idle: Duration,
    pub tls_handshake: Duration,
}

#[derive(Debug, Clone)]
pub enum StoreConfig {
    Sqlite {
        path: PathBuf,
    },
    /// Shared by several replicas (`store.postgres_url`).
    Postgres(PostgresConfig),
}

/// `store.postgres_url` and its companions, validated (the URL parses, names a host and a
/// user; its TLS parameters name readable files).
#[derive(Debug, Clone)]
pub struct PostgresConfig {
    /// The URL as written; secret because it may carry a password.
    pub url: Secret,
    /// `store.username`: overrides the URL's user.
    pub username: Option<String>,
    /// `store.password`: overrides the URL's password.
    pub password: Option<Secret>,
    /// Pool size per gateway (`store.max_connections`, default 5).
    pub max_connections: u32,
    /// Connecting (and waiting for a pooled connection) gives up after this
    /// (`store.connect_timeout_ms`, default 5000).
    pub connect_timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct ModelRow {
    pub id: String,
    pub label: Option<String>,
    pub description: Option<String>,
    pub upstream_model: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub struct ModelsConfig {
    pub rows: Vec<ModelRow>,
    pub auto_include_builtin: bool,
}

#[derive(Debug, Clone)]
pub struct ClientKeyConfig {
    pub id: String,
    /// SHA-256 of the key; the key itself is not kept.
    pub hash: [u8; 32],
}

/// A price override, in nano-USD per token (USD per million tokens x 1000).
#[derive(Debug, Clone, PartialEq)]
pub struct PriceOverride {
    /// The upstream (by name) whose requests this applies to; `None`: any.
    pub upstream: Option<String>,
    pub model: String,
    pub price: Prices,
}

/// Nano-USD per token (and per web search request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prices {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write_5m: u64,
    pub cache_write_1h: u64,
    /// Nano-USD per web search request.
    pub web_search: u64,
    /// `long_prompt`: other prices for a request whose prompt is long.
    pub long_prompt: Option<LongPromptPrices>,
}

/// An override's `long_prompt`: when input + cache-read + cache-write tokens exceed
/// `above_prompt_tokens`, these prices (nano-USD per token) apply to the whole request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongPromptPrices {
    pub above_prompt_tokens: u64,
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write_5m: u64,
    pub cache_write_1h: u64,
}

#[derive(Debug, Clone)]
pub struct PricingConfig {
    pub multiplier: f64,
    pub overrides: Vec<PriceOverride>,
    /// `pricing.default`: what a model nothing else prices costs (`None`: the built-in
    /// default tier).
    pub default: Option<Prices>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rotation {
    Daily,
    Hourly,
    Never,
}

#[derive(Debug, Clone, Default)]
pub struct LoggingConfig {
    pub dir: Option<(PathBuf, Rotation)>,
}

impl Config {
    /// Parses, expands and validates a YAML configuration.
    pub fn from_yaml(text: &str, ctx: &LoadContext<'_>) -> Result<Config, ConfigError> {
        let mut tree: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(text).map_err(|e| ConfigError::at("", yaml_message(&e)))?;
        if tree.is_null() {
            tree = serde_yaml_ng::Value::Mapping(Default::default());
        }
        let expander = Expander::new(ctx.env, ctx.credentials);
        let expanded = expander.expand(&mut tree, "");
        // What `${...}` references resolved to never appears in an error below.
        let (resolved, expansion_warnings) = expander.into_parts();
        expanded.map_err(|e| expand::hide(e, &resolved))?;
        let (raw, unknown_keys) = match parse::parse(tree) {
            parse::Parsed::Clean(raw) => (raw, Vec::new()),
            parse::Parsed::UnknownKeys(issues, raw) => (raw, issues),
            parse::Parsed::Failed(e) => return Err(expand::hide(e, &resolved)),
        };
        let validated = validate::validate(raw, ctx);
        let refused = match (ConfigError::from_issues(unknown_keys), validated) {
            (None, Ok(mut config)) => {
                config.warnings.splice(0..0, expansion_warnings);
                config.resolved = resolved;
                return Ok(config);
            }
            (Some(unknown), Ok(_)) => unknown,
            (None, Err(e)) => e,
            (Some(unknown), Err(e)) => unknown.and(e),
        };
        Err(expand::hide(refused, &resolved))
    }

    /// `e` with every value the file's references resolved to taken out, as the loader's
    /// own errors are: for checks that run on the validated config.
    pub fn hide(&self, e: ConfigError) -> ConfigError {
        expand::hide(e, &self.resolved)
    }

    /// The JSON schema of the configuration file, generated from the raw types.
    pub fn json_schema() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(raw::RawConfig)).unwrap_or_default()
    }

    /// Which group cap binds when several apply (`admin.group_limit_mode`).
    pub fn group_mode(&self) -> GroupMode {
        self.spend
            .as_ref()
            .map(|s| s.group_mode)
            .unwrap_or_default()
    }

    /// Which pool pays when a person is in several pooled groups.
    pub fn pool_rule(&self) -> PoolRule {
        self.spend
            .as_ref()
            .map(|s| s.pool_rule.clone())
            .unwrap_or_default()
    }

    /// Whether this listener is on a loopback address (desktop and local use).
    pub fn is_loopback(&self) -> bool {
        self.listen.host.is_loopback()
    }
}

fn yaml_message(e: &serde_yaml_ng::Error) -> String {
    match e.location() {
        Some(loc) => format!(
            "invalid YAML at line {} column {}: {e}",
            loc.line(),
            loc.column()
        ),
        None => format!("invalid YAML: {e}"),
    }
}
