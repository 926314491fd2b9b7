//! IdP claims -> the gateway's [`UserIdentity`], and the sign-in gates.
//!
//! `sub` is required. Email and groups come from configurable claim names or JSON pointers
//! (`/realm_access/roles`). `email_verified: false` (or `"false"`) refuses. With
//! `allowed_email_domains`, the email's domain must match exactly (lower-case); with
//! `allowed_groups`, at least one group must match.

use serde_json::{Map, Value};

use super::session::UserIdentity;
use crate::config::OidcConfig;

/// Why a sign-in was refused (stable strings for events and pages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    #[error("the identity provider sent no user id (`sub` or `oidc.user_id_claim`)")]
    MissingSubject,
    #[error("the email address is not verified")]
    EmailNotVerified,
    #[error("no email address, and this gateway only admits certain email domains")]
    MissingEmail,
    #[error("the email domain is not admitted by this gateway")]
    DomainNotAllowed,
    #[error("none of the user's groups is admitted by this gateway")]
    GroupNotAllowed,
}

impl GateError {
    pub fn reason(&self) -> &'static str {
        match self {
            GateError::MissingSubject => "missing_sub",
            GateError::EmailNotVerified => "email_not_verified",
            GateError::MissingEmail => "missing_email",
            GateError::DomainNotAllowed => "domain_not_allowed",
            GateError::GroupNotAllowed => "group_not_allowed",
        }
    }
}

fn lookup<'a>(claims: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    if name.starts_with('/') {
        let root = claims.get(name.split('/').nth(1)?)?;
        let rest: String = name
            .splitn(3, '/')
            .nth(2)
            .map(|r| format!("/{r}"))
            .unwrap_or_default();
        if rest.is_empty() {
            Some(root)
        } else {
            root.pointer(&rest)
        }
    } else {
        claims.get(name)
    }
}

/// Email from the first configured claim that holds a non-empty string.
pub fn email(claims: &Map<String, Value>, cfg: &OidcConfig) -> Option<String> {
    cfg.email_claims.iter().find_map(|c| {
        lookup(claims, c)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    })
}

/// Groups: an array of strings, or a single string (or what `groups_jsonpath` selects).
pub fn groups(claims: &Map<String, Value>, cfg: &OidcConfig) -> Option<Vec<String>> {
    if let Some(path) = &cfg.extras.groups_jsonpath {
        return path.groups(claims);
    }
    match lookup(claims, &cfg.groups_claim)? {
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
        ),
        Value::String(s) => Some(vec![s.clone()]),
        _ => None,
    }
}

/// Builds the identity and applies the gates.
pub fn admit(claims: &Map<String, Value>, cfg: &OidcConfig) -> Result<UserIdentity, GateError> {
    admit_with(claims, cfg, None)
}

/// [`admit`] with the person's groups from elsewhere (`oidc.google_groups`' directory)
/// in place of the claims'.
pub fn admit_with(
    claims: &Map<String, Value>,
    cfg: &OidcConfig,
    directory_groups: Option<Vec<String>>,
) -> Result<UserIdentity, GateError> {
    let sub = claims
        .get(cfg.extras.user_id_claim.as_str())
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or(GateError::MissingSubject)?
        .to_owned();
    match claims.get("email_verified") {
        Some(Value::Bool(false)) => return Err(GateError::EmailNotVerified),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => {
            return Err(GateError::EmailNotVerified);
        }
        _ => {}
    }
    let email = email(claims, cfg);
    if !cfg.allowed_email_domains.is_empty() {
        let e = email.as_deref().ok_or(GateError::MissingEmail)?;
        let domain = e
            .rsplit_once('@')
            .map(|(_, d)| d.to_ascii_lowercase())
            .unwrap_or_default();
        if !cfg.allowed_email_domains.contains(&domain) {
            return Err(GateError::DomainNotAllowed);
        }
    }
    let groups = match directory_groups {
        Some(g) => g,
        None => groups(claims, cfg).unwrap_or_default(),
    };
    if !cfg.allowed_groups.is_empty() && !groups.iter().any(|g| cfg.allowed_groups.contains(g)) {
        return Err(GateError::GroupNotAllowed);
    }
    let name = claims
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(UserIdentity {
        sub,
        email,
        name,
        groups,
    })
}

/// A configuration for unit tests.
#[cfg(test)]
pub fn test_config() -> OidcConfig {
    OidcConfig {
        issuer: "https://idp".into(),
        client_id: "c".into(),
        extras: crate::config::oidc::OidcExtras {
            client_auth: crate::config::oidc::ClientAuth::SecretBasic(crate::secret::Secret::new(
                "s",
            )),
            user_id_claim: "sub".into(),
            clock_skew: std::time::Duration::ZERO,
            id_token_alg: None,
            additional_authorized_parties: vec![],
            discovery_url: None,
            scope_on_refresh: false,
            form_action_origins: vec![],
            groups_jsonpath: None,
            ca_certs: vec![],
            google_groups: None,
            use_proxy: None,
        },
        scopes: vec!["openid".into()],
        use_pkce: true,
        allowed_email_domains: vec!["corp.example".into()],
        allowed_groups: vec!["claude-users".into()],
        groups_claim: "groups".into(),
        email_claims: vec!["email".into(), "/profile/mail".into()],
        userinfo_fallback: false,
        extra_auth_params: vec![],
        login_notice: None,
        allow_loopback: false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn cfg() -> OidcConfig {
        test_config()
    }

    fn claims(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn gates() {
        let ok = claims(
            json!({"sub": "a", "email": "A@Corp.Example", "email_verified": true, "groups": ["x", "claude-users"], "name": "A"}),
        );
        let who = admit(&ok, &cfg()).unwrap();
        assert_eq!(who.groups, vec!["x", "claude-users"]);
        let cases = [
            (
                json!({"email": "a@corp.example", "groups": ["claude-users"]}),
                GateError::MissingSubject,
            ),
            (
                json!({"sub": "a", "email": "a@corp.example", "email_verified": "false", "groups": ["claude-users"]}),
                GateError::EmailNotVerified,
            ),
            (
                json!({"sub": "a", "groups": ["claude-users"]}),
                GateError::MissingEmail,
            ),
            (
                json!({"sub": "a", "email": "a@corp.example.evil", "groups": ["claude-users"]}),
                GateError::DomainNotAllowed,
            ),
            (
                json!({"sub": "a", "email": "a@corp.example", "groups": ["sales"]}),
                GateError::GroupNotAllowed,
            ),
            (
                json!({"sub": "a", "email": "a@corp.example"}),
                GateError::GroupNotAllowed,
            ),
        ];
        for (c, want) in cases {
            assert_eq!(admit(&claims(c), &cfg()).unwrap_err(), want);
        }
    }

    #[test]
    fn pointers_and_fallback_claims() {
        let mut c = cfg();
        c.groups_claim = "/realm_access/roles".into();
        let v = claims(
            json!({"sub": "a", "profile": {"mail": "a@corp.example"}, "realm_access": {"roles": ["claude-users"]}}),
        );
        let who = admit(&v, &c).unwrap();
        assert_eq!(who.email.as_deref(), Some("a@corp.example"));
        assert_eq!(who.groups, vec!["claude-users"]);
    }

    #[test]
    fn user_id_claim_and_groups_jsonpath() {
        let mut c = cfg();
        c.extras.user_id_claim = "oid".into();
        c.extras.groups_jsonpath = Some(
            crate::config::jsonpath::JsonPath::parse("$.memberships[?@.kind=='group'].name")
                .unwrap(),
        );
        let v = claims(json!({"sub": "a", "oid": "u-1", "email": "a@corp.example",
            "memberships": [{"kind": "group", "name": "claude-users"}, {"kind": "role", "name": "x"}]}));
        let who = admit(&v, &c).unwrap();
        assert_eq!(who.sub, "u-1");
        assert_eq!(who.groups, vec!["claude-users"]);
        let v = claims(json!({"sub": "a", "email": "a@corp.example", "memberships": []}));
        assert_eq!(admit(&v, &c).unwrap_err(), GateError::MissingSubject);
    }
}
