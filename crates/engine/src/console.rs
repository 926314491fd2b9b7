//! The team console's own routes: the page at `/console` (the `ui/` build's `console.html`
//! entry, under the dashboard's CSP), `/console/login` and `/console/logout` (sign-in in
//! [`crate::identity::console`]). Every figure the page shows comes from the admin API
//! ([`crate::admin`]). Nothing here answers on the desktop's loopback listener or without
//! the `admin` block.

use std::net::IpAddr;

use axum::body::Body;
use http::{HeaderValue, Method, Request, Response, header};

use crate::error::ApiError;
use crate::gateway::Gateway;

/// `/console`, `/console/login`, `/console/logout`.
pub async fn serve(
    gw: &Gateway,
    client_ip: IpAddr,
    path: &str,
    req: Request<Body>,
) -> Result<Response<Body>, ApiError> {
    if gw.local.app().is_some() || gw.config.spend.is_none() {
        return Err(ApiError::NotFound(
            "the team console needs the `admin` block on a server".into(),
        ));
    }
    let method = req.method().clone();
    let allowed = match path {
        "/console/logout" => method == Method::POST,
        _ => method == Method::GET,
    };
    if !allowed {
        let allow = if path == "/console/logout" {
            "POST"
        } else {
            "GET"
        };
        let mut resp = ApiError::MethodNotAllowed(method.to_string()).into_response();
        resp.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(allow));
        return Ok(resp);
    }
    let identity = gw.identity.as_ref();
    match (path, identity) {
        ("/console", _) => page(),
        ("/console/login", Some(id)) => {
            Ok(crate::identity::console::login(gw, id, client_ip).await)
        }
        ("/console/logout", Some(id)) => {
            let headers = req.headers().clone();
            Ok(crate::identity::console::logout(gw, id, &method, &headers).await)
        }
        _ => Err(ApiError::NotFound(
            "console sign-in needs `oidc` on this gateway; admin keys still work with the admin API"
                .into(),
        )),
    }
}

/// The console's HTML entry (hashed assets under `/assets/`).
fn page() -> Result<Response<Body>, ApiError> {
    let html = crate::dashboard::assets::find("/console.html")
        .ok_or_else(|| ApiError::NotFound("the console is not built".into()))?;
    let mut resp = Response::new(Body::from(html));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(crate::dashboard::assets::UI_CSP),
    );
    Ok(resp)
}
