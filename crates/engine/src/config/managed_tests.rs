#![allow(clippy::unwrap_used)]
use super::*;
use crate::deps::MapEnvironment;
use serde_json::json;

fn raw(v: Value) -> RawManaged {
    serde_json::from_value(v).unwrap()
}

fn paths(e: &ConfigError) -> Vec<String> {
    e.issues().into_iter().map(|i| i.path).collect()
}

#[test]
fn a_settings_file_with_a_byte_order_mark_is_read() {
    let env =
        MapEnvironment::default().with_file("/m.json", "\u{feff}{\"model\": \"claude-opus-4-7\"}");
    let got = validate(&raw(json!({"settings": "/m.json"})), &env).unwrap();
    assert_eq!(got[0].cli["model"], "claude-opus-4-7");
    assert!(got[0].from_settings_file);
    let env = MapEnvironment::default().with_file("/m.json", "\u{feff}{\"bogusKey\": 1}");
    let e = validate(&raw(json!({"settings": "/m.json"})), &env).unwrap_err();
    assert_eq!(paths(&e), vec!["managed.settings.bogusKey"]);
}

#[test]
fn every_policy_and_every_issue_is_listed_at_once() {
    let e = validate(
        &raw(json!({"policies": [
            {"match": {"groups": ["a"]}, "cli": {"timeFormat": 5, "crossSessionInbound": "maybe"}},
            {"cli": {"attribution": 7}}
        ]})),
        &MapEnvironment::default(),
    )
    .unwrap_err();
    let mut found = paths(&e);
    found.sort();
    assert_eq!(
        found,
        vec![
            "managed.policies[0].cli.crossSessionInbound",
            "managed.policies[0].cli.timeFormat",
            "managed.policies[1].cli.attribution",
        ]
    );
}

#[test]
fn newer_and_typed_keys_read_as_the_reference_reads_them() {
    let ok = json!({"policies": [{"cli": {
        "disableDirectMcpSkills": true,
        "disableLocalMcpServers": true,
        "allowedAdminConsoleOrgUUIDs": ["11111111-1111-1111-1111-111111111111"],
        "allowedProviders": ["anthropic", "bedrock"],
        "strictPluginOnlyCustomization": ["skills"],
        "attribution": false,
        "timeFormat": "%H:%M"
    }}]});
    validate(&raw(ok), &MapEnvironment::default()).unwrap();
    let bad = json!({"policies": [{"cli": {
        "allowedProviders": ["azure"],
        "strictPluginOnlyCustomization": "yes",
        "extraKnownMarketplaces": [],
        "blockedMarketplaces": {},
        "managedMcpServers": {"s": {"type": "stdio", "command": "x"}}
    }}]});
    let e = validate(&raw(bad), &MapEnvironment::default()).unwrap_err();
    let found = paths(&e);
    for want in [
        "managed.policies[0].cli.allowedProviders",
        "managed.policies[0].cli.strictPluginOnlyCustomization",
        "managed.policies[0].cli.extraKnownMarketplaces",
        "managed.policies[0].cli.blockedMarketplaces",
        "managed.policies[0].cli.managedMcpServers.s.command",
        "managed.policies[0].cli.managedMcpServers.s.type",
    ] {
        assert!(
            found.iter().any(|p| p.starts_with(want)),
            "{want} in {found:?}"
        );
    }
}
