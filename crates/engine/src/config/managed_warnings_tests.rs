#![allow(clippy::unwrap_used)]
use super::*;
use serde_json::json;

fn policy(cli: Value, desktop: Option<Value>) -> PolicyConfig {
    PolicyConfig {
        cli: cli.as_object().unwrap().clone(),
        desktop: desktop.map(|d| d.as_object().unwrap().clone()),
        ..PolicyConfig::default()
    }
}

const WITH_URL: Context<'static> = Context {
    public_url: Some("https://gw.example.com"),
    bedrock_without_guardrail: false,
};

fn found(policies: &[PolicyConfig], ctx: &Context<'_>, needle: &str) -> bool {
    warnings(policies, ctx)
        .iter()
        .any(|(p, m)| p.contains(needle) || m.contains(needle))
}

#[test]
fn nothing_without_policies_and_nothing_for_a_plain_desktop_policy() {
    assert!(warnings(&[], &WITH_URL).is_empty());
    let quiet = [policy(
        json!({}),
        Some(json!({"disabledBuiltinTools": ["WebSearch"]})),
    )];
    assert_eq!(warnings(&quiet, &WITH_URL), Vec::<Warning>::new());
}

#[test]
fn desktop_without_public_url() {
    let p = [policy(json!({}), Some(json!({})))];
    let none = Context {
        public_url: None,
        ..WITH_URL
    };
    assert!(found(&p, &none, "listen.public_url is not set"));
    assert!(!found(&p, &WITH_URL, "listen.public_url is not set"));
}

#[test]
fn no_policy_opts_into_desktop() {
    assert!(found(
        &[policy(json!({}), None)],
        &WITH_URL,
        "no managed policy carries a desktop"
    ));
    assert!(!found(
        &[policy(json!({}), Some(json!({})))],
        &WITH_URL,
        "no managed policy carries a desktop"
    ));
}

#[test]
fn cli_settings_do_not_reach_the_code_tab() {
    let p = [policy(json!({"model": "x"}), Some(json!({})))];
    assert!(found(&p, &WITH_URL, "outside a code: block"));
    let mut silenced = p.clone();
    silenced[0].serve_to_desktop = Some(false);
    assert!(!found(&silenced, &WITH_URL, "outside a code: block"));
    let mut code = p.clone();
    code[0].under_code = true;
    assert!(!found(&code, &WITH_URL, "outside a code: block"));
}

#[test]
fn code_needs_machine_settings_and_ignores_serve_to_desktop_false() {
    let mut p = [policy(json!({"model": "x"}), Some(json!({})))];
    p[0].under_code = true;
    assert!(found(
        &p,
        &WITH_URL,
        "forceLoginGatewayUrl\":\"https://gw.example.com"
    ));
    assert!(!found(&p, &WITH_URL, "serve_to_desktop"));
    p[0].serve_to_desktop = Some(false);
    assert!(found(&p, &WITH_URL, "managed.policies[0].serve_to_desktop"));
    let plain = [policy(json!({"model": "x"}), Some(json!({})))];
    assert!(!found(&plain, &WITH_URL, "forceLoginGatewayUrl"));
}

#[test]
fn empty_sandbox_domains() {
    let empty = [policy(
        json!({"sandbox": {"network": {"allowedDomains": []}}}),
        Some(json!({})),
    )];
    assert!(found(&empty, &WITH_URL, "sandbox.network.allowedDomains"));
    let listed = [policy(
        json!({"sandbox": {"network": {"allowedDomains": ["a.com"]}}}),
        Some(json!({})),
    )];
    assert!(!found(&listed, &WITH_URL, "sandbox.network.allowedDomains"));
    let overlay_set = [policy(
        json!({"sandbox": {"network": {"allowedDomains": []}}}),
        Some(json!({"coworkEgressAllowedHosts": ["a.com"]})),
    )];
    assert!(!found(
        &overlay_set,
        &WITH_URL,
        "sandbox.network.allowedDomains"
    ));
}

#[test]
fn dated_desktop_deprecations_and_unknown_keys() {
    let p = [policy(
        json!({}),
        Some(json!({"coworkTabEnabled": false, "chatSessionRetentionDays": 30, "brandNewKey": 1})),
    )];
    assert!(found(&p, &WITH_URL, "coworkTabEnabled no longer"));
    assert!(found(
        &p,
        &WITH_URL,
        "coworkSessionRetentionDays to the same"
    ));
    assert!(found(&p, &WITH_URL, "desktop.brandNewKey"));
    let home = [policy(
        json!({}),
        Some(
            json!({"desktopHome": "standard", "coworkTabEnabled": false, "chatSessionRetentionDays": 30, "coworkSessionRetentionDays": 30}),
        ),
    )];
    assert!(!found(&home, &WITH_URL, "November 10"));
}

#[test]
fn invalid_max_effort_level() {
    let bad = [policy(
        json!({"maxEffortLevel": "ultra", "modelSettings": {"opus": {"maxEffortLevel": "huge"}}}),
        Some(json!({})),
    )];
    assert!(found(
        &bad,
        &WITH_URL,
        "managed.policies[0].cli.maxEffortLevel"
    ));
    assert!(found(&bad, &WITH_URL, "modelSettings.opus.maxEffortLevel"));
    let good = [policy(json!({"maxEffortLevel": "high"}), Some(json!({})))];
    assert!(!found(&good, &WITH_URL, "maxEffortLevel"));
}

#[test]
fn available_models_empty_or_cli_aliases() {
    let empty = [policy(json!({"availableModels": []}), Some(json!({})))];
    assert!(found(&empty, &WITH_URL, "is an empty list"));
    let aliases = [policy(
        json!({"availableModels": ["opusplan", "sonnet"]}),
        Some(json!({})),
    )];
    assert!(found(&aliases, &WITH_URL, "contains opusplan"));
    assert!(found(&aliases, &WITH_URL, "these entries never match"));
    let fine = [policy(
        json!({"availableModels": ["opus", "claude-sonnet-4-6"]}),
        Some(json!({})),
    )];
    assert!(!found(&fine, &WITH_URL, "availableModels"));
    // A role inherits the catch-all's list.
    let inherited = [
        {
            let mut p = policy(json!({}), Some(json!({})));
            p.groups = Some(vec!["eng".into()]);
            p
        },
        policy(json!({"availableModels": []}), None),
    ];
    assert!(found(
        &inherited,
        &WITH_URL,
        "managed.policies[0].cli.availableModels"
    ));
}

#[test]
fn guardrail_header_without_a_guardrail() {
    let p = [policy(
        json!({"env": {"ANTHROPIC_CUSTOM_HEADERS": "X-Amzn-Bedrock-GuardrailIdentifier: g1"}}),
        Some(json!({})),
    )];
    let unguarded = Context {
        bedrock_without_guardrail: true,
        ..WITH_URL
    };
    assert!(found(&p, &unguarded, "GuardrailIdentifier header"));
    assert!(!found(&p, &WITH_URL, "GuardrailIdentifier header"));
}

#[test]
fn an_allowlist_without_the_default_model_is_named_once_for_every_policy() {
    let haiku = policy(json!({"availableModels": ["haiku"]}), Some(json!({})));
    let opus = policy(json!({"availableModels": ["opus"]}), Some(json!({})));
    let pinned = policy(
        json!({"availableModels": ["haiku"], "model": "claude-haiku-4-5"}),
        Some(json!({})),
    );
    let enforced = policy(
        json!({"availableModels": ["haiku"], "enforceAvailableModels": true}),
        Some(json!({})),
    );
    let all = warnings(&[haiku.clone(), opus, pinned, enforced, haiku], &WITH_URL);
    let named: Vec<&String> = all
        .iter()
        .map(|(_, m)| m)
        .filter(|m| m.contains("leaves out claude-opus-4-7"))
        .collect();
    assert_eq!(named.len(), 1, "{all:?}");
    assert!(
        named[0].starts_with("managed policies 0, 4: availableModels"),
        "{}",
        named[0]
    );
}

#[test]
fn a_managed_mcp_placeholder_is_warned_with_its_policy() {
    let p = policy(
        json!({"managedMcpServers": {"docs": {"type": "http", "url": "https://h.example.com", "headers": {"A": "${x"}}}}),
        Some(json!({})),
    );
    assert!(found(
        &[p],
        &WITH_URL,
        "managed.policies[0].cli: managedMcpServers.docs.headers.A contains a \"${\" placeholder"
    ));
}
