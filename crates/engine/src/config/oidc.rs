//! The reference's IdP knobs on `oidc`: client authentication (secret or `private_key_jwt`
//! with a certificate), extra CAs, claim selection, ID-token checks and the sign-in page's
//! `form-action`. Validated here into [`OidcExtras`], next to [`super::identity`].

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::DecodePrivateKey;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::{PemObject, SectionKind};
use schemars::JsonSchema;
use serde::Deserialize;
use sha2::Digest;

use super::ConfigError;
use super::raw::RawOidc;
use crate::secret::Secret;

/// `oidc.token_endpoint_auth_method`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    ClientSecretBasic,
    ClientSecretPost,
    PrivateKeyJwt,
}

/// `oidc.id_token_signed_response_alg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
pub enum IdTokenAlg {
    RS256,
    RS384,
    RS512,
    PS256,
    PS384,
    PS512,
    ES256,
    ES384,
    ES512,
    EdDSA,
}

/// `oidc.client_assertion`: the certificate credentials of `private_key_jwt`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawClientAssertion {
    /// Unencrypted RSA key (>= 2048 bits), PKCS#8 or PKCS#1 PEM text.
    pub private_key_pem: String,
    /// The one certificate issued for that key (PEM text), as uploaded to the IdP.
    pub certificate_pem: String,
}

/// `oidc.google_groups`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawGoogleGroups {
    /// Path of a service-account key file with domain-wide delegation.
    pub service_account_json_path: String,
    /// The Workspace admin the service account acts as.
    pub admin_email: String,
}

/// How the gateway authenticates at the IdP's token endpoint.
#[derive(Debug, Clone)]
pub enum ClientAuth {
    SecretBasic(Secret),
    SecretPost(Secret),
    PrivateKeyJwt(Arc<AssertionKey>),
}

/// The signing key and certificate thumbprints of `private_key_jwt`.
pub struct AssertionKey {
    /// The RSA key as PKCS#1 DER (what `jsonwebtoken` signs with).
    pub key: jsonwebtoken::EncodingKey,
    /// base64url SHA-1 of the certificate (`x5t`).
    pub x5t: String,
    /// base64url SHA-256 of the certificate (`x5t#S256`).
    pub x5t_s256: String,
}

impl std::fmt::Debug for AssertionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssertionKey")
            .field("x5t", &self.x5t)
            .finish_non_exhaustive()
    }
}

/// The validated reference knobs of `oidc`.
#[derive(Debug, Clone)]
pub struct OidcExtras {
    pub client_auth: ClientAuth,
    pub user_id_claim: String,
    pub clock_skew: Duration,
    pub id_token_alg: Option<IdTokenAlg>,
    pub additional_authorized_parties: Vec<String>,
    pub discovery_url: Option<url::Url>,
    pub scope_on_refresh: bool,
    /// Origins (no trailing slash).
    pub form_action_origins: Vec<String>,
    pub groups_jsonpath: Option<crate::config::jsonpath::JsonPath>,
    /// Extra trust anchors for IdP traffic (DER).
    pub ca_certs: Vec<CertificateDer<'static>>,
    /// `google_groups`: a person's groups come from Google Workspace's directory.
    pub google_groups: Option<GoogleGroupsConfig>,
    /// `use_proxy`: IdP traffic through HTTPS_PROXY/HTTP_PROXY (unset: only when
    /// CLAUDE_GATEWAY_PROXY_IS_EGRESS_BOUNDARY applies; decided at start from the
    /// environment).
    pub use_proxy: Option<bool>,
}

/// The Admin SDK Directory API's group listing.
pub const GOOGLE_DIRECTORY_GROUPS: &str = "https://admin.googleapis.com/admin/directory/v1/groups";

/// Validated `oidc.google_groups`.
#[derive(Debug, Clone)]
pub struct GoogleGroupsConfig {
    /// The service-account key file (read at start).
    pub key_path: std::path::PathBuf,
    /// The Workspace admin the service account acts as (`sub` of its JWT assertion).
    pub admin_email: String,
    /// The Directory API's groups endpoint: Google's; not a config key (tests inject a
    /// fake here after loading).
    pub directory_url: url::Url,
}

fn google_groups(g: &RawGoogleGroups) -> Result<GoogleGroupsConfig, ConfigError> {
    if g.service_account_json_path.trim().is_empty() {
        return Err(ConfigError::at(
            "oidc.google_groups.service_account_json_path",
            "must not be empty",
        ));
    }
    let at = g.admin_email.split_once('@');
    if !at.is_some_and(|(l, d)| {
        !l.is_empty() && d.contains('.') && !d.starts_with('.') && !d.ends_with('.')
    }) || g.admin_email.chars().any(char::is_whitespace)
    {
        return Err(ConfigError::at(
            "oidc.google_groups.admin_email",
            "must be an email address",
        ));
    }
    Ok(GoogleGroupsConfig {
        key_path: std::path::PathBuf::from(g.service_account_json_path.trim()),
        admin_email: g.admin_email.clone(),
        directory_url: url::Url::parse(GOOGLE_DIRECTORY_GROUPS)
            .map_err(|e| ConfigError::at("oidc.google_groups", e.to_string()))?,
    })
}

/// `loopback_ok`: loopback IdP URLs are allowed (`CLAUDE_GATEWAY_ALLOW_LOOPBACK` or
/// `oidc.allow_loopback`).
pub fn validate(o: &RawOidc, loopback_ok: bool) -> Result<OidcExtras, ConfigError> {
    let google_groups = o.google_groups.as_ref().map(google_groups).transpose()?;
    let groups_jsonpath = match &o.groups_jsonpath {
        None => None,
        Some(p) => {
            if o.groups_claim.as_deref().is_some_and(|c| c != "groups") {
                return Err(ConfigError::at(
                    "oidc.groups_jsonpath",
                    "is read in place of oidc.groups_claim: remove one of the two",
                ));
            }
            Some(crate::config::jsonpath::JsonPath::parse(p).map_err(|e| {
                ConfigError::at(
                    "oidc.groups_jsonpath",
                    format!("{e}; for a plain claim name or a JSON Pointer, use oidc.groups_claim"),
                )
            })?)
        }
    };
    if o.user_id_claim.as_deref().is_some_and(str::is_empty) {
        return Err(ConfigError::at("oidc.user_id_claim", "must not be empty"));
    }
    let discovery_url = match &o.discovery_url {
        None => None,
        Some(u) => {
            let url = url::Url::parse(u)
                .map_err(|e| ConfigError::at("oidc.discovery_url", format!("invalid URL: {e}")))?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(ConfigError::at(
                    "oidc.discovery_url",
                    "must be an http(s) URL",
                ));
            }
            if !url.path().contains("/.well-known/") {
                return Err(ConfigError::at(
                    "oidc.discovery_url",
                    "must point at the discovery document itself (path containing /.well-known/)",
                ));
            }
            super::targets::check(&url, loopback_ok)
                .map_err(|m| ConfigError::at("oidc.discovery_url", m))?;
            Some(url)
        }
    };
    Ok(OidcExtras {
        client_auth: client_auth(o)?,
        user_id_claim: o.user_id_claim.clone().unwrap_or_else(|| "sub".to_owned()),
        clock_skew: Duration::from_secs(o.clock_skew_seconds.unwrap_or(0)),
        id_token_alg: o.id_token_signed_response_alg,
        additional_authorized_parties: o.additional_authorized_parties.clone().unwrap_or_default(),
        discovery_url,
        scope_on_refresh: o.scope_on_refresh.unwrap_or(false),
        form_action_origins: form_action_origins(o.form_action_origins.as_deref().unwrap_or(&[]))?,
        groups_jsonpath,
        ca_certs: match &o.ca_cert_pem {
            None => Vec::new(),
            Some(pem) => ca_certs(pem)?,
        },
        google_groups,
        use_proxy: o.use_proxy,
    })
}

fn client_auth(o: &RawOidc) -> Result<ClientAuth, ConfigError> {
    let method = o
        .token_endpoint_auth_method
        .unwrap_or(AuthMethod::ClientSecretBasic);
    if method != AuthMethod::PrivateKeyJwt {
        if o.client_assertion.is_some() {
            return Err(ConfigError::at(
                "oidc.client_assertion",
                "is only used with token_endpoint_auth_method: private_key_jwt; set that and remove client_secret, or remove this block",
            ));
        }
        let secret = o.client_secret.clone().ok_or_else(|| {
            ConfigError::at(
                "oidc.client_secret",
                "is required, or, if your IdP issues certificates instead of secrets (e.g. Microsoft Entra certificate credentials), set token_endpoint_auth_method: private_key_jwt with a client_assertion block",
            )
        })?;
        if secret.is_empty() {
            return Err(ConfigError::at("oidc.client_secret", "must not be empty"));
        }
        let secret = Secret::new(secret);
        return Ok(if method == AuthMethod::ClientSecretPost {
            ClientAuth::SecretPost(secret)
        } else {
            ClientAuth::SecretBasic(secret)
        });
    }
    if o.client_secret.is_some() {
        return Err(ConfigError::at(
            "oidc.client_secret",
            "must be removed when token_endpoint_auth_method is private_key_jwt: the gateway authenticates with the client_assertion certificate instead",
        ));
    }
    let a = o.client_assertion.as_ref().ok_or_else(|| {
        ConfigError::at(
            "oidc.client_assertion",
            "is required when token_endpoint_auth_method is private_key_jwt: private_key_pem (the key the gateway signs with) and certificate_pem (the certificate you uploaded to the IdP)",
        )
    })?;
    Ok(ClientAuth::PrivateKeyJwt(Arc::new(assertion_key(a)?)))
}

const KEY_PATH: &str = "oidc.client_assertion.private_key_pem";
const CERT_PATH: &str = "oidc.client_assertion.certificate_pem";

fn assertion_key(a: &RawClientAssertion) -> Result<AssertionKey, ConfigError> {
    if a.private_key_pem.contains("ENCRYPTED") {
        return Err(ConfigError::at(
            KEY_PATH,
            "is encrypted with a passphrase; the gateway needs the key as unencrypted PEM",
        ));
    }
    let unreadable = || {
        ConfigError::at(
            KEY_PATH,
            "is not a PEM private key the gateway can read: expected \"-----BEGIN PRIVATE KEY-----\" (PKCS#8) or \"-----BEGIN RSA PRIVATE KEY-----\" (PKCS#1)",
        )
    };
    let (kind, der) = <(SectionKind, Vec<u8>)>::from_pem_slice(a.private_key_pem.as_bytes())
        .map_err(|_| unreadable())?;
    let key = match kind {
        SectionKind::RsaPrivateKey => {
            rsa::RsaPrivateKey::from_pkcs1_der(&der).map_err(|_| unreadable())?
        }
        SectionKind::PrivateKey => rsa::RsaPrivateKey::from_pkcs8_der(&der).map_err(|_| {
            ConfigError::at(
                KEY_PATH,
                "must be an RSA key (the client assertion is signed with RS256)",
            )
        })?,
        SectionKind::EcPrivateKey => {
            return Err(ConfigError::at(
                KEY_PATH,
                "must be an RSA key (the client assertion is signed with RS256); got ec",
            ));
        }
        _ => return Err(unreadable()),
    };
    let bits = rsa::traits::PublicKeyParts::size(&key) * 8;
    if bits < 2048 {
        return Err(ConfigError::at(
            KEY_PATH,
            format!("must be an RSA key of at least 2048 bits; got {bits}"),
        ));
    }
    if a.certificate_pem
        .matches("-----BEGIN CERTIFICATE-----")
        .count()
        > 1
    {
        return Err(ConfigError::at(
            CERT_PATH,
            "must contain only the client certificate, not a chain: keep the one certificate issued for private_key_pem (with openssl pkcs12, add -clcerts)",
        ));
    }
    let cert = CertificateDer::from_pem_slice(a.certificate_pem.as_bytes()).map_err(|_| {
        ConfigError::at(
            CERT_PATH,
            "is not a PEM certificate the gateway can read: expected one beginning with \"-----BEGIN CERTIFICATE-----\"",
        )
    })?;
    let parsed = <x509_cert::Certificate as x509_cert::der::Decode>::from_der(cert.as_ref())
        .map_err(|_| ConfigError::at(CERT_PATH, "is not a certificate the gateway can read"))?;
    let cert_key = x509_cert::der::Encode::to_der(&parsed.tbs_certificate.subject_public_key_info)
        .ok()
        .and_then(|der| rsa::pkcs8::DecodePublicKey::from_public_key_der(&der).ok());
    if cert_key.as_ref() != Some(rsa::RsaPrivateKey::as_ref(&key)) {
        return Err(ConfigError::at(
            CERT_PATH,
            "does not match private_key_pem: use the certificate that was issued for this key",
        ));
    }
    let pkcs1 = rsa::pkcs1::EncodeRsaPrivateKey::to_pkcs1_der(&key).map_err(|_| unreadable())?;
    Ok(AssertionKey {
        key: jsonwebtoken::EncodingKey::from_rsa_der(pkcs1.as_bytes()),
        x5t: URL_SAFE_NO_PAD.encode(<sha1::Sha1 as Digest>::digest(cert.as_ref())),
        x5t_s256: URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(cert.as_ref())),
    })
}

/// `oidc.ca_cert_pem`: every certificate in the text; at least one.
fn ca_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError::at("oidc.ca_cert_pem", format!("unreadable PEM: {e}")))?;
    if certs.is_empty() {
        return Err(ConfigError::at(
            "oidc.ca_cert_pem",
            "holds no certificate (expected \"-----BEGIN CERTIFICATE-----\" blocks)",
        ));
    }
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs.iter().cloned());
    if added == 0 {
        return Err(ConfigError::at(
            "oidc.ca_cert_pem",
            "holds no usable CA certificate",
        ));
    }
    Ok(certs)
}

/// `oidc.form_action_origins`: http(s) URLs reduced to their origins.
fn form_action_origins(list: &[String]) -> Result<Vec<String>, ConfigError> {
    list.iter()
        .enumerate()
        .map(|(i, u)| {
            let path = format!("oidc.form_action_origins[{i}]");
            let url = url::Url::parse(u)
                .map_err(|e| ConfigError::at(&path, format!("invalid URL: {e}")))?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(ConfigError::at(&path, "must be an http(s) URL"));
            }
            let origin = url.origin().ascii_serialization();
            if origin
                .chars()
                .any(|c| matches!(c, ';' | ',' | '\'' | '"') || c.is_whitespace())
            {
                return Err(ConfigError::at(
                    &path,
                    "must not contain CSP delimiters (; , quotes or whitespace)",
                ));
            }
            Ok(origin)
        })
        .collect()
}
