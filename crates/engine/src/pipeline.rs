//! The request pipeline, in the order that gives it its meaning (SPEC 1.2).
//!
//! ```text
//! client address (X-Forwarded-For only from trusted proxies)
//!  -> deny CIDRs
//!  -> /healthz, /readyz
//!  -> allow CIDRs
//!  -> framing limits (414, 431, 411, 413), one Host (400), loopback Host check
//!  -> public routes (dashboard, sign-in)   -- no credential
//!  -> desktop app API /gatehouse/app/* (its own per-launch token; 404 on a server)
//!  -> team console page and sign-in /console (404 on the desktop and without `admin`)
//!  -> admin API (admin keys, admin- or viewer-group session, the console's cookie)
//!  -> bearer admission (client key, workload token, session)
//!  -> dispatch: /managed/settings, /user/bootstrap, /v1/models, OTLP, usage, inference
//!     (`load_test_mode`: `x-load-test-user` names a made-up developer)
//!  -> inference: paused? -> JSON parse (/v1/chat/completions: translated to a Messages
//!     body first, its answer translated back) -> policy webhook -> policy model allowlist
//!     -> cached central allowlist (desktop) -> operator model mapping
//!     -> spend reservation (sessions, the desktop's local key) -> routing + failover
//!     -> response hygiene + usage metering, settling the reservation (see `inference`)
//! ```
//!
//! Every response, error or not, leaves through [`handle`], which adds `x-request-id` and
//! the security headers. Every route is declared once in [`ROUTES`], with its methods and
//! the admission it needs; a path in no route is reachable only past bearer admission
//! (and then answers 404), so an unauthenticated caller learns nothing of it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use serde_json::json;

use crate::auth::{self, Principal};
use crate::edge::{self, client_ip, json_response, limits, request_id, response_headers};
use crate::error::ApiError;
use crate::events::Event;
use crate::gateway::Gateway;
use crate::inference::{self, Endpoint};

/// How a route is admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// No credential (the dashboard); only matched with one of its methods.
    Public,
    /// Sign-in (public; 404 without `oidc`).
    SignIn,
    /// The desktop app's API: its own per-launch token (404 on a server).
    App,
    /// The team console's page and sign-in (404 on the desktop and without `admin`).
    Console,
    /// The admin API: an admin key, else an admin-group session.
    Admin,
    /// A principal from bearer admission.
    Bearer,
}

/// What serves a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Dashboard,
    SignIn,
    App,
    Console,
    Admin,
    Metrics,
    /// `POST /v1/gatehouse/route/explain` (admin admission).
    RouteExplain,
    Models,
    ManagedSettings,
    UserBootstrap,
    OauthUsage,
    MeSpend,
    Otlp(crate::telemetry::Signal),
    Inference(Endpoint),
}

/// One route: a path (a trailing `*` matches any rest), its methods (`|`-separated, `*`
/// for any: the target answers 405 itself), how it is admitted and what serves it.
#[derive(Debug)]
pub struct Route {
    pub path: &'static str,
    pub methods: &'static str,
    pub admit: Admit,
    pub target: Target,
}

const fn route(path: &'static str, methods: &'static str, admit: Admit, target: Target) -> Route {
    Route {
        path,
        methods,
        admit,
        target,
    }
}

/// Every route of the gateway.
pub const ROUTES: &[Route] = {
    use crate::telemetry::Signal;
    use Admit as A;
    use Target as T;
    &[
        route("/", "GET", A::Public, T::Dashboard),
        route("/assets/*", "GET", A::Public, T::Dashboard),
        route("/status.css", "GET", A::Public, T::Dashboard),
        route("/favicon.svg", "GET", A::Public, T::Dashboard),
        route("/favicon.ico", "GET", A::Public, T::Dashboard),
        route(
            crate::dashboard::API_DASHBOARD,
            "GET",
            A::Public,
            T::Dashboard,
        ),
        route(crate::dashboard::API_EVENTS, "GET", A::Public, T::Dashboard),
        route(
            crate::dashboard::status::API_STATUS,
            "GET",
            A::Public,
            T::Dashboard,
        ),
        route(
            "/.well-known/oauth-authorization-server",
            "GET",
            A::SignIn,
            T::SignIn,
        ),
        route("/oauth/device_authorization", "POST", A::SignIn, T::SignIn),
        route("/device", "GET|POST", A::SignIn, T::SignIn),
        route("/oauth/callback", "GET", A::SignIn, T::SignIn),
        route("/oauth/token", "POST", A::SignIn, T::SignIn),
        route("/oauth/revoke", "POST", A::SignIn, T::SignIn),
        route("/gatehouse/app/*", "*", A::App, T::App),
        route("/console", "GET", A::Console, T::Console),
        route("/console/login", "GET", A::Console, T::Console),
        route("/console/logout", "POST", A::Console, T::Console),
        route("/v1/organizations/spend_limits", "*", A::Admin, T::Admin),
        route("/v1/organizations/spend_limits/*", "*", A::Admin, T::Admin),
        route("/v1/organizations/analytics/cost", "*", A::Admin, T::Admin),
        route(
            "/v1/organizations/analytics/sessions",
            "*",
            A::Admin,
            T::Admin,
        ),
        route("/v1/organizations/me", "*", A::Admin, T::Admin),
        route("/v1/organizations/overview", "*", A::Admin, T::Admin),
        route("/v1/organizations/users", "*", A::Admin, T::Admin),
        route("/v1/organizations/users/*", "*", A::Admin, T::Admin),
        route("/v1/organizations/upstreams", "*", A::Admin, T::Admin),
        route("/v1/organizations/policies", "*", A::Admin, T::Admin),
        route("/v1/organizations/policies/*", "*", A::Admin, T::Admin),
        route("/v1/organizations/analytics/usage", "*", A::Admin, T::Admin),
        route("/metrics", "GET", A::Admin, T::Metrics),
        route(
            crate::inference::explain::PATH,
            "POST",
            A::Admin,
            T::RouteExplain,
        ),
        route("/v1/models", "GET", A::Bearer, T::Models),
        route("/managed/settings", "GET", A::Bearer, T::ManagedSettings),
        route("/user/bootstrap", "GET", A::Bearer, T::UserBootstrap),
        route("/api/oauth/usage", "GET", A::Bearer, T::OauthUsage),
        route("/v1/me/spend", "GET", A::Bearer, T::MeSpend),
        route("/v1/metrics", "POST", A::Bearer, T::Otlp(Signal::Metrics)),
        route("/v1/logs", "POST", A::Bearer, T::Otlp(Signal::Logs)),
        route("/v1/traces", "POST", A::Bearer, T::Otlp(Signal::Traces)),
        route(
            "/v1/messages",
            "POST",
            A::Bearer,
            T::Inference(Endpoint::Messages),
        ),
        route(
            "/v1/messages/count_tokens",
            "POST",
            A::Bearer,
            T::Inference(Endpoint::CountTokens),
        ),
        route(
            inference::chat::PATH,
            "POST",
            A::Bearer,
            T::Inference(Endpoint::ChatCompletions),
        ),
    ]
};

impl Route {
    fn matches_path(&self, path: &str) -> bool {
        match self.path.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => path == self.path,
        }
    }

    fn allows(&self, method: &Method) -> bool {
        self.methods == "*" || self.methods.split('|').any(|m| m == method.as_str())
    }

    /// 405 with the route's methods in `Allow`.
    fn method_not_allowed(&self, method: &Method) -> Response<Body> {
        let error = ApiError::MethodNotAllowed(method.to_string());
        let mut resp = if self.target == Target::Inference(Endpoint::ChatCompletions) {
            error.into_openai_response()
        } else {
            error.into_response()
        };
        if let Ok(v) = HeaderValue::from_str(&self.methods.replace('|', ", ")) {
            resp.headers_mut().insert(header::ALLOW, v);
        }
        resp
    }
}

/// The route for a request: a public route only with one of its methods (anything else
/// on its path goes on to bearer admission, as an unknown path does).
pub fn find(method: &Method, path: &str) -> Option<&'static Route> {
    ROUTES
        .iter()
        .find(|r| r.matches_path(path) && (r.admit != Admit::Public || r.allows(method)))
}

/// Every request the listener accepts, from `peer` (the socket's address).
pub async fn handle(gw: Arc<Gateway>, peer: SocketAddr, req: Request<Body>) -> Response<Body> {
    let request_id = request_id::from_headers(req.headers(), gw.deps.clock.now());
    // The OpenAI front door answers every refusal (admission included) in OpenAI's envelope.
    let openai = req.uri().path() == inference::chat::PATH;
    let mut resp = match run(&gw, peer, &request_id, req).await {
        Ok(resp) => resp,
        Err(err) if openai => err.into_openai_response(),
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

    // 4. Allow list (without one, the first caller from the internet is worth a warning).
    if cfg.access.allow.is_empty() && client_ip::is_public(client_ip) {
        static PUBLIC_CALLER: crate::once::Once = crate::once::Once::new();
        if PUBLIC_CALLER.first() {
            tracing::warn!(
                client_ip = %client_ip,
                "a request came from the public address {client_ip} and access_control.allow_cidrs is empty, so anyone on the internet can reach this gateway's sign-in and managed-settings routes. Keep it on a private network, or set access_control.allow_cidrs (logged once)"
            );
        }
    }
    if !cfg.access.allow.is_empty() && !edge::in_any(client_ip, &cfg.access.allow) {
        deny(gw, request_id, &client_ip.to_string(), &path, "allow_cidr");
        return Err(ApiError::Forbidden("access denied".into()));
    }

    // 5. Framing limits, before any body byte is read; exactly one Host (two, or one that
    //    contradicts the target, answer 400). On a loopback listener, only loopback Host
    //    names: a web page that rebinds its DNS name to 127.0.0.1 gets nothing.
    limits::check(req.uri(), req.headers(), &cfg.limits)?;
    let host = edge::single_host(req.uri(), req.headers())?;
    if cfg.is_loopback() && !edge::host_is_loopback(host) {
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

    // 6. Routes admitted without a bearer: public, sign-in, the desktop app, the admin API.
    let route = find(req.method(), &path);
    match route.map(|r| r.admit) {
        Some(Admit::Public) => {
            return crate::dashboard::serve(gw, client_ip, &path, req.headers()).await;
        }
        Some(Admit::SignIn) => return Ok(sign_in(gw, client_ip, &path, req).await),
        Some(Admit::App) => {
            return match gw.local.app() {
                Some(app) => Ok(app.handle(req).await),
                None => Err(ApiError::NotFound("no such route".into())),
            };
        }
        Some(Admit::Console) => return crate::console::serve(gw, client_ip, &path, req).await,
        _ => {}
    }

    // 7. Admin API, then 8. bearer admission: every route below needs a principal.
    let admission = auth::Admission {
        keys: &gw.keys,
        identity: gw.identity.as_ref(),
        workload: gw.workload.as_ref(),
        now: gw.deps.clock.now(),
        inference: req.method() == Method::POST
            && route.is_some_and(|r| matches!(r.target, Target::Inference(_))),
    };
    // Admin API: `x-api-key` from the admin key ring first (no fallback), else an
    // admin-group session; it authenticates itself.
    if route.is_some_and(|r| r.target == Target::RouteExplain) {
        return Ok(crate::inference::explain::handle(gw, request_id, &admission, req).await);
    }
    if let Some(r) = route.filter(|r| r.admit == Admit::Admin) {
        if r.target == Target::Metrics {
            if !r.allows(req.method()) {
                return Ok(r.method_not_allowed(req.method()));
            }
            return metrics(gw, &admission, req.headers().clone()).await;
        }
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
    let Some(route) = route else {
        let method = req.method();
        return Err(ApiError::NotFound(format!("no route for {method} {path}")));
    };
    dispatch(gw, request_id, &principal, route, req).await
}

/// `GET /metrics`: the Prometheus text exposition, for an admin key (read or write) or an
/// admin-group session; 404 without `admin`.
async fn metrics(
    gw: &Gateway,
    admission: &auth::Admission<'_>,
    headers: http::HeaderMap,
) -> Result<Response<Body>, ApiError> {
    if gw.config.spend.is_none() {
        return Err(ApiError::NotFound(
            "metrics need admin keys (admin.read_keys)".into(),
        ));
    }
    crate::spend::admin::authenticate(gw, &Method::GET, &headers, admission).await?;
    Ok(crate::metrics::text_response(
        crate::metrics::Metrics::scrape(gw).await,
    ))
}

/// Sign-in routes (public, and 404 unless `oidc` is configured).
async fn sign_in(
    gw: &Arc<Gateway>,
    client_ip: std::net::IpAddr,
    path: &str,
    req: Request<Body>,
) -> Response<Body> {
    use crate::identity::{browser, device};
    let Some(id) = gw.identity.as_ref() else {
        // Workload-only (`cri` without `oidc`): discovery without OAuth endpoints.
        if gw.workload.is_some()
            && (req.method().as_str(), path) == ("GET", "/.well-known/oauth-authorization-server")
        {
            return device::discovery_without_sign_in(&gw.config.listen);
        }
        return ApiError::NotFound("sign-in is not configured on this gateway".into())
            .into_response();
    };
    match (req.method().as_str(), path) {
        ("GET", "/.well-known/oauth-authorization-server") => {
            device::discovery(id, gw.workload.is_some())
        }
        ("POST", "/oauth/device_authorization") => {
            device::device_authorization(gw, id, client_ip, req).await
        }
        ("GET", "/device") => browser::show(id, req.uri()),
        ("POST", "/device") => browser::submit(gw, id, client_ip, req).await,
        ("GET", "/oauth/callback") => browser::callback(gw, id, req).await,
        ("POST", "/oauth/token") => device::token(gw, id, req).await,
        ("POST", "/oauth/revoke") => device::revoke(gw, id, req).await,
        _ => match find(req.method(), path) {
            Some(route) => route.method_not_allowed(req.method()),
            None => ApiError::NotFound("no such route".into()).into_response(),
        },
    }
}

async fn dispatch(
    gw: &Arc<Gateway>,
    request_id: &str,
    principal: &Principal,
    route: &Route,
    req: Request<Body>,
) -> Result<Response<Body>, ApiError> {
    if !route.allows(req.method()) {
        return Ok(route.method_not_allowed(req.method()));
    }
    use crate::policy::routes as policy;
    match route.target {
        Target::Models => {
            gw.deps.emit(
                Event::new("models.list")
                    .with("request_id", request_id)
                    .with("principal", principal.label()),
            );
            Ok(policy::models_response(gw, principal))
        }
        Target::ManagedSettings => {
            policy::managed_settings(gw, request_id, principal, req.headers())
        }
        Target::UserBootstrap => policy::user_bootstrap(gw, request_id, principal),
        Target::OauthUsage => crate::spend::usage_api::oauth_usage(gw, principal).await,
        Target::MeSpend => crate::spend::usage_api::me_spend(gw, principal).await,
        Target::Otlp(signal) => crate::telemetry::ingest::ingest(gw, principal, signal, req).await,
        Target::Inference(endpoint) => {
            let principal = inference::load_test::principal(gw, principal, req.headers())?;
            inference::handle(gw, request_id, &principal, endpoint, req).await
        }
        // Admitted above, before bearer admission.
        Target::Dashboard
        | Target::SignIn
        | Target::App
        | Target::Console
        | Target::Admin
        | Target::Metrics
        | Target::RouteExplain => Err(ApiError::NotFound("no such route".into())),
    }
}

/// A real store read and write; concurrent probes share one (see [`crate::memo`]).
async fn readiness(gw: &Gateway) -> Response<Body> {
    let store = gw.store.backend();
    let (ready, reason) = gw
        .readiness
        .get(|| async {
            match tokio::time::timeout(Duration::from_secs(2), gw.store.ready()).await {
                Ok(Ok(())) => (true, ""),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "readiness probe: store failed");
                    (false, "store failed")
                }
                Err(_) => (false, "store timed out"),
            }
        })
        .await;
    if !ready {
        // Spend leases admit no more: the next capped request asks the store.
        gw.ledger.retire_all();
    }
    use crate::readiness::Verdict;
    match gw.ready_grace.judge(ready, gw.deps.clock.now()) {
        Verdict::Ready => json_response(StatusCode::OK, json!({"status": "ready", "store": store})),
        Verdict::Grace => json_response(
            StatusCode::OK,
            json!({"status": "ready", "store": store, "store_failing": reason}),
        ),
        Verdict::Unavailable => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "unavailable", "store": store, "reason": reason}),
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
