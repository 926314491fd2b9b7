//! The Anthropic Messages API upstream: raw HTTP, bodies and SSE passed through as bytes.

use bytes::Bytes;
use http::{HeaderMap, Method};

use crate::config::{CredentialScheme, UpstreamConfig};
use crate::secret::Secret;

use super::headers;

/// Builds the upstream request for `path` (`v1/messages` or `v1/messages/count_tokens`)
/// with the credential value read for this request.
pub fn build(
    client: &reqwest::Client,
    upstream: &UpstreamConfig,
    credential: Option<(CredentialScheme, &Secret)>,
    path: &str,
    query: Option<&str>,
    incoming: &HeaderMap,
    body: Bytes,
) -> Result<reqwest::Request, reqwest::Error> {
    let mut url = upstream.base_url.clone();
    let joined = format!("{}{}", url.path(), path);
    url.set_path(&joined);
    url.set_query(query);
    client
        .request(Method::POST, url)
        .headers(headers::to_upstream(incoming, credential))
        .body(body)
        .build()
}
