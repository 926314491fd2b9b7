//! The relying-party side of OIDC, through the `openidconnect` crate: discovery at start,
//! the authorization request (PKCE, nonce, our sealed state), code exchange with ID token
//! verification, refresh, and the optional userinfo fallback.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use openidconnect::core::{
    CoreClient, CoreErrorResponseType, CoreProviderMetadata, CoreResponseType,
};
use openidconnect::{
    AuthType, AuthenticationFlow, AuthorizationCode, ClientId, ClientSecret, CsrfToken,
    EndpointMaybeSet, EndpointNotSet, EndpointSet, IssuerUrl, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError, Scope,
    TokenResponse,
};
use serde_json::{Map, Value};

use crate::config::OidcConfig;
use crate::config::oidc::ClientAuth;
use crate::outbound::{FetchError, SafeFetch, error_chain};

/// Largest IdP answer read.
const MAX_IDP_BODY: usize = 1 << 20;

/// openidconnect's HTTP client, through the safe-fetch helper.
pub(super) fn via(
    fetch: &SafeFetch,
) -> impl Fn(
    openidconnect::HttpRequest,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<openidconnect::HttpResponse, FetchError>> + Send>,
> + '_ {
    move |req| {
        let f = fetch.clone();
        Box::pin(async move { f.execute(req, MAX_IDP_BODY).await })
    }
}

type Client = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    #[error("OIDC discovery at {issuer} failed: {message}")]
    Discovery { issuer: String, message: String },
    #[error("token exchange failed: {0}")]
    Exchange(String),
    #[error("the ID token did not verify: {0}")]
    IdToken(String),
    #[error("userinfo failed: {0}")]
    UserInfo(String),
    #[error("{0}")]
    GoogleGroups(String),
}

/// How a refresh at the IdP failed.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// The grant is gone (revoked, expired, user disabled): the user must sign in again.
    #[error("refresh refused by the identity provider: {0}")]
    Invalid(String),
    /// The IdP could not answer now; the client may retry later.
    #[error("identity provider temporarily unavailable: {0}")]
    Transient(String),
}

/// What a successful exchange or refresh yields.
pub struct IdpTokens {
    /// Verified claims (ID token, completed from userinfo when configured).
    pub claims: Map<String, Value>,
    pub refresh_token: Option<String>,
}

pub struct Oidc {
    client: Client,
    http: SafeFetch,
    userinfo_url: Option<String>,
    /// CSP `form-action` sources besides `'self'`: the IdP's authorization origin and
    /// `oidc.form_action_origins`.
    pub authorization_origin: String,
    /// The token endpoint (the audience of `private_key_jwt` assertions).
    token_endpoint: Option<String>,
    cfg: OidcConfig,
}

impl Oidc {
    pub async fn discover(
        cfg: &OidcConfig,
        redirect_uri: String,
        http: SafeFetch,
    ) -> Result<Self, OidcError> {
        let fail = |message: String| OidcError::Discovery {
            issuer: cfg.issuer.clone(),
            message,
        };
        let issuer = IssuerUrl::new(cfg.issuer.clone()).map_err(|e| fail(e.to_string()))?;
        let metadata = match &cfg.extras.discovery_url {
            None => CoreProviderMetadata::discover_async(issuer, &via(&http))
                .await
                .map_err(|e| fail(error_chain(&e)))?,
            Some(url) => super::idp_client::discover_at(url, &issuer, &http)
                .await
                .map_err(fail)?,
        };
        let scopes_supported: Option<Vec<String>> = metadata
            .scopes_supported()
            .map(|s| s.iter().map(|s| s.as_str().to_owned()).collect());
        for w in crate::config::warnings::after_discovery(cfg, scopes_supported.as_deref()) {
            tracing::warn!("{w}");
        }
        let auth_url = metadata.authorization_endpoint().url().clone();
        let userinfo_url = metadata.userinfo_endpoint().map(|u| u.url().to_string());
        let token_endpoint = metadata.token_endpoint().map(|u| u.url().to_string());
        let (secret, auth_type) = match &cfg.extras.client_auth {
            ClientAuth::SecretBasic(s) => (Some(s), AuthType::BasicAuth),
            ClientAuth::SecretPost(s) => (Some(s), AuthType::RequestBody),
            ClientAuth::PrivateKeyJwt(_) => {
                if token_endpoint.is_none() {
                    return Err(fail(
                        "the discovery document has no token_endpoint, which private_key_jwt needs as the assertion audience".into(),
                    ));
                }
                (None, AuthType::RequestBody)
            }
        };
        let client = CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(cfg.client_id.clone()),
            secret.map(|s| ClientSecret::new(s.expose().to_owned())),
        )
        .set_auth_type(auth_type)
        .set_redirect_uri(RedirectUrl::new(redirect_uri).map_err(|e| fail(e.to_string()))?);
        Ok(Self {
            client,
            http,
            userinfo_url,
            authorization_origin: std::iter::once(auth_url.origin().ascii_serialization())
                .chain(cfg.extras.form_action_origins.iter().cloned())
                .collect::<Vec<_>>()
                .join(" "),
            token_endpoint,
            cfg: cfg.clone(),
        })
    }

    /// The `client_assertion` parameters of a token request (`private_key_jwt` only).
    fn assertion_params(&self) -> Result<Vec<(&'static str, String)>, String> {
        let ClientAuth::PrivateKeyJwt(key) = &self.cfg.extras.client_auth else {
            return Ok(Vec::new());
        };
        let aud = self.token_endpoint.as_deref().unwrap_or_default();
        let jwt = super::idp_client::assertion(key, &self.cfg.client_id, aud)?;
        Ok(vec![
            (
                "client_assertion_type",
                super::idp_client::ASSERTION_TYPE.to_owned(),
            ),
            ("client_assertion", jwt),
        ])
    }

    /// The ID-token checks: the configured algorithm, clock skew and authorized parties.
    fn verifier(&self) -> openidconnect::core::CoreIdTokenVerifier<'_> {
        let mut v = self.client.id_token_verifier();
        if let Some(alg) = self.cfg.extras.id_token_alg {
            v = v.set_allowed_algs([signing_alg(alg)]);
        }
        let skew = chrono::Duration::from_std(self.cfg.extras.clock_skew).unwrap_or_default();
        // Extra audiences are judged by `azp` (see `idp_client::check_azp`).
        v.set_time_fn(move || chrono::Utc::now() - skew)
            .set_other_audience_verifier_fn(|_| true)
    }

    /// Whether the authorization request carries a PKCE challenge.
    pub fn uses_pkce(&self) -> bool {
        self.cfg.use_pkce
    }

    /// The IdP authorization URL carrying `state` (sealed by the caller), `nonce` and, when
    /// PKCE is on, the S256 challenge of `pkce_verifier`.
    pub fn authorize_url(
        &self,
        state: String,
        nonce: String,
        pkce_verifier: Option<&str>,
    ) -> url::Url {
        let mut req = self.client.authorize_url(
            AuthenticationFlow::<CoreResponseType>::AuthorizationCode,
            move || CsrfToken::new(state),
            move || Nonce::new(nonce),
        );
        for s in self.cfg.scopes.iter().filter(|s| *s != "openid") {
            req = req.add_scope(Scope::new(s.clone()));
        }
        for (k, v) in &self.cfg.extra_auth_params {
            req = req.add_extra_param(k.clone(), v.clone());
        }
        if let Some(v) = pkce_verifier {
            let challenge =
                PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(v.to_owned()));
            req = req.set_pkce_challenge(challenge);
        }
        req.url().0
    }

    pub async fn exchange(
        &self,
        code: String,
        pkce_verifier: Option<String>,
        nonce: &str,
    ) -> Result<IdpTokens, OidcError> {
        let mut req = self
            .client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|e| OidcError::Exchange(e.to_string()))?;
        if let Some(v) = pkce_verifier {
            req = req.set_pkce_verifier(PkceCodeVerifier::new(v));
        }
        for (k, v) in self.assertion_params().map_err(OidcError::Exchange)? {
            req = req.add_extra_param(k, v);
        }
        let resp = req
            .request_async(&via(&self.http))
            .await
            .map_err(|e| OidcError::Exchange(error_chain(&e)))?;
        let id_token = resp
            .id_token()
            .ok_or_else(|| OidcError::IdToken("the token response has no id_token".into()))?;
        let nonce = Nonce::new(nonce.to_owned());
        id_token
            .claims(&self.verifier(), &nonce)
            .map_err(|e| OidcError::IdToken(error_chain(&e)))?;
        let mut claims = payload(&id_token.to_string())
            .ok_or_else(|| OidcError::IdToken("unreadable payload".into()))?;
        super::idp_client::check_azp(&claims, &self.cfg).map_err(OidcError::IdToken)?;
        self.complete(&mut claims, resp.access_token().secret())
            .await?;
        Ok(IdpTokens {
            claims,
            refresh_token: resp.refresh_token().map(|t| t.secret().clone()),
        })
    }

    pub async fn refresh(&self, refresh_token: &str) -> Result<IdpTokens, RefreshError> {
        let token = RefreshToken::new(refresh_token.to_owned());
        let mut req = self
            .client
            .exchange_refresh_token(&token)
            .map_err(|e| RefreshError::Invalid(e.to_string()))?;
        if self.cfg.extras.scope_on_refresh {
            req = req.add_scopes(self.cfg.scopes.iter().map(|s| Scope::new(s.clone())));
        }
        for (k, v) in self.assertion_params().map_err(RefreshError::Transient)? {
            req = req.add_extra_param(k, v);
        }
        let resp = req
            .request_async(&via(&self.http))
            .await
            .map_err(|e| match &e {
                RequestTokenError::ServerResponse(r) => match r.error() {
                    CoreErrorResponseType::Extension(code)
                        if matches!(code.as_str(), "server_error" | "temporarily_unavailable") =>
                    {
                        RefreshError::Transient(code.clone())
                    }
                    other => RefreshError::Invalid(format!("{other:?}")),
                },
                RequestTokenError::Request(_) | RequestTokenError::Parse(_, _) => {
                    RefreshError::Transient(error_chain(&e))
                }
                RequestTokenError::Other(m) => RefreshError::Invalid(m.clone()),
            })?;
        let access = resp.access_token().secret().clone();
        let mut claims = match resp.id_token() {
            Some(id) => {
                id.claims(&self.verifier(), |_: Option<&Nonce>| Ok(()))
                    .map_err(|e| RefreshError::Invalid(format!("ID token: {}", error_chain(&e))))?;
                let claims = payload(&id.to_string())
                    .ok_or_else(|| RefreshError::Invalid("unreadable ID token".into()))?;
                super::idp_client::check_azp(&claims, &self.cfg)
                    .map_err(|e| RefreshError::Invalid(format!("ID token: {e}")))?;
                claims
            }
            None => self
                .userinfo(&access)
                .await
                .map_err(|e| RefreshError::Transient(e.to_string()))?,
        };
        self.complete(&mut claims, &access)
            .await
            .map_err(|e| RefreshError::Transient(e.to_string()))?;
        Ok(IdpTokens {
            claims,
            refresh_token: Some(
                resp.refresh_token()
                    .map(|t| t.secret().clone())
                    .unwrap_or_else(|| refresh_token.to_owned()),
            ),
        })
    }

    /// With `userinfo_fallback`, fills email and groups from userinfo when the ID token lacks
    /// them; the userinfo `sub` must be the same.
    async fn complete(
        &self,
        claims: &mut Map<String, Value>,
        access_token: &str,
    ) -> Result<(), OidcError> {
        if !self.cfg.userinfo_fallback {
            return Ok(());
        }
        let has_email = super::claims::email(claims, &self.cfg).is_some();
        let has_groups = super::claims::groups(claims, &self.cfg).is_some();
        if has_email && has_groups {
            return Ok(());
        }
        let info = self.userinfo(access_token).await?;
        if info.get("sub") != claims.get("sub") {
            return Err(OidcError::UserInfo(
                "userinfo `sub` differs from the ID token".into(),
            ));
        }
        for (k, v) in info {
            claims.entry(k).or_insert(v);
        }
        Ok(())
    }

    async fn userinfo(&self, access_token: &str) -> Result<Map<String, Value>, OidcError> {
        let url = self
            .userinfo_url
            .as_ref()
            .ok_or_else(|| OidcError::UserInfo("the IdP has no userinfo endpoint".into()))?;
        let url = url::Url::parse(url).map_err(|e| OidcError::UserInfo(e.to_string()))?;
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static("application/json"),
        );
        let auth = http::HeaderValue::from_str(&format!("Bearer {access_token}"))
            .map_err(|e| OidcError::UserInfo(e.to_string()))?;
        headers.insert(http::header::AUTHORIZATION, auth);
        let resp = self
            .http
            .get(&url, headers)
            .await
            .map_err(|e| OidcError::UserInfo(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(OidcError::UserInfo(format!("status {}", resp.status())));
        }
        let body = resp
            .bytes()
            .await
            .map_err(|e| OidcError::UserInfo(e.to_string()))?;
        serde_json::from_slice::<Map<String, Value>>(&body)
            .map_err(|e| OidcError::UserInfo(e.to_string()))
    }
}

fn signing_alg(
    alg: crate::config::oidc::IdTokenAlg,
) -> openidconnect::core::CoreJwsSigningAlgorithm {
    use crate::config::oidc::IdTokenAlg as A;
    use openidconnect::core::CoreJwsSigningAlgorithm as J;
    match alg {
        A::RS256 => J::RsaSsaPkcs1V15Sha256,
        A::RS384 => J::RsaSsaPkcs1V15Sha384,
        A::RS512 => J::RsaSsaPkcs1V15Sha512,
        A::PS256 => J::RsaSsaPssSha256,
        A::PS384 => J::RsaSsaPssSha384,
        A::PS512 => J::RsaSsaPssSha512,
        A::ES256 => J::EcdsaP256Sha256,
        A::ES384 => J::EcdsaP384Sha384,
        A::ES512 => J::EcdsaP521Sha512,
        A::EdDSA => J::EdDsa,
    }
}

/// The JSON payload of a compact JWS whose signature was already verified.
fn payload(jwt: &str) -> Option<Map<String, Value>> {
    let part = jwt.split('.').nth(1)?;
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).ok()?).ok()
}
