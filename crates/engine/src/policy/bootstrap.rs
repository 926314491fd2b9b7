//! The Claude Desktop bootstrap document (`/user/bootstrap`).
//!
//! The policy's Desktop overlay is served whole (config validation admitted only keys a
//! gateway may serve); connection, credential and telemetry fields are written by the
//! gateway over it. Disabled tools also come from the CLI policy's argument-less, non-MCP
//! deny rules, egress hosts from its sandbox allowed domains.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

use super::ResolvedPolicy;

pub struct BootstrapContext<'a> {
    pub public_origin: &'a str,
    pub models: Vec<Value>,
    pub otlp_endpoint: Option<&'a str>,
    /// `telemetry.resource_attributes`, sent before the gateway's own labels.
    pub resource_attributes: &'a [(String, String)],
    pub subject: &'a str,
    pub expires_at: DateTime<Utc>,
}

/// Deny rules such as `WebFetch` (no argument, not `mcp__...`) name whole built-in tools.
fn disabled_from_deny(settings: &Value) -> Vec<Value> {
    settings["permissions"]["deny"]
        .as_array()
        .map(|rules| {
            rules
                .iter()
                .filter_map(Value::as_str)
                .filter(|r| !r.contains('(') && !r.starts_with("mcp__") && !r.is_empty())
                .map(|r| Value::String(r.to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn push_unique(list: &mut Vec<Value>, items: impl IntoIterator<Item = Value>) {
    for i in items {
        if !list.contains(&i) {
            list.push(i);
        }
    }
}

pub fn document(policy: &ResolvedPolicy, ctx: &BootstrapContext<'_>) -> Value {
    let overlay: Map<String, Value> = policy.desktop.clone().unwrap_or_default();
    let mut disabled = Vec::new();
    push_unique(&mut disabled, disabled_from_deny(&policy.settings));
    if let Some(Value::Array(a)) = overlay.get("disabledBuiltinTools") {
        push_unique(&mut disabled, a.iter().cloned());
    }
    let mut egress = Vec::new();
    if let Some(Value::Array(a)) = policy.settings.pointer("/sandbox/network/allowedDomains") {
        push_unique(&mut egress, a.iter().cloned());
    }
    if let Some(Value::Array(a)) = overlay.get("coworkEgressAllowedHosts") {
        push_unique(&mut egress, a.iter().cloned());
    }
    let mut doc = Value::Object(overlay);
    let gateway = json!({
        "inferenceProvider": "gateway",
        "inferenceGatewayBaseUrl": ctx.public_origin,
        "inferenceCredentialKind": "interactive",
        "models": ctx.models,
        "disabledBuiltinTools": disabled,
        "coworkEgressAllowedHosts": egress,
        "expiresAt": ctx.expires_at.to_rfc3339_opts(SecondsFormat::Secs, true),
    });
    if let (Value::Object(d), Value::Object(g)) = (&mut doc, gateway) {
        d.extend(g);
    }
    if policy.under_code && policy.served_to_desktop {
        doc["inferenceGatewayManagedClaudeCode"] = Value::Bool(true);
    }
    if let Some(endpoint) = ctx.otlp_endpoint {
        doc["otlpEndpoint"] = Value::String(endpoint.to_owned());
        doc["otlpProtocol"] = Value::String("http/json".into());
        let mut attrs: Map<String, Value> = ctx
            .resource_attributes
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        attrs.insert("enduser.id".into(), Value::String(ctx.subject.to_owned()));
        doc["otlpResourceAttributes"] = Value::Object(attrs);
    }
    doc
}
