//! `web_fetch` from the gateway, with [`crate::outbound`]'s address rules applied to
//! every host the model names: each name is resolved once and refused if any of its
//! addresses is blocked ([`crate::outbound::check_ip`]: cloud metadata, link-local,
//! multicast, reserved; loopback unless allowed for tests), and, unless
//! `allow_private_networks`, private networks too (the model chooses these URLs; an
//! operator's intranet is not for it to read). The checked addresses are the ones
//! connected to. Redirects are followed by hand, at most five, each target checked as the
//! first. No proxy; a timeout on each exchange; the body read to a bound; HTML reduced to
//! text ([`super::html`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use url::{Host, Url};

use super::answer::Page;
use super::history::Asked;
use crate::config::server_tools::WebFetchConfig;

const MAX_URL_CHARS: usize = 2048;
const MAX_REDIRECTS: usize = 5;

/// What a fetch may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reach {
    pub allow_loopback: bool,
    pub allow_private: bool,
}

/// Whether `ip` is on a private network (RFC 1918, shared address space, unique local).
fn private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_private() || (o[0] == 100 && (64..128).contains(&o[1]))
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => private(IpAddr::V4(v4)),
            None => v6.segments()[0] & 0xfe00 == 0xfc00,
        },
    }
}

/// Why `ip` may not be fetched, if it may not.
pub(crate) fn refused(ip: IpAddr, reach: Reach) -> Option<&'static str> {
    if let Err(why) = crate::outbound::check_ip(ip, reach.allow_loopback) {
        return Some(why);
    }
    (!reach.allow_private && private(ip)).then_some("private network address")
}

#[derive(Debug, thiserror::Error)]
#[error("refused to fetch from {0}: {1}")]
struct Blocked(IpAddr, &'static str);

struct Resolver(Reach);

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        let reach = self.0;
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            for a in &addrs {
                if let Some(why) = refused(a.ip(), reach) {
                    return Err(Box::new(Blocked(a.ip(), why)) as _);
                }
            }
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

fn client(reach: Reach, timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    type Key = (Reach, Duration);
    static CLIENTS: OnceLock<Mutex<Vec<(Key, reqwest::Client)>>> = OnceLock::new();
    let clients = CLIENTS.get_or_init(Default::default);
    let mut list = clients.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, c)) = list.iter().find(|(k, _)| *k == (reach, timeout)) {
        return Ok(c.clone());
    }
    let c = reqwest::Client::builder()
        .no_proxy()
        .dns_resolver(Arc::new(Resolver(reach)))
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .connect_timeout(timeout)
        .user_agent(concat!(
            "gatehouse/",
            env!("CARGO_PKG_VERSION"),
            " (web_fetch)"
        ))
        .build()?;
    if list.len() < 16 {
        list.push(((reach, timeout), c.clone()));
    }
    Ok(c)
}

/// The checks a URL passes before any request: scheme, length, no credentials, the
/// tool's domain lists, a literal address's class.
pub(crate) fn check(url: &Url, asked: &Asked, reach: Reach) -> Result<(), &'static str> {
    if url.as_str().len() > MAX_URL_CHARS {
        return Err("url_too_long");
    }
    if !matches!(url.scheme(), "http" | "https")
        || !url.username().is_empty()
        || url.password().is_some()
    {
        return Err("url_not_allowed");
    }
    let ip = match url.host() {
        None => return Err("url_not_allowed"),
        Some(Host::Domain(d)) => {
            return if asked.admits(d) {
                Ok(())
            } else {
                Err("url_not_allowed")
            };
        }
        Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
    };
    if refused(ip, reach).is_some() || !asked.admits(&ip.to_string()) {
        return Err("url_not_allowed");
    }
    Ok(())
}

fn blocked(e: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(e);
    for _ in 0..16 {
        let Some(s) = source else { return false };
        if s.downcast_ref::<Blocked>().is_some() {
            return true;
        }
        source = s.source();
    }
    false
}

/// Fetches `url` (the tool's input); `Err` is Anthropic's error code for it.
pub(crate) async fn fetch(
    config: &WebFetchConfig,
    allow_loopback: bool,
    asked: &Asked,
    url: &str,
    now: DateTime<Utc>,
) -> Result<Page, &'static str> {
    let reach = Reach {
        allow_loopback,
        allow_private: config.allow_private_networks,
    };
    let mut url = Url::parse(url.trim()).map_err(|_| "invalid_tool_input")?;
    let client = client(reach, config.timeout).map_err(|_| "unavailable")?;
    let mut hops = 0;
    let response = loop {
        check(&url, asked, reach)?;
        let sent = client.get(url.clone()).send().await;
        let response = sent.map_err(|e| {
            if blocked(&e) {
                "url_not_allowed"
            } else {
                tracing::info!(error = %crate::outbound::error_chain(&e.without_url()), "web_fetch: not reachable");
                "url_not_accessible"
            }
        })?;
        if !response.status().is_redirection() {
            break response;
        }
        hops += 1;
        let next = response
            .headers()
            .get(http::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .and_then(|l| url.join(l).ok());
        match next {
            Some(next) if hops <= MAX_REDIRECTS => url = next,
            _ => return Err("url_not_accessible"),
        }
    };
    match response.status().as_u16() {
        200..=299 => {}
        429 => return Err("too_many_requests"),
        _ => return Err("url_not_accessible"),
    }
    let kind = Kind::of(
        response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    )
    .ok_or("unsupported_content_type")?;
    // Markup takes room: read several times the text kept.
    let raw_cap = config.max_bytes.saturating_mul(8).max(1 << 20);
    let (raw, _) = read(response, raw_cap).await?;
    let raw = String::from_utf8_lossy(&raw);
    let (title, text) = match kind {
        Kind::Html => super::html::to_text(&raw),
        Kind::Text => (None, raw.trim().to_owned()),
    };
    Ok(Page {
        url: url.to_string(),
        title,
        text: cut(text, config.max_bytes),
        retrieved_at: now.to_rfc3339_opts(SecondsFormat::Secs, true),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
}

impl Kind {
    fn of(content_type: Option<&str>) -> Option<Kind> {
        let Some(ct) = content_type else {
            return Some(Kind::Html);
        };
        let mime = ct
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match mime.as_str() {
            "text/html" | "application/xhtml+xml" => Some(Kind::Html),
            m if m.starts_with("text/")
                || m.ends_with("+json")
                || m.ends_with("+xml")
                || matches!(
                    m,
                    "application/json" | "application/xml" | "application/javascript"
                ) =>
            {
                Some(Kind::Text)
            }
            _ => None,
        }
    }
}

/// The body, at most `cap` bytes of it, and whether it was longer.
async fn read(
    mut response: reqwest::Response,
    cap: usize,
) -> Result<(Vec<u8>, bool), &'static str> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|_| "url_not_accessible")? {
        let room = cap.saturating_sub(out.len());
        if chunk.len() > room {
            out.extend_from_slice(&chunk[..room]);
            return Ok((out, true));
        }
        out.extend_from_slice(&chunk);
    }
    Ok((out, false))
}

/// `text` within `max` bytes, cut at a character boundary with a note.
fn cut(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!("\n\n[cut at {max} bytes by the gateway]"));
    text
}

#[cfg(test)]
#[path = "fetch_tests.rs"]
mod tests;
