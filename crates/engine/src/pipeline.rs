//! The request pipeline, in the order that gives it its meaning (SPEC 1.2).
//!
//! ```text
//! client address (X-Forwarded-For only from trusted proxies)
//!  -> deny CIDRs
//!  -> /healthz, /readyz
//!  -> allow CIDRs
//!  -> framing limits (414, 431, 411, 413), loopback Host check
//!  -> public routes (dashboard, sign-in)   -- no credential
//!  -> desktop app API /gatehouse/app/* (its own per-launch token; 404 on a server)
//!  -> admin API (admin keys or admin-group session)
//!  -> bearer admission (client key, workload token, session)
//!  -> dispatch: /managed/settings, /user/bootstrap, /v1/models, OTLP, usage, inference
//!  -> inference: paused? -> JSON parse -> policy webhook -> policy model allowlist
//!     -> cached central allowlist (desktop) -> operator model mapping
//!     -> spend reservation (sessions, the desktop's local key) -> routing + failover
//!     -> response hygiene + usage metering, settling the reservation (see `inference`)
//! ```
//!
//! Every response, error or not, leaves through [`handle`], which adds `x-request-id` and
//! the security headers. Routes that need no credential are listed in [`PUBLIC_ROUTES`];
//! nothing else is reachable before admission.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use serde_json::json;

use crate::auth::{self, Principal};
use crate::edge::{self, client_ip, limits, request_id, response_headers};
use crate::error::ApiError;
use crate::events::Event;
use crate::inference::{self, Endpoint};
use crate::server::Gateway;

/// Paths served without a credential (after the edge guards).
/// A trailing `*` matches any rest of the path. The dashboard's data is public because
/// request-level detail is only shown to loopback and admin-key callers (`dashboard::detail`).
pub const PUBLIC_ROUTES: &[(&str, &str)] = &[
    ("GET", "/"),
    ("GET", "/assets/*"),
    ("GET", "/status.css"),
    ("GET", "/favicon.svg"),
    ("GET", "/favicon.ico"),
    ("GET", crate::dashboard::API_DASHBOARD),
    ("GET", crate::dashboard::API_EVENTS),
];

fn is_public(method: &Method, path: &str) -> bool {
    PUBLIC_ROUTES.iter().any(|(m, p)| {
        method.as_str() == *m
            && match p.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => path == *p,
            }
    })
}

pub async fn handle(
    State(gw): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request<Body>,
) -> Response<Body> {
    let request_id = request_id::from_headers(req.headers());
    let mut resp = match run(&gw, peer, &request_id, req).await {
        Ok(resp) => resp,
        Err(err) => err.into_response(),
    };
    response_headers::apply(
        resp.headers_mut(),
        &request_id,
        gw.config.listen.tls.is_some(),
    );
    resp
}

async fn run(
    gw: &Arc<Gateway>,
    peer: SocketAddr,
    request_id: &str,
    req: Request<Body>,
) -> Result<Response<Body>, ApiError> {
    let cfg = &gw.config;
    let path = req.uri().path().to_owned();

    // 1. Who is calling: the socket peer, or X-Forwarded-For when the peer is a trusted proxy.
    let client_ip = client_ip::resolve(peer.ip(), req.headers(), &cfg.listen.trusted_proxies);

    // 2. Deny list first: a denied address sees nothing, not even health.
    if edge::in_any(client_ip, &cfg.access.deny) {
        deny(gw, request_id, &client_ip.to_string(), &path, "deny_cidr");
        return Err(ApiError::Forbidden("access denied".into()));
    }

    // 3. Health and readiness sit before the allow list, so a load balancer outside it can probe.
    match path.as_str() {
        "/healthz" => return Ok(json_response(StatusCode::OK, json!({"status": "ok"}))),
        "/readyz" => return Ok(readiness(gw).await),
        _ => {}
    }

    // 4. Allow list.
    if !cfg.access.allow.is_empty() && !edge::in_any(client_ip, &cfg.access.allow) {
        deny(gw, request_id, &client_ip.to_string(), &path, "allow_cidr");
        return Err(ApiError::Forbidden("access denied".into()));
    }

    // 5. Framing limits, before any body byte is read. On a loopback listener, only loopback
    //    Host names: a web page that rebinds its DNS name to 127.0.0.1 gets nothing.
    limits::check(req.uri(), req.headers(), &cfg.limits)?;
    if cfg.is_loopback() {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| req.uri().authority().map(|a| a.as_str()));
        if !edge::host_is_loopback(host) {
            deny(
                gw,
                request_id,
                &client_ip.to_string(),
                &path,
                "non_loopback_host",
            );
            return Err(ApiError::Forbidden(
                "this gateway only answers requests addressed to a loopback host name".into(),
            ));
        }
    }

    // 6. Public routes: no credential needed.
    if is_public(req.method(), &path) {
        return crate::dashboard::serve(gw, client_ip, &path, req.headers()).await;
    }
    if path.starts_with(crate::local_control::APP_PREFIX) {
        return match gw.local.app() {
            Some(app) => Ok(app.handle(req).await),
            None => Err(ApiError::NotFound("no such route".into())),
        };
    }
    if SIGN_IN_ROUTES.iter().any(|(_, p)| path == *p) {
        return Ok(sign_in(gw, client_ip, &path, req).await);
    }

    // 7. Admin API, then 8. bearer admission: every route below needs a principal.
    let admission = auth::Admission {
        keys: &gw.keys,
        identity: gw.identity.as_ref(),
        workload: gw.workload.as_ref(),
        now: gw.deps.clock.now(),
        inference: req.method() == Method::POST
            && matches!(path.as_str(), "/v1/messages" | "/v1/messages/count_tokens"),
    };
    // Admin API: `x-api-key` from the admin key ring first (no fallback), else an
    // admin-group session; it authenticates itself.
    if path == crate::spend::admin::PREFIX
        || path.starts_with(&format!("{}/", crate::spend::admin::PREFIX))
    {
        return Ok(crate::spend::admin::handle(gw, request_id, &admission, req).await);
    }
    let principal = match auth::admit(&admission, req.headers()).await {
        Ok(p) => p,
        Err(e) => {
            if let ApiError::Unauthenticated { reason, .. } = &e {
                gw.deps.emit(
                    Event::new("auth.denied")
                        .with("request_id", request_id)
                        .with("client_ip", client_ip.to_string())
                        .with("path", path.clone())
                        .with("reason", *reason),
                );
            }
            return Err(e);
        }
    };
    if let Principal::Session { user, .. } = &principal {
        gw.directory
            .note(user, admission.now, &gw.store, &gw.tracker);
    }
    if let Principal::Workload(_) = &principal
        && !admission.inference
    {
        return Err(ApiError::Unauthenticated {
            message: "workload tokens are admitted to inference only",
            reason: "workload_not_inference",
        });
    }

    // 9. Dispatch.
    dispatch(gw, request_id, &principal, &path, req).await
}

/// Sign-in routes (public, and 404 unless `oidc` is configured).
pub const SIGN_IN_ROUTES: &[(&str, &str)] = &[
    ("GET", "/.well-known/oauth-authorization-server"),
    ("POST", "/oauth/device_authorization"),
    ("GET|POST", "/device"),
    ("GET", "/oauth/callback"),
    ("POST", "/oauth/token"),
    ("POST", "/oauth/revoke"),
];

async fn sign_in(
    gw: &Arc<Gateway>,
    client_ip: std::net::IpAddr,
    path: &str,
    req: Request<Body>,
) -> Response<Body> {
    use crate::identity::{browser, device};
    let Some(id) = gw.identity.as_ref() else {
        return ApiError::NotFound("sign-in is not configured on this gateway".into())
            .into_response();
    };
    match (req.method().as_str(), path) {
        ("GET", "/.well-known/oauth-authorization-server") => device::discovery(id),
        ("POST", "/oauth/device_authorization") => {
            device::device_authorization(gw, id, client_ip, req).await
        }
        ("GET", "/device") => browser::show(id, req.uri()),
        ("POST", "/device") => browser::submit(gw, id, client_ip, req).await,
        ("GET", "/oauth/callback") => browser::callback(gw, id, req).await,
        ("POST", "/oauth/token") => device::token(gw, id, req).await,
        ("POST", "/oauth/revoke") => device::revoke(gw, id, req).await,
        (m, p) => ApiError::MethodNotAllowed(format!("{m} {p}")).into_response(),
    }
}

async fn dispatch(
    gw: &Arc<Gateway>,
    request_id: &str,
    principal: &Principal,
    path: &str,
    req: Request<Body>,
) -> Result<Response<Body>, ApiError> {
    let method = req.method().clone();
    let (allowed, allow_header) = match path {
        "/v1/models" | "/managed/settings" | "/user/bootstrap" | "/api/oauth/usage"
        | "/v1/me/spend" => (Method::GET, "GET"),
        "/v1/messages" | "/v1/messages/count_tokens" => (Method::POST, "POST"),
        "/v1/metrics" | "/v1/logs" | "/v1/traces" => (Method::POST, "POST"),
        _ => return Err(ApiError::NotFound(format!("no route for {method} {path}"))),
    };
    if method != allowed {
        let mut resp = ApiError::MethodNotAllowed(method.to_string()).into_response();
        resp.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(allow_header));
        return Ok(resp);
    }
    match path {
        "/v1/models" => {
            gw.deps.emit(
                Event::new("models.list")
                    .with("request_id", request_id)
                    .with("principal", principal.label()),
            );
            Ok(crate::policy::routes::models_response(gw, principal))
        }
        "/managed/settings" => {
            crate::policy::routes::managed_settings(gw, request_id, principal, req.headers())
        }
        "/user/bootstrap" => crate::policy::routes::user_bootstrap(gw, request_id, principal),
        "/api/oauth/usage" => crate::spend::usage_api::oauth_usage(gw, principal).await,
        "/v1/me/spend" => crate::spend::usage_api::me_spend(gw, principal).await,
        "/v1/metrics" | "/v1/logs" | "/v1/traces" => {
            match crate::telemetry::Signal::from_path(path) {
                Some(signal) => crate::telemetry::ingest::ingest(gw, principal, signal, req).await,
                None => Err(ApiError::NotFound(format!("no route for {method} {path}"))),
            }
        }
        "/v1/messages" => {
            inference::handle(gw, request_id, principal, Endpoint::Messages, req).await
        }
        _ => inference::handle(gw, request_id, principal, Endpoint::CountTokens, req).await,
    }
}

async fn readiness(gw: &Gateway) -> Response<Body> {
    let store = gw.store.backend();
    match tokio::time::timeout(Duration::from_secs(2), gw.store.ready()).await {
        Ok(Ok(())) => json_response(StatusCode::OK, json!({"status": "ready", "store": store})),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness probe: store read failed");
            json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"status": "unavailable", "store": store, "reason": "store read failed"}),
            )
        }
        Err(_) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "unavailable", "store": store, "reason": "store read timed out"}),
        ),
    }
}

fn deny(gw: &Gateway, request_id: &str, client_ip: &str, path: &str, reason: &'static str) {
    gw.deps.emit(
        Event::new("access.denied")
            .with("request_id", request_id)
            .with("client_ip", client_ip)
            .with("path", path)
            .with("reason", reason),
    );
}

pub fn json_response(status: StatusCode, body: serde_json::Value) -> Response<Body> {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}
