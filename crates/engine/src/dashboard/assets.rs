//! The built dashboard (`ui/dist`), embedded at compile time by `build.rs`, served at `/`
//! and `/assets/*` under a strict CSP: scripts, styles and requests from this origin only,
//! nothing inline, no framing. Hashed assets are cached for a year; `index.html` never.

use axum::body::Body;
use http::{HeaderValue, Response, StatusCode, header};

use crate::error::ApiError;

include!(concat!(env!("OUT_DIR"), "/ui_assets.rs"));

/// The CSP of the dashboard (the UI contract).
pub const UI_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

const ICON: &[u8] = include_bytes!("../../../../icons/gatehouse.svg");

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("woff2") => "font/woff2",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The embedded file at a URL path (`/` is `index.html`).
pub fn find(path: &str) -> Option<&'static [u8]> {
    let path = if path == "/" { "/index.html" } else { path };
    UI_ASSETS
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, bytes)| *bytes)
}

/// `/`, `/assets/*`, `/status.css` (the sign-in pages' stylesheet) and the favicon.
pub fn serve(path: &str) -> Result<Response<Body>, ApiError> {
    let (body, cache) = match path {
        "/favicon.svg" | "/favicon.ico" => (ICON, "public, max-age=86400"),
        "/" => (
            find(path).ok_or_else(|| ApiError::NotFound("the dashboard is not built".into()))?,
            "no-cache",
        ),
        // Vite names every asset after a hash of its contents.
        _ if path.starts_with("/assets/") => (
            find(path).ok_or_else(|| ApiError::NotFound(format!("no asset {path}")))?,
            "public, max-age=31536000, immutable",
        ),
        _ => (
            find(path).ok_or_else(|| ApiError::NotFound(format!("no route for GET {path}")))?,
            "public, max-age=3600",
        ),
    };
    let kind = if path.starts_with("/favicon") {
        "image/svg+xml"
    } else if path == "/" {
        "text/html; charset=utf-8"
    } else {
        content_type(path)
    };
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(UI_CSP),
    );
    Ok(resp)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn index_references_only_embedded_assets() {
        let html = std::str::from_utf8(find("/").unwrap()).unwrap();
        let refs: Vec<&str> = html
            .split(['"', '\''])
            .filter(|s| s.starts_with("/assets/"))
            .collect();
        assert!(!refs.is_empty(), "the built index loads its script: {html}");
        for r in refs {
            assert!(find(r).is_some(), "{r} is embedded");
        }
        assert!(!html.contains("<style"), "no inline style under the CSP");
        assert!(
            !html.contains("<script>") && !html.contains("<script type=\"module\">"),
            "no inline script under the CSP"
        );
        assert!(
            find("/status.css").is_some(),
            "the sign-in pages' stylesheet"
        );
    }

    #[test]
    fn types_and_caching() {
        assert_eq!(
            content_type("/assets/index-abc.js"),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(content_type("/assets/x.css"), "text/css; charset=utf-8");
        let r = serve("/favicon.svg").unwrap();
        assert_eq!(r.headers()[header::CONTENT_TYPE], "image/svg+xml");
        assert!(serve("/assets/nope.js").is_err());
        assert!(serve("/nope.html").is_err());
        let r = serve("/").unwrap();
        assert_eq!(r.headers()[header::CONTENT_SECURITY_POLICY], UI_CSP);
        assert_eq!(r.headers()[header::CACHE_CONTROL], "no-cache");
    }
}
