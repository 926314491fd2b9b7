//! `web_search` against a SearXNG instance's JSON API: `GET <base>/search?q=<query>&format=json`
//! through the gateway's safe outbound client ([`crate::outbound`]: no metadata or
//! link-local addresses, loopback only when allowed, no redirects, a timeout).
//!
//! SearXNG answers `{"query", "number_of_results", "results": [{"url", "title", "content",
//! "publishedDate", "engine", ...}], "answers", "suggestions", ...}`; only `results` is
//! read. An instance without `json` in `search.formats` answers 403.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use super::answer::Hit;
use super::history::Asked;
use crate::config::server_tools::WebSearchConfig;
use crate::outbound::{FetchError, FetchPolicy, SafeFetch};

/// The longest query sent (Anthropic's error for longer ones is `query_too_long`).
const MAX_QUERY_CHARS: usize = 500;
/// The longest snippet kept per result.
const MAX_SNIPPET_CHARS: usize = 1000;
/// The most of a SearXNG answer read.
const MAX_ANSWER_BYTES: usize = 4 << 20;

#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    results: Vec<WireResult>,
}

#[derive(Deserialize)]
struct WireResult {
    url: Option<String>,
    title: Option<String>,
    content: Option<String>,
    #[serde(rename = "publishedDate")]
    published: Option<serde_json::Value>,
}

/// One safe-fetch client per policy (searches are rare; building a TLS client per search
/// is not).
pub(crate) fn client(policy: FetchPolicy) -> Result<SafeFetch, FetchError> {
    static CLIENTS: OnceLock<Mutex<Vec<(FetchPolicy, SafeFetch)>>> = OnceLock::new();
    let clients = CLIENTS.get_or_init(Default::default);
    let mut list = clients.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, c)) = list.iter().find(|(p, _)| *p == policy) {
        return Ok(c.clone());
    }
    let c = SafeFetch::try_new(policy)?;
    if list.len() < 16 {
        list.push((policy, c.clone()));
    }
    Ok(c)
}

/// The URL of a search for `query`.
pub(crate) fn search_url(base: &Url, query: &str) -> Url {
    let mut url = base.clone();
    let path = format!("{}/search", base.path().trim_end_matches('/'));
    url.set_path(&path);
    url.query_pairs_mut()
        .append_pair("q", query)
        .append_pair("format", "json");
    url
}

/// Runs one search; `Err` is Anthropic's error code for it.
pub(crate) async fn search(
    config: &WebSearchConfig,
    allow_loopback: bool,
    asked: &Asked,
    query: &str,
) -> Result<Vec<Hit>, &'static str> {
    let query = query.trim();
    if query.is_empty() {
        return Err("invalid_tool_input");
    }
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err("query_too_long");
    }
    let policy = FetchPolicy {
        allow_loopback,
        timeout: config.timeout,
    };
    let fetch = client(policy).map_err(|e| {
        tracing::warn!(error = %e, "web_search: no HTTP client");
        "unavailable"
    })?;
    let url = search_url(&config.searxng_url, query);
    let request = http::Request::get(url.as_str())
        .header(http::header::ACCEPT, "application/json")
        .body(Vec::new())
        .map_err(|_| "unavailable")?;
    let answer = tokio::time::timeout(
        config.timeout + Duration::from_millis(100),
        fetch.execute(request, MAX_ANSWER_BYTES),
    )
    .await
    .map_err(|_| "unavailable")?;
    let answer = answer.map_err(|e| {
        tracing::warn!(backend = %crate::outbound::redact_url(&config.searxng_url), error = %e, "web_search: the search backend failed");
        "unavailable"
    })?;
    match answer.status().as_u16() {
        200..=299 => {}
        429 => return Err("too_many_requests"),
        status => {
            tracing::warn!(
                backend = %crate::outbound::redact_url(&config.searxng_url),
                status,
                "web_search: the search backend refused (SearXNG answers 403 when `json` is not in search.formats)"
            );
            return Err("unavailable");
        }
    }
    let hits = parse(answer.body(), config.max_results, asked).map_err(|e| {
        tracing::warn!(error = %e, "web_search: the search backend's answer is not SearXNG JSON");
        "unavailable"
    })?;
    Ok(hits)
}

/// The results of a SearXNG JSON answer the tool's domain lists admit: http(s) URLs, each
/// once, at most `max`.
pub(crate) fn parse(body: &[u8], max: usize, asked: &Asked) -> Result<Vec<Hit>, serde_json::Error> {
    let wire: Wire = serde_json::from_slice(body)?;
    let mut hits: Vec<Hit> = Vec::new();
    for r in wire.results {
        if hits.len() >= max {
            break;
        }
        let Some(url) = r.url.as_deref().and_then(|u| Url::parse(u.trim()).ok()) else {
            continue;
        };
        if !matches!(url.scheme(), "http" | "https")
            || !url.host_str().is_some_and(|h| asked.admits(h))
            || hits.iter().any(|h| h.url == url.as_str())
        {
            continue;
        }
        let title = r
            .title
            .map(|t| clean(&t, 300))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| url.to_string());
        hits.push(Hit {
            url: url.to_string(),
            title,
            snippet: r
                .content
                .map(|c| clean(&c, MAX_SNIPPET_CHARS))
                .unwrap_or_default(),
            page_age: r
                .published
                .as_ref()
                .and_then(|p| p.as_str())
                .and_then(page_age),
        });
    }
    Ok(hits)
}

/// Whitespace collapsed, control characters dropped, at most `max` characters.
fn clean(s: &str, max: usize) -> String {
    let words: Vec<&str> = s.split_whitespace().collect();
    words
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .take(max)
        .collect()
}

/// SearXNG's `publishedDate` (`2025-04-30T00:00:00`, sometimes with a zone) as Anthropic
/// writes `page_age` (`April 30, 2025`).
pub(crate) fn page_age(published: &str) -> Option<String> {
    let date = chrono::NaiveDate::parse_from_str(published.get(..10)?, "%Y-%m-%d").ok()?;
    Some(date.format("%B %-d, %Y").to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::shaping::ServerTool;

    fn asked(allowed: &[&str], blocked: &[&str]) -> Asked {
        Asked {
            tool: ServerTool::WebSearch,
            name: "web_search".into(),
            max_uses: 5,
            allowed: allowed.iter().map(|s| s.to_string()).collect(),
            blocked: blocked.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// A SearXNG 2024/2025 answer, trimmed: the fields an instance really sends.
    const ANSWER: &str = r#"{
      "query": "rust async", "number_of_results": 0,
      "results": [
        {"url": "https://tokio.rs/tokio/tutorial", "title": "Tutorial | Tokio",
         "content": "Tokio is an  asynchronous\nruntime for Rust.", "engine": "duckduckgo",
         "parsed_url": ["https", "tokio.rs", "/tokio/tutorial", "", "", ""], "template": "default.html",
         "engines": ["duckduckgo", "brave"], "positions": [1, 2], "publishedDate": "2024-11-05T00:00:00",
         "score": 4.0, "category": "general"},
        {"url": "https://tokio.rs/tokio/tutorial", "title": "dup", "content": "", "engine": "brave",
         "publishedDate": null},
        {"url": "ftp://files.example/x", "title": "ftp", "content": "no"},
        {"url": "https://blocked.example/a", "title": "Blocked", "content": "x"},
        {"url": "https://rust-lang.github.io/async-book/", "title": "", "content": null,
         "publishedDate": "not a date"},
        {"url": "https://third.example/", "title": "Third", "content": "c"}
      ],
      "answers": [], "corrections": [], "infoboxes": [], "suggestions": ["rust async await"],
      "unresponsive_engines": [["google", "timeout"]]
    }"#;

    #[test]
    fn searxng_results_are_kept_once_cleaned_and_bounded() {
        let hits = parse(ANSWER.as_bytes(), 2, &asked(&[], &["blocked.example"])).unwrap();
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].url, "https://tokio.rs/tokio/tutorial");
        assert_eq!(hits[0].title, "Tutorial | Tokio");
        assert_eq!(
            hits[0].snippet,
            "Tokio is an asynchronous runtime for Rust."
        );
        assert_eq!(hits[0].page_age.as_deref(), Some("November 5, 2024"));
        // No title: the URL stands in; no date that parses: no age.
        assert_eq!(hits[1].title, "https://rust-lang.github.io/async-book/");
        assert_eq!(hits[1].page_age, None);
        let only = parse(ANSWER.as_bytes(), 5, &asked(&["third.example"], &[])).unwrap();
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].title, "Third");
        assert!(parse(b"<html>", 5, &asked(&[], &[])).is_err());
        assert!(parse(b"{}", 5, &asked(&[], &[])).unwrap().is_empty());
    }

    #[test]
    fn the_search_url_keeps_the_base_path() {
        let base = Url::parse("https://s.example/searxng/").unwrap();
        assert_eq!(
            search_url(&base, "a b&c").as_str(),
            "https://s.example/searxng/search?q=a+b%26c&format=json"
        );
        let bare = Url::parse("https://s.example").unwrap();
        assert_eq!(search_url(&bare, "x").path(), "/search");
    }

    #[tokio::test]
    async fn queries_are_checked_before_any_request() {
        let config = WebSearchConfig {
            searxng_url: Url::parse("https://s.invalid/").unwrap(),
            max_results: 5,
            price_per_search_nano: 0,
            timeout: Duration::from_secs(1),
        };
        let a = asked(&[], &[]);
        assert_eq!(
            search(&config, false, &a, "  ").await,
            Err("invalid_tool_input")
        );
        let long = "x".repeat(501);
        assert_eq!(
            search(&config, false, &a, &long).await,
            Err("query_too_long")
        );
        // A backend on a metadata address is refused even with loopback allowed.
        let meta = WebSearchConfig {
            searxng_url: Url::parse("http://169.254.169.254/").unwrap(),
            ..config
        };
        assert_eq!(search(&meta, true, &a, "x").await, Err("unavailable"));
    }
}
