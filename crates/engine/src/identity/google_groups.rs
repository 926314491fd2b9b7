//! `oidc.google_groups`: Google ID tokens carry no groups, so a person's groups come from
//! the Admin SDK Directory API, as the reference fetches them: a service account with
//! domain-wide delegation signs a JWT assertion (`iss` = its `client_email`, `sub` =
//! `admin_email`, the directory read-only scope, `aud` = the token endpoint), trades it
//! for an access token (kept until a minute before it expires, dropped on a 401), then
//! `GET groups?userKey=<email>&maxResults=200` page by page (at most 50 pages); the groups'
//! emails, lower-cased, are the person's groups. Any failure refuses the sign-in (fail
//! closed): a person whose groups cannot be read is never admitted without them.
//!
//! The token endpoint is the key file's `token_uri` (Google's by default); a loopback one
//! is honoured only where the IdP may be loopback (`CLAUDE_GATEWAY_ALLOW_LOOPBACK`).

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http::HeaderMap;
use serde::Deserialize;
use url::Url;

use crate::config::oidc::GoogleGroupsConfig;
use crate::deps::{Clock, Environment};
use crate::outbound::SafeFetch;
use crate::secret::Secret;

const SCOPE: &str = "https://www.googleapis.com/auth/admin.directory.group.readonly";
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
const MAX_PAGES: usize = 50;
/// Largest token or directory answer read.
const MAX_BODY: usize = 1 << 20;

#[derive(Deserialize)]
struct KeyFile {
    client_email: Option<String>,
    private_key: Option<String>,
    token_uri: Option<String>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: Option<String>,
    expires_in: Option<i64>,
}

#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    groups: Vec<Group>,
    #[serde(rename = "nextPageToken")]
    next_page_token: Option<String>,
}

#[derive(Deserialize)]
struct Group {
    email: Option<String>,
}

/// The directory lookup, ready at start.
pub struct GoogleGroups {
    admin_email: String,
    directory_url: Url,
    client_email: String,
    key: jsonwebtoken::EncodingKey,
    token_uri: Url,
    http: SafeFetch,
    clock: Arc<dyn Clock>,
    /// The access token and its expiry (Unix seconds).
    token: tokio::sync::Mutex<Option<(Secret, i64)>>,
}

impl GoogleGroups {
    /// Reads and checks the key file now, so a bad file stops start-up with its path.
    pub fn load(
        cfg: &GoogleGroupsConfig,
        env: &dyn Environment,
        http: SafeFetch,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, String> {
        let path = cfg.key_path.display();
        let text = env
            .read_file(Path::new(&cfg.key_path))
            .map_err(|e| format!("oidc.google_groups: cannot read {path}: {e}"))?;
        let file: KeyFile = serde_json::from_str(&text)
            .map_err(|_| format!("oidc.google_groups: {path} is not JSON"))?;
        let (Some(client_email), Some(private_key)) = (file.client_email, file.private_key) else {
            return Err(format!(
                "oidc.google_groups: {path} is not a Google service-account key (missing client_email or private_key)"
            ));
        };
        let key = rsa_key(&private_key).ok_or_else(|| {
            format!("oidc.google_groups: the private_key in {path} is not an RSA key in PEM")
        })?;
        let token_uri = Url::parse(file.token_uri.as_deref().unwrap_or(GOOGLE_TOKEN_URI))
            .map_err(|e| format!("oidc.google_groups: token_uri in {path}: {e}"))?;
        let loopback = matches!(
            token_uri.host_str(),
            Some("127.0.0.1" | "localhost" | "[::1]")
        );
        let allowed = token_uri.scheme() == "https"
            || (token_uri.scheme() == "http" && loopback && http.policy().allow_loopback);
        if !allowed || http.check_url(&token_uri).is_err() {
            return Err(format!(
                "oidc.google_groups: token_uri in {path} must be https (a loopback http one only with CLAUDE_GATEWAY_ALLOW_LOOPBACK)"
            ));
        }
        Ok(Self {
            admin_email: cfg.admin_email.clone(),
            directory_url: cfg.directory_url.clone(),
            client_email,
            key,
            token_uri,
            http,
            clock,
            token: tokio::sync::Mutex::new(None),
        })
    }

    /// The person's groups (lower-case group emails); an error names what failed, never a
    /// token.
    pub async fn groups(&self, email: &str) -> Result<Vec<String>, String> {
        let token = self.access_token().await?;
        let mut out = Vec::new();
        let mut page_token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut url = self.directory_url.clone();
            url.query_pairs_mut()
                .append_pair("userKey", email)
                .append_pair("maxResults", "200");
            if let Some(t) = &page_token {
                url.query_pairs_mut().append_pair("pageToken", t);
            }
            let mut headers = HeaderMap::new();
            let bearer = format!("Bearer {}", token.expose());
            if let Ok(v) = http::HeaderValue::from_str(&bearer) {
                headers.insert(http::header::AUTHORIZATION, v);
            }
            let resp = self
                .http
                .get(&url, headers)
                .await
                .map_err(|e| format!("directory API: {e}"))?;
            let status = resp.status();
            if !status.is_success() {
                if status == http::StatusCode::UNAUTHORIZED {
                    *self.token.lock().await = None;
                }
                return Err(format!("directory API {}", status.as_u16()));
            }
            let page: Page = read_json(resp)
                .await
                .map_err(|e| format!("directory API: {e}"))?;
            out.extend(
                page.groups
                    .into_iter()
                    .filter_map(|g| g.email)
                    .map(|e| e.to_lowercase()),
            );
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(t) => page_token = Some(t),
                None => break,
            }
        }
        Ok(out)
    }

    /// A cached token, or a new one from the JWT-bearer grant.
    async fn access_token(&self) -> Result<Secret, String> {
        let now = self.clock.now().timestamp();
        let mut cached = self.token.lock().await;
        if let Some((token, exp)) = cached.as_ref()
            && exp - 60 > now
        {
            return Ok(token.clone());
        }
        let claims = serde_json::json!({
            "iss": self.client_email,
            "sub": self.admin_email,
            "scope": SCOPE,
            "aud": self.token_uri.as_str(),
            "iat": now,
            "exp": now + 3600,
        });
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
        header.typ = Some("JWT".into());
        let assertion = jsonwebtoken::encode(&header, &claims, &self.key)
            .map_err(|e| format!("could not sign the service-account assertion: {e}"))?;
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer")
            .append_pair("assertion", &assertion)
            .finish();
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        let resp = self
            .http
            .post(&self.token_uri, headers, Bytes::from(form))
            .await
            .map_err(|e| format!("google token endpoint: {e}"))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("google token endpoint {}", status.as_u16()));
        }
        let answer: TokenAnswer = read_json(resp)
            .await
            .map_err(|e| format!("google token endpoint: {e}"))?;
        let Some(token) = answer.access_token else {
            return Err("google token endpoint returned no access_token".into());
        };
        let token = Secret::new(token);
        *cached = Some((token.clone(), now + answer.expires_in.unwrap_or(3600)));
        Ok(token)
    }
}

/// An RSA key in PKCS#8 (Google's key files) or PKCS#1 PEM, as `jsonwebtoken` signs with it.
fn rsa_key(pem: &str) -> Option<jsonwebtoken::EncodingKey> {
    use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey};
    use rsa::pkcs8::DecodePrivateKey;
    let key = rsa::RsaPrivateKey::from_pkcs8_pem(pem)
        .or_else(|_| rsa::RsaPrivateKey::from_pkcs1_pem(pem))
        .ok()?;
    let der = key.to_pkcs1_der().ok()?;
    Some(jsonwebtoken::EncodingKey::from_rsa_der(der.as_bytes()))
}

async fn read_json<T: serde::de::DeserializeOwned>(
    mut resp: reqwest::Response,
) -> Result<T, String> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err("answer too large".into());
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|_| "answer is not the expected JSON".into())
}
