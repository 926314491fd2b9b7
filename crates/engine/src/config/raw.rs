//! The configuration file as written: serde structs that refuse unknown keys.
//!
//! Key names follow the Claude apps gateway's `gateway.yaml`, so a team can bring its file.
//! Every key the reference accepts has a field here; validation (`validate` and the
//! per-section modules) turns them into the checked `Config`.
//! The JSON schema in `config.schema.json` is generated from these types.

use std::collections::BTreeMap;

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::Deserialize;

/// Opaque value for a block that is recognised but not implemented yet.
pub type Reserved = Option<serde_json::Value>;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// A JSON-schema URL for editors; ignored (as the reference does).
    #[serde(rename = "$schema")]
    pub schema: Option<String>,
    /// Plain-text notice returned as `login_notice` from device authorization and shown on
    /// the sign-in page (the reference's top-level key; ANSI and control characters are
    /// stripped and spaces collapsed; 1-500 characters). `oidc.login_notice` is the same.
    pub login_notice: Option<String>,
    #[serde(default)]
    pub listen: RawListen,
    #[serde(default)]
    pub access_control: RawAccessControl,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub timeouts: RawTimeouts,
    #[serde(default)]
    pub store: RawStore,
    /// Ordered: the first upstream that can serve a model is tried first.
    #[serde(default)]
    pub upstreams: Vec<RawUpstream>,
    /// The operator's model allowlist and per-upstream model ids.
    #[serde(default)]
    pub models: Vec<RawModel>,
    /// Also accept the built-in Claude model ids (default true).
    pub auto_include_builtin_models: Option<bool>,
    /// Static bearer keys for callers such as CI or the desktop app (Gatehouse addition).
    #[serde(default)]
    pub client_keys: Vec<RawClientKey>,
    #[serde(default, deserialize_with = "super::pricing_rules::block")]
    pub pricing: RawPricing,
    /// Rotating file logs (Gatehouse addition).
    #[serde(default)]
    pub logging: RawLogging,
    /// Gateway session tokens (required with `oidc`).
    pub session: Option<RawSession>,
    /// OIDC sign-in for people (device flow for CLIs).
    pub oidc: Option<RawOidc>,
    /// Managed settings per role (groups / email domain).
    pub managed: Option<super::managed::RawManaged>,
    /// Spend caps and their admin API.
    pub admin: Option<RawAdmin>,
    /// What happens when the spend store cannot answer.
    pub enforcement: Option<RawEnforcement>,
    /// Canned replies without upstream calls, for capacity tests.
    pub load_test_mode: Option<RawLoadTestMode>,
    /// OTLP relay: where the gateway forwards Claude Code's telemetry.
    pub telemetry: Option<super::telemetry::RawTelemetry>,
    /// Per-IP limits on the sign-in endpoints, and traffic limits on inference.
    #[serde(default)]
    pub rate_limits: RawRateLimits,
    /// `Idempotency-Key` replays of inference POSTs (Gatehouse addition).
    pub idempotency: Option<super::limits::RawIdempotency>,
    /// A separate Prometheus listener (Gatehouse addition).
    pub metrics: Option<super::limits::RawMetrics>,
    /// Workload-token admission ("customer-routed inference"): machine callers with ES256
    /// JWTs from a fixed issuer.
    pub cri: Option<RawCri>,
    /// The status page's data routes (Gatehouse addition).
    pub dashboard: Option<RawDashboard>,
    /// Upstream health (circuit breaker, cooldown, stalled streams) and same-upstream
    /// retry (Gatehouse addition).
    pub routing: Option<super::routing::RawRouting>,
    /// Anthropic server tools (`web_search`, `web_fetch`) run by the gateway for upstreams
    /// that cannot run them (Gatehouse addition).
    pub server_tools: Option<super::server_tools::RawServerTools>,
}

/// `dashboard`: who may read the status page's data off loopback.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDashboard {
    /// Serve usage aggregates and upstream health (`/gatehouse/api/dashboard`, the event
    /// stream) to callers that are neither on loopback nor presenting an admin key
    /// (default false: off loopback those routes need an admin read or write key).
    pub public: Option<bool>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawListen {
    /// Bind address (default 0.0.0.0; a non-loopback bind requires `public_url`).
    pub host: Option<String>,
    /// Bind port (default 8080; 0 picks a free port).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub port: Option<u16>,
    /// The origin clients and browsers use to reach this gateway.
    pub public_url: Option<String>,
    /// Socket peers in these CIDRs (or bare IPs) may set X-Forwarded-For.
    #[serde(default, deserialize_with = "ip_nets")]
    #[schemars(with = "Vec<String>")]
    pub trusted_proxies: Vec<IpNet>,
    /// Serve HTTPS with this certificate chain and key (PEM; use `${file:/abs/path}`).
    pub tls: Option<RawTls>,
    /// Open client connections at most; more wait in the kernel's accept queue until one
    /// closes (default 4096; Gatehouse addition).
    pub max_connections: Option<u64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAccessControl {
    /// CIDRs or bare IPs (a /32 or /128).
    #[serde(default, deserialize_with = "ip_nets")]
    #[schemars(with = "Vec<String>")]
    pub allow_cidrs: Vec<IpNet>,
    /// CIDRs or bare IPs (a /32 or /128).
    #[serde(default, deserialize_with = "ip_nets")]
    #[schemars(with = "Vec<String>")]
    pub deny_cidrs: Vec<IpNet>,
}

/// CIDRs, or bare IPs as a /32 or /128, as the reference takes them.
fn ip_nets<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
    Ok(Vec::<Net>::deserialize(d)?
        .into_iter()
        .map(|n| n.0)
        .collect())
}

/// One entry of an IP list (an error names its index).
struct Net(IpNet);

impl<'de> Deserialize<'de> for Net {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let text = String::deserialize(d)?;
        let s = text.trim();
        let net = if s.contains('/') {
            s.parse::<IpNet>().map_err(D::Error::custom)?
        } else {
            IpNet::from(s.parse::<std::net::IpAddr>().map_err(D::Error::custom)?)
        };
        Ok(Net(net))
    }
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Largest request body accepted (default 33554432 = 32 MiB).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub max_request_bytes: Option<u64>,
    /// Largest sum of header name + value + 4 (default 65536).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub max_request_header_bytes: Option<usize>,
    /// Longest request target (default 8192).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub max_url_length: Option<usize>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTimeouts {
    /// Time allowed until the upstream's response headers (default 120000).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub upstream_ttfb_ms: Option<u64>,
    /// TCP/TLS connect timeout to an upstream (default 10000).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub upstream_connect_ms: Option<u64>,
    /// On shutdown, how long in-flight streams may finish (default 30000).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub shutdown_drain_ms: Option<u64>,
    /// After a client disconnects mid-stream, how long the gateway keeps reading the
    /// upstream to record the usage it reports (default 300000; 0 disables).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub disconnect_drain_ms: Option<u64>,
    /// Silence after which a translated stream (Bedrock) gets an `event: ping`
    /// (default 15000; Gatehouse addition).
    pub stream_ping_ms: Option<u64>,
    /// Time allowed for a request's head (line and headers) from its first byte, or from
    /// the connection's start for its first request (default 10000; Gatehouse addition).
    pub header_read_ms: Option<u64>,
    /// While the gateway reads a request body: time allowed for each 1 KiB of it (or its
    /// rest); a slower upload gets 408 (default 30000; Gatehouse addition).
    pub request_body_idle_ms: Option<u64>,
    /// A connection with no request in progress is closed after this long
    /// (default 75000; Gatehouse addition).
    pub keep_alive_idle_ms: Option<u64>,
    /// Time allowed for a TLS handshake (default 10000; Gatehouse addition).
    pub tls_handshake_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    /// SQLite database file (the embedded default; not with `postgres_url`).
    pub sqlite_path: Option<String>,
    /// PostgreSQL shared by several replicas, e.g. `postgres://gatehouse@db:5432/gatehouse`
    /// (or the `key=value` form). TLS with libpq's parameters: `sslmode` (`require`,
    /// `verify-ca`, `verify-full`), `sslrootcert` (CA file, or `system`), `sslcert` and
    /// `sslkey` (client certificate and key files).
    pub postgres_url: Option<String>,
    /// PostgreSQL connections per gateway (default 5).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub max_connections: Option<u32>,
    /// PostgreSQL user; overrides the one in `postgres_url`.
    pub username: Option<String>,
    /// PostgreSQL password; overrides the one in `postgres_url`. Use `${VAR}` or
    /// `${file:/path}` rather than writing it here.
    pub password: Option<String>,
    /// Time allowed to connect to PostgreSQL, and to wait for a free pooled connection
    /// (default 5000).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub connect_timeout_ms: Option<u64>,
    /// The reference's spelling of the connect timeout, in seconds (1-60).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub connect_timeout_seconds: Option<u64>,
    /// Keep `/readyz` ready for this many seconds while the store is unreachable (0-3600,
    /// default 0).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub readiness_grace_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawUpstream {
    /// Default: the provider's value (`anthropic`, `bedrock`, ...), as in the reference.
    pub name: Option<String>,
    pub provider: RawProvider,
    pub base_url: Option<String>,
    /// AWS region (bedrock) or Vertex region (`global`, `us`, `eu` or a region).
    pub region: Option<String>,
    /// GCP project (vertex, anthropicGoogleCloud).
    pub project_id: Option<String>,
    /// Azure resource name (foundry): `https://<resource>.services.ai.azure.com/anthropic`.
    pub resource: Option<String>,
    /// Anthropic workspace (anthropicGoogleCloud: required; anthropicAws: refused as not
    /// supported yet).
    pub workspace_id: Option<String>,
    /// GCP location (anthropicGoogleCloud; default `global`).
    pub location: Option<String>,
    #[serde(default)]
    pub auth: RawUpstreamAuth,
    /// anthropic: send the signed-in person's sub and email (percent-encoded) to an
    /// operator-owned proxy as `x-claude-gateway-user-id`, `x-claude-gateway-user-email`
    /// and `x-litellm-end-user-id`; refused toward Anthropic-run hosts.
    pub forward_user_identity: Option<bool>,
    /// Bedrock guardrail applied to every request.
    pub guardrail: Option<RawGuardrail>,
    /// Ask Bedrock for the guardrail trace and log it (bedrock).
    pub guardrail_trace: Option<bool>,
    /// STS AssumeRole for bedrock.
    pub assume_role: Option<RawAssumeRole>,
    /// Extra headers sent on every request to this upstream.
    pub headers: Option<std::collections::BTreeMap<String, String>>,
    /// Only people in one of these IdP groups are routed to this upstream.
    pub groups: Option<Vec<String>>,
    /// The only model ids sent to this upstream (case-insensitive, one `*` wildcard).
    pub models: Option<Vec<String>>,
    /// What this upstream serves for each Claude family Claude Code asks for (`opus`,
    /// `sonnet`, `haiku`, …; `"*"` for any other), e.g. `{sonnet: deepseek-chat}`;
    /// `models[].upstream_model` still wins.
    pub model_map: Option<std::collections::BTreeMap<String, String>>,
    /// openai: the field that carries the output limit, `max_tokens` or
    /// `max_completion_tokens` (default: `max_completion_tokens` for o1/o3/o4/gpt-5 ids,
    /// else `max_tokens`).
    pub max_tokens_field: Option<String>,
    /// openai: the most output tokens this upstream's models allow (e.g. 8192 for
    /// DeepSeek); a larger `max_tokens` is lowered to it and named in `route_reason`.
    pub max_output_tokens: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawGuardrail {
    /// Sent as `X-Amzn-Bedrock-GuardrailIdentifier`.
    pub id: String,
    /// Sent as `X-Amzn-Bedrock-GuardrailVersion`.
    pub version: String,
    /// `last_message`, `user_messages`, `all_messages` or `all_messages_and_system`.
    pub input_tagging: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAssumeRole {
    /// `arn:aws:iam::<12 digits>:role/<name>`.
    pub role_arn: String,
    pub external_id: Option<String>,
    /// `email` or `sub`: one role session per person (CloudTrail shows who); default one
    /// shared session `claude-apps-gateway`.
    pub session_name: Option<String>,
}

/// One key of `auth.api_keys`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawPoolKey {
    Key(String),
    Named { id: String, key: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
pub enum RawProvider {
    #[serde(rename = "anthropic")]
    Anthropic,
    #[serde(rename = "bedrock")]
    Bedrock,
    #[serde(rename = "anthropicAws")]
    AnthropicAws,
    #[serde(rename = "anthropicGoogleCloud")]
    AnthropicGoogleCloud,
    #[serde(rename = "mantle")]
    Mantle,
    #[serde(rename = "vertex")]
    Vertex,
    #[serde(rename = "foundry")]
    Foundry,
    #[serde(rename = "openai")]
    OpenAi,
}

impl RawProvider {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::Bedrock => "bedrock",
            Self::AnthropicAws => "anthropicAws",
            Self::AnthropicGoogleCloud => "anthropicGoogleCloud",
            Self::Mantle => "mantle",
            Self::Vertex => "vertex",
            Self::Foundry => "foundry",
            Self::OpenAi => "openai",
        }
    }
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawUpstreamAuth {
    /// Sent as `x-api-key` (anthropic, foundry); openai: sent as `Authorization: Bearer`.
    pub api_key: Option<String>,
    /// A key pool instead of `api_key`: keys used in turn; one answered 401/403 is set
    /// aside, one answered 429 cools down for its `retry-after`, the others carry on.
    /// Each entry is the key, or `{id, key}` to name it in events and the dashboard
    /// (default id: `key-<n>`, from 1).
    pub api_keys: Option<Vec<RawPoolKey>>,
    /// Sent as `Authorization: Bearer` (OAuth or gateway tokens).
    pub auth_token: Option<String>,
    /// An Anthropic OAuth token: Bearer plus the `oauth-2025-04-20` beta.
    pub oauth_token: Option<String>,
    /// Workload-identity federation with Anthropic (anthropic): the rule the identity
    /// token is exchanged under.
    pub federation_rule_id: Option<String>,
    /// Federation: the Anthropic organization.
    pub organization_id: Option<String>,
    /// Federation: the path of the identity (OIDC JWT) token file, read at each exchange.
    pub identity_token_file: Option<String>,
    /// Federation: the Anthropic service account to act as.
    pub service_account_id: Option<String>,
    /// Federation: the workspace the exchanged token is scoped to.
    pub workspace_id: Option<String>,
    /// Bedrock SigV4 key pair and optional session token.
    pub aws_access_key_id: Option<String>,
    pub aws_secret_access_key: Option<String>,
    pub aws_session_token: Option<String>,
    /// A Bedrock API key, sent as Bearer.
    pub aws_bearer_token: Option<String>,
    /// Vertex, anthropicGoogleCloud: the path of a service-account key file.
    pub service_account_json: Option<String>,
    /// Vertex, anthropicGoogleCloud: a fixed OAuth access token.
    pub access_token: Option<String>,
    /// Foundry: Entra ID tokens instead of an API key.
    pub use_azure_ad: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    pub id: String,
    pub label: Option<String>,
    pub description: Option<String>,
    /// Upstream name -> the model id that upstream expects (required, at least one).
    pub upstream_model: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawClientKey {
    pub id: String,
    pub key: String,
}

/// `pricing`. Every number is read as the reference reads it (JavaScript's `Number()`:
/// `"3.5"`, `true` and `null` are numbers there, `"abc"` is not a number) and checked in
/// `pricing_rules`, which also reports a required number that is missing (so every such
/// key is named at once). A mapping or list written `null` is refused.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPricing {
    /// Scales every price; in (0, 10] (default 1; above 1 is a markup).
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(with = "Option<super::lenient::NumberOrString>")]
    pub multiplier: Option<f64>,
    #[serde(default, deserialize_with = "super::pricing_rules::list")]
    pub overrides: Vec<RawPriceOverride>,
    /// Prices for a model nothing else prices (a non-Claude upstream model without an
    /// override); each such model is flagged once (`pricing.unknown_model`). Default: $5
    /// input and $25 output per million tokens. (Gatehouse's key.)
    #[serde(default, deserialize_with = "super::pricing_rules::opt_object")]
    pub default: Option<RawPrice>,
    /// The file has a `pricing` key (even `pricing: {}`), which needs a consumer.
    #[serde(skip)]
    pub written: bool,
}

/// `pricing.default`, in USD per million tokens; omitted cache prices derive from `input`
/// (read 0.1x, 5-minute write 1.25x, 1-hour write 2x).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPrice {
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(required, with = "super::lenient::NumberOrString")]
    pub input: Option<f64>,
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(required, with = "super::lenient::NumberOrString")]
    pub output: Option<f64>,
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(with = "Option<super::lenient::NumberOrString>")]
    pub cache_read: Option<f64>,
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(with = "Option<super::lenient::NumberOrString>")]
    pub cache_write_5m: Option<f64>,
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(with = "Option<super::lenient::NumberOrString>")]
    pub cache_write_1h: Option<f64>,
    /// USD per web search request (0 or more).
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(with = "Option<super::lenient::NumberOrString>")]
    pub web_search: Option<f64>,
}

/// `pricing.overrides[]`, in USD per million tokens, each in (0, 10000]. The 5-minute
/// cache-write price is `cache_write_5m` else `cache_write`, the 1-hour one
/// `cache_write_1h` else `cache_write`; both must resolve.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPriceOverride {
    /// Only for requests this upstream (by name) served; default: whichever served it
    /// (Gatehouse: the reference requires it).
    pub upstream: Option<String>,
    /// The requested model id or an upstream's model id (`deepseek-chat`).
    pub model: String,
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(required, with = "super::lenient::NumberOrString")]
    pub input: Option<f64>,
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(required, with = "super::lenient::NumberOrString")]
    pub output: Option<f64>,
    /// Default: a tenth of `input` (Gatehouse: the reference requires it).
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(with = "Option<super::lenient::NumberOrString>")]
    pub cache_read: Option<f64>,
    /// The cache-write price for whichever of `cache_write_5m` / `cache_write_1h` is not
    /// set.
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(with = "Option<super::lenient::NumberOrString>")]
    pub cache_write: Option<f64>,
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(with = "Option<super::lenient::NumberOrString>")]
    pub cache_write_5m: Option<f64>,
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(with = "Option<super::lenient::NumberOrString>")]
    pub cache_write_1h: Option<f64>,
    /// Other prices above a prompt size.
    #[serde(default, deserialize_with = "super::pricing_rules::opt_object")]
    pub long_prompt: Option<RawLongPrompt>,
    /// USD per web search request, 0 or more (Gatehouse's key).
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(with = "Option<super::lenient::NumberOrString>")]
    pub web_search: Option<f64>,
}

/// `pricing.overrides[].long_prompt`: every key required.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLongPrompt {
    /// An integer above 0: input + cache-read + cache-write tokens above it are a long
    /// prompt.
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(required, with = "super::lenient::IntOrString")]
    pub above_prompt_tokens: Option<f64>,
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(required, with = "super::lenient::NumberOrString")]
    pub input: Option<f64>,
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(required, with = "super::lenient::NumberOrString")]
    pub output: Option<f64>,
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(required, with = "super::lenient::NumberOrString")]
    pub cache_read: Option<f64>,
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(required, with = "super::lenient::NumberOrString")]
    pub cache_write_5m: Option<f64>,
    #[serde(default, deserialize_with = "super::pricing_rules::opt_number")]
    #[schemars(required, with = "super::lenient::NumberOrString")]
    pub cache_write_1h: Option<f64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLogging {
    /// Directory for rotating file logs (operator lines and events). Off when absent.
    pub dir: Option<String>,
    /// `daily` (default), `hourly` or `never`.
    pub rotation: Option<String>,
}

/// A string or a list of strings.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSession {
    /// At least 32 characters; a list rotates: the first signs, all verify.
    pub jwt_secret: OneOrMany,
    /// Session token lifetime in hours (default 1).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::NumberOrString>")]
    pub ttl_hours: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawOidc {
    /// The IdP's issuer URL (discovery at `<issuer>/.well-known/openid-configuration`).
    pub issuer: String,
    pub client_id: String,
    /// Required unless `token_endpoint_auth_method: private_key_jwt` (then forbidden).
    pub client_secret: Option<String>,
    /// `client_secret_basic` (default), `client_secret_post` or `private_key_jwt`.
    pub token_endpoint_auth_method: Option<super::oidc::AuthMethod>,
    /// Certificate credentials for `private_key_jwt` (required with it, only with it).
    pub client_assertion: Option<super::oidc::RawClientAssertion>,
    /// Extra CA certificates (PEM text) trusted for IdP traffic only.
    pub ca_cert_pem: Option<String>,
    /// Claim holding the person's id (default `sub`); a missing claim fails sign-in.
    pub user_id_claim: Option<String>,
    /// Tolerance in seconds on ID-token time claims (default 0).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub clock_skew_seconds: Option<u64>,
    /// Expected ID-token signing algorithm (RS/PS/ES 256/384/512 or EdDSA).
    pub id_token_signed_response_alg: Option<super::oidc::IdTokenAlg>,
    /// Extra `azp` values accepted in ID tokens.
    pub additional_authorized_parties: Option<Vec<String>>,
    /// Explicit discovery document URL (must contain `/.well-known/`).
    pub discovery_url: Option<String>,
    /// Send IdP traffic through HTTPS_PROXY/HTTP_PROXY, except NO_PROXY hosts (default: on
    /// only when CLAUDE_GATEWAY_PROXY_IS_EGRESS_BOUNDARY is set with a usable proxy).
    pub use_proxy: Option<bool>,
    /// Send `scope` on refresh-token grants (default false).
    pub scope_on_refresh: Option<bool>,
    /// Extra origins allowed in the sign-in page's CSP `form-action`.
    pub form_action_origins: Option<Vec<String>>,
    /// Groups from nested claims: `.name`, `['name']`, `[*]`, `[?@.f=='v']` (only with the
    /// default `groups_claim`).
    pub groups_jsonpath: Option<String>,
    /// Google Workspace groups through the Admin SDK Directory API (service account with
    /// domain-wide delegation); they replace the ID token's groups.
    pub google_groups: Option<super::oidc::RawGoogleGroups>,
    /// Default: openid, profile, email, offline_access.
    pub scopes: Option<Vec<String>>,
    /// Default true.
    pub use_pkce: Option<bool>,
    #[serde(default)]
    pub allowed_email_domains: Vec<String>,
    #[serde(default)]
    pub allowed_groups: Vec<String>,
    /// Claim name or JSON pointer (`/realm_access/roles`) holding the groups (default `groups`).
    pub groups_claim: Option<String>,
    /// Claim name(s) or JSON pointer(s) tried in order for the email (default `email`).
    pub email_claim: Option<OneOrMany>,
    /// Ask the userinfo endpoint when the ID token lacks email or groups (default false).
    pub userinfo_fallback: Option<bool>,
    /// Allow an IdP on a loopback address (tests; default false).
    pub allow_loopback: Option<bool>,
    /// Extra authorization request parameters (cannot override protocol fields).
    #[serde(default)]
    pub extra_auth_params: BTreeMap<String, String>,
    /// Shown next to the user code by Claude Code (at most 500 characters).
    pub login_notice: Option<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRateLimits {
    /// `POST /oauth/device_authorization` per client IP (default 30 per 600 s).
    pub device_authorization: Option<RawRate>,
    /// `POST /device` per client IP (default 10 per 600 s).
    pub device_verify: Option<RawRate>,
    /// Inference limits (Gatehouse addition): the first entry whose `match` fits the
    /// caller applies.
    #[serde(default)]
    pub inference: Vec<super::limits::RawInferenceLimit>,
    /// Concurrent inference requests per client key when no entry sets `concurrent`
    /// (default 50; 0: unlimited).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub client_key_concurrency: Option<u32>,
    /// When the store cannot answer for an operator's inference limit: refuse the request
    /// (true) or let it through (false, the default: a store outage is not a traffic
    /// spike). A `limits.unavailable` event is logged either way (Gatehouse addition).
    pub fail_closed: Option<bool>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRate {
    /// Requests allowed per window per client address (the reference's `max`).
    #[serde(alias = "max", default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub limit: Option<u32>,
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub window_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCri {
    pub enabled: Option<bool>,
    /// Token issuer (default `https://api.anthropic.com/api/oauth/cri`); exact match.
    pub issuer: Option<String>,
    /// Key set URL; only a loopback URL, and only with `allow_loopback_jwks` (tests).
    pub jwks_url: Option<String>,
    pub allow_loopback_jwks: Option<bool>,
    /// Accepted `aud` values (at least one).
    #[serde(default)]
    pub audience: Vec<String>,
    /// Accepted `org` values (at least one).
    #[serde(default)]
    pub org_allowlist: Vec<String>,
    /// The policy webhook (runs for every inference caller, not only workloads).
    pub policy: Option<RawCriPolicy>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCriPolicy {
    pub webhook: Option<RawWebhook>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWebhook {
    pub url: String,
    /// Default 2000, at most 30000 (a number or a string holding one).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub timeout_ms: Option<u64>,
    /// Block when the webhook cannot answer (default true).
    pub fail_closed: Option<bool>,
    /// Allow a loopback webhook URL (tests and sidecars; default false).
    pub allow_loopback: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    /// PEM certificate chain, leaf first.
    pub cert: String,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    /// `x-api-key` values that may read and change caps (`{id, key}`, key >= 32 chars).
    #[serde(default)]
    pub write_keys: Vec<RawClientKey>,
    /// `x-api-key` values that may only read.
    #[serde(default)]
    pub read_keys: Vec<RawClientKey>,
    /// Signed-in members of these groups may read and change caps.
    #[serde(default)]
    pub admin_groups: Vec<String>,
    /// Signed-in members of these groups may read everything the admin API and the team
    /// console show, and change nothing (a Gatehouse extension).
    #[serde(default)]
    pub viewer_groups: Vec<String>,
    /// Appended to the message of a spend block (e.g. where to ask for more).
    pub blocked_message: Option<String>,
    /// `min` (default: the smallest group cap binds) or `max`.
    pub group_limit_mode: Option<String>,
    /// Days the admin audit trail is kept (default 365).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub audit_retention_days: Option<i64>,
    /// Months spend and usage rows are kept (default 13).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub spend_retention_months: Option<i64>,
    /// Days the identity directory keeps a person not seen since (default 90).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::IntOrString>")]
    pub identity_retention_days: Option<i64>,
    /// `default_order` (the largest shared group budget first) or `priority_list` (the
    /// groups of `pooled_priority_order` first): which shared budget pays for a person in
    /// several.
    pub pooled_conflict_rule: Option<String>,
    /// Group names in pool priority order (at most 50, unique), required with
    /// `priority_list`.
    pub pooled_priority_order: Option<Vec<String>>,
    /// The request-tag name that carries a person's billing group: put in session tokens as
    /// the `billing_group_tag` claim (Claude Code then sends `tags: {<name>: <group>}`); the
    /// group is recorded on the `inference` event when the person is in it, and `tags` and
    /// the `request-tags-2026-08-21` beta are removed before any upstream.
    pub billing_group_tag: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLoadTestMode {
    pub enabled: bool,
    /// Size of each canned reply, 1-100000 (default 750); a number, not a string (as the
    /// reference).
    pub reply_tokens: Option<i64>,
    /// Duration of each canned reply in seconds, 0-600 (default 9.5).
    #[serde(default, deserialize_with = "super::lenient::opt")]
    #[schemars(with = "Option<super::lenient::NumberOrString>")]
    pub reply_seconds: Option<f64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawEnforcement {
    /// Refuse inference when caps cannot be read (default false: let it through).
    pub fail_closed_on_error: Option<bool>,
}

impl RawUpstream {
    /// `name`, or the provider's value when unnamed.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(self.provider.as_str())
    }
}
