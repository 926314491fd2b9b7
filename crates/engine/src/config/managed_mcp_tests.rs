#![allow(clippy::unwrap_used)]
use super::*;
use serde_json::json;

fn issues(server: Value) -> Vec<String> {
    entry_issues(&server, "managedMcpServers.s")
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

#[test]
fn an_https_server_passes() {
    let ok = json!({"type": "http", "url": "https://mcp.example.com/x", "headers": {"A": "b"}});
    assert!(issues(ok).is_empty());
    assert!(issues(json!("not a mapping")).is_empty());
}

#[test]
fn every_rule_names_its_field_at_once() {
    let found = issues(json!({
        "type": "stdio",
        "command": "run.sh",
        "env": {},
        "url": "http://mcp.example.com",
        "headers": {"Authorization": "Bearer ${TOKEN}", "X": "a\u{200b}b"}
    }));
    for want in [
        "managedMcpServers.s.command",
        "managedMcpServers.s.env",
        "managedMcpServers.s.type",
        "managedMcpServers.s.url",
        "managedMcpServers.s.headers.Authorization",
        "managedMcpServers.s.headers.X",
    ] {
        assert!(found.contains(&want.to_owned()), "{want} in {found:?}");
    }
}

#[test]
fn variable_references_are_refused_and_other_placeholders_warned() {
    assert!(has_variable("${A}") && has_variable("x ${A_1:-d} y") && has_variable("$${B}"));
    assert!(
        !has_variable("${1}")
            && !has_variable("${ A}")
            && !has_variable("${A")
            && !has_variable("${A-d}")
    );
    let block = json!({"managedMcpServers": {
        "s": {"type": "http", "url": "https://h.example.com", "headers": {"K": "${not closed", "L": "plain"}}
    }});
    let found = placeholder_warnings(
        block.as_object().unwrap(),
        "managed.policies[0].cli",
        "managed.policies[0].cli",
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0].1,
        "managed.policies[0].cli: managedMcpServers.s.headers.K contains a \"${\" placeholder. Nothing fills it in, so Claude Code uses the text as written. Replace it with the actual value."
    );
}

#[test]
fn the_walk_stops_where_the_reference_stops() {
    let deep = json!({"type": "http", "url": "https://h.example.com",
        "a": {"b": {"c": {"d": {"e": {"f": "${X}"}}}}}});
    assert!(issues(deep).iter().all(|p| !p.ends_with(".f")));
    let shallow = json!({"type": "http", "url": "https://h.example.com", "a": {"b": "${X}"}});
    assert_eq!(issues(shallow), vec!["managedMcpServers.s.a.b"]);
}
