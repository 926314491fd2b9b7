//! Anthropic's Messages API on AWS over raw HTTP, shared by [`super::mantle`] (Bedrock
//! Mantle) and [`super::anthropic_aws`] (Claude Platform on AWS): the caller's body and
//! allowed headers pass through as bytes to `<base_url>/v1/messages` (and
//! `/v1/messages/count_tokens`, the SDKs' count call) with the caller's query string; the
//! capability table drops what the provider refuses (Mantle: the request-tags beta and
//! top-level `tags`). Authentication is SigV4 for the provider's service name
//! ([`super::aws::sigv4`]), a Bedrock API key as `Authorization: Bearer`, or the upstream's
//! `credential` (an API key as `x-api-key`). Credentials from the chain or a role are built
//! anew once after a 401/403 before the router fails over; errors are cleaned
//! ([`super::errors`]) so account ids and ARNs stay in the operator log.
//!
//! As the reference's clients do since 2.1.334, Mantle requests (whatever their
//! authentication) and Claude Platform on AWS requests signed with AWS credentials (not an
//! API key) carry `x-amz-content-sha256: <hex SHA-256 of the body sent>` unless a header of
//! that name is already set; a SigV4 signature covers it.

use async_trait::async_trait;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use url::Url;

use sha2::{Digest, Sha256};

use super::aws::sigv4::Signer;
use super::http_client::HttpClient;
use super::{
    Answer, Call, Operation, SendError, Upstream, anthropic, body, capabilities, errors, headers,
};
use crate::secret::Secret;

/// How requests are authenticated.
pub enum Auth {
    /// SigV4 with the upstream's AWS credentials.
    SigV4(Box<Signer>),
    /// A Bedrock API key, `Authorization: Bearer`.
    Bearer(Secret),
    /// The upstream's `credential`, as the call carries it.
    Credential,
}

pub struct AwsHttp {
    pub client: HttpClient,
    pub name: String,
    /// Ends in `/`; `v1/messages` is joined to it.
    pub base_url: Url,
    /// The provider's row in the capability table.
    pub provider: &'static str,
    pub auth: Auth,
    /// Headers every request carries (`anthropic-workspace-id`).
    pub fixed: Vec<(HeaderName, HeaderValue)>,
}

/// The header naming the body's SHA-256.
pub const CONTENT_SHA256: &str = "x-amz-content-sha256";

/// Sets `x-amz-content-sha256` to the hex SHA-256 of `body` unless it is set already.
pub fn content_sha256(headers: &mut HeaderMap, body: &[u8]) {
    if headers.contains_key(CONTENT_SHA256) {
        return;
    }
    if let Ok(v) = HeaderValue::from_str(&hex::encode(Sha256::digest(body))) {
        headers.insert(HeaderName::from_static(CONTENT_SHA256), v);
    }
}

impl AwsHttp {
    /// Whether requests name the body's hash: every Mantle request, and Claude Platform
    /// on AWS signed with AWS credentials.
    pub fn hashes_body(&self) -> bool {
        self.provider == "mantle" || matches!(self.auth, Auth::SigV4(_))
    }

    /// The request's headers before authentication: the caller's allowed ones (with
    /// `anthropic-beta` as the plan keeps it), the configured extras, the fixed ones.
    pub fn headers(&self, call: &Call<'_>, plan: &capabilities::Plan) -> HeaderMap {
        let credential = match self.auth {
            Auth::Credential => call.credential,
            _ => None,
        };
        let mut out = headers::to_upstream(call.headers, credential);
        if !plan.dropped.is_empty() {
            out.remove("anthropic-beta");
            if let Ok(v) = HeaderValue::from_str(&plan.header.join(","))
                && !plan.header.is_empty()
            {
                out.insert("anthropic-beta", v);
            }
        }
        for (name, value) in call.extra_headers.iter().chain(&self.fixed) {
            out.insert(name.clone(), value.clone());
        }
        if let Auth::Bearer(key) = &self.auth {
            headers::bearer(&mut out, key);
        }
        out
    }

    /// The body to send: the caller's without the fields the plan drops (and which of
    /// them were there).
    pub fn payload(
        call: &Call<'_>,
        plan: &capabilities::Plan,
    ) -> Result<(Bytes, Vec<String>), SendError> {
        let fields: Vec<&str> = plan.drop_fields.iter().map(String::as_str).collect();
        let dropped = body::present(&call.body, &fields);
        if dropped.is_empty() {
            return Ok((call.body.clone(), Vec::new()));
        }
        let edited = body::edit(&call.body, &dropped, &[])
            .map_err(|e| SendError::Build(format!("request body: {e}")))?;
        Ok((edited, dropped.iter().map(|s| (*s).to_owned()).collect()))
    }

    async fn send_once(
        &self,
        call: &Call<'_>,
        url: &Url,
        mut headers: HeaderMap,
        payload: &Bytes,
    ) -> Result<Answer, SendError> {
        if self.hashes_body() {
            content_sha256(&mut headers, payload);
        }
        if let Auth::SigV4(signer) = &self.auth {
            signer.sign(call.caller, url, &mut headers, payload).await?;
        }
        let sent = self
            .client
            .get()
            .post(url.clone())
            .headers(headers)
            .body(payload.clone())
            .send()
            .await;
        match sent {
            Ok(r) => Ok(Answer::from_http(r)),
            Err(e) if e.is_connect() => Err(SendError::Connect(e.to_string())),
            Err(e) => Err(SendError::Network(e.to_string())),
        }
    }
}

#[async_trait]
impl Upstream for AwsHttp {
    async fn send(&self, call: Call<'_>) -> Result<Answer, SendError> {
        if let Some(refused) = errors::workspace_id_in_body(&call.body) {
            return Ok(refused);
        }
        if call.op == Operation::Messages
            && let Some(refused) =
                capabilities::over_output_limit(self.provider, call.model, &call.body)
        {
            return Ok(refused);
        }
        let plan = capabilities::plan(self.provider, &capabilities::betas(call.headers));
        let (payload, dropped) = Self::payload(&call, &plan)?;
        let url = anthropic::url(&self.base_url, call.op, call.query);
        let headers = self.headers(&call, &plan);
        let mut answer = self
            .send_once(&call, &url, headers.clone(), &payload)
            .await?;
        // Credentials the chain or STS gave may have gone stale: build them anew once
        // before the router fails over.
        if let Auth::SigV4(signer) = &self.auth
            && matches!(answer.status.as_u16(), 401 | 403)
            && signer.refreshable()
        {
            tracing::warn!(upstream = %self.name, status = answer.status.as_u16(), "the upstream refused the AWS credentials; fetching new ones once");
            signer.refresh().await;
            answer = self.send_once(&call, &url, headers, &payload).await?;
        }
        let mut answer = errors::clean(&self.name, answer).await;
        answer.notes = plan.notes(&dropped);
        Ok(answer)
    }
}
