//! The operator status page at `/`: plain server-rendered HTML under a strict CSP, no
//! script, no secrets (upstream names and hosts only; aggregate usage only).

use std::fmt::Write;

use axum::body::Body;
use chrono::{Duration, Utc};
use http::{HeaderValue, Response, StatusCode, header};

use crate::edge::response_headers::PAGE_CSP;
use crate::server::Gateway;

const TEMPLATE: &str = include_str!("../../../ui/status.html");
const CSS: &str = include_str!("../../../ui/status.css");
const ICON: &str = include_str!("../../../icons/gatehouse.svg");

pub async fn serve(gw: &Gateway, path: &str) -> Response<Body> {
    match path {
        "/status.css" => asset(CSS, "text/css; charset=utf-8"),
        "/favicon.svg" | "/favicon.ico" => asset(ICON, "image/svg+xml"),
        _ => page(gw).await,
    }
}

fn asset(body: &'static str, content_type: &'static str) -> Response<Body> {
    let mut resp = Response::new(Body::from(body));
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    resp
}

async fn page(gw: &Gateway) -> Response<Body> {
    let now = Utc::now();
    let day_start = now - Duration::hours(24);
    let (usage, store_state) = match gw.store.usage_totals(day_start).await {
        Ok(t) => (
            format!(
                "{} requests · {} input / {} output tokens · ${:.4}",
                t.requests,
                t.input_tokens,
                t.output_tokens,
                t.cost_micro_usd as f64 / 1e6
            ),
            "ready",
        ),
        Err(_) => ("unavailable".to_owned(), "unavailable"),
    };
    let mut upstreams = String::new();
    for u in &gw.upstreams.list {
        let credential = if u.missing_credential_hint.is_some() {
            "missing (see startup message)"
        } else if u.credential.is_some() {
            "configured"
        } else {
            "none"
        };
        let _ = write!(
            upstreams,
            "<tr><td>{}</td><td>anthropic</td><td>{}</td><td>{}</td></tr>",
            escape(&u.name),
            escape(u.base_url.host_str().unwrap_or_default()),
            credential
        );
    }
    let uptime = (now - gw.started_at).num_seconds().max(0);
    let html = TEMPLATE
        .replace("{{version}}", env!("CARGO_PKG_VERSION"))
        .replace(
            "{{uptime}}",
            &format!("{}h {}m", uptime / 3600, (uptime % 3600) / 60),
        )
        .replace(
            "{{store}}",
            &format!("{} ({store_state})", gw.store.backend()),
        )
        .replace("{{usage}}", &escape(&usage))
        .replace("{{upstreams}}", &upstreams);
    let mut resp = Response::new(Body::from(html));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(PAGE_CSP),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
