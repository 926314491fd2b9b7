//! Configuration loading: examples load, and every kind of mistake names its field path.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::deps::{MapEnvironment, NoCredentialStore};

fn env() -> MapEnvironment {
    MapEnvironment::default()
        .with_var("ANTHROPIC_API_KEY", "sk-example")
        .with_var("CORP_PROXY_TOKEN", "corp-token")
        .with_var("DEEPSEEK_API_KEY", "sk-deepseek-example")
        .with_var(
            "GATEHOUSE_CLIENT_KEY",
            "local-client-key-0123456789abcdef0123",
        )
        .with_file("/run/secrets/anthropic_api_key", "sk-from-file\n")
        .with_file(
            "/run/secrets/gatehouse_ci_key",
            "ci-client-key-0123456789abcdef012345",
        )
}

fn load(yaml: &str) -> Result<Config, ConfigError> {
    let env = env();
    Config::from_yaml(
        yaml,
        &LoadContext {
            env: &env,
            credentials: &NoCredentialStore,
            default_data_dir: "/data".into(),
        },
    )
}

fn load_with_env(yaml: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let env = vars.iter().fold(env(), |e, (k, v)| e.with_var(k, v));
    Config::from_yaml(
        yaml,
        &LoadContext {
            env: &env,
            credentials: &NoCredentialStore,
            default_data_dir: "/data".into(),
        },
    )
}

fn err(yaml: &str) -> String {
    load(yaml).unwrap_err().to_string()
}

const UP: &str = "upstreams: [{name: a, provider: anthropic, auth: {api_key: sk-test}}]\n";

#[test]
fn every_example_config_loads() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            load(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            n += 1;
        }
    }
    assert!(n >= 2);
}

#[test]
fn example_values_are_applied() {
    let text = include_str!("../../../../examples/gateway.yaml");
    let c = load(text).unwrap();
    assert_eq!(c.listen.port, 8080);
    assert_eq!(c.upstreams.len(), 2);
    assert!(
        matches!(&c.upstreams[0].credential, Some(k) if k.scheme == CredentialScheme::ApiKey
            && k.current().is_some_and(|v| v.expose() == "sk-from-file"))
    );
    assert_eq!(
        c.upstreams[0].base_url.as_str(),
        "https://api.anthropic.com/"
    );
    assert_eq!(
        c.upstreams[1].base_url.as_str(),
        "https://llm-proxy.corp.example/"
    );
    assert_eq!(
        c.models.rows[0].upstream_model["corp-proxy"],
        "sonnet-4-6-corp"
    );
    assert_eq!(c.pricing.overrides[0].price.input, 3_000);
    assert_eq!(c.pricing.overrides[0].price.cache_write_1h, 6_000);
    assert_eq!(c.client_keys[0].id, "ci");
    assert!(matches!(&c.store, StoreConfig::Sqlite { path } if path.ends_with("gatehouse.db")));
    let limits = &c.inference_limits;
    assert_eq!(limits.client_key_concurrency, Some(20));
    assert_eq!(limits.rules[0].matcher.client_keys, ["ci"]);
    assert_eq!((limits.rules[0].rpm, limits.rules[0].burst), (Some(60), 10));
    assert_eq!(limits.rules[0].tpm, Some(400_000), "a string of the number");
    assert!(limits.rules[1].matcher.is_catch_all());
    assert_eq!(limits.rules[1].daily_tokens, Some(5_000_000));
    assert_eq!(c.metrics_listen.map(|a| a.port()), Some(9464));
    assert!(c.idempotency.is_some());
}

#[test]
fn defaults_follow_the_reference() {
    let c = load("listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, auth: {api_key: sk-test}}]").unwrap();
    assert_eq!(c.listen.port, 8080);
    assert_eq!(c.limits.max_request_bytes, 33_554_432);
    assert_eq!(c.limits.max_header_bytes, 65_536);
    assert_eq!(c.limits.max_url_length, 8192);
    assert_eq!(c.timeouts.upstream_ttfb.as_millis(), 120_000);
    assert!(
        matches!(&c.store, StoreConfig::Sqlite { path } if path == std::path::Path::new("/data/gatehouse.db"))
    );
    assert!(c.models.auto_include_builtin);
}

#[test]
fn a_missing_key_is_named_by_its_own_path() {
    let e = load(
        "listen: {host: 127.0.0.1}\nupstreams: [{provider: anthropic, auth: {api_key: sk-test}}]\nclient_keys: [{id: a}]",
    )
    .unwrap_err();
    assert_eq!(e.path, "client_keys[0].key", "{e}");
}

#[test]
fn the_reference_drain_variable_applies_unless_the_key_is_set() {
    let base =
        "listen: {host: 127.0.0.1}\nupstreams: [{provider: anthropic, auth: {api_key: sk-test}}]";
    let drain = [("CLAUDE_GATEWAY_DRAIN_TIMEOUT_MS", "2500")];
    let c = load_with_env(base, &drain).unwrap();
    assert_eq!(c.timeouts.shutdown_drain.as_millis(), 2500);
    let keyed = format!("{base}\ntimeouts: {{shutdown_drain_ms: 700}}");
    let c = load_with_env(&keyed, &drain).unwrap();
    assert_eq!(c.timeouts.shutdown_drain.as_millis(), 700);
    let e = load_with_env(base, &[("CLAUDE_GATEWAY_DRAIN_TIMEOUT_MS", "soon")]).unwrap_err();
    assert_eq!(e.path, "CLAUDE_GATEWAY_DRAIN_TIMEOUT_MS");
}

#[test]
fn listener_limits_have_defaults_and_bounds() {
    use std::time::Duration;
    let c = load(&format!("listen: {{host: 127.0.0.1}}\n{UP}")).unwrap();
    assert_eq!(c.listen.max_connections, 4096);
    assert_eq!(c.timeouts.header_read, Duration::from_secs(10));
    assert_eq!(c.timeouts.request_body_idle, Duration::from_secs(30));
    assert_eq!(c.timeouts.keep_alive_idle, Duration::from_secs(75));
    assert_eq!(c.timeouts.tls_handshake, Duration::from_secs(10));
    let c = load(&format!(
        "listen: {{host: 127.0.0.1, max_connections: 8}}\ntimeouts: {{header_read_ms: 1000, \
         request_body_idle_ms: 2000, keep_alive_idle_ms: 3000, tls_handshake_ms: 4000}}\n{UP}"
    ))
    .unwrap();
    assert_eq!(c.listen.max_connections, 8);
    assert_eq!(c.timeouts.header_read, Duration::from_secs(1));
    assert_eq!(c.timeouts.request_body_idle, Duration::from_secs(2));
    assert_eq!(c.timeouts.keep_alive_idle, Duration::from_secs(3));
    assert_eq!(c.timeouts.tls_handshake, Duration::from_secs(4));
    for (block, expected) in [
        (
            "listen: {host: 127.0.0.1, max_connections: 0}",
            "listen.max_connections: must be greater than 0",
        ),
        (
            "listen: {host: 127.0.0.1, max_connections: 2000000}",
            "listen.max_connections: must be at most 1000000",
        ),
        (
            "timeouts: {header_read_ms: 0}",
            "timeouts.header_read_ms: must be greater than 0",
        ),
        (
            "timeouts: {header_read_ms: 3600000}",
            "timeouts.header_read_ms: must be at most 300000",
        ),
        (
            "timeouts: {request_body_idle_ms: 0}",
            "timeouts.request_body_idle_ms: must be greater than 0",
        ),
        (
            "timeouts: {request_body_idle_ms: 600001}",
            "timeouts.request_body_idle_ms: must be at most 600000",
        ),
        (
            "timeouts: {keep_alive_idle_ms: 0}",
            "timeouts.keep_alive_idle_ms: must be greater than 0",
        ),
        (
            "timeouts: {keep_alive_idle_ms: 86400000}",
            "timeouts.keep_alive_idle_ms: must be at most 3600000",
        ),
        (
            "timeouts: {tls_handshake_ms: 0}",
            "timeouts.tls_handshake_ms: must be greater than 0",
        ),
        (
            "timeouts: {tls_handshake_ms: 300001}",
            "timeouts.tls_handshake_ms: must be at most 300000",
        ),
    ] {
        let listen = if block.starts_with("listen") {
            ""
        } else {
            "listen: {host: 127.0.0.1}\n"
        };
        let got = err(&format!("{listen}{block}\n{UP}"));
        assert!(got.contains(expected), "{block}: {got}");
    }
}

#[test]
fn errors_name_the_field_path() {
    let cases: &[(&str, &str)] = &[
        (
            "listen: {host: 127.0.0.1, prot: 1}\n",
            "listen.prot: unknown field `prot`",
        ),
        (
            "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, bse_url: x}]",
            "upstreams[0].bse_url: unknown field `bse_url`",
        ),
        (
            "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: azure}]",
            "upstreams[0].provider: unknown variant `azure`",
        ),
        (
            "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, auth: {api_key: sk-test}}, {name: a, provider: anthropic, auth: {api_key: sk-test}}]",
            "upstreams[1].name: duplicate upstream name `a`",
        ),
        (
            "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, base_url: 'ftp://x'}]",
            "upstreams[0].base_url: URL scheme must be http or https",
        ),
        (
            "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, base_url: 'not a url'}]",
            "upstreams[0].base_url: invalid URL",
        ),
        (
            "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, base_url: 'https://u:p@h'}]",
            "upstreams[0].base_url: URL must not carry credentials",
        ),
        (
            "listen: {host: 127.0.0.1}\naccess_control: {allow_cidrs: [10.0.0.0/33]}\n",
            "access_control.allow_cidrs[0]: invalid IP address syntax",
        ),
        (
            "listen: {host: 0.0.0.0}\n",
            "listen.public_url: required when listen.host (0.0.0.0) is not localhost, 127.0.0.1 or ::1",
        ),
        (
            "listen: {host: 10.0.0.1, public_url: 'ftp://gw/x'}\n",
            "listen.public_url: URL scheme must be http or https",
        ),
        (
            "listen: {host: 127.0.0.1}\n",
            "upstreams: at least one upstream is required",
        ),
        (
            "listen: {host: 127.0.0.1}\nclient_keys: [{id: a, key: short}]\n",
            "client_keys[0].key: must be at least 32",
        ),
        (
            "listen: {host: 127.0.0.1}\npricing: {multiplier: 10.5}\n",
            "pricing.multiplier: Number must be less than or equal to 10",
        ),
        (
            "listen: {host: 127.0.0.1}\npricing: {overrides: [{model: m, input: -1, output: 1, cache_write: 1}]}\n",
            "pricing.overrides[0].input",
        ),
        (
            "listen: {host: 127.0.0.1}\npricing: {overrides: [{upstream: nope, model: m, input: 1, output: 1, cache_write: 1}]}\n",
            "pricing.overrides[0].upstream: no upstream is named `nope`",
        ),
        (
            "listen: {host: 127.0.0.1}\npricing: {default: {input: 1, output: .nan}}\n",
            "pricing.default.output",
        ),
        (
            "listen: {host: 127.0.0.1}\nmodels: [{id: m, upstream_model: {nope: x}}]\n",
            "models[0].upstream_model.nope: no upstream is named `nope`",
        ),
        (
            "listen: {host: 127.0.0.1}\nmodels: [{id: m}]\n",
            "models[0].upstream_model: required",
        ),
        (
            "listen: {host: 127.0.0.1}\nlimits: {max_request_bytes: 0}\n",
            "limits.max_request_bytes: must be greater than 0",
        ),
        (
            "listen: {host: 127.0.0.1}\nlimits: {max_request_bytes: -4}\n",
            "limits.max_request_bytes: invalid value",
        ),
        (
            "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, auth: {api_key: '${MISSING}'}}]",
            "upstreams[0].auth.api_key: environment variable MISSING is not set",
        ),
        (
            "listen: {host: 127.0.0.1}\nlogging: {dir: /x, rotation: weekly}\n",
            "logging.rotation: `weekly` is not one of daily, hourly, never",
        ),
        (
            "listen: {host: 127.0.0.1}\nunknown_block: {}\n",
            "unknown field `unknown_block`",
        ),
        (
            "listen: {host: 127.0.0.1}\nlisten: {host: 127.0.0.1}\n",
            "duplicate",
        ),
        ("listen: [1, 2\n", "invalid YAML at line"),
    ];
    let mut failures = Vec::new();
    let cases: Vec<(&str, &str)> = cases
        .iter()
        .copied()
        .chain([(
            "listen: {host: 127.0.0.1, tls: {cert: 'not pem', key: 'nope'}}\n",
            "listen.tls.cert: cannot read the PEM file",
        )])
        .collect();
    for (yaml, expected) in cases {
        let yaml = if yaml.contains("upstreams") || expected.starts_with("upstreams:") {
            yaml.to_string()
        } else {
            format!("{yaml}{UP}")
        };
        let got = err(&yaml);
        if !got.contains(expected) {
            failures.push(format!(
                "for {yaml:?}\n  expected: {expected}\n  got:      {got}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn sign_in_blocks_are_validated() {
    let base = "listen: {host: 127.0.0.1, public_url: 'https://gw.example'}\nupstreams: [{name: a, provider: anthropic, auth: {api_key: sk-test}}]\n";
    let oidc = "oidc: {issuer: 'https://idp.example', client_id: c, client_secret: s}\n";
    let session = "session: {jwt_secret: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'}\n";
    let ok = load(&format!("{base}{oidc}{session}")).unwrap();
    let id = ok.identity.unwrap();
    assert_eq!(id.session_ttl.as_secs(), 3600);
    assert_eq!(id.device_authorization_limit.limit, 30);
    assert_eq!(id.device_verify_limit.window.as_secs(), 600);
    assert_eq!(
        id.oidc.scopes,
        vec!["openid", "profile", "email", "offline_access"]
    );
    // The reference's top-level `login_notice`, cleaned as it cleans it.
    let noticed = load(&format!(
        "{base}{oidc}{session}login_notice: \"  Use\\tyour \\e[1mcorp\\e[0m account.\\n\"\n"
    ))
    .unwrap();
    assert_eq!(
        noticed.identity.unwrap().oidc.login_notice.as_deref(),
        Some("Use your corp account.")
    );
    let cases = [
        (
            format!(
                "{base}oidc: {{issuer: 'https://idp.example', client_id: c, client_secret: s, login_notice: a}}\n{session}login_notice: b\n"
            ),
            "login_notice: is also set as oidc.login_notice",
        ),
        (
            format!("{base}{oidc}{session}login_notice: \"\\e[0m \\t\"\n"),
            "login_notice: must not be empty",
        ),
        (
            format!("{base}{oidc}"),
            "session: required when `oidc` is configured",
        ),
        (
            format!("{base}{session}"),
            "oidc: is required; it may be omitted only for a workload-only deployment",
        ),
        (
            format!("{base}{oidc}session: {{jwt_secret: short}}\n"),
            "session.jwt_secret: must be at least 32 characters",
        ),
        (
            format!(
                "{base}{oidc}session: {{jwt_secret: ['aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', short]}}\n"
            ),
            "session.jwt_secret[1]: must be at least 32",
        ),
        (
            format!(
                "listen: {{host: 127.0.0.2}}\nupstreams: [{{name: a, provider: anthropic, auth: {{api_key: sk-test}}}}]\n{oidc}{session}"
            ),
            "listen.public_url: required when listen.host (127.0.0.2) is not localhost",
        ),
        (
            format!("{base}oidc: {{issuer: 'https://idp.example', client_id: c}}\n{session}"),
            "oidc.client_secret: is required, or",
        ),
        (
            format!(
                "{base}oidc: {{issuer: 'https://idp.example', client_id: c, client_secret: s, extra_auth_params: {{state: x}}}}\n{session}"
            ),
            "oidc.extra_auth_params.state: is set by the gateway",
        ),
        (
            format!(
                "{base}oidc: {{issuer: 'https://idp.example', client_id: c, client_secret: s, scopes: [email]}}\n{session}"
            ),
            "oidc.scopes: must include `openid`",
        ),
        (
            format!(
                "{base}oidc: {{issuer: 'https://idp.example', client_id: c, client_secret: s, isuer: x}}\n{session}"
            ),
            "oidc.isuer: unknown field",
        ),
        (
            format!(
                "{base}{oidc}{session}rate_limits: {{device_verify: {{limit: 0, window_seconds: 5}}}}\n"
            ),
            "rate_limits.device_verify.max: must be greater than 0",
        ),
    ];
    for (yaml, want) in cases {
        let got = err(&yaml);
        assert!(got.contains(want), "expected {want}\ngot {got}");
    }
    // As the reference: no `public_url` on a loopback listener (the bound address is
    // used), sign-in rate limits without `oidc`, a workload-only file with `session`.
    let derived = load(&format!(
        "listen: {{host: '::1', port: 9000}}\nupstreams: [{{name: a, provider: anthropic, auth: {{api_key: sk-test}}}}]\n{oidc}{session}"
    ))
    .unwrap()
    .identity
    .unwrap();
    assert!(derived.public_url_derived);
    assert_eq!(derived.public_url.as_str(), "http://[::1]:9000/");
    load(&format!(
        "{base}rate_limits: {{device_verify: {{max: 1, window_seconds: 5}}}}\n"
    ))
    .unwrap();
    let cri = "cri: {enabled: true, audience: [gw], org_allowlist: [o]}\n";
    let workload_only = load(&format!("{base}{session}{cri}")).unwrap();
    assert!(workload_only.identity.is_none() && workload_only.workload.is_some());
}

#[test]
fn workload_block_is_validated() {
    let base = "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, auth: {api_key: sk-test}}]\nsession: {jwt_secret: 0123456789abcdef0123456789abcdef0123}\n";
    let c = load(&format!(
        "{base}cri: {{enabled: true, audience: ['https://gw'], org_allowlist: [ORG-1]}}\n"
    ))
    .unwrap();
    let w = c.workload.unwrap();
    assert_eq!(w.issuer, "https://api.anthropic.com/api/oauth/cri");
    assert_eq!(
        w.jwks_url.as_str(),
        "https://api.anthropic.com/api/oauth/cri/jwks.json"
    );
    assert_eq!(w.org_allowlist, vec!["org-1"]);
    // A workload-only deployment needs `session`, as in the reference; with CRI off and
    // a session, `oidc` is required.
    let no_session = base.replace(
        "session: {jwt_secret: 0123456789abcdef0123456789abcdef0123}\n",
        "",
    );
    assert!(
        err(&format!(
            "{no_session}cri: {{enabled: true, audience: [a], org_allowlist: [o]}}\n"
        ))
        .starts_with("session: required")
    );
    assert!(err(&format!("{base}cri: {{enabled: false}}\n")).starts_with("oidc: is required"));
    for (block, want) in [
        (
            "cri: {enabled: true, org_allowlist: [o]}",
            "cri.audience: must list at least one",
        ),
        (
            "cri: {enabled: true, audience: [a], org_allowlist: []}",
            "cri.org_allowlist: must list at least one organization",
        ),
        (
            "cri: {enabled: true, audience: [a], org_allowlist: [o], jwks_url: 'https://keys.example/jwks'}",
            "cri.jwks_url: may only point at a loopback address",
        ),
        (
            "cri: {enabled: true, audience: [a], org_allowlist: [o], jwks_url: 'http://127.0.0.1:9/jwks'}",
            "cri.jwks_url: may only point at a loopback address",
        ),
        (
            "cri: {enabled: true, audience: [a], org_allowlist: [o], issuer: 'https://iss.example/'}",
            "cri.issuer: must be a canonical URL",
        ),
        (
            "cri: {enabled: true, audience: [a], org_allowlist: [o], issuer: 'http://iss.example'}",
            "cri.issuer: must be https",
        ),
    ] {
        let got = err(&format!("{base}{block}\n"));
        assert!(got.contains(want), "expected {want}\ngot {got}");
    }
}

#[test]
fn managed_policies_are_validated() {
    let base = "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, auth: {api_key: sk-test}}]\n";
    let ok = load(&format!("{base}managed: {{policies: [{{match: {{groups: [eng]}}, cli: {{model: x}}}}, {{match: {{}}, cli: {{}}}}]}}\n")).unwrap();
    assert_eq!(ok.policies.len(), 2);
    // The reference's readings: `match` defaults to the catch-all, `@` and case are
    // dropped from a domain, `settings` is `cli`, `code` reaches Claude Desktop's Code tab.
    let ok = load(&format!(
        "{base}managed: {{policy_mode: layered, settings: /nowhere.json, policies: [{{match: {{email_domain: ' @Corp.Example '}}, settings: {{model: y}}, serve_to_desktop: true}}, {{}}]}}\n"
    ))
    .unwrap();
    let p = &ok.policies[0];
    assert_eq!(p.email_domain.as_deref(), Some("corp.example"));
    assert_eq!(p.cli["model"], "y");
    assert!(p.layered && !p.under_code && p.serve_to_desktop == Some(true));
    assert!(ok.policies[1].is_catch_all() && ok.policies[1].cli.is_empty());
    let ok = load(&format!("{base}managed: {{policies: [{{code: {{model: z}}}}, {{match: {{groups: [a]}}, desktop: {{}}}}]}}\n")).unwrap();
    assert!(ok.policies.iter().all(|p| p.under_code));
    assert_eq!(ok.policies[0].cli["model"], "z");
    // `managed.settings`: a missing file is empty settings, a relative path is read as is.
    let ok = load(&format!(
        "{base}managed: {{settings: relative/managed.json}}\n"
    ))
    .unwrap();
    assert!(ok.policies[0].is_catch_all() && ok.policies[0].cli.is_empty());
    for (block, want) in [
        (
            "managed: {policies: [{match: {}, cli: {mcpServers: {}}}]}",
            "managed.policies[0].cli.mcpServers: not a managed-settings key; use \"managedMcpServers\"",
        ),
        (
            "managed: {policies: [{match: {}, cli: {forceLoginMetod: gateway}}]}",
            "managed.policies[0].cli.forceLoginMetod: unknown settings key",
        ),
        (
            "managed: {policies: [{match: {}, cli: {env: [A]}}]}",
            "managed.policies[0].cli.env: Invalid input: expected object, received array",
        ),
        (
            "managed: {policies: [{match: {}, cli: {permissions: {deny: WebFetch}}}]}",
            "managed.policies[0].cli.permissions.deny: Invalid input: expected array, received string",
        ),
        (
            "managed: {policies: [{match: {}, desktop: {inferenceGatewayBaseUrl: x}}]}",
            "managed.policies[0].desktop.inferenceGatewayBaseUrl: set by the gateway from its own configuration",
        ),
        (
            "managed: {policies: [{match: {groups: []}, cli: {}}]}",
            "managed.policies[0].match.groups: must list non-empty group names",
        ),
        (
            "managed: {policies: [{match: {email_domain: 'a@corp.example'}, cli: {}}]}",
            "managed.policies[0].match.email_domain: must be one bare domain",
        ),
        (
            "managed: {policies: [{match: {email_domain: ' @ '}}]}",
            "managed.policies[0].match.email_domain: is blank after normalization",
        ),
        (
            "managed: {policies: [{code: {}}, {match: {groups: [a]}, settings: {}}]}",
            "managed.policies[1].settings: this file has a `code` block",
        ),
        (
            "managed: {policies: [{code: {}, cli: {}}]}",
            "managed.policies[0].cli: this policy has a `code` block and a `cli` block",
        ),
        (
            "managed: {policy_mode: stacked, policies: []}",
            "managed.policy_mode: unknown variant `stacked`",
        ),
        (
            "managed: {policy_mode: layered, policies: [{match: {groups: [a]}, cli: {disableAllHooks: true}}]}",
            "managed.policies[0].cli.disableAllHooks: can't be used in this policy with policy_mode: layered",
        ),
        (
            "managed: {policies: [{settings: {deniedModels: opus}}]}",
            "managed.policies[0].settings.deniedModels: Invalid input: expected array, received string",
        ),
        (
            "managed: {policies: [{cli: {availableModelsMatch: fuzzy}}]}",
            "managed.policies[0].cli.availableModelsMatch: Invalid option",
        ),
        (
            "managed: {policies: [{match: {team: x}, cli: {}}]}",
            "managed.policies[0].match.team: unknown field",
        ),
        (
            "managed: {settings: /run/secrets/anthropic_api_key}",
            "managed.settings: /run/secrets/anthropic_api_key is not valid JSON",
        ),
    ] {
        let got = err(&format!("{base}{block}\n"));
        assert!(got.contains(want), "expected {want}\ngot {got}");
    }
}

#[test]
fn postgres_store_is_validated() {
    let base = format!("listen: {{host: 127.0.0.1}}\n{UP}");
    let c = load(&format!(
        "{base}store: {{postgres_url: 'postgres://gh@db.internal:6543/gatehouse', password: '${{PGPW}}', max_connections: 12, connect_timeout_ms: 1500}}\n"
    ));
    // `${PGPW}` is not defined in this environment: the error names the field, not a value.
    assert!(c.unwrap_err().to_string().contains("store.password"));
    let env = env().with_var("PGPW", "pg-secret-password-value");
    let c = Config::from_yaml(
        &format!(
            "{base}store: {{postgres_url: 'postgres://gh@db.internal:6543/gatehouse', password: '${{PGPW}}', max_connections: 12, connect_timeout_ms: 1500}}\n"
        ),
        &LoadContext {
            env: &env,
            credentials: &NoCredentialStore,
            default_data_dir: "/data".into(),
        },
    )
    .unwrap();
    let StoreConfig::Postgres(pg) = &c.store else {
        panic!("expected the PostgreSQL store: {:?}", c.store);
    };
    assert_eq!(pg.max_connections, 12);
    assert_eq!(pg.connect_timeout, Duration::from_millis(1500));
    assert_eq!(
        pg.password.as_ref().map(Secret::expose),
        Some("pg-secret-password-value")
    );
    assert!(!format!("{c:?}").contains("pg-secret-password-value"));
    let c = load(&format!(
        "{base}store: {{postgres_url: 'postgres://gh@h/db'}}\n"
    ))
    .unwrap();
    let StoreConfig::Postgres(pg) = &c.store else {
        panic!("expected the PostgreSQL store");
    };
    assert_eq!(
        (pg.max_connections, pg.connect_timeout),
        (5, Duration::from_secs(5))
    );

    for (block, want) in [
        (
            "store: {postgres_url: 'postgres://u:hunter2-pw@h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem'}",
            "store.postgres_url: TLS: sslrootcert: cannot read PEM certificates from /nonexistent/ca.pem",
        ),
        (
            "store: {postgres_url: 'postgres://u:hunter2-pw@h:port/db'}",
            "store.postgres_url: not a valid PostgreSQL URL",
        ),
        (
            "store: {postgres_url: 'postgres://u@h/db', sqlite_path: /x.db}",
            "store.sqlite_path: not with store.postgres_url",
        ),
        (
            "store: {postgres_url: 'postgres://u@h/db', max_connections: 0}",
            "store.max_connections: must be greater than 0",
        ),
        (
            "store: {postgres_url: 'postgres://u@h/db', connect_timeout_ms: 0}",
            "store.connect_timeout_ms: must be greater than 0",
        ),
        (
            "store: {max_connections: 5}",
            "store.max_connections: only applies with store.postgres_url",
        ),
        (
            "store: {password: hunter2-pw}",
            "store.password: only applies with store.postgres_url",
        ),
    ] {
        let got = err(&format!("{base}{block}\n"));
        assert!(got.starts_with(want), "expected {want}\ngot {got}");
        assert!(!got.contains("hunter2"), "{got}");
    }
    // No user anywhere: PostgreSQL's clients log in as PGUSER, else USER (as the
    // reference's); with neither the file is still valid, and connecting says why not.
    let user = |env: &[(&str, &str)]| {
        let c = load_with_env(
            &format!("{base}store: {{postgres_url: 'postgres://h/db', max_connections: 2000}}\n"),
            env,
        )
        .unwrap();
        let StoreConfig::Postgres(pg) = c.store else {
            panic!("postgres")
        };
        assert_eq!(pg.max_connections, 2000);
        pg.username
    };
    assert_eq!(user(&[("USER", "alice")]).as_deref(), Some("alice"));
    assert_eq!(
        user(&[("USER", "alice"), ("PGUSER", "gh")]).as_deref(),
        Some("gh")
    );
    assert_eq!(user(&[]), None);
}

#[test]
fn forward_user_identity_goes_only_to_an_operators_proxy() {
    let at = |u: &str| load(&format!("listen: {{host: 127.0.0.1}}\nupstreams: [{u}]"));
    for host in [
        "https://api.anthropic.com",
        "https://API.Anthropic.com.",
        "https://anthropic.com/v1",
        "https://aws-external-anthropic.us-east-1.api.aws",
        "https://claude.googleapis.com",
    ] {
        let e = at(&format!(
            "{{name: p, provider: anthropic, base_url: '{host}', forward_user_identity: true}}"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("upstreams[0].forward_user_identity: refused toward")
                && e.contains("Anthropic-run host"),
            "{host}: {e}"
        );
    }
    // Left out, the base URL is Anthropic's own.
    let e = at("{name: p, provider: anthropic, forward_user_identity: true}").unwrap_err();
    assert!(e.to_string().contains("Anthropic-run host"), "{e}");
    let e = at("{name: f, provider: foundry, resource: corp, forward_user_identity: true, auth: {api_key: k}}")
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "upstreams[0].forward_user_identity: only anthropic upstreams take it"
    );
    // A look-alike name is the operator's own host; `false` changes nothing.
    let c = at("{name: p, provider: anthropic, base_url: 'https://anthropic.com.proxy.corp.example', forward_user_identity: true, auth: {api_key: k}}")
        .unwrap();
    assert!(c.upstreams[0].forward_user_identity);
    assert!(c.warnings.iter().any(|w| {
        w.path == "upstreams[0].forward_user_identity"
            && w.message
                .contains("https://anthropic.com.proxy.corp.example")
    }));
    let c = at("{name: p, provider: anthropic, forward_user_identity: false, auth: {api_key: k}}")
        .unwrap();
    assert!(!c.upstreams[0].forward_user_identity);
}

#[test]
fn only_the_platform_providers_take_a_workspace_id() {
    let at = |u: &str| err(&format!("listen: {{host: 127.0.0.1}}\nupstreams: [{u}]"));
    assert_eq!(
        at("{name: a, provider: anthropic, workspace_id: ws1}"),
        "upstreams[0].workspace_id: only anthropicAws and anthropicGoogleCloud upstreams take it"
    );
}

#[test]
fn foundry_with_entra_id_keeps_no_credential_and_takes_no_key_beside_it() {
    let c = load(
        "listen: {host: 127.0.0.1}\nupstreams:\n  - {name: f, provider: foundry, resource: corp, auth: {use_azure_ad: true}}\n",
    )
    .unwrap();
    let Provider::Foundry(f) = &c.upstreams[0].provider else {
        panic!("foundry")
    };
    assert!(f.use_azure_ad);
    assert!(c.upstreams[0].credential.is_none());
    assert_eq!(
        c.upstreams[0].base_url.as_str(),
        "https://corp.services.ai.azure.com/anthropic/"
    );
    for up in [
        "{name: f, provider: foundry, resource: corp, auth: {api_key: k, use_azure_ad: true}}",
        "{name: f, provider: foundry, resource: corp, auth: {api_keys: [{id: a, key: k}], use_azure_ad: true}}",
    ] {
        let e = load(&format!(
            "listen: {{host: 127.0.0.1}}\nupstreams:\n  - {up}\n"
        ))
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.contains("upstreams[0].auth: set exactly one of api_key or use_azure_ad"),
            "{e}"
        );
    }
}

#[test]
fn anthropic_google_cloud_and_federation_are_validated() {
    let ok = |u: &str| load(&format!("listen: {{host: 127.0.0.1}}\nupstreams: [{u}]")).unwrap();
    let c = ok(
        "{name: g, provider: anthropicGoogleCloud, project_id: p-1, workspace_id: ws_1, auth: {access_token: t}}",
    );
    let Provider::AnthropicGoogleCloud(g) = &c.upstreams[0].provider else {
        panic!("not anthropicGoogleCloud")
    };
    assert_eq!(
        (g.project_id.as_str(), g.location.as_str()),
        ("p-1", "global")
    );
    assert!(matches!(g.auth, crate::config::GoogleAuth::AccessToken(_)));
    assert_eq!(
        c.upstreams[0].base_url.as_str(),
        "https://claude.googleapis.com/v1/projects/p-1/locations/global/workspaces/ws_1/invoke/"
    );
    assert!(c.upstreams[0].credential.is_none());
    let c = ok(
        "{name: a, provider: anthropic, auth: {federation_rule_id: fdrl_1, organization_id: org-1, identity_token_file: /run/token, workspace_id: wrk_1}}",
    );
    let cred = c.upstreams[0].credential.as_ref().unwrap();
    let CredentialSource::Federation(f) = &cred.source else {
        panic!("not federation")
    };
    assert_eq!(f.identity_token_file, std::path::Path::new("/run/token"));
    assert_eq!(
        (f.workspace_id.as_deref(), f.service_account_id.as_deref()),
        (Some("wrk_1"), None)
    );
    assert!(
        c.upstreams[0].missing_credential().is_none(),
        "a missing token file is a runtime error, as in the reference"
    );
    let at = |u: &str| err(&format!("listen: {{host: 127.0.0.1}}\nupstreams: [{u}]"));
    for (up, want) in [
        (
            "{name: g, provider: anthropicGoogleCloud, project_id: 'bad project'}",
            "upstreams[0].project_id: must be a GCP project id",
        ),
        (
            "{name: g, provider: anthropicGoogleCloud, project_id: p, workspace_id: w, location: 'us east'}",
            "upstreams[0].location: must be a GCP location",
        ),
        (
            "{name: g, provider: anthropicGoogleCloud, project_id: p, workspace_id: w, region: us}",
            "upstreams[0].region: not a key of this provider",
        ),
        (
            "{name: a, provider: anthropic, auth: {federation_rule_id: r, organization_id: o}}",
            "upstreams[0].auth.identity_token_file: required for workload-identity federation",
        ),
        (
            "{name: a, provider: anthropic, auth: {federation_rule_id: r, organization_id: o, identity_token_file: f, api_key: k}}",
            "upstreams[0].auth.api_key: not together with workload-identity federation",
        ),
        (
            "{name: v, provider: vertex, region: global, project_id: p, auth: {federation_rule_id: r}}",
            "upstreams[0].auth.federation_rule_id: only anthropic upstreams take it",
        ),
    ] {
        let e = at(up);
        assert!(e.starts_with(want), "{up}: {e}");
    }
    // Both missing ids are named at once.
    let e = at("{name: g, provider: anthropicGoogleCloud}");
    assert!(
        e.contains("upstreams[0].project_id") && e.contains("upstreams[0].workspace_id"),
        "{e}"
    );
}

#[test]
fn mantle_and_anthropic_aws_take_the_references_keys() {
    let c = load(
        "listen: {host: 127.0.0.1}\nupstreams:\n  - {name: m, provider: mantle, region: us-east-1, models: [claude-opus-4-8], assume_role: {role_arn: 'arn:aws:iam::123456789012:role/r', session_name: email}}\n  - {name: mb, provider: mantle, region: eu-west-1, models: [claude-opus-4-8], auth: {aws_bearer_token: bt}}\n  - {name: o, provider: anthropicAws, region: us-east-1, workspace_id: wrkspc_1, auth: {api_key: k}}\n  - {name: os, provider: anthropicAws, region: us-west-2, workspace_id: wrkspc_2, auth: {aws_access_key_id: AKID, aws_secret_access_key: s, aws_session_token: t}}\n  - {name: oc, provider: anthropicAws, region: us-west-2, workspace_id: wrkspc_3}\n",
    )
    .unwrap();
    let u = &c.upstreams;
    assert_eq!(
        u[0].base_url.as_str(),
        "https://bedrock-mantle.us-east-1.api.aws/anthropic/"
    );
    let Provider::Mantle(m) = &u[0].provider else {
        panic!("not mantle")
    };
    assert!(matches!(m.auth, AwsAuth::DefaultChain));
    assert_eq!(
        m.assume_role.as_ref().unwrap().session_name,
        Some(SessionName::Email)
    );
    let Provider::Mantle(mb) = &u[1].provider else {
        panic!("not mantle")
    };
    assert!(matches!(&mb.auth, AwsAuth::Bearer(b) if b.expose() == "bt"));
    assert_eq!(
        u[2].base_url.as_str(),
        "https://aws-external-anthropic.us-east-1.api.aws/"
    );
    let Provider::AnthropicAws(o) = &u[2].provider else {
        panic!("not anthropicAws")
    };
    assert_eq!(
        (o.workspace_id.as_str(), o.sigv4.is_none()),
        ("wrkspc_1", true)
    );
    let cred = u[2].credential.as_ref().unwrap();
    assert_eq!(cred.scheme, CredentialScheme::Bearer);
    let Provider::AnthropicAws(os) = &u[3].provider else {
        panic!("not anthropicAws")
    };
    assert!(matches!(os.sigv4, Some(AwsAuth::Keys { .. })) && u[3].credential.is_none());
    let Provider::AnthropicAws(oc) = &u[4].provider else {
        panic!("not anthropicAws")
    };
    assert!(matches!(oc.sigv4, Some(AwsAuth::DefaultChain)));

    let at = |u: &str| err(&format!("listen: {{host: 127.0.0.1}}\nupstreams: [{u}]"));
    for (up, want) in [
        (
            "{provider: anthropicAws, region: us-east-1}",
            "upstreams[0].workspace_id: required for provider anthropicAws (the workspace on AWS)",
        ),
        (
            "{provider: anthropicAws, region: us-east-1, workspace_id: 'a b'}",
            "upstreams[0].workspace_id: printable ASCII without spaces",
        ),
        (
            "{provider: anthropicAws, region: us-east-1, workspace_id: w, auth: {aws_session_token: t}}",
            "upstreams[0].auth: aws_access_key_id and aws_secret_access_key go together (a session token needs both)",
        ),
        (
            "{provider: anthropicAws, region: us-east-1, workspace_id: w, auth: {api_key: k, aws_access_key_id: a, aws_secret_access_key: s}}",
            "upstreams[0].auth.api_key: not together with AWS access keys",
        ),
        (
            "{provider: anthropicAws, region: us-east-1, workspace_id: w, auth: {aws_bearer_token: b}}",
            "upstreams[0].auth.aws_bearer_token: not a key of this provider",
        ),
        (
            "{provider: mantle, region: US-EAST-1, models: [claude-opus-4-8]}",
            "upstreams[0].region: lower-case letters, digits and `-` only (an AWS region such as us-east-1)",
        ),
        (
            "{provider: mantle, models: [claude-opus-4-8]}",
            "upstreams[0].region: required for this provider",
        ),
        (
            "{provider: mantle, region: us-east-1, models: [claude-opus-4-8], guardrail: {id: g, version: '1'}}",
            "upstreams[0].guardrail: only bedrock upstreams take it",
        ),
        (
            "{provider: mantle, region: us-east-1, models: [claude-opus-4-8], auth: {aws_bearer_token: b}, assume_role: {role_arn: 'arn:aws:iam::123456789012:role/r'}}",
            "upstreams[0].auth.aws_bearer_token: not with assume_role",
        ),
        (
            "{provider: bedrock, region: us-east-1, guardrail: {id: g, version: '1'}}, {provider: mantle, region: us-east-1, models: [claude-opus-4-8]}",
            "upstreams[1].provider: a mantle upstream cannot stand beside a bedrock upstream with a guardrail (Mantle applies no guardrail)",
        ),
    ] {
        assert_eq!(at(up), want, "{up}");
    }
}

#[test]
fn openai_upstreams_need_a_base_url_and_take_a_bearer_key() {
    let c = load(
        "listen: {host: 127.0.0.1}\nupstreams:\n  - {name: ds, provider: openai, base_url: 'https://api.deepseek.com/v1', auth: {api_key: sk-ds}, max_tokens_field: max_completion_tokens, max_output_tokens: 8192}\n  - {name: local, provider: openai, base_url: 'http://localhost:11434/v1'}\n",
    )
    .unwrap();
    let Provider::OpenAi(o) = &c.upstreams[0].provider else {
        panic!("not openai")
    };
    assert_eq!(o.token_field, Some(TokenField::MaxCompletionTokens));
    assert_eq!(o.max_output_tokens, Some(8192));
    assert_eq!(
        c.upstreams[0].base_url.as_str(),
        "https://api.deepseek.com/v1/"
    );
    let cred = c.upstreams[0].credential.as_ref().unwrap();
    assert_eq!(cred.scheme, CredentialScheme::Bearer);
    assert_eq!(cred.current().unwrap().expose(), "sk-ds");
    assert!(
        c.upstreams[1].credential.is_none(),
        "local servers take no key"
    );
    for (u, want) in [
        (
            "{name: o, provider: openai}",
            "upstreams[0].base_url: required for openai upstreams",
        ),
        (
            "{name: o, provider: openai, base_url: 'https://x.example/v1', auth: {auth_token: t}}",
            "upstreams[0].auth.auth_token: not a key of this provider",
        ),
        (
            "{name: o, provider: openai, base_url: 'https://x.example/v1', region: us-east-1}",
            "upstreams[0].region: not a key of this provider",
        ),
        (
            "{name: o, provider: openai, base_url: 'https://x.example/v1', max_tokens_field: tokens}",
            "upstreams[0].max_tokens_field: must be `max_tokens` or `max_completion_tokens`",
        ),
        (
            "{name: o, provider: openai, base_url: 'https://x.example/v1', max_output_tokens: 0}",
            "upstreams[0].max_output_tokens: must be at least 1",
        ),
        (
            "{name: a, provider: anthropic, max_tokens_field: max_tokens}",
            "upstreams[0].max_tokens_field: only openai upstreams take it",
        ),
        (
            "{name: a, provider: anthropic, max_output_tokens: 10}",
            "upstreams[0].max_output_tokens: only openai upstreams take it",
        ),
    ] {
        let got = err(&format!("listen: {{host: 127.0.0.1}}\nupstreams: [{u}]\n"));
        assert!(got.starts_with(want), "expected {want}\ngot {got}");
    }
}

#[test]
fn cloud_upstreams_take_their_own_keys() {
    let c = load(
        "listen: {host: 127.0.0.1}\nupstreams:\n  - {name: b, provider: bedrock, region: eu-west-1}\n  - {name: v, provider: vertex, region: global, project_id: p1, auth: {access_token: tok}}\n  - {name: f, provider: foundry, resource: corp-ai, auth: {api_key: k}}\n",
    )
    .unwrap();
    assert_eq!(
        c.upstreams[0].base_url.as_str(),
        "https://bedrock-runtime.eu-west-1.amazonaws.com/"
    );
    assert!(
        matches!(&c.upstreams[0].provider, Provider::Bedrock(b) if matches!(b.auth, AwsAuth::DefaultChain))
    );
    assert_eq!(
        c.upstreams[1].base_url.as_str(),
        "https://aiplatform.googleapis.com/v1/"
    );
    assert_eq!(
        c.upstreams[2].base_url.as_str(),
        "https://corp-ai.services.ai.azure.com/anthropic/"
    );
    assert_eq!(
        c.upstreams[2].credential.as_ref().unwrap().scheme,
        CredentialScheme::ApiKey
    );
    for (u, want) in [
        (
            "{name: b, provider: bedrock}",
            "upstreams[0].region: required for this provider",
        ),
        (
            "{name: b, provider: bedrock, region: us-east-1, auth: {aws_access_key_id: a}}",
            "upstreams[0].auth: aws_access_key_id and aws_secret_access_key go together",
        ),
        (
            "{name: b, provider: bedrock, region: us-east-1, auth: {api_key: k}}",
            "upstreams[0].auth.api_key: not a key of this provider",
        ),
        (
            "{name: b, provider: bedrock, region: us-east-1, auth: {api_keys: [k]}}",
            "upstreams[0].auth.api_keys: not a key of this provider",
        ),
        (
            "{name: a, provider: anthropic, auth: {api_key: k, api_keys: [k2]}}",
            "upstreams[0].auth: set one of api_key, api_keys",
        ),
        (
            "{name: a, provider: anthropic, auth: {api_keys: []}}",
            "upstreams[0].auth.api_keys: must list 1 to 64 keys",
        ),
        (
            "{name: a, provider: anthropic, auth: {api_keys: [{id: a b, key: k}]}}",
            "upstreams[0].auth.api_keys[0].id: must be 1 to 64",
        ),
        (
            "{name: a, provider: anthropic, auth: {api_keys: [{id: x, key: k}, {id: x, key: j}]}}",
            "upstreams[0].auth.api_keys[1].id: duplicate key id `x`",
        ),
        (
            "{name: o, provider: openai, base_url: \"https://llm.example/v1\", auth: {api_key: k, api_keys: [j]}}",
            "upstreams[0].auth: set one of api_key or api_keys",
        ),
        (
            "{name: a, provider: anthropic, model_map: {gpt: x}}",
            "upstreams[0].model_map.gpt: not a Claude family",
        ),
        (
            "{name: a, provider: anthropic, model_map: {sonnet: deep seek}}",
            "upstreams[0].model_map.sonnet: must be a model id",
        ),
        (
            "{name: v, provider: vertex, region: us-east5}",
            "upstreams[0].project_id: required for this provider",
        ),
        (
            "{name: f, provider: foundry, auth: {api_key: k}}",
            "upstreams[0].resource: required",
        ),
        (
            "{name: f, provider: foundry, resource: -x, auth: {api_key: k}}",
            "upstreams[0].resource: required",
        ),
        (
            "{name: f, provider: foundry, resource: corp}",
            "upstreams[0].auth: set exactly one of api_key or use_azure_ad",
        ),
        (
            "{name: a, provider: anthropic, region: us-east-1}",
            "upstreams[0].region: not a key of this provider",
        ),
        (
            "{name: a, provider: anthropic, headers: {Authorization: x}}",
            "upstreams[0].headers.Authorization: set by the gateway or the provider",
        ),
        (
            "{name: a, provider: anthropic, headers: {x-amz-date: x}}",
            "upstreams[0].headers.x-amz-date: set by the gateway or the provider",
        ),
        (
            "{name: a, provider: anthropic, headers: {x-team: ' padded '}}",
            "upstreams[0].headers.x-team: printable ASCII",
        ),
        (
            "{name: a, provider: anthropic, groups: []}",
            "upstreams[0].groups: must list at least one entry",
        ),
        (
            "{name: a, provider: anthropic, models: ['']}",
            "upstreams[0].models[0]: a non-empty name",
        ),
        (
            "{name: b, provider: bedrock, region: us-east-1, assume_role: {role_arn: x}}",
            "upstreams[0].assume_role.role_arn: must be an IAM role ARN",
        ),
        (
            "{name: b, provider: bedrock, region: us-east-1, assume_role: {role_arn: 'arn:aws:iam::123456789012:role/r', session_name: name}}",
            "upstreams[0].assume_role.session_name: must be `email` or `sub`",
        ),
        (
            "{name: b, provider: bedrock, region: us-east-1, auth: {aws_bearer_token: t}, assume_role: {role_arn: 'arn:aws:iam::123456789012:role/r'}}",
            "upstreams[0].auth.aws_bearer_token: not with assume_role",
        ),
        (
            "{name: v, provider: vertex, region: us-east5, project_id: p, guardrail: {id: g, version: '1'}}",
            "upstreams[0].guardrail: only bedrock upstreams take it",
        ),
    ] {
        let got = err(&format!("listen: {{host: 127.0.0.1}}\nupstreams: [{u}]"));
        assert!(got.starts_with(want), "{u}\nexpected {want}\ngot {got}");
    }
}

#[test]
fn secrets_never_appear_in_errors() {
    let env = MapEnvironment::default().with_var("K", "sk-ant-secret-value-123");
    let e = Config::from_yaml(
        "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, auth: {api_key: '${K}'}}]\nclient_keys: [{id: a, key: '${K}'}]\n",
        &LoadContext { env: &env, credentials: &NoCredentialStore, default_data_dir: "/d".into() },
    )
    .unwrap_err()
    .to_string();
    assert!(!e.contains("sk-ant"), "{e}");
}

/// A check that runs on the loaded config (`check-config`'s managed-policy merge) hides
/// what references resolved to, as the loader does (issue 35).
#[test]
fn later_checks_hide_the_references_too() {
    let env = MapEnvironment::default().with_var("K", "sk-ant-later-secret-456");
    let config = Config::from_yaml(
        "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, auth: {api_key: '${K}'}}]\nclient_keys: [{id: a, key: 'client-key-0123456789abcdef0123456789abcdef'}]\n",
        &LoadContext { env: &env, credentials: &NoCredentialStore, default_data_dir: "/d".into() },
    )
    .unwrap();
    let e = config.hide(ConfigError::at(
        "managed.policies[0] (merged).env.sk-ant-later-secret-456",
        "`sk-ant-later-secret-456` is not allowed",
    ));
    assert!(!e.to_string().contains("sk-ant-later"), "{e}");
    assert!(
        !format!("{config:?}").contains("sk-ant-later"),
        "Debug keeps it redacted"
    );
}

/// Found by the `config` fuzz target (fuzz/corpus/config/crash-resolved-value-in-error.yaml):
/// an error quoting a value repeated what `${...}` had resolved to.
#[test]
fn errors_never_repeat_a_resolved_value_found_by_fuzzing() {
    // Found by the `config` fuzz target: a resolved value quoted by a type error.
    let env = MapEnvironment::default()
        .with_var("K", "sk-ant-secret \"value\"")
        .with_file("/run/k", "file-secret-value\n");
    let load = |yaml: &str| {
        Config::from_yaml(
            yaml,
            &LoadContext {
                env: &env,
                credentials: &NoCredentialStore,
                default_data_dir: "/d".into(),
            },
        )
        .unwrap_err()
        .to_string()
    };
    for (yaml, path) in [
        ("${K}", ""),
        (
            "listen: {host: 127.0.0.1, port: '${file:/run/k}'}",
            "listen.port",
        ),
        (
            "listen: {host: 127.0.0.1}\nlogging: {dir: /l, rotation: 'x${K}'}",
            "logging.rotation",
        ),
    ] {
        let e = load(yaml);
        assert!(e.lines().any(|l| l.starts_with(path)), "{e}");
        for piece in ["sk-ant-secret", "file-secret", "\\\"value\\\""] {
            assert!(!e.contains(piece), "{e}");
        }
    }
}

#[test]
fn schema_is_generated_from_the_types() {
    let schema = Config::json_schema();
    let props = &schema["properties"];
    for key in [
        "listen",
        "upstreams",
        "models",
        "client_keys",
        "pricing",
        "oidc",
        "cri",
    ] {
        assert!(props.get(key).is_some(), "schema lacks {key}");
    }
    let committed: serde_json::Value =
        serde_json::from_str(include_str!("../../../../config.schema.json")).unwrap();
    assert_eq!(
        committed, schema,
        "config.schema.json is stale: run `gatehouse config-schema > config.schema.json`"
    );
}

#[test]
fn errors_never_quote_values_read_through_references() {
    // A secret file mounted in the wrong place, an env var in the wrong field: the error
    // names the field and what it wanted, never what the file or variable held.
    let cases = [
        (
            format!("{UP}listen: {{port: '${{file:/run/secrets/anthropic_api_key}}'}}\n"),
            "listen.port: invalid value (read through a reference, not shown)",
            "sk-from-file",
        ),
        (
            format!("{UP}listen: {{host: 127.0.0.1, public_url: '${{ANTHROPIC_API_KEY}}'}}\n"),
            "listen.public_url: invalid URL: relative URL without a base",
            "sk-example",
        ),
        (
            format!(
                "{UP}listen: {{host: 127.0.0.1}}\nlogging: {{dir: /x, rotation: 'x-${{CORP_PROXY_TOKEN}}'}}\n"
            ),
            "logging.rotation: invalid value (read through a reference, not shown)",
            "corp-token",
        ),
    ];
    for (yaml, expected, secret) in cases {
        let e = err(&yaml);
        assert_eq!(e, expected, "{yaml}");
        assert!(!e.contains(secret));
    }
    // A literal value is still quoted: it is the operator's own text.
    assert_eq!(
        err(&format!("{UP}listen: {{host: 'no pe'}}\n")),
        "listen.host: `no pe` is neither an IP address nor a host name"
    );
}

#[test]
fn reference_spellings_load_with_the_references_meaning() {
    let c = load(
        "$schema: https://example.com/gateway.schema.json
listen: {host: 127.0.0.1, trusted_proxies: [10.0.0.5]}
access_control: {allow_cidrs: [192.168.1.7, '10.0.0.0/8'], deny_cidrs: ['::1']}
upstreams:
  - {provider: anthropic, auth: {api_key: k}}
pricing:
  overrides:
    - {upstream: anthropic, model: claude-sonnet-4-6, input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}
",
    )
    .unwrap();
    assert_eq!(
        c.upstreams[0].name, "anthropic",
        "unnamed: the provider's value"
    );
    assert_eq!(c.listen.trusted_proxies[0].to_string(), "10.0.0.5/32");
    assert_eq!(c.access.allow[0].to_string(), "192.168.1.7/32");
    assert_eq!(c.access.deny[0].to_string(), "::1/128");
    let o = &c.pricing.overrides[0];
    assert_eq!(o.upstream.as_deref(), Some("anthropic"));
    assert_eq!(
        (o.price.cache_write_5m, o.price.cache_write_1h),
        (3_750, 3_750)
    );
    let pg = load(
        "listen: {host: 127.0.0.1}\nupstreams: [{provider: anthropic, auth: {api_key: sk-test}}]\nstore: {postgres_url: 'postgres://u@h/db', connect_timeout_seconds: 7}\n",
    )
    .unwrap();
    assert!(
        matches!(&pg.store, StoreConfig::Postgres(p) if p.connect_timeout == std::time::Duration::from_secs(7))
    );
    for (yaml, want) in [
        (
            "listen: {host: 127.0.0.1}\nupstreams: [{provider: anthropic, auth: {api_key: sk-test}}, {provider: anthropic, auth: {api_key: sk-test}}]\n",
            "upstreams[1].name: duplicate upstream name `anthropic` (an upstream without a name",
        ),
        (
            "listen: {host: 127.0.0.1}\naccess_control: {allow_cidrs: [not-an-ip]}\n",
            "access_control.allow_cidrs[0]: invalid IP address syntax",
        ),
        (
            "listen: {host: 127.0.0.1}\nupstreams: [{provider: anthropic, auth: {api_key: sk-test}}]\nstore: {postgres_url: 'postgres://u@h/db', connect_timeout_seconds: 0}\n",
            "store.connect_timeout_seconds: must be 1 to 60",
        ),
    ] {
        let got = err(yaml);
        assert!(got.contains(want), "expected {want}\ngot {got}");
    }
}

#[test]
fn numbers_may_be_strings_as_in_the_reference() {
    let env = [("PORT", "9091"), ("TTFB", "45000")];
    let yaml = "listen: {host: 127.0.0.1, port: '${PORT}'}\nupstreams: [{provider: anthropic, auth: {api_key: sk-test}}]\ntimeouts: {upstream_ttfb_ms: '${TTFB}'}\nlimits: {max_request_bytes: '1048576'}\n";
    let c = load_with_env(yaml, &env).unwrap();
    assert_eq!(c.listen.port, 9091);
    assert_eq!(
        c.timeouts.upstream_ttfb,
        std::time::Duration::from_millis(45_000)
    );
    assert_eq!(c.limits.max_request_bytes, 1_048_576);
    let e = load_with_env(
        "listen: {host: 127.0.0.1, port: eighty}\nupstreams: [{provider: anthropic, auth: {api_key: sk-test}}]\n",
        &env,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("listen.port: invalid value `eighty`"), "{e}");
}

/// A key and certificate from the differential corpus (`tests/config-corpus/oidc`).
fn corpus_key_and_cert() -> (String, String) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/config-corpus/oidc/ok_private_key_jwt_pkcs8.yaml");
    let v: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let a = &v["oidc"]["client_assertion"];
    (
        a["private_key_pem"].as_str().unwrap().to_owned(),
        a["certificate_pem"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn tls_files_are_read_from_paths_and_pem_text_still_works() {
    let (key, cert) = corpus_key_and_cert();
    let env = env()
        .with_file("/etc/gw/tls.crt", &cert)
        .with_file("/etc/gw/tls.key", &key);
    let ctx = LoadContext {
        env: &env,
        credentials: &NoCredentialStore,
        default_data_dir: "/data".into(),
    };
    let by_path = "listen: {host: 127.0.0.1, tls: {cert: /etc/gw/tls.crt, key: /etc/gw/tls.key}}\n";
    let c = Config::from_yaml(&format!("{by_path}{UP}"), &ctx).unwrap();
    assert_eq!(c.listen.tls.unwrap().cert_pem, cert);
    let text = format!(
        "listen:\n  host: 127.0.0.1\n  tls:\n    cert: {:?}\n    key: {:?}\n{UP}",
        cert, key
    );
    assert!(Config::from_yaml(&text, &ctx).is_ok());
}

#[test]
fn private_key_jwt_takes_the_key_and_its_certificate() {
    let (key, cert) = corpus_key_and_cert();
    let yaml = format!(
        "listen: {{host: 127.0.0.1}}\n{UP}session: {{jwt_secret: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'}}\noidc:\n  issuer: https://idp.example\n  client_id: c\n  token_endpoint_auth_method: private_key_jwt\n  client_assertion:\n    private_key_pem: {key:?}\n    certificate_pem: {cert:?}\n"
    );
    let id = load(&yaml).unwrap().identity.unwrap();
    let super::oidc::ClientAuth::PrivateKeyJwt(k) = &id.oidc.extras.client_auth else {
        panic!("private_key_jwt expected");
    };
    // base64url of a SHA-1 and a SHA-256 digest.
    assert_eq!((k.x5t.len(), k.x5t_s256.len()), (27, 43));
    // The assertion verifies with the certificate's key and names the token endpoint.
    let jwt = crate::identity::idp_client::assertion(k, "c", "https://idp.example/token").unwrap();
    let header = jsonwebtoken::decode_header(&jwt).unwrap();
    assert_eq!(header.x5t.as_deref(), Some(k.x5t.as_str()));
    assert_eq!(header.x5t_s256.as_deref(), Some(k.x5t_s256.as_str()));
    assert_eq!(header.alg, jsonwebtoken::Algorithm::RS256);
}

fn paths(e: &ConfigError) -> Vec<String> {
    e.issues().into_iter().map(|i| i.path).collect()
}

#[test]
fn problems_in_several_sections_are_all_reported_with_their_paths() {
    let e = load(&format!(
        "listen: {{host: 'not an ip'}}\n{UP}client_keys: [{{id: ci, key: short}}]\nlogging: {{rotation: weekly}}\n"
    ))
    .unwrap_err();
    assert_eq!(
        paths(&e),
        ["listen.host", "client_keys[0].key", "logging.rotation"],
        "{e}"
    );
    // Displayed one per line, each with its path.
    let text = e.to_string();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        text.lines()
            .nth(2)
            .unwrap()
            .starts_with("logging.rotation: ")
    );
}

#[test]
fn a_check_against_a_refused_section_is_skipped() {
    // The upstream list is refused, so models[].upstream_model is not judged against it.
    let e = load(
        "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, base_url: 'ftp://x'}]\nmodels: [{id: m, upstream_model: {nope: x}}]\nlogging: {rotation: weekly}\n",
    )
    .unwrap_err();
    assert_eq!(
        paths(&e),
        ["upstreams[0].base_url", "logging.rotation"],
        "{e}"
    );
}

#[test]
fn unknown_keys_are_reported_beside_the_rules_the_rest_breaks() {
    let e = load(&format!(
        "listen: {{host: 127.0.0.1, nope: 1}}\n{UP}bogus: 2\nmodels: [{{id: m, upstream_model: {{nope: x}}}}]\n"
    ))
    .unwrap_err();
    assert_eq!(
        paths(&e),
        ["listen.nope", "bogus", "models[0].upstream_model.nope"],
        "{e}"
    );
}

#[test]
fn every_failing_reference_is_reported_and_resolved_values_stay_hidden() {
    let e = load(&format!(
        "listen: {{host: '${{NOT_SET_A}}'}}\n{UP}logging: {{dir: '${{NOT_SET_B}}'}}\n"
    ))
    .unwrap_err();
    assert_eq!(paths(&e), ["listen.host", "logging.dir"], "{e}");
    let e = load_with_env(
        &format!("listen: {{host: '${{H}}'}}\n{UP}logging: {{rotation: '${{R}}'}}\n"),
        &[("H", "secret host value"), ("R", "secret-rotation-value")],
    )
    .unwrap_err();
    assert_eq!(paths(&e), ["listen.host", "logging.rotation"], "{e}");
    assert!(!e.to_string().contains("secret-"), "{e}");
}
