//! Validation of the sign-in blocks: `oidc`, `session` and `rate_limits`.

use std::time::Duration;

use super::raw::{RawConfig, RawRate};
use super::{ConfigError, IdentityConfig, Listen, OidcConfig, RateLimit, WorkloadConfig};
use crate::secret::Secret;

/// `session.ttl_hours` above this (10 years) is held to it.
pub const MAX_SESSION_TTL_HOURS: f64 = 24.0 * 365.0 * 10.0;

/// Session secrets shorter than this are refused.
pub const MIN_SESSION_SECRET_LEN: usize = 32;
/// Parameters the gateway sets itself in the authorization request.
const PROTOCOL_PARAMS: &[&str] = &[
    "client_id",
    "redirect_uri",
    "response_type",
    "scope",
    "state",
    "nonce",
    "code_challenge",
    "code_challenge_method",
    "response_mode",
];

/// `env_loopback`: `CLAUDE_GATEWAY_ALLOW_LOOPBACK` is set.
pub fn validate(
    raw: &RawConfig,
    listen: &Listen,
    env_loopback: bool,
) -> Result<Option<IdentityConfig>, ConfigError> {
    let cri_enabled = raw.cri.as_ref().is_some_and(|c| c.enabled == Some(true));
    let (oidc, session) = match (&raw.oidc, &raw.session) {
        // A workload-only deployment (CRI on, no sign-in) still needs `session`, as in the
        // reference. A file with neither and CRI off is a Gatehouse one (client keys).
        (None, None) if cri_enabled => {
            return Err(ConfigError::at(
                "session",
                "required: a workload-only deployment (cri without oidc) still needs session.jwt_secret",
            ));
        }
        (None, None) => return Ok(None),
        (Some(_), None) => {
            return Err(ConfigError::at(
                "session",
                "required when `oidc` is configured",
            ));
        }
        (None, Some(s)) => {
            if !cri_enabled {
                return Err(ConfigError::at(
                    "oidc",
                    "is required; it may be omitted only for a workload-only deployment (cri.enabled: true)",
                ));
            }
            // Workload-only: the session block is checked, sign-in stays off.
            session_secrets(s)?;
            return Ok(None);
        }
        (Some(o), Some(s)) => (o, s),
    };
    // On a loopback listener without `public_url`, the bound address is the origin.
    let (public_url, public_url_derived) = match &listen.public_url {
        Some(u) => (u.clone(), false),
        None => {
            let scheme = if listen.tls.is_some() {
                "https"
            } else {
                "http"
            };
            let url = url::Url::parse(&format!(
                "{scheme}://{}",
                std::net::SocketAddr::new(listen.host, listen.port)
            ))
            .map_err(|e| ConfigError::at("listen.public_url", e.to_string()))?;
            (url, true)
        }
    };
    let secrets = session_secrets(session)?;
    // Any number, as the reference takes it; `warnings` names one outside (0, 720]. Zero
    // or less issues sessions that are already expired; the lifetime is held to 10 years
    // so time arithmetic cannot overflow.
    let ttl_hours = session
        .ttl_hours
        .unwrap_or(1.0)
        .clamp(0.0, MAX_SESSION_TTL_HOURS);
    let ttl_hours = if ttl_hours.is_nan() { 0.0 } else { ttl_hours };
    let issuer = url::Url::parse(&oidc.issuer)
        .map_err(|e| ConfigError::at("oidc.issuer", format!("invalid URL: {e}")))?;
    if !matches!(issuer.scheme(), "https" | "http")
        || issuer.query().is_some()
        || issuer.fragment().is_some()
    {
        return Err(ConfigError::at(
            "oidc.issuer",
            "must be an http(s) URL without query or fragment",
        ));
    }
    let loopback_ok = env_loopback || oidc.allow_loopback == Some(true);
    super::targets::check(&issuer, loopback_ok).map_err(|m| ConfigError::at("oidc.issuer", m))?;
    if oidc.client_id.trim().is_empty() {
        return Err(ConfigError::at("oidc.client_id", "must not be empty"));
    }
    if oidc.groups_claim.as_deref().is_some_and(str::is_empty) {
        return Err(ConfigError::at(
            "oidc.groups_claim",
            "must not be empty (leave it out for `groups`)",
        ));
    }
    let extras = super::oidc::validate(oidc, loopback_ok)?;
    let scopes = oidc.scopes.clone().unwrap_or_else(|| {
        ["openid", "profile", "email", "offline_access"]
            .map(String::from)
            .to_vec()
    });
    if !scopes.iter().any(|s| s == "openid") {
        return Err(ConfigError::at("oidc.scopes", "must include `openid`"));
    }
    for k in oidc.extra_auth_params.keys() {
        if PROTOCOL_PARAMS.contains(&k.as_str()) {
            return Err(ConfigError::at(
                &format!("oidc.extra_auth_params.{k}"),
                "is set by the gateway and cannot be overridden",
            ));
        }
    }
    let login_notice = match (&raw.login_notice, &oidc.login_notice) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::at(
                "login_notice",
                "is also set as oidc.login_notice; keep one",
            ));
        }
        (Some(n), None) => Some(clean_notice("login_notice", n)?),
        (None, Some(n)) => Some(clean_notice("oidc.login_notice", n)?),
        (None, None) => None,
    };
    let email_claims = oidc
        .email_claim
        .clone()
        .map_or_else(|| vec!["email".to_owned()], |c| c.into_vec());
    if email_claims.is_empty() || email_claims.iter().any(|c| c.trim().is_empty()) {
        return Err(ConfigError::at(
            "oidc.email_claim",
            "must name at least one claim",
        ));
    }
    let domains = trimmed(
        &oidc.allowed_email_domains,
        |d| d.trim().trim_start_matches('@').to_ascii_lowercase(),
        "oidc.allowed_email_domains",
    )?;
    let allowed_groups = trimmed(
        &oidc.allowed_groups,
        |g| g.trim().to_owned(),
        "oidc.allowed_groups",
    )?;
    Ok(Some(IdentityConfig {
        public_url,
        public_url_derived,
        session_secrets: secrets.into_iter().map(Secret::new).collect(),
        session_ttl: Duration::from_secs_f64(ttl_hours * 3600.0),
        oidc: OidcConfig {
            issuer: oidc.issuer.trim_end_matches('/').to_owned(),
            client_id: oidc.client_id.clone(),
            extras,
            scopes,
            use_pkce: oidc.use_pkce.unwrap_or(true),
            allowed_email_domains: domains,
            allowed_groups,
            groups_claim: oidc
                .groups_claim
                .clone()
                .unwrap_or_else(|| "groups".to_owned()),
            email_claims,
            userinfo_fallback: oidc.userinfo_fallback.unwrap_or(false),
            extra_auth_params: oidc
                .extra_auth_params
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            login_notice,
            allow_loopback: loopback_ok,
        },
        device_authorization_limit: rate(
            raw.rate_limits.device_authorization,
            30,
            600,
            "rate_limits.device_authorization",
        )?,
        device_verify_limit: rate(
            raw.rate_limits.device_verify,
            10,
            600,
            "rate_limits.device_verify",
        )?,
        billing_group_tag: raw.admin.as_ref().and_then(|a| a.billing_group_tag.clone()),
    }))
}

/// The session secrets: at least one, each long enough.
fn session_secrets(session: &super::raw::RawSession) -> Result<Vec<String>, ConfigError> {
    let secrets: Vec<String> = session.jwt_secret.clone().into_vec();
    if secrets.is_empty() {
        return Err(ConfigError::at(
            "session.jwt_secret",
            "must not be an empty list",
        ));
    }
    for (i, s) in secrets.iter().enumerate() {
        if s.chars().count() < MIN_SESSION_SECRET_LEN {
            let path = if matches!(session.jwt_secret, super::raw::OneOrMany::One(_)) {
                "session.jwt_secret".to_owned()
            } else {
                format!("session.jwt_secret[{i}]")
            };
            return Err(ConfigError::at(
                &path,
                format!("must be at least {MIN_SESSION_SECRET_LEN} characters"),
            ));
        }
    }
    Ok(secrets)
}

/// A list normalised entry by entry with empty results dropped; a non-empty list whose
/// every entry is empty is refused (as the reference does).
fn trimmed(
    list: &[String],
    norm: impl Fn(&str) -> String,
    path: &str,
) -> Result<Vec<String>, ConfigError> {
    let out: Vec<String> = list
        .iter()
        .map(|s| norm(s))
        .filter(|s| !s.is_empty())
        .collect();
    if !list.is_empty() && out.is_empty() {
        return Err(ConfigError::at(
            path,
            "contains only empty entries after normalization",
        ));
    }
    Ok(out)
}

fn rate(
    raw: Option<RawRate>,
    limit: u32,
    window: u64,
    path: &str,
) -> Result<RateLimit, ConfigError> {
    let r = raw.unwrap_or(RawRate {
        limit: None,
        window_seconds: None,
    });
    let (limit, window) = (r.limit.unwrap_or(limit), r.window_seconds.unwrap_or(window));
    if limit == 0 {
        return Err(ConfigError::at(
            &format!("{path}.max"),
            "must be greater than 0 (requests per window; Gatehouse also reads it as `limit`)",
        ));
    }
    if window == 0 {
        return Err(ConfigError::at(
            &format!("{path}.window_seconds"),
            "must be greater than 0",
        ));
    }
    Ok(RateLimit {
        limit,
        window: Duration::from_secs(window),
    })
}

/// The issuer of Anthropic's workload tokens.
pub const DEFAULT_CRI_ISSUER: &str = "https://api.anthropic.com/api/oauth/cri";

pub fn validate_workload(
    raw: &RawConfig,
    env_loopback: bool,
) -> Result<Option<WorkloadConfig>, ConfigError> {
    let Some(cri) = &raw.cri else { return Ok(None) };
    if !cri.enabled.unwrap_or(false) {
        return Ok(None);
    }
    let issuer = cri
        .issuer
        .clone()
        .unwrap_or_else(|| DEFAULT_CRI_ISSUER.to_owned());
    let loopback_ok = cri.allow_loopback_jwks == Some(true) || env_loopback;
    let parsed = url::Url::parse(&issuer)
        .map_err(|e| ConfigError::at("cri.issuer", format!("invalid URL: {e}")))?;
    if parsed.scheme() != "https" && !(loopback_ok && is_loopback_url(&parsed)) {
        return Err(ConfigError::at("cri.issuer", "must be https"));
    }
    if parsed.query().is_some()
        || parsed.fragment().is_some()
        || issuer.ends_with('/')
        || parsed.as_str().trim_end_matches('/') != issuer
    {
        return Err(ConfigError::at(
            "cri.issuer",
            "must be a canonical URL without query, fragment or trailing slash",
        ));
    }
    let jwks_url = match &cri.jwks_url {
        None => url::Url::parse(&format!("{issuer}/jwks.json"))
            .map_err(|e| ConfigError::at("cri.issuer", e.to_string()))?,
        Some(u) => {
            let url = url::Url::parse(u)
                .map_err(|e| ConfigError::at("cri.jwks_url", format!("invalid URL: {e}")))?;
            if !loopback_ok || !is_loopback_url(&url) {
                return Err(ConfigError::at(
                    "cri.jwks_url",
                    "may only point at a loopback address, with CLAUDE_GATEWAY_ALLOW_LOOPBACK set (or `allow_loopback_jwks: true`; tests); production keys come from the issuer",
                ));
            }
            url
        }
    };
    // Both lists are judged, so a file missing both hears of both.
    let mut lists = super::validate::Issues::default();
    if cri.audience.is_empty() || cri.audience.iter().any(|a| a.trim().is_empty()) {
        lists.push("cri.audience", "must list at least one non-empty audience");
    }
    if cri.org_allowlist.is_empty() || cri.org_allowlist.iter().any(|o| o.trim().is_empty()) {
        lists.push(
            "cri.org_allowlist",
            "must list at least one organization (an empty list is not \"allow all\")",
        );
    }
    lists.finish()?;
    Ok(Some(WorkloadConfig {
        issuer,
        jwks_url,
        audience: cri.audience.clone(),
        org_allowlist: cri
            .org_allowlist
            .iter()
            .map(|o| o.trim().to_ascii_lowercase())
            .collect(),
    }))
}

pub(super) fn is_loopback_url(u: &url::Url) -> bool {
    match u.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    }
}

/// `cri.policy.webhook`: https (plain http only to a loopback address), never a metadata
/// endpoint, loopback only with `env_loopback` or `allow_loopback`.
pub fn validate_webhook(
    raw: &RawConfig,
    env_loopback: bool,
) -> Result<Option<super::WebhookConfig>, ConfigError> {
    let Some(policy) = raw.cri.as_ref().and_then(|c| c.policy.as_ref()) else {
        return Ok(None);
    };
    let Some(w) = policy.webhook.as_ref() else {
        return Err(ConfigError::at(
            "cri.policy.webhook",
            "required inside cri.policy (the webhook that allows or blocks each request)",
        ));
    };
    // Checked either way, but as the reference: it runs only while CRI is on.
    let active = raw.cri.as_ref().is_some_and(|c| c.enabled == Some(true));
    let url = url::Url::parse(&w.url)
        .map_err(|e| ConfigError::at("cri.policy.webhook.url", format!("invalid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(ConfigError::at(
            "cri.policy.webhook.url",
            "must be an http(s) URL",
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ConfigError::at(
            "cri.policy.webhook.url",
            "must not carry credentials",
        ));
    }
    if url.scheme() == "http" && !is_loopback_url(&url) {
        return Err(ConfigError::at(
            "cri.policy.webhook.url",
            "must be https:// (http:// only to a loopback address)",
        ));
    }
    let loopback_ok = env_loopback || w.allow_loopback == Some(true);
    super::targets::check(&url, loopback_ok)
        .map_err(|m| ConfigError::at("cri.policy.webhook.url", m))?;
    let timeout = w.timeout_ms.unwrap_or(2000);
    if timeout == 0 || timeout > 30_000 {
        return Err(ConfigError::at(
            "cri.policy.webhook.timeout_ms",
            "must be between 1 and 30000",
        ));
    }
    if !active {
        return Ok(None);
    }
    Ok(Some(super::WebhookConfig {
        url,
        timeout: Duration::from_millis(timeout),
        fail_closed: w.fail_closed.unwrap_or(true),
        allow_loopback: loopback_ok,
    }))
}

/// The sign-in notice as the reference keeps it: ANSI escape sequences and control
/// characters removed, runs of whitespace collapsed to one space, 1 to 500 characters.
fn clean_notice(path: &str, raw: &str) -> Result<String, ConfigError> {
    let mut text = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI (`ESC [ ... final`) or a two-character escape.
            if chars.peek() == Some(&'[') {
                chars.next();
                for f in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&f) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
        } else if c.is_whitespace() {
            text.push(' ');
        } else if !c.is_control() {
            text.push(c);
        }
    }
    let notice = text
        .split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    match notice.chars().count() {
        0 => Err(ConfigError::at(path, "must not be empty")),
        n if n > 500 => Err(ConfigError::at(path, "must be at most 500 characters")),
        _ => Ok(notice),
    }
}

#[cfg(test)]
mod notice_tests {
    #![allow(clippy::unwrap_used)]
    use super::clean_notice;

    #[test]
    fn ansi_and_control_characters_go_and_spaces_collapse() {
        assert_eq!(
            clean_notice(
                "login_notice",
                "  \u{1b}[31mUse\u{1b}[0m your\t\tcorp\u{7}\naccount.  "
            )
            .unwrap(),
            "Use your corp account."
        );
        assert!(clean_notice("login_notice", "\u{1b}[1m \u{7}").is_err());
        assert!(clean_notice("login_notice", &"x".repeat(501)).is_err());
        assert_eq!(
            clean_notice("login_notice", &"é".repeat(500))
                .unwrap()
                .chars()
                .count(),
            500
        );
    }
}
