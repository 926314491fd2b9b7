//! Startup warnings for `managed` files that load but are risky or will not do what they
//! seem to (the reference gateway prints the same at start): Desktop reachability, the
//! Code-tab rules of `code:`/`serve_to_desktop`, the Desktop overlay's unknown and dated
//! keys, and the managed-settings values Claude Code or the gateway would ignore or refuse.
//!
//! Each warning is `(path, message)`.

use serde_json::{Map, Value};

use super::desktop_overlay;
use super::managed::PolicyConfig;

/// What the rules need from the rest of the file.
pub struct Context<'a> {
    pub public_url: Option<&'a str>,
    /// Some bedrock upstream has no `guardrail`.
    pub bedrock_without_guardrail: bool,
}

/// Claude Code's effort levels; anything else in `maxEffortLevel` is ignored by it.
const EFFORT_LEVELS: &[&str] = &["low", "medium", "high", "xhigh", "max"];
/// Model aliases Claude Code resolves itself; the gateway matches the raw model string, so
/// in `availableModels` they never match (family words such as `opus` do).
const CLI_ONLY_ALIASES: &[&str] = &["best", "sonnet[1m]", "opus[1m]", "fable[1m]", "opusplan"];

/// The model Claude Code starts on when nobody has picked one (the reference's default
/// `opus`, as of the pinned Claude Code).
const CLAUDE_CODE_DEFAULT_MODEL: &str = "claude-opus-4-7";
/// Settings that pick the model a session starts on, so the default never applies.
const MODEL_PICKERS: &[&str] = &[
    "ANTHROPIC_MODEL",
    "ANTHROPIC_DEFAULT_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
];

type Warning = (String, String);

pub fn warnings(policies: &[PolicyConfig], ctx: &Context<'_>) -> Vec<Warning> {
    let mut out = Vec::new();
    if policies.is_empty() {
        return out;
    }
    desktop_reach(policies, ctx, &mut out);
    code_tab(policies, ctx, &mut out);
    let base = policies.iter().find(|p| p.is_catch_all());
    for (i, p) in policies.iter().enumerate() {
        let block = format!(
            "managed.policies[{i}].{}",
            if p.under_code { "code" } else { "cli" }
        );
        if let Some(d) = &p.desktop {
            let at = format!("managed.policies[{i}].desktop");
            out.extend(desktop_overlay::check(d, &at).warnings);
            overlay_notes(d, &at, &mut out);
            if !d.contains_key("coworkEgressAllowedHosts") {
                egress_domains(effective(p, base, "sandbox"), &block, &mut out);
            }
        }
        settings_values(p, base, &block, &mut out);
        let (at, label) = if p.from_settings_file {
            ("managed.settings", "managed settings")
        } else {
            (block.as_str(), block.as_str())
        };
        out.extend(super::managed_mcp::placeholder_warnings(&p.cli, at, label));
    }
    default_model_left_out(policies, base, &mut out);
    let text = policies
        .iter()
        .map(|p| Value::Object(p.cli.clone()).to_string())
        .collect::<String>()
        .to_lowercase();
    if ctx.bedrock_without_guardrail && text.contains("x-amzn-bedrock-guardrailidentifier") {
        out.push(("managed".into(), "managed settings contain an X-Amzn-Bedrock-GuardrailIdentifier header. The gateway does not forward it to Bedrock and a bedrock upstream has no guardrail:, so the header has no effect there. To apply a guardrail, set guardrail: on every bedrock upstream".into()));
    }
    out
}

/// A key of a policy's settings as served: its own, else the catch-all's.
fn effective<'a>(
    p: &'a PolicyConfig,
    base: Option<&'a PolicyConfig>,
    key: &str,
) -> Option<&'a Value> {
    p.cli.get(key).or_else(|| base.and_then(|b| b.cli.get(key)))
}

fn desktop_reach(policies: &[PolicyConfig], ctx: &Context<'_>, out: &mut Vec<Warning>) {
    let any_desktop = policies.iter().any(|p| p.desktop.is_some());
    if any_desktop && ctx.public_url.is_none() {
        out.push(("managed.policies".into(), "listen.public_url is not set, so Desktop overlay values pinned to the gateway's origin cannot be checked at start and Claude Desktop would drop them; set listen.public_url".into()));
    }
    if !any_desktop {
        out.push(("managed".into(), "no managed policy carries a desktop: block, so Claude Desktop clients will be rejected by /user/bootstrap until a policy opts in".into()));
    }
}

fn code_tab(policies: &[PolicyConfig], ctx: &Context<'_>, out: &mut Vec<Warning>) {
    let code: Vec<&PolicyConfig> = policies.iter().filter(|p| p.under_code).collect();
    if code.iter().any(|p| !p.cli.is_empty()) {
        out.push(("managed.policies".into(), format!(
            "settings in a code: block reach Claude Desktop's Code tab only on machines whose own Claude Code managed settings name this gateway and that reach it over HTTPS on a private network; on any other machine the Code tab does not start. Each machine's Claude Code managed settings need: {}",
            serde_json::json!({
                "forceLoginGatewayUrl": ctx.public_url.unwrap_or("<listen.public_url>"),
                "parentSettingsBehavior": "merge"
            })
        )));
    }
    for (i, p) in policies.iter().enumerate() {
        if p.under_code && p.serve_to_desktop == Some(false) {
            out.push((format!("managed.policies[{i}].serve_to_desktop"), "serve_to_desktop: false is ignored in a file that has a code: block, so this policy's settings reach Claude Desktop's Code tab too. Remove it, or write every block under cli: (terminal Claude Code only)".into()));
        }
    }
    let cli_with_desktop = policies
        .iter()
        .any(|p| p.desktop.is_some() && !p.under_code && !p.cli.is_empty());
    if cli_with_desktop && !policies.iter().any(|p| p.serve_to_desktop == Some(false)) {
        out.push(("managed.policies".into(), "Claude Code settings outside a code: block do not reach the Code tab of a Claude Desktop connected through bootstrap, even with serve_to_desktop: true. To reach it, write every policy's block under code: (read \"Choose cli or code\" in the docs first); serve_to_desktop: false silences this and serves Claude Desktop sessions nothing".into()));
    }
}

/// Dated deprecations and keys the gateway serves but that do nothing through it.
fn overlay_notes(d: &Map<String, Value>, at: &str, out: &mut Vec<Warning>) {
    let mut note = |m: &str| out.push((at.to_owned(), m.to_owned()));
    if !d.contains_key("desktopHome") {
        if d.get("coworkTabEnabled") == Some(&Value::Bool(false)) {
            note(
                "from November 10, 2026, coworkTabEnabled no longer keeps Cowork off while desktopHome is not set: current Claude Desktop versions then open Unified Claude with Cowork on",
            );
        }
        if let Some(chat) = d.get("chatSessionRetentionDays")
            && d.get("coworkSessionRetentionDays") != Some(chat)
        {
            note(
                "from November 10, 2026, while desktopHome is not set, Claude Desktop starts new conversations as Cowork tasks, which chatSessionRetentionDays does not delete; set coworkSessionRetentionDays to the same number to delete both after the same days",
            );
        }
    }
    if d.contains_key("organizationPluginsUrl") {
        note(
            "organizationPluginsUrl is deprecated and stops being accepted on October 7, 2026; use an allowedPluginMarketplaces entry with \"source\": \"url\"",
        );
    }
    if d.contains_key("allowOptionalClientAuth") {
        note(
            "allowOptionalClientAuth is deprecated and stops being accepted on November 17, 2026; use Claude Desktop 1.49585.0 or later on every device, then remove the key",
        );
    }
    if d.get("orgPluginSettings").is_some_and(Value::is_object) {
        note(
            "orgPluginSettings as a mapping is deprecated and stops being accepted on October 7, 2026; use the list form [{\"serverName\": ..., \"tools\": [...]}]",
        );
    }
    if d.get("dictationEnabled") == Some(&Value::Bool(true)) {
        note(
            "dictationEnabled is set, but this gateway has no dictation route, so dictation in Claude Desktop will fail; remove the key",
        );
    }
    if d.contains_key("codeAllowedRepositories") {
        note(
            "codeAllowedRepositories is served, but Claude Desktop does not apply it yet where sessions run on the device, as every session of this gateway does",
        );
    }
}

/// The CLI sandbox's allowed domains become the Desktop's egress hosts: an explicitly empty
/// list serves nothing.
fn egress_domains(sandbox: Option<&Value>, block: &str, out: &mut Vec<Warning>) {
    let Some(Value::Array(domains)) = sandbox.and_then(|s| s.pointer("/network/allowedDomains"))
    else {
        return;
    };
    if domains.is_empty() {
        out.push((format!("{block}.sandbox.network.allowedDomains"), "is explicitly empty, so no coworkEgressAllowedHosts is derived for Claude Desktop (desktops treat absent and empty alike); remove the key, or list the domains to allow".into()));
    }
}

fn settings_values(
    p: &PolicyConfig,
    base: Option<&PolicyConfig>,
    block: &str,
    out: &mut Vec<Warning>,
) {
    let mut efforts = vec![(
        "maxEffortLevel".to_owned(),
        effective(p, base, "maxEffortLevel"),
    )];
    if let Some(Value::Object(models)) = effective(p, base, "modelSettings") {
        for (name, s) in models {
            efforts.push((
                format!("modelSettings.{name}.maxEffortLevel"),
                s.get("maxEffortLevel"),
            ));
        }
    }
    for (key, v) in efforts {
        if let Some(v) = v
            && !v.as_str().is_some_and(|s| EFFORT_LEVELS.contains(&s))
        {
            out.push((format!("{block}.{key}"), format!("{v} is not one of {}, so Claude Code ignores it; fix the value, or upgrade the gateway if the level is new", EFFORT_LEVELS.join(", "))));
        }
    }
    let Some(Value::Array(models)) = effective(p, base, "availableModels") else {
        return;
    };
    let at = format!("{block}.availableModels");
    if models.is_empty() {
        out.push((at, "is an empty list. Claude Code reads that as \"Default model only\", but the gateway checks requests against the list itself, so every inference request for this role is refused. List the models this role may use".into()));
        return;
    }
    let aliases: Vec<&str> = models
        .iter()
        .filter_map(Value::as_str)
        .filter(|m| CLI_ONLY_ALIASES.contains(&m.trim().to_lowercase().as_str()))
        .collect();
    if !aliases.is_empty() {
        let effect = if aliases.len() == models.len() {
            "so every inference request for this role is refused"
        } else {
            "so these entries never match (the others still do)"
        };
        out.push((at, format!("contains {}: Claude Code resolves these aliases when picking a model, but the gateway matches the model string of the request, {effect}. List model ids or family words (fable, opus, sonnet, haiku) instead", aliases.join(", "))));
    }
}

/// Policies whose `availableModels` leaves out the model Claude Code starts on, with
/// nothing that picks another: their developers' first request is refused.
fn default_model_left_out(
    policies: &[PolicyConfig],
    base: Option<&PolicyConfig>,
    out: &mut Vec<Warning>,
) {
    let mut left_out = Vec::new();
    for (i, p) in policies.iter().enumerate() {
        let Some(Value::Array(list)) = effective(p, base, "availableModels") else {
            continue;
        };
        let list: Vec<String> = list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        let env = effective(p, base, "env");
        let picked = effective(p, base, "model").is_some_and(Value::is_string)
            || effective(p, base, "enforceAvailableModels") == Some(&Value::Bool(true))
            || effective(p, base, "availableModelsMatch").and_then(Value::as_str) == Some("exact")
            || MODEL_PICKERS
                .iter()
                .any(|k| env.and_then(|e| e.get(*k)).is_some_and(Value::is_string));
        if !list.is_empty()
            && !picked
            && !crate::policy::model_rules::allows(&list, CLAUDE_CODE_DEFAULT_MODEL, false)
        {
            left_out.push(i.to_string());
        }
    }
    if left_out.is_empty() {
        return;
    }
    let who = if left_out.len() == 1 {
        format!("policy {}", left_out[0])
    } else {
        format!("policies {}", left_out.join(", "))
    };
    out.push(("managed.policies".into(), format!("managed {who}: availableModels leaves out {CLAUDE_CODE_DEFAULT_MODEL}, the model Claude Code (as of this release) starts on when nobody has picked one, and neither model nor enforceAvailableModels is set, so those developers get a 400 on every request until they pick a listed model with /model. Add enforceAvailableModels: true so the Default option resolves to a listed model, or set model.")));
}

#[cfg(test)]
#[path = "managed_warnings_tests.rs"]
mod tests;
