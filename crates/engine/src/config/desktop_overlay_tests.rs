#![allow(clippy::unwrap_used, clippy::panic)]
use super::*;
use serde_json::json;

fn run(v: Value) -> Findings {
    check(v.as_object().unwrap(), "d")
}

fn error_for<'a>(f: &'a Findings, path: &str) -> &'a str {
    f.errors
        .iter()
        .find(|(p, _)| p == path)
        .map(|(_, m)| m.as_str())
        .unwrap_or_else(|| panic!("no error at {path}: {f:?}"))
}

#[test]
fn the_data_file_loads_with_every_servable_key() {
    let keys = servable_keys();
    assert_eq!(keys.len(), 91);
    for k in [
        "disabledBuiltinTools",
        "builtinToolPolicy",
        "coworkEgressAllowedHosts",
        "desktopHome",
        "banner",
    ] {
        assert!(keys.contains(&k), "{k}");
    }
}

#[test]
fn servable_keys_with_readable_values_pass() {
    let f = run(json!({
        "disabledBuiltinTools": ["WebSearch", "Bash(curl *)"],
        "builtinToolPolicy": {"WebFetch": "ask", "Bash": "allow"},
        "coworkEgressAllowedHosts": ["example.com", "*.corp.example.com"],
        "desktopHome": "standard",
        "chatTabEnabled": "true",
        "coworkTabEnabled": false,
        "chatSessionRetentionDays": "30",
        "mcpToolTimeoutSec": 120,
        "deploymentDisplayName": "Acme",
        "sshHostAllowlist": ["*.corp.example.com"],
        "dangerousMaxVersion": "1.2.3",
        "sshClientPath": "/usr/bin/ssh",
        "sharingEndpoint": {"url": "https://share.example.com/publish"},
        "banner": {"text": "hello"}
    }));
    assert_eq!(f, Findings::default());
}

#[test]
fn unparseable_values_are_refused() {
    let f = run(json!({
        "chatTabEnabled": "yes",
        "desktopHome": "home",
        "mcpToolTimeoutSec": 5,
        "chatSessionRetentionDays": true,
        "coworkEgressAllowedHosts": ["zz"],
        "builtinToolPolicy": {"NoSuchTool": "ask"},
        "disabledBuiltinTools": "WebSearch",
        "dangerousMaxVersion": "latest"
    }));
    for p in [
        "d.chatTabEnabled",
        "d.desktopHome",
        "d.mcpToolTimeoutSec",
        "d.chatSessionRetentionDays",
        "d.coworkEgressAllowedHosts",
        "d.builtinToolPolicy",
        "d.disabledBuiltinTools",
        "d.dangerousMaxVersion",
    ] {
        assert!(error_for(&f, p).starts_with("cannot be read"), "{p}");
    }
}

#[test]
fn keys_the_gateway_cannot_serve_are_refused_with_the_reason() {
    let f = run(json!({
        "inferenceGatewayBaseUrl": "https://x",
        "otlpEndpoint": "https://x",
        "bootstrapUrl": "https://x",
        "selfHostedUrl": "https://x",
        "selfHostedAnything": 1
    }));
    assert!(error_for(&f, "d.inferenceGatewayBaseUrl").contains("upstreams"));
    assert!(error_for(&f, "d.otlpEndpoint").contains("telemetry.forward_to"));
    assert!(error_for(&f, "d.bootstrapUrl").contains("MDM"));
    assert!(error_for(&f, "d.selfHostedUrl").contains("off the device"));
    assert!(error_for(&f, "d.selfHostedAnything").contains("off the device"));
}

#[test]
fn typos_get_did_you_mean_and_gateway_keys_the_indentation_hint() {
    let f = run(json!({
        "disabledBuiltinTool": [],
        "coworkegressallowedhosts": [],
        "selfHostedUr": "x",
        "upstreams": [],
        "match": {},
        "inferenceFoo": 1
    }));
    assert!(error_for(&f, "d.disabledBuiltinTool").ends_with("did you mean disabledBuiltinTools?"));
    assert!(
        error_for(&f, "d.coworkegressallowedhosts")
            .ends_with("did you mean coworkEgressAllowedHosts?")
    );
    assert!(error_for(&f, "d.selfHostedUr").contains("the nearest one, selfHostedUrl"));
    assert!(error_for(&f, "d.upstreams").contains("check the indentation"));
    assert!(error_for(&f, "d.match").contains("check the indentation"));
    assert!(error_for(&f, "d.inferenceFoo").contains("unknown desktop key"));
}

#[test]
fn other_unknown_keys_warn_and_pass() {
    let f = run(json!({"someNewFeatureEnabled": true, "disabldBltnTols": [], "base_url": "x"}));
    assert!(f.errors.is_empty(), "{f:?}");
    assert_eq!(f.warnings.len(), 3);
    assert!(f.warnings[0].1.contains("it may be newer"));
}

#[test]
fn levenshtein() {
    assert_eq!(distance("kitten", "sitting"), 3);
    assert_eq!(distance("", "ab"), 2);
    assert_eq!(distance("same", "same"), 0);
}

#[test]
fn booleans_read_as_claude_desktop_reads_them() {
    for ok in [
        json!(true),
        json!(1),
        json!(0),
        json!(1.0),
        json!("TRUE"),
        json!(" false"),
        json!("1"),
        json!("0"),
    ] {
        let f = run(json!({ "chatTabEnabled": ok }));
        assert!(f.errors.is_empty(), "{ok}: {f:?}");
    }
    for bad in [json!(2), json!(-1), json!("yes"), json!("on"), json!("01")] {
        let f = run(json!({ "chatTabEnabled": bad }));
        assert!(
            error_for(&f, "d.chatTabEnabled").contains("true or false"),
            "{bad}"
        );
    }
}

#[test]
fn the_recheck_interval_is_two_to_thirty_whole_minutes() {
    for ok in [json!(2), json!(30), json!("7")] {
        let f = run(json!({ "configRecheckIntervalMinutes": ok }));
        assert!(f.errors.is_empty(), "{ok}: {f:?}");
    }
    for bad in [json!(1), json!(31), json!(2.5), json!(true)] {
        let f = run(json!({ "configRecheckIntervalMinutes": bad }));
        error_for(&f, "d.configRecheckIntervalMinutes");
    }
}

#[test]
fn every_marketplace_and_repository_entry_must_be_readable() {
    let ok = run(json!({
        "allowedPluginMarketplaces": [
            {"source": "github", "repo": "acme/plugins"},
            {"source": "git", "url": "https://git.example.com/p.git"},
            {"source": "url", "url": "http://127.0.0.1:8000/m.json"}
        ],
        "codeAllowedRepositories": [
            {"source": "github", "repo": "acme/app"},
            {"source": "git", "url": "git@git.example.com:acme/app.git"}
        ]
    }));
    assert!(ok.errors.is_empty(), "{ok:?}");
    let empty = run(json!({"allowedPluginMarketplaces": [], "codeAllowedRepositories": []}));
    assert!(empty.errors.is_empty(), "{empty:?}");
    let bad = run(json!({
        "allowedPluginMarketplaces": [{"source": "github", "repo": "a/b"}, "github:a/b"],
        "codeAllowedRepositories": [{"source": "git", "url": "https://git.example.com"}]
    }));
    // Each entry Claude Desktop would drop is named, as the reference names it.
    assert!(error_for(&bad, "d.allowedPluginMarketplaces[1]").contains("not a mapping"));
    assert!(
        bad.errors
            .iter()
            .all(|(p, _)| p != "d.allowedPluginMarketplaces[0]")
    );
    assert!(error_for(&bad, "d.codeAllowedRepositories[0]").contains("after the host"));
    let http = run(
        json!({"allowedPluginMarketplaces": [{"source": "url", "url": "http://m.example.com/x"}]}),
    );
    assert!(error_for(&http, "d.allowedPluginMarketplaces[0]").contains("https"));
}
