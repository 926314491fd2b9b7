//! Startup warnings: choices a valid file makes that are probably not what the operator
//! meant (the reference's warnings at start). Each names the key path and what to do;
//! `gatehouse serve` logs them and `gatehouse check-config` prints them, and neither
//! refuses the file for them.
//!
//! The rules that only need the file live here ([`of_file`], [`upstreams`]); the ones that
//! need the built-in model and price tables are `crate::models::warnings` (added by
//! `crate::check_config`), and [`after_discovery`] runs when the IdP's discovery document
//! has been fetched.

use super::raw::RawConfig;
use super::{Config, OidcConfig, UpstreamConfig};
use crate::deps::Environment;

/// One warning: where, and what is risky there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    pub path: String,
    pub message: String,
}

impl ConfigWarning {
    pub fn at(path: &str, message: impl Into<String>) -> Self {
        Self {
            path: path.to_owned(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every warning about a validated file that needs only the file and the environment.
pub(super) fn of_file(
    raw: &RawConfig,
    config: &Config,
    env: &dyn Environment,
) -> Vec<ConfigWarning> {
    let mut out = Vec::new();
    telemetry(raw, config, &mut out);
    catch_all_not_last(config, &mut out);
    out.extend(upstreams(&config.upstreams));
    govcloud(raw, &mut out);
    ignored_base_url_variables(raw, env, &mut out);
    pricing(raw, config, &mut out);
    cri(raw, &mut out);
    cri_only(raw, config, &mut out);
    if raw.load_test_mode.as_ref().is_some_and(|l| l.enabled) {
        out.push(ConfigWarning::at(
            "load_test_mode.enabled",
            "load test mode is on: inference requests get canned replies and no upstream is called. Turn it off outside capacity tests",
        ));
    }
    google(raw, &mut out);
    managed(config, &mut out);
    out.extend(super::drop_in_warnings::check(raw));
    out
}

/// The managed-settings and Desktop-overlay rules (`super::managed_warnings`).
fn managed(config: &Config, out: &mut Vec<ConfigWarning>) {
    let public_url = config.listen.public_url.as_ref().map(url::Url::as_str);
    let ctx = super::managed_warnings::Context {
        public_url: public_url.map(|u| u.trim_end_matches('/')),
        bedrock_without_guardrail: config
            .upstreams
            .iter()
            .any(|u| matches!(&u.provider, super::Provider::Bedrock(b) if b.guardrail.is_none())),
    };
    for (path, message) in super::managed_warnings::warnings(&config.policies, &ctx) {
        out.push(ConfigWarning::at(&path, message));
    }
}

fn telemetry(raw: &RawConfig, config: &Config, out: &mut Vec<ConfigWarning>) {
    if !config.telemetry.destinations.is_empty() && config.listen.public_url.is_none() {
        out.push(ConfigWarning::at(
            "telemetry.forward_to",
            "set without listen.public_url, so clients are not told to export OTLP here. Set listen.public_url so managed settings can push OTEL_EXPORTER_OTLP_ENDPOINT",
        ));
    }
    let t = raw.telemetry.as_ref();
    if t.and_then(|t| t.resource_attributes.as_ref())
        .is_some_and(|a| !a.is_empty())
        && t.is_some_and(|t| t.forward_to.is_empty())
    {
        out.push(ConfigWarning::at(
            "telemetry.resource_attributes",
            "set but telemetry.forward_to is empty, so the labels are never applied",
        ));
    }
}

fn catch_all_not_last(config: &Config, out: &mut Vec<ConfigWarning>) {
    let policies = &config.policies;
    if let Some(pos) = policies.iter().position(|p| p.is_catch_all())
        && pos + 1 < policies.len()
    {
        out.push(ConfigWarning::at(
            &format!("managed.policies[{pos}]"),
            "matches everyone but is not the last policy: the policies after it never match (it is still merged under them as the base). Move it to the end",
        ));
    }
}

/// What an operator should hear about each upstream: a credential without a value, and
/// identity headers going to the upstream's host.
pub fn upstreams(upstreams: &[UpstreamConfig]) -> Vec<ConfigWarning> {
    let mut out = Vec::new();
    for (i, u) in upstreams.iter().enumerate() {
        if let Some(hint) = u.missing_credential() {
            out.push(ConfigWarning::at(&format!("upstreams[{i}].auth"), hint));
        }
        if u.forward_user_identity {
            let origin = u.base_url.origin().ascii_serialization();
            out.push(ConfigWarning::at(
                &format!("upstreams[{i}].forward_user_identity"),
                format!(
                    "sends each signed-in person's sub and email to {origin}; make sure that host is yours"
                ),
            ));
        }
    }
    out
}

/// Whether two upstreams can serve the same person: either is open to everyone, or they
/// share a group.
fn same_people(a: Option<&Vec<String>>, b: Option<&Vec<String>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.iter().any(|g| b.contains(g)),
        _ => true,
    }
}

fn govcloud(raw: &RawConfig, out: &mut Vec<ConfigWarning>) {
    let gov = |u: &super::raw::RawUpstream| {
        u.region
            .as_deref()
            .is_some_and(|r| r.trim().to_ascii_lowercase().starts_with("us-gov-"))
    };
    for (i, u) in raw.upstreams.iter().enumerate().filter(|(_, u)| gov(u)) {
        let others: Vec<String> = raw
            .upstreams
            .iter()
            .filter(|o| !gov(o) && same_people(u.groups.as_ref(), o.groups.as_ref()))
            .map(|o| format!("'{}'", o.name()))
            .collect();
        if !others.is_empty() {
            out.push(ConfigWarning::at(
                &format!("upstreams[{i}].region"),
                format!(
                    "upstream '{}' is in AWS GovCloud, but the people it serves can also reach {} outside GovCloud: a conversation can move there without notice (another model, or failover). Set groups so that no one reaches both sides",
                    u.name(),
                    others.join(", ")
                ),
            ));
        }
    }
}

/// `ANTHROPIC_{BEDROCK,VERTEX,FOUNDRY}_BASE_URL`: the cloud SDKs' variables, which the
/// gateway does not read; upstreams without `base_url` go to the provider's endpoint.
fn ignored_base_url_variables(
    raw: &RawConfig,
    env: &dyn Environment,
    out: &mut Vec<ConfigWarning>,
) {
    for (var, provider) in [
        ("ANTHROPIC_BEDROCK_BASE_URL", "bedrock"),
        ("ANTHROPIC_VERTEX_BASE_URL", "vertex"),
        ("ANTHROPIC_FOUNDRY_BASE_URL", "foundry"),
    ] {
        if env.var(var).is_none_or(|v| v.trim().is_empty()) {
            continue;
        }
        let names: Vec<String> = raw
            .upstreams
            .iter()
            .filter(|u| u.provider.as_str() == provider && u.base_url.is_none())
            .map(|u| format!("'{}'", u.name()))
            .collect();
        if !names.is_empty() {
            out.push(ConfigWarning::at(
                var,
                format!(
                    "set in the gateway's environment, but the gateway does not read it: the {provider} upstreams without base_url ({}) go to the provider's default endpoint. Copy the URL into their base_url, or remove the variable",
                    names.join(", ")
                ),
            ));
        }
    }
}

fn pricing(raw: &RawConfig, config: &Config, out: &mut Vec<ConfigWarning>) {
    let m = config.pricing.multiplier;
    if m > 1.0 {
        let caps = if config.spend.is_some() {
            format!(
                " Spend limits count {m}x the price, so developers reach them sooner; raise the caps if that is not intended."
            )
        } else {
            String::new()
        };
        out.push(ConfigWarning::at(
            "pricing.multiplier",
            format!("is {m}, a markup.{caps}"),
        ));
    }
    if let Some(admin) = &raw.admin
        && admin
            .pooled_priority_order
            .as_ref()
            .is_some_and(|o| !o.is_empty())
        && admin.pooled_conflict_rule.as_deref() != Some("priority_list")
    {
        out.push(ConfigWarning::at(
            "admin.pooled_priority_order",
            "is ignored unless admin.pooled_conflict_rule is priority_list",
        ));
    }
}

/// An organisation id as Anthropic writes them: a canonical 8-4-4-4-12 UUID.
fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn cri(raw: &RawConfig, out: &mut Vec<ConfigWarning>) {
    let Some(cri) = &raw.cri else { return };
    if cri.enabled != Some(true) {
        out.push(ConfigWarning::at(
            "cri.enabled",
            "a cri block is present but not enabled, so workload tokens are refused. Set cri.enabled: true, or remove the block",
        ));
        return;
    }
    for (i, org) in cri.org_allowlist.iter().enumerate() {
        if !is_uuid(org.trim()) {
            out.push(ConfigWarning::at(
                &format!("cri.org_allowlist[{i}]"),
                format!(
                    "'{org}' is not a UUID (8-4-4-4-12): Anthropic organization ids are, so it will never match a caller's org claim"
                ),
            ));
        }
    }
}

/// A CRI-only deployment (no `oidc`): no one can sign in, so what acts on signed-in
/// people never acts.
fn cri_only(raw: &RawConfig, config: &Config, out: &mut Vec<ConfigWarning>) {
    if config.identity.is_some() || config.workload.is_none() {
        return;
    }
    let mut inert = Vec::new();
    if !config.policies.is_empty() {
        inert.push((
            "managed".to_owned(),
            "no signed-in person can fetch managed settings",
        ));
    }
    if raw.admin.is_some() {
        inert.push((
            "admin".to_owned(),
            "spend limits bind signed-in people only",
        ));
    }
    if !config.telemetry.destinations.is_empty() {
        inert.push((
            "telemetry.forward_to".to_owned(),
            "the OTLP relay takes signed-in callers only",
        ));
    }
    for (i, u) in config.upstreams.iter().enumerate() {
        if u.forward_user_identity {
            inert.push((
                format!("upstreams[{i}].forward_user_identity"),
                "identity headers name a signed-in person, and there is none",
            ));
        }
    }
    if raw.login_notice.is_some() {
        inert.push(("login_notice".to_owned(), "no one signs in to see it"));
    }
    for (path, why) in inert {
        out.push(ConfigWarning::at(
            &path,
            format!(
                "never acts: oidc is not configured (CRI-only deployment), so {why}. Remove it, or configure oidc if sign-in is intended"
            ),
        ));
    }
}

/// Google as the IdP (`https://accounts.google.com`).
fn is_google(issuer: &str) -> bool {
    url::Url::parse(issuer.trim())
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
        .is_some_and(|h| h == "accounts.google.com")
}

fn google(raw: &RawConfig, out: &mut Vec<ConfigWarning>) {
    let Some(oidc) = &raw.oidc else { return };
    let google = is_google(&oidc.issuer);
    if google {
        let param = |k: &str, v: &str| oidc.extra_auth_params.get(k).is_some_and(|x| x.trim() == v);
        if !(param("access_type", "offline") && param("prompt", "consent")) {
            out.push(ConfigWarning::at(
                "oidc.extra_auth_params",
                "Google gives a refresh token only with access_type: offline and prompt: consent; without both, a session ends when Google's ID token expires (about an hour). Add them to extra_auth_params",
            ));
        }
        if !oidc.allowed_groups.is_empty() && oidc.google_groups.is_none() {
            out.push(ConfigWarning::at(
                "oidc.allowed_groups",
                "Google ID tokens carry no groups, so no one passes allowed_groups. Configure oidc.google_groups to read groups from Google Workspace",
            ));
        }
    } else if oidc.google_groups.is_some() {
        out.push(ConfigWarning::at(
            "oidc.google_groups",
            "only applies to Google as the IdP (issuer https://accounts.google.com); it is ignored with this issuer",
        ));
    }
}

/// The warnings that need the IdP's discovery document: `scopes` leaving out
/// `offline_access` although the IdP offers it (no refresh token: sessions end with the ID
/// token).
pub fn after_discovery(
    oidc: &OidcConfig,
    scopes_supported: Option<&[String]>,
) -> Vec<ConfigWarning> {
    let offered = scopes_supported.is_some_and(|s| s.iter().any(|s| s == "offline_access"));
    if offered && !oidc.scopes.iter().any(|s| s == "offline_access") {
        return vec![ConfigWarning::at(
            "oidc.scopes",
            "leaves out offline_access, which the IdP offers: without it the IdP may issue no refresh token and sessions end when the ID token expires. Add offline_access to oidc.scopes",
        )];
    }
    Vec::new()
}
