//! The embedded default configuration used when `gatehouse serve` gets no `--config`.
//!
//! Loopback only, on [`DEFAULT_LOCAL_PORT`]; SQLite in the user data directory; one
//! Anthropic upstream whose key comes from `ANTHROPIC_API_KEY`. Callers authenticate with
//! the per-install local key kept (as a hash) in the store. Without an upstream key the
//! gateway still starts and answers inference with a 503 that says what to set.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use super::upstream::ANTHROPIC_BASE_URL;
use super::validate::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEADER_BYTES, DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_URL_LENGTH,
};
use super::{
    AccessControl, Config, ConfigError, CredentialRole, CredentialScheme, CredentialSource, Limits,
    Listen, LoggingConfig, ModelsConfig, PricingConfig, Provider, StoreConfig, UpstreamConfig,
    UpstreamCredential,
};
use crate::deps::Environment;
use crate::secret::Secret;

/// The documented port of the embedded default (loopback only).
pub const DEFAULT_LOCAL_PORT: u16 = 8788;

/// Builds the embedded default. `GATEHOUSE_ANTHROPIC_BASE_URL` may point the one upstream
/// somewhere other than api.anthropic.com (an operator proxy, or a test's fake upstream).
pub fn embedded_default(
    env: &dyn Environment,
    data_dir: &Path,
    port: Option<u16>,
) -> Result<Config, ConfigError> {
    let key = env
        .var("ANTHROPIC_API_KEY")
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty());
    let base = env
        .var("GATEHOUSE_ANTHROPIC_BASE_URL")
        .unwrap_or_else(|| ANTHROPIC_BASE_URL.to_owned());
    let mut base_url = url::Url::parse(&base).map_err(|e| {
        ConfigError::at("GATEHOUSE_ANTHROPIC_BASE_URL", format!("invalid URL: {e}"))
    })?;
    if !matches!(base_url.scheme(), "http" | "https") {
        return Err(ConfigError::at(
            "GATEHOUSE_ANTHROPIC_BASE_URL",
            "URL scheme must be http or https",
        ));
    }
    if !base_url.path().ends_with('/') {
        let p = format!("{}/", base_url.path());
        base_url.set_path(&p);
    }
    let credential = UpstreamCredential {
        scheme: CredentialScheme::ApiKey,
        source: key.map_or(CredentialSource::Missing, |k| {
            CredentialSource::Static(Secret::new(k))
        }),
        role: CredentialRole::Provider,
        missing_hint: "no upstream credential: set ANTHROPIC_API_KEY in the environment of \
                       `gatehouse serve` and restart it"
            .to_owned(),
    };
    let upstreams = vec![UpstreamConfig {
        name: "anthropic".into(),
        provider: Provider::Anthropic,
        base_url,
        credential: Some(credential),
        headers: Vec::new(),
        groups: None,
        models: None,
        model_map: Default::default(),
        forward_user_identity: false,
    }];
    Ok(Config {
        listen: Listen {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            host_name: None,
            port: port.unwrap_or(DEFAULT_LOCAL_PORT),
            public_url: None,
            trusted_proxies: Vec::new(),
            tls: None,
            max_connections: DEFAULT_MAX_CONNECTIONS as usize,
        },
        access: AccessControl::default(),
        limits: Limits {
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            max_url_length: DEFAULT_MAX_URL_LENGTH,
        },
        timeouts: super::validate::timeouts(&Default::default())?,
        store: StoreConfig::Sqlite {
            path: data_dir.join("gatehouse.db"),
        },
        warnings: super::warnings::upstreams(&upstreams),
        differing_defaults: Vec::new(),
        resolved: Vec::new(),
        upstreams,
        models: ModelsConfig {
            rows: Vec::new(),
            auto_include_builtin: true,
        },
        client_keys: Vec::new(),
        pricing: PricingConfig {
            multiplier: 1.0,
            overrides: Vec::new(),
            default: None,
        },
        logging: LoggingConfig::default(),
        local_key: true,
        identity: None,
        workload: None,
        policies: Vec::new(),
        webhook: None,
        telemetry: Default::default(),
        spend: None,
        dashboard_public: false,
        routing: Default::default(),
        inference_limits: Default::default(),
        idempotency: Some(Default::default()),
        metrics_listen: None,
        load_test: None,
        server_tools: Default::default(),
        readiness_grace: std::time::Duration::ZERO,
    })
}
