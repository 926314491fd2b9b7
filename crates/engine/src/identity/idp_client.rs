//! The reference's IdP knobs at work: discovery at an explicit `discovery_url`, the
//! `private_key_jwt` client assertion (RS256 with the certificate thumbprints in `x5t` and
//! `x5t#S256`, as Microsoft Entra expects), and the `azp` check with
//! `additional_authorized_parties`.

use std::time::{SystemTime, UNIX_EPOCH};

use openidconnect::IssuerUrl;
use openidconnect::core::{CoreJsonWebKeySet, CoreProviderMetadata};
use serde_json::{Map, Value};

use crate::config::OidcConfig;
use crate::config::oidc::AssertionKey;
use crate::outbound::SafeFetch;

/// The assertion type of RFC 7523 client authentication.
pub const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// Lifetime of one client assertion.
const ASSERTION_SECS: u64 = 300;

/// Discovery at `url` (an explicit `oidc.discovery_url`): the document's `issuer` must be
/// the configured issuer; the key set is fetched from its `jwks_uri`.
pub async fn discover_at(
    url: &url::Url,
    issuer: &IssuerUrl,
    http: &SafeFetch,
) -> Result<CoreProviderMetadata, String> {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static("application/json"),
    );
    let resp = http.get(url, headers).await.map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("discovery document: status {}", resp.status()));
    }
    let body = resp.bytes().await.map_err(|e| e.to_string())?;
    let metadata: CoreProviderMetadata =
        serde_json::from_slice(&body).map_err(|e| format!("discovery document: {e}"))?;
    if metadata.issuer() != issuer {
        return Err(format!(
            "the discovery document names issuer `{}`, not the configured `{}`",
            metadata.issuer().as_str(),
            issuer.as_str()
        ));
    }
    let jwks = CoreJsonWebKeySet::fetch_async(metadata.jwks_uri(), &super::oidc::via(http))
        .await
        .map_err(|e| crate::outbound::error_chain(&e))?;
    Ok(metadata.set_jwks(jwks))
}

/// A fresh client assertion for `audience` (the token endpoint).
pub fn assertion(key: &AssertionKey, client_id: &str, audience: &str) -> Result<String, String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs();
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.typ = Some("JWT".to_owned());
    header.x5t = Some(key.x5t.clone());
    header.x5t_s256 = Some(key.x5t_s256.clone());
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "jti": uuid::Uuid::new_v4().to_string(),
        "iat": now,
        "nbf": now,
        "exp": now + ASSERTION_SECS,
    });
    jsonwebtoken::encode(&header, &claims, &key.key).map_err(|e| e.to_string())
}

/// `azp`, when present, must be the client or one of `additional_authorized_parties`;
/// an ID token for several audiences must name its authorized party.
pub fn check_azp(claims: &Map<String, Value>, cfg: &OidcConfig) -> Result<(), String> {
    let several = claims
        .get("aud")
        .and_then(Value::as_array)
        .is_some_and(|a| a.len() > 1);
    match claims.get("azp") {
        None if several => Err("the ID token has several audiences and no azp".into()),
        None => Ok(()),
        Some(Value::String(azp))
            if *azp == cfg.client_id || cfg.extras.additional_authorized_parties.contains(azp) =>
        {
            Ok(())
        }
        Some(_) => Err(
            "the ID token's azp is neither this client nor an additional authorized party".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::check_azp;
    use crate::identity::claims::test_config;
    use serde_json::json;

    #[test]
    fn azp_must_be_the_client_or_an_additional_party() {
        let mut cfg = test_config();
        cfg.extras.additional_authorized_parties = vec!["other-app".into()];
        let ok = |v: serde_json::Value| check_azp(v.as_object().unwrap(), &cfg);
        assert!(ok(json!({"aud": "c"})).is_ok());
        assert!(ok(json!({"aud": "c", "azp": "c"})).is_ok());
        assert!(ok(json!({"aud": ["c", "other-app"], "azp": "other-app"})).is_ok());
        assert!(ok(json!({"aud": ["c", "x"]})).is_err());
        assert!(ok(json!({"aud": "c", "azp": "stranger"})).is_err());
    }
}
