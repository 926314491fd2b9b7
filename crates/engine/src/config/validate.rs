//! Raw configuration -> validated [`Config`], with field paths in every error.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use sha2::{Digest, Sha256};
use url::Url;

use super::check::http_url;
use super::raw::{RawConfig, RawTimeouts};
use super::{
    AccessControl, ClientKeyConfig, Config, ConfigError, ConfigIssue, Limits, Listen, LoadContext,
    LoggingConfig, MIN_CLIENT_KEY_LEN, ModelRow, ModelsConfig, PostgresConfig, Rotation,
    StoreConfig, Timeouts, UpstreamConfig,
};
use crate::secret::Secret;

pub const DEFAULT_PORT: u16 = 8080;
pub const DEFAULT_MAX_REQUEST_BYTES: u64 = 32 * 1024 * 1024;
pub const DEFAULT_MAX_HEADER_BYTES: usize = 64 * 1024;
pub const DEFAULT_MAX_URL_LENGTH: usize = 8192;
/// Open client connections at most: a few keep-alive connections for each of a large
/// team's clients, well under what a task and its buffers per connection cost in memory.
pub const DEFAULT_MAX_CONNECTIONS: u64 = 4096;

/// Every problem found so far. Each section's check goes through [`Issues::take`], so one
/// refused section does not hide the problems of the others; a check that needs another
/// section's validated form runs only when that section validated.
#[derive(Debug, Default)]
pub(super) struct Issues(Vec<ConfigIssue>);

impl Issues {
    /// The section's value, or `None` with its problems kept.
    pub(super) fn take<T>(&mut self, result: Result<T, ConfigError>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                self.0.extend(e.issues());
                None
            }
        }
    }

    /// A problem found outside a section's `Result`.
    pub(super) fn push(&mut self, path: &str, message: impl Into<String>) {
        self.0.push(ConfigIssue {
            path: path.to_owned(),
            message: message.into(),
        });
    }

    /// Every problem kept, as one error (`Ok` when there is none).
    pub(super) fn finish(self) -> Result<(), ConfigError> {
        ConfigError::from_issues(self.0).map_or(Ok(()), Err)
    }
}

pub fn validate(raw: RawConfig, ctx: &LoadContext<'_>) -> Result<Config, ConfigError> {
    let mut issues = Issues::default();
    // The reference's `CLAUDE_GATEWAY_ALLOW_LOOPBACK` beside Gatehouse's own keys.
    let env_loopback = super::check::env_allows_loopback(ctx.env);
    let listen = issues.take(listen(&raw, ctx));
    let store = issues.take(store(&raw, ctx));
    let upstreams = issues.take(
        super::upstream::validate(&raw.upstreams, env_loopback).and_then(|u| {
            if u.is_empty() {
                return Err(ConfigError::at(
                    "upstreams",
                    "at least one upstream is required",
                ));
            }
            Ok(u)
        }),
    );
    // Checks against the upstream list run only when it validated.
    let models = upstreams
        .as_ref()
        .and_then(|u| issues.take(models(&raw, u)));
    let client_keys = issues.take(client_keys(&raw));
    let pricing = upstreams
        .as_ref()
        .and_then(|u| issues.take(super::pricing_rules::pricing(&raw, u)));
    let logging = issues.take(logging(&raw));
    let identity = listen
        .as_ref()
        .and_then(|l| issues.take(super::identity::validate(&raw, l, env_loopback)));
    let workload = issues.take(super::identity::validate_workload(&raw, env_loopback));
    let webhook = issues.take(super::identity::validate_webhook(&raw, env_loopback));
    let spend = issues.take(super::spend::validate(&raw));
    let telemetry = issues.take(super::telemetry::validate(
        raw.telemetry.as_ref().unwrap_or(&Default::default()),
        env_loopback,
    ));
    let policies = issues.take(match &raw.managed {
        Some(m) => super::managed::validate(m, ctx.env),
        None => Ok(Vec::new()),
    });
    let timeouts = issues.take(timeouts(&raw.timeouts).and_then(|mut t| {
        if raw.timeouts.shutdown_drain_ms.is_none()
            && let Some(ms) = drain_from_env(ctx.env)?
        {
            t.shutdown_drain = ms;
        }
        Ok(t)
    }));
    let limits = issues.take(limits(&raw));
    let routing = upstreams.as_ref().and_then(|u| {
        issues.take(super::routing::validate(
            raw.routing.as_ref().unwrap_or(&Default::default()),
            &u.iter().map(|u| u.name.as_str()).collect::<Vec<_>>(),
        ))
    });
    let inference_limits = issues.take(super::limits::validate(
        &raw.rate_limits.inference,
        raw.rate_limits.client_key_concurrency,
        raw.rate_limits.fail_closed,
    ));
    let idempotency = issues.take(super::limits::validate_idempotency(
        raw.idempotency.as_ref(),
    ));
    let metrics_listen = issues.take(super::limits::validate_metrics(raw.metrics.as_ref()));
    let load_test = issues.take(super::load_test::validate(raw.load_test_mode.as_ref()));
    let server_tools = issues.take(super::server_tools::validate(raw.server_tools.as_ref()));
    let readiness_grace = issues.take(readiness_grace(raw.store.readiness_grace_seconds));
    issues.finish()?;
    let (
        Some(listen),
        Some(store),
        Some(upstreams),
        Some(models),
        Some(client_keys),
        Some(pricing),
        Some(logging),
        Some(identity),
        Some(workload),
        Some(webhook),
        Some(spend),
        Some(telemetry),
        Some(policies),
        Some(timeouts),
        Some(limits),
        Some(routing),
        Some(inference_limits),
        Some(idempotency),
        Some(metrics_listen),
        Some(load_test),
        Some(server_tools),
        Some(readiness_grace),
    ) = (
        listen,
        store,
        upstreams,
        models,
        client_keys,
        pricing,
        logging,
        identity,
        workload,
        webhook,
        spend,
        telemetry,
        policies,
        timeouts,
        limits,
        routing,
        inference_limits,
        idempotency,
        metrics_listen,
        load_test,
        server_tools,
        readiness_grace,
    )
    else {
        // Unreachable: a section is `None` only when its problems were kept above.
        return Err(ConfigError::at("", "the configuration is invalid"));
    };
    let mut config = Config {
        listen,
        access: AccessControl {
            allow: raw.access_control.allow_cidrs.clone(),
            deny: raw.access_control.deny_cidrs.clone(),
        },
        limits,
        timeouts,
        store,
        upstreams,
        models,
        client_keys,
        pricing,
        logging,
        local_key: false,
        identity,
        workload,
        policies,
        webhook,
        telemetry,
        spend,
        dashboard_public: raw
            .dashboard
            .as_ref()
            .and_then(|d| d.public)
            .unwrap_or(false),
        routing,
        inference_limits,
        idempotency,
        metrics_listen,
        load_test,
        server_tools,
        readiness_grace,
        warnings: Vec::new(),
        differing_defaults: super::drop_in_warnings::safer_defaults(&raw),
        resolved: Vec::new(),
    };
    config.warnings = super::warnings::of_file(&raw, &config, ctx.env);
    Ok(config)
}

/// `limits`: each a positive number, with its default.
fn limits(raw: &RawConfig) -> Result<Limits, ConfigError> {
    let l = &raw.limits;
    Ok(Limits {
        max_request_bytes: positive(
            l.max_request_bytes,
            DEFAULT_MAX_REQUEST_BYTES,
            "limits.max_request_bytes",
        )?,
        max_header_bytes: positive(
            l.max_request_header_bytes.map(|v| v as u64),
            DEFAULT_MAX_HEADER_BYTES as u64,
            "limits.max_request_header_bytes",
        )? as usize,
        max_url_length: positive(
            l.max_url_length.map(|v| v as u64),
            DEFAULT_MAX_URL_LENGTH as u64,
            "limits.max_url_length",
        )? as usize,
    })
}

/// `store.readiness_grace_seconds`: 0 to 3600 (an hour).
fn readiness_grace(seconds: Option<u64>) -> Result<Duration, ConfigError> {
    match seconds {
        None => Ok(Duration::ZERO),
        Some(s) if s <= 3600 => Ok(Duration::from_secs(s)),
        Some(_) => Err(ConfigError::at(
            "store.readiness_grace_seconds",
            "must be a whole number of seconds from 0 to 3600",
        )),
    }
}

/// The reference's `CLAUDE_GATEWAY_DRAIN_TIMEOUT_MS`: the shutdown drain when
/// `timeouts.shutdown_drain_ms` is not set.
fn drain_from_env(env: &dyn crate::deps::Environment) -> Result<Option<Duration>, ConfigError> {
    const NAME: &str = "CLAUDE_GATEWAY_DRAIN_TIMEOUT_MS";
    let Some(v) = env.var(NAME).filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    v.trim()
        .parse::<u64>()
        .map(|ms| Some(Duration::from_millis(ms)))
        .map_err(|_| ConfigError::at(NAME, "expected whole milliseconds, e.g. 25000"))
}

/// `timeouts`, validated; an empty block gives the defaults (the embedded config uses them).
pub fn timeouts(t: &RawTimeouts) -> Result<Timeouts, ConfigError> {
    let ms = |v, default, max, path| bounded(v, default, max, path).map(Duration::from_millis);
    Ok(Timeouts {
        upstream_ttfb: ms(
            t.upstream_ttfb_ms,
            120_000,
            u64::MAX,
            "timeouts.upstream_ttfb_ms",
        )?,
        upstream_connect: ms(
            t.upstream_connect_ms,
            10_000,
            u64::MAX,
            "timeouts.upstream_connect_ms",
        )?,
        shutdown_drain: Duration::from_millis(t.shutdown_drain_ms.unwrap_or(30_000)),
        disconnect_drain: Duration::from_millis(t.disconnect_drain_ms.unwrap_or(300_000)),
        stream_ping: ms(
            t.stream_ping_ms,
            15_000,
            u64::MAX,
            "timeouts.stream_ping_ms",
        )?,
        // A head is a few KiB: 10 s is generous on any link, and short enough that
        // connections trickling headers cannot pile up.
        header_read: ms(t.header_read_ms, 10_000, 300_000, "timeouts.header_read_ms")?,
        request_body_idle: ms(
            t.request_body_idle_ms,
            30_000,
            600_000,
            "timeouts.request_body_idle_ms",
        )?,
        // Longer than the 60 s idle timeout of common load balancers, so the gateway never
        // closes a connection a balancer is about to reuse.
        keep_alive_idle: ms(
            t.keep_alive_idle_ms,
            75_000,
            3_600_000,
            "timeouts.keep_alive_idle_ms",
        )?,
        tls_handshake: ms(
            t.tls_handshake_ms,
            10_000,
            300_000,
            "timeouts.tls_handshake_ms",
        )?,
    })
}

/// [`positive`] with a ceiling: a value above `max` is refused as a mistake.
fn bounded(v: Option<u64>, default: u64, max: u64, path: &str) -> Result<u64, ConfigError> {
    let v = positive(v, default, path)?;
    if v > max {
        return Err(ConfigError::at(path, format!("must be at most {max}")));
    }
    Ok(v)
}

fn positive(v: Option<u64>, default: u64, path: &str) -> Result<u64, ConfigError> {
    match v {
        Some(0) => Err(ConfigError::at(path, "must be greater than 0")),
        Some(v) => Ok(v),
        None => Ok(default),
    }
}

fn listen(raw: &RawConfig, ctx: &LoadContext<'_>) -> Result<Listen, ConfigError> {
    let (host, host_name) = listen_host(raw.listen.host.as_deref())?;
    let public_url = match raw.listen.public_url.as_deref() {
        None => None,
        Some(s) => Some(public_url(s)?),
    };
    // The reference's loopback set: localhost, 127.0.0.1, ::1 and [::1].
    let named_loopback = matches!(
        raw.listen.host.as_deref(),
        Some("localhost" | "127.0.0.1" | "::1" | "[::1]")
    );
    if !named_loopback && public_url.is_none() {
        return Err(ConfigError::at(
            "listen.public_url",
            format!(
                "required when listen.host ({host}) is not localhost, 127.0.0.1 or ::1: set it to the externally visible origin (e.g. https://claude-gateway.corp.example.com); without it the IdP redirect_uri and token issuer would come from the client-controlled Host header"
            ),
        ));
    }
    let tls = match &raw.listen.tls {
        None => None,
        Some(t) => {
            let tls = super::TlsConfig {
                cert_pem: super::check::pem_or_file(&t.cert, "listen.tls.cert", ctx.env)?,
                key_pem: Secret::new(super::check::pem_or_file(
                    &t.key,
                    "listen.tls.key",
                    ctx.env,
                )?),
            };
            tls.server_config().map_err(|e| {
                let (field, msg) = e.split_once(": ").unwrap_or(("cert", e.as_str()));
                let field = if field.starts_with("key") {
                    "key"
                } else {
                    "cert"
                };
                ConfigError::at(&format!("listen.tls.{field}"), msg.to_owned())
            })?;
            Some(tls)
        }
    };
    Ok(Listen {
        host,
        host_name,
        port: raw.listen.port.unwrap_or(DEFAULT_PORT),
        public_url,
        trusted_proxies: raw.listen.trusted_proxies.clone(),
        tls,
        max_connections: bounded(
            raw.listen.max_connections,
            DEFAULT_MAX_CONNECTIONS,
            1_000_000,
            "listen.max_connections",
        )? as usize,
    })
}

/// `listen.host`: an IP address, `localhost`, or (as the reference takes) a host name,
/// which is resolved when the listener binds; `host` is then the unspecified address.
fn listen_host(host: Option<&str>) -> Result<(IpAddr, Option<String>), ConfigError> {
    let ip = match host {
        None => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        Some("localhost") => IpAddr::V4(Ipv4Addr::LOCALHOST),
        Some(h) => match h.trim_start_matches('[').trim_end_matches(']').parse() {
            Ok(ip) => ip,
            Err(_) if url::Host::parse(h).is_ok_and(|d| matches!(d, url::Host::Domain(_))) => {
                return Ok((IpAddr::V4(Ipv4Addr::UNSPECIFIED), Some(h.to_owned())));
            }
            Err(_) => {
                return Err(ConfigError::at(
                    "listen.host",
                    format!("`{h}` is neither an IP address nor a host name"),
                ));
            }
        },
    };
    Ok((ip, None))
}

/// `listen.public_url`: an http(s) URL; a path is kept (a proxy may mount the gateway
/// under one). A query or fragment cannot be the base of other URLs: the reference takes
/// them, so Gatehouse does, drops them and warns (`drop_in_warnings`).
fn public_url(s: &str) -> Result<Url, ConfigError> {
    let mut url = http_url(s, "listen.public_url")?;
    url.set_query(None);
    url.set_fragment(None);
    Ok(url)
}

fn store(raw: &RawConfig, ctx: &LoadContext<'_>) -> Result<StoreConfig, ConfigError> {
    let s = &raw.store;
    if let Some(url) = &s.postgres_url {
        if s.sqlite_path.is_some() {
            return Err(ConfigError::at(
                "store.sqlite_path",
                "not with store.postgres_url (choose one store)",
            ));
        }
        if s.username.as_deref().is_some_and(|u| u.trim().is_empty()) {
            return Err(ConfigError::at("store.username", "must not be empty"));
        }
        let max_connections =
            positive(s.max_connections.map(u64::from), 5, "store.max_connections")?;
        let mut config = PostgresConfig {
            url: Secret::new(url.clone()),
            username: s.username.clone(),
            password: s.password.clone().map(Secret::new),
            max_connections: u32::try_from(max_connections).unwrap_or(u32::MAX),
            connect_timeout: connect_timeout(s)?,
        };
        let no_user = |e: &super::postgres::PgConfigError| e.field() == "store.username";
        let mut checked = super::postgres::connect_config(&config).map(drop);
        // No user in the URL nor in `store.username`: PostgreSQL's clients (the reference's
        // among them) then log in as `PGUSER`, else the operating-system user. With
        // neither, the file is still valid (as in the reference); connecting says why not.
        if checked.as_ref().is_err_and(no_user) && s.username.is_none() {
            config.username = ctx.env.var("PGUSER").or_else(|| ctx.env.var("USER"));
            checked = super::postgres::connect_config(&config).map(drop);
            if checked.as_ref().is_err_and(no_user) {
                checked = Ok(());
            }
        }
        checked.map_err(|e| ConfigError::at(e.field(), e.to_string()))?;
        return Ok(StoreConfig::Postgres(config));
    }
    for (path, present) in [
        ("store.username", s.username.is_some()),
        ("store.password", s.password.is_some()),
        ("store.max_connections", s.max_connections.is_some()),
        ("store.connect_timeout_ms", s.connect_timeout_ms.is_some()),
        (
            "store.connect_timeout_seconds",
            s.connect_timeout_seconds.is_some(),
        ),
    ] {
        if present {
            return Err(ConfigError::at(
                path,
                "only applies with store.postgres_url",
            ));
        }
    }
    let path = match raw.store.sqlite_path.as_deref() {
        Some("") => return Err(ConfigError::at("store.sqlite_path", "must not be empty")),
        Some(p) => PathBuf::from(p),
        None => ctx.default_data_dir.join("gatehouse.db"),
    };
    Ok(StoreConfig::Sqlite { path })
}

fn models(raw: &RawConfig, upstreams: &[UpstreamConfig]) -> Result<ModelsConfig, ConfigError> {
    let mut ids = HashSet::new();
    let mut rows = Vec::with_capacity(raw.models.len());
    for (i, m) in raw.models.iter().enumerate() {
        let at = |field: &str| format!("models[{i}].{field}");
        if m.id.trim().is_empty() || m.id.contains(char::is_whitespace) {
            return Err(ConfigError::at(
                &at("id"),
                "must be a non-empty model id without spaces",
            ));
        }
        // A repeated id is the reference's to accept: the first entry serves it
        // (`warnings` names the later one).
        if !ids.insert(m.id.as_str()) {
            continue;
        }
        let Some(upstream_model) = m.upstream_model.as_ref().filter(|u| !u.is_empty()) else {
            return Err(ConfigError::at(
                &at("upstream_model"),
                "required: map at least one upstream name to the model id it expects",
            ));
        };
        for (name, target) in upstream_model {
            if !upstreams.iter().any(|u| &u.name == name) {
                return Err(ConfigError::at(
                    &at(&format!("upstream_model.{name}")),
                    format!("no upstream is named `{name}`"),
                ));
            }
            if target.trim().is_empty() {
                return Err(ConfigError::at(
                    &at(&format!("upstream_model.{name}")),
                    "must not be empty",
                ));
            }
        }
        rows.push(ModelRow {
            id: m.id.clone(),
            label: m.label.clone(),
            description: m.description.clone(),
            upstream_model: upstream_model.clone(),
        });
    }
    // `auto_include_builtin_models: false` with no `models` serves nothing; the reference
    // accepts it and so does Gatehouse, with a warning.
    let auto = raw.auto_include_builtin_models.unwrap_or(true);
    Ok(ModelsConfig {
        rows,
        auto_include_builtin: auto,
    })
}

fn client_keys(raw: &RawConfig) -> Result<Vec<ClientKeyConfig>, ConfigError> {
    let mut ids = HashSet::new();
    let mut hashes = HashSet::new();
    let mut out = Vec::with_capacity(raw.client_keys.len());
    for (i, k) in raw.client_keys.iter().enumerate() {
        let at = |field: &str| format!("client_keys[{i}].{field}");
        if k.id.trim().is_empty() {
            return Err(ConfigError::at(&at("id"), "must not be empty"));
        }
        if !ids.insert(k.id.as_str()) {
            return Err(ConfigError::at(
                &at("id"),
                format!("duplicate client key id `{}`", k.id),
            ));
        }
        if k.key.len() < MIN_CLIENT_KEY_LEN || !k.key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ConfigError::at(
                &at("key"),
                format!(
                    "must be at least {MIN_CLIENT_KEY_LEN} printable characters without spaces"
                ),
            ));
        }
        let hash: [u8; 32] = Sha256::digest(k.key.as_bytes()).into();
        if !hashes.insert(hash) {
            return Err(ConfigError::at(&at("key"), "the same key is listed twice"));
        }
        out.push(ClientKeyConfig {
            id: k.id.clone(),
            hash,
        });
    }
    Ok(out)
}

/// `store.connect_timeout_ms`, or the reference's `connect_timeout_seconds` (1-60).
fn connect_timeout(s: &super::raw::RawStore) -> Result<Duration, ConfigError> {
    match (s.connect_timeout_ms, s.connect_timeout_seconds) {
        (Some(_), Some(_)) => Err(ConfigError::at(
            "store.connect_timeout_seconds",
            "set connect_timeout_ms or connect_timeout_seconds, not both",
        )),
        (None, Some(secs)) if (1..=60).contains(&secs) => Ok(Duration::from_secs(secs)),
        (None, Some(_)) => Err(ConfigError::at(
            "store.connect_timeout_seconds",
            "must be 1 to 60",
        )),
        (ms, None) => Ok(Duration::from_millis(positive(
            ms,
            5_000,
            "store.connect_timeout_ms",
        )?)),
    }
}

fn logging(raw: &RawConfig) -> Result<LoggingConfig, ConfigError> {
    let rotation = match raw.logging.rotation.as_deref() {
        None | Some("daily") => Rotation::Daily,
        Some("hourly") => Rotation::Hourly,
        Some("never") => Rotation::Never,
        Some(other) => {
            return Err(ConfigError::at(
                "logging.rotation",
                format!("`{other}` is not one of daily, hourly, never"),
            ));
        }
    };
    let dir = match raw.logging.dir.as_deref() {
        None => None,
        Some("") => return Err(ConfigError::at("logging.dir", "must not be empty")),
        Some(d) => Some((PathBuf::from(d), rotation)),
    };
    Ok(LoggingConfig { dir })
}
