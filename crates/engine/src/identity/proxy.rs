//! Whether IdP traffic (discovery, JWKS, token, userinfo, and the `google_groups`
//! directory) goes through the environment's forward proxy, as the reference decides it:
//! `oidc.use_proxy` when set, else on only when `CLAUDE_GATEWAY_PROXY_IS_EGRESS_BOUNDARY`
//! is set with a usable `HTTPS_PROXY`/`HTTP_PROXY`, an empty `NO_PROXY` and no
//! `CLAUDE_GATEWAY_ALLOW_LOOPBACK`. Hosts `NO_PROXY` matches go direct. The decision and
//! its warnings come from the injected environment.

use url::Url;

use crate::deps::Environment;

/// The decision: the proxy and the `NO_PROXY` list, and what to tell the operator.
#[derive(Debug, Default)]
pub struct IdpProxy {
    pub proxy: Option<(Url, String)>,
    pub warnings: Vec<&'static str>,
}

fn set(env: &dyn Environment, name: &str) -> bool {
    env.var(name)
        .is_some_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

fn first(env: &dyn Environment, names: &[&str]) -> Option<String> {
    names
        .iter()
        .find_map(|n| env.var(n).filter(|v| !v.trim().is_empty()))
}

/// A usable proxy URL: it parses and has a host.
fn usable_proxy(env: &dyn Environment) -> Option<Url> {
    let raw = first(
        env,
        &["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"],
    )?;
    Url::parse(raw.trim())
        .ok()
        .filter(|u| u.host_str().is_some_and(|h| !h.is_empty()))
}

pub fn decide(use_proxy: Option<bool>, env: &dyn Environment) -> IdpProxy {
    let proxy = usable_proxy(env);
    let no_proxy = first(env, &["NO_PROXY", "no_proxy"]).unwrap_or_default();
    let egress_boundary = set(env, "CLAUDE_GATEWAY_PROXY_IS_EGRESS_BOUNDARY")
        && proxy.is_some()
        && no_proxy.trim().is_empty()
        && !set(env, "CLAUDE_GATEWAY_ALLOW_LOOPBACK");
    let on = use_proxy.unwrap_or(egress_boundary);
    let mut warnings = Vec::new();
    if use_proxy == Some(true) && proxy.is_none() {
        warnings.push(
            "oidc.use_proxy is set but no usable HTTPS_PROXY/HTTP_PROXY is set; IdP requests go direct",
        );
    }
    let proxy = proxy.filter(|_| on);
    if proxy.is_none() && set(env, "CLAUDE_GATEWAY_IDP_CONNECT_BY_HOSTNAME") {
        warnings.push(
            "oidc: CLAUDE_GATEWAY_IDP_CONNECT_BY_HOSTNAME is set but has no effect: IdP requests go direct. It needs oidc.use_proxy: true and HTTPS_PROXY set to your forward proxy",
        );
    }
    IdpProxy {
        proxy: proxy.map(|p| (p, no_proxy)),
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deps::MapEnvironment;

    fn env(vars: &[(&str, &str)]) -> MapEnvironment {
        vars.iter()
            .fold(MapEnvironment::default(), |e, (k, v)| e.with_var(k, v))
    }

    #[test]
    fn use_proxy_follows_the_key_then_the_egress_switch() {
        let p = env(&[
            ("HTTPS_PROXY", "http://proxy.corp:3128"),
            ("NO_PROXY", "idp.corp"),
        ]);
        let d = decide(Some(true), &p);
        let (url, no) = d
            .proxy
            .as_ref()
            .map(|(u, n)| (u.as_str(), n.as_str()))
            .unwrap_or_default();
        assert_eq!((url, no), ("http://proxy.corp:3128/", "idp.corp"));
        assert!(d.warnings.is_empty());
        assert!(
            decide(None, &p).proxy.is_none(),
            "default off without the switch"
        );
        assert!(decide(Some(false), &p).proxy.is_none());
        let boundary = env(&[
            ("HTTP_PROXY", "http://proxy.corp:3128"),
            ("CLAUDE_GATEWAY_PROXY_IS_EGRESS_BOUNDARY", "1"),
        ]);
        assert!(
            decide(None, &boundary).proxy.is_some(),
            "default on at the boundary"
        );
        assert!(decide(Some(false), &boundary).proxy.is_none());
        let with_no_proxy = env(&[
            ("HTTP_PROXY", "http://proxy.corp:3128"),
            ("NO_PROXY", "internal"),
            ("CLAUDE_GATEWAY_PROXY_IS_EGRESS_BOUNDARY", "1"),
        ]);
        assert!(
            decide(None, &with_no_proxy).proxy.is_none(),
            "NO_PROXY disarms the boundary"
        );
    }

    #[test]
    fn use_proxy_without_a_proxy_warns() {
        let d = decide(Some(true), &env(&[("HTTPS_PROXY", "not a url")]));
        assert!(d.proxy.is_none());
        assert_eq!(d.warnings.len(), 1);
        assert!(d.warnings[0].contains("no usable HTTPS_PROXY"));
        let d = decide(
            None,
            &env(&[("CLAUDE_GATEWAY_IDP_CONNECT_BY_HOSTNAME", "1")]),
        );
        assert!(d.warnings[0].contains("has no effect"));
    }
}
