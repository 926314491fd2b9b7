//! Each startup warning rule of [`super::warnings`]: it fires on the risky file and stays
//! quiet on the safe one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::warnings::{ConfigWarning, after_discovery};
use super::*;
use crate::deps::{MapEnvironment, NoCredentialStore};

const BASE: &str =
    "listen: {host: 127.0.0.1}\nupstreams: [{name: a, provider: anthropic, auth: {api_key: k}}]\n";
const OIDC: &str = "session: {jwt_secret: 0123456789abcdef0123456789abcdef0123}\n";
const CRI: &str =
    "cri: {enabled: true, audience: [gw], org_allowlist: [3f1c2a9e-1111-2222-3333-444455556666]}\n";

fn load_env(yaml: &str, env: &MapEnvironment) -> Config {
    Config::from_yaml(
        yaml,
        &LoadContext {
            env,
            credentials: &NoCredentialStore,
            default_data_dir: "/data".into(),
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

/// The paths warned about for `BASE` + `extra`.
fn warned(extra: &str) -> Vec<String> {
    warned_env(&format!("{BASE}{extra}"), &MapEnvironment::default())
}

fn warned_env(yaml: &str, env: &MapEnvironment) -> Vec<String> {
    load_env(yaml, env)
        .warnings
        .into_iter()
        .map(|w| w.path)
        .collect()
}

/// For keys validation still refuses (other work in progress): the rules on the raw file.
fn warned_raw(extra: &str) -> Vec<String> {
    let config = load_env(BASE, &MapEnvironment::default());
    let raw: raw::RawConfig = serde_yaml_ng::from_str(&format!("{BASE}{extra}")).unwrap();
    warnings::of_file(&raw, &config, &MapEnvironment::default())
        .into_iter()
        .map(|w| w.path)
        .collect()
}

#[test]
fn a_plain_file_has_no_warnings() {
    assert!(warned("").is_empty());
}

#[test]
fn telemetry_without_public_url_or_destinations() {
    let fwd = "telemetry: {forward_to: [{url: 'https://otel.corp.example/v1/metrics'}]}\n";
    assert_eq!(warned(fwd), ["telemetry.forward_to"]);
    let with_url = format!(
        "listen: {{host: 127.0.0.1, public_url: 'https://gw.corp.example'}}\nupstreams: [{{name: a, provider: anthropic, auth: {{api_key: k}}}}]\n{fwd}"
    );
    assert!(warned_env(&with_url, &MapEnvironment::default()).is_empty());
    assert_eq!(
        warned("telemetry: {resource_attributes: {team: eng}}\n"),
        ["telemetry.resource_attributes"]
    );
}

#[test]
fn a_catch_all_policy_that_is_not_last() {
    let policies = |list: &str| {
        format!(
            "client_keys: [{{id: ci, key: ci-client-key-0123456789abcdef012345}}]\nmanaged: {{policies: [{list}]}}\n"
        )
    };
    // Only the per-policy rules (`managed` alone is the Desktop one: no policy has `desktop:`).
    let per_policy = |yaml: &str| -> Vec<String> {
        warned(yaml)
            .into_iter()
            .filter(|p| p.starts_with("managed.policies"))
            .collect()
    };
    assert_eq!(
        per_policy(&policies(
            "{cli: {env: {A: '1'}}}, {match: {groups: [eng]}, cli: {env: {B: '1'}}}"
        )),
        ["managed.policies[0]"]
    );
    assert!(
        per_policy(&policies(
            "{match: {groups: [eng]}, cli: {env: {B: '1'}}}, {cli: {env: {A: '1'}}}"
        ))
        .is_empty()
    );
}

#[test]
fn identity_headers_and_missing_credentials_per_upstream() {
    let yaml = "listen: {host: 127.0.0.1}\nupstreams: [{name: p, provider: anthropic, base_url: 'https://llm-proxy.corp.example', auth: {api_key: k}, forward_user_identity: true}]\n";
    let c = load_env(yaml, &MapEnvironment::default());
    let w: Vec<&ConfigWarning> = c.warnings.iter().collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].path, "upstreams[0].forward_user_identity");
    assert!(w[0].message.contains("https://llm-proxy.corp.example"));
    // The embedded default without ANTHROPIC_API_KEY says what to set.
    let d = embedded_default(
        &MapEnvironment::default(),
        std::path::Path::new("/data"),
        None,
    )
    .unwrap();
    assert_eq!(d.warnings.len(), 1);
    assert_eq!(d.warnings[0].path, "upstreams[0].auth");
    assert!(d.warnings[0].message.contains("ANTHROPIC_API_KEY"));
    let env = MapEnvironment::default().with_var("ANTHROPIC_API_KEY", "sk-x");
    let d = embedded_default(&env, std::path::Path::new("/data"), None).unwrap();
    assert!(d.warnings.is_empty());
}

#[test]
fn govcloud_beside_commercial_upstreams_for_the_same_people() {
    let ups = |gov_groups: &str, other_groups: &str| {
        format!(
            "listen: {{host: 127.0.0.1}}\nupstreams:\n- {{name: gov, provider: bedrock, region: us-gov-west-1{gov_groups}}}\n- {{name: com, provider: bedrock, region: us-east-1{other_groups}}}\n"
        )
    };
    let env = MapEnvironment::default();
    assert_eq!(warned_env(&ups("", ""), &env), ["upstreams[0].region"]);
    assert_eq!(
        warned_env(&ups(", groups: [fed]", ", groups: [fed, eng]"), &env),
        ["upstreams[0].region"]
    );
    assert!(warned_env(&ups(", groups: [fed]", ", groups: [eng]"), &env).is_empty());
}

#[test]
fn cloud_base_url_variables_the_gateway_does_not_read() {
    let yaml = "listen: {host: 127.0.0.1}\nupstreams:\n- {name: b, provider: bedrock, region: us-east-1}\n- {name: v, provider: vertex, project_id: p, region: us-east5, models: [claude-opus-4-7]}\n";
    let env = MapEnvironment::default().with_var("ANTHROPIC_BEDROCK_BASE_URL", "https://x.example");
    assert_eq!(warned_env(yaml, &env), ["ANTHROPIC_BEDROCK_BASE_URL"]);
    assert!(warned_env(yaml, &MapEnvironment::default()).is_empty());
    let env = MapEnvironment::default().with_var("ANTHROPIC_FOUNDRY_BASE_URL", "https://x.example");
    assert!(warned_env(yaml, &env).is_empty(), "no foundry upstream");
}

#[test]
fn a_markup_multiplier() {
    assert_eq!(
        warned("pricing: {multiplier: 1.5}\n"),
        ["pricing.multiplier"]
    );
    assert!(warned("pricing: {multiplier: 1}\n").is_empty());
    assert!(warned("pricing: {multiplier: 0.8}\n").is_empty());
}

#[test]
fn a_pool_order_without_the_rule_that_reads_it() {
    let admin = "admin: {write_keys: [{id: w, key: admin-write-key-0123456789abcdef0123456789}]";
    assert_eq!(
        warned_raw(&format!("{admin}, pooled_priority_order: [eng]}}\n")),
        ["admin.pooled_priority_order"]
    );
    assert!(
        warned_raw(&format!(
            "{admin}, pooled_conflict_rule: priority_list, pooled_priority_order: [eng]}}\n"
        ))
        .is_empty()
    );
}

#[test]
fn load_test_mode_on() {
    assert_eq!(
        warned_raw("load_test_mode: {enabled: true}\n"),
        ["load_test_mode.enabled"]
    );
    assert!(warned_raw("load_test_mode: {enabled: false}\n").is_empty());
}

#[test]
fn cri_present_but_disabled_and_org_ids_that_are_not_uuids() {
    let oidc = "oidc: {issuer: 'https://idp.corp.example', client_id: g, client_secret: s}\nlisten: {host: 127.0.0.1, public_url: 'https://gw.corp.example'}\nupstreams: [{name: a, provider: anthropic, auth: {api_key: k}}]\n";
    let env = MapEnvironment::default();
    assert_eq!(
        warned_env(&format!("{oidc}{OIDC}cri: {{enabled: false}}\n"), &env),
        ["cri.enabled"]
    );
    assert!(warned_env(&format!("{oidc}{OIDC}{CRI}"), &env).is_empty());
    assert_eq!(
        warned_env(
            &format!(
                "{oidc}{OIDC}cri: {{enabled: true, audience: [gw], org_allowlist: [3f1c2a9e-1111-2222-3333-444455556666, acme-corp]}}\n"
            ),
            &env
        ),
        ["cri.org_allowlist[1]"]
    );
}

#[test]
fn a_cri_only_deployment_names_the_sections_that_never_act() {
    let inert = "admin: {write_keys: [{id: w, key: admin-write-key-0123456789abcdef0123456789}]}\nlogin_notice: hello\n";
    assert_eq!(
        warned(&format!("{OIDC}{CRI}{inert}")),
        ["admin", "login_notice"]
    );
    assert!(warned(&format!("{OIDC}{CRI}")).is_empty());
}

#[test]
fn google_as_the_idp() {
    let oidc = |issuer: &str, more: &str| {
        format!(
            "listen: {{host: 127.0.0.1, public_url: 'https://gw.corp.example'}}\nupstreams: [{{name: a, provider: anthropic, auth: {{api_key: k}}}}]\n{OIDC}oidc: {{issuer: '{issuer}', client_id: g, client_secret: s{more}}}\n"
        )
    };
    let env = MapEnvironment::default();
    let google = "https://accounts.google.com";
    assert_eq!(
        warned_env(&oidc(google, ""), &env),
        ["oidc.extra_auth_params"]
    );
    let offline = ", extra_auth_params: {access_type: offline, prompt: consent}";
    assert!(warned_env(&oidc(google, offline), &env).is_empty());
    assert_eq!(
        warned_env(
            &oidc(google, &format!("{offline}, allowed_groups: [eng]")),
            &env
        ),
        ["oidc.allowed_groups"]
    );
    assert!(
        warned_env(
            &oidc("https://idp.corp.example", ", allowed_groups: [eng]"),
            &env
        )
        .is_empty()
    );
    assert_eq!(
        warned_raw(
            "oidc: {issuer: 'https://idp.corp.example', client_id: g, google_groups: {service_account_json_path: /x.json, admin_email: a@corp.example}}\n"
        ),
        ["oidc.google_groups"]
    );
}

#[test]
fn scopes_without_offline_access_the_idp_offers() {
    let c = load_env(
        &format!(
            "listen: {{host: 127.0.0.1, public_url: 'https://gw.corp.example'}}\nupstreams: [{{name: a, provider: anthropic, auth: {{api_key: k}}}}]\n{OIDC}oidc: {{issuer: 'https://idp.corp.example', client_id: g, client_secret: s, scopes: [openid, email]}}\n"
        ),
        &MapEnvironment::default(),
    );
    let oidc = &c.identity.as_ref().unwrap().oidc;
    let offered = ["openid".to_owned(), "offline_access".to_owned()];
    let w = after_discovery(oidc, Some(&offered));
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].path, "oidc.scopes");
    assert!(after_discovery(oidc, Some(&offered[..1])).is_empty());
    assert!(after_discovery(oidc, None).is_empty());
    let mut with = oidc.clone();
    with.scopes.push("offline_access".into());
    assert!(after_discovery(&with, Some(&offered)).is_empty());
}

#[test]
fn a_file_reference_inside_a_longer_string_is_a_warning() {
    assert_eq!(
        warned(
            "login_notice: 'see ${file:/x} here'\nclient_keys: [{id: ci, key: ci-client-key-0123456789abcdef012345}]\n"
        ),
        ["login_notice"]
    );
}
