//! `gatehouse healthcheck [URL]`: one GET, exit status 0 on a 2xx answer and 1 otherwise.
//! The container image's `HEALTHCHECK` runs it against `/readyz`, so the image needs no
//! curl. Proxies from the environment are ignored: the check is about this host's server.

use std::time::Duration;

/// The server's default listener (`listen` in a config file) and its readiness route.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080/readyz";

/// GETs `url` within `timeout`; `Ok` with the status line on a 2xx answer.
pub async fn check(url: &str, timeout: Duration) -> Result<String, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("bad URL {url}: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("bad URL {url}: the scheme must be http or https"));
    }
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let response = client
        .get(parsed)
        .send()
        .await
        .map_err(|e| format!("{url}: {}", without_url(&e)))?;
    let status = response.status();
    if status.is_success() {
        Ok(format!("{url}: {status}"))
    } else {
        Err(format!("{url}: {status}"))
    }
}

/// reqwest's error text, without repeating the URL (already named by the caller).
fn without_url(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    match std::error::Error::source(e) {
        Some(source) => format!("{kind}: {source}"),
        None => kind.to_owned(),
    }
}
