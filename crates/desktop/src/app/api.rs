//! The app's HTTP API at `/gatehouse/app/*`, mounted into the engine on loopback.
//!
//! Every call must carry this launch's token in `x-gatehouse-app-token` (compared in
//! constant time). A web page cannot send that header cross-origin without a CORS
//! preflight, which this API never grants, and the engine already refuses non-loopback
//! Host names (DNS rebinding). Answers are the app state, or `{"error": {type, message}}`.

use std::sync::Weak;

use async_trait::async_trait;
use axum::body::Body;
use gatehouse_engine::local_control::{APP_PREFIX, AppRoutes};
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use super::{App, AppError, Inner};

/// The header that carries the app token.
pub const TOKEN_HEADER: &str = "x-gatehouse-app-token";
const MAX_BODY: usize = 64 * 1024;

/// Holds the app weakly: the engine must not keep the app alive (it owns the engine).
pub struct AppApi {
    app: Weak<Inner>,
}

impl AppApi {
    pub fn new(app: &App) -> Self {
        Self {
            app: std::sync::Arc::downgrade(&app.inner),
        }
    }
}

fn reply(status: StatusCode, body: Value) -> Response<Body> {
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    r
}

/// A refusal: status, error type, message (turned into the error envelope at the end).
struct Fail(StatusCode, &'static str, String);

impl Fail {
    fn bad(message: impl Into<String>) -> Self {
        Fail(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            message.into(),
        )
    }
}

fn error(status: StatusCode, kind: &str, message: &str) -> Response<Body> {
    reply(
        status,
        json!({"type": "error", "error": {"type": kind, "message": message}}),
    )
}

fn app_error(e: &AppError) -> Fail {
    let (status, kind) = match e {
        AppError::BadInput(_) => (StatusCode::BAD_REQUEST, "invalid_request_error"),
        AppError::Locked(_) => (StatusCode::CONFLICT, "locked"),
        AppError::Keychain(_) => (StatusCode::SERVICE_UNAVAILABLE, "keychain_unavailable"),
        AppError::Central(_) => (StatusCode::SERVICE_UNAVAILABLE, "central_unavailable"),
        AppError::Engine(_) | AppError::Internal(_) => {
            (StatusCode::INTERNAL_SERVER_ERROR, "api_error")
        }
    };
    Fail(status, kind, e.to_string())
}

async fn json_body(req: Request<Body>) -> Result<Value, Fail> {
    let bytes = http_body_util::Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| {
            if gatehouse_engine::edge::listener::is_body_timeout(e.as_ref()) {
                Fail(
                    StatusCode::REQUEST_TIMEOUT,
                    "timeout_error",
                    "the request body arrived too slowly".into(),
                )
            } else {
                Fail(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "invalid_request_error",
                    "body too large or unreadable".into(),
                )
            }
        })?
        .to_bytes();
    if bytes.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| Fail::bad(format!("the body is not valid JSON: {e}")))
}

fn text<'a>(v: &'a Value, key: &str) -> Result<&'a str, Fail> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| Fail::bad(format!("`{key}` (a string) is required")))
}

#[async_trait]
impl AppRoutes for AppApi {
    /// Mode and sign-in state for `gatehouse status` (no email, token or key).
    async fn status(&self) -> Option<Value> {
        let app = App {
            inner: self.app.upgrade()?,
        };
        let settings = app.settings();
        let sign_in = match app.login_state() {
            super::connected::LoginState::SignedOut { .. } => "signed_out",
            super::connected::LoginState::Expired { .. } => "expired",
            super::connected::LoginState::Pending(_) => "pending",
            super::connected::LoginState::SignedIn => "signed_in",
        };
        let connected = settings.mode == crate::settings::Mode::Connected;
        Some(json!({
            "tray": app.tray_state().await.as_str(),
            "mode": if connected { "connected" } else { "standalone" },
            "sign_in": connected.then_some(sign_in),
            "central_url": connected.then_some(settings.central_url),
        }))
    }

    async fn handle(&self, req: Request<Body>) -> Response<Body> {
        let Some(inner) = self.app.upgrade() else {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "the app is shutting down",
            );
        };
        let app = App { inner };
        if !admitted(&app, req.method(), req.uri().path(), req.headers()).await {
            return error(
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "this API is for the Gatehouse app window only",
            );
        }
        match route(&app, req).await {
            Ok(Answer::State) => reply(StatusCode::OK, app.state().await),
            Ok(Answer::Json(v)) => reply(StatusCode::OK, v),
            Ok(Answer::Raw(r)) => r,
            Err(Fail(status, kind, message)) => error(status, kind, &message),
        }
    }
}

/// What a route answers with.
enum Answer {
    /// The app state (every action).
    State,
    Json(Value),
    Raw(Response<Body>),
}

/// Routes the local token may also read: `gatehouse statusline` and `gatehouse usage
/// export` hold the token Claude Code uses (from the keychain), not this launch's.
const LOCAL_KEY_ROUTES: [&str; 2] = ["statusline", "usage/export"];

/// This launch's app token in `x-gatehouse-app-token`, or (for [`LOCAL_KEY_ROUTES`]) the
/// local key as a Bearer token or `x-api-key`; both compared in constant time.
async fn admitted(app: &App, method: &Method, path: &str, headers: &http::HeaderMap) -> bool {
    let presented = headers
        .get(TOKEN_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if bool::from(presented.ct_eq(app.app_token().expose().as_bytes())) {
        return true;
    }
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    // The status token (the data dir's statusline.json) opens the status line only.
    if method == Method::GET
        && path.strip_prefix(APP_PREFIX) == Some("statusline")
        && let Some(t) = bearer
        && bool::from(t.as_bytes().ct_eq(app.status_token().expose().as_bytes()))
    {
        return true;
    }
    let path = path.strip_prefix(APP_PREFIX).unwrap_or_default();
    if method != Method::GET || !LOCAL_KEY_ROUTES.contains(&path) {
        return false;
    }
    let key = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()));
    let Some(key) = key else { return false };
    match app.store().local_key_hash().await {
        Ok(Some((stored, _))) => {
            let hash = gatehouse_engine::auth::ClientKeys::hash(key);
            bool::from(hash.ct_eq(&stored))
        }
        _ => false,
    }
}

/// The query's parameters (the last of a repeated name wins).
fn query(req: &Request<Body>) -> std::collections::HashMap<String, String> {
    url::form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

fn limit_param(v: Option<&String>) -> Result<usize, Fail> {
    match v {
        None => Ok(200),
        Some(s) => match s.parse::<usize>() {
            Ok(n) if (1..=5_000).contains(&n) => Ok(n),
            _ => Err(Fail::bad("limit must be a whole number from 1 to 5000")),
        },
    }
}

/// `GET usage/export`: the file, streamed a page at a time.
fn export(app: &App, q: &std::collections::HashMap<String, String>) -> Result<Answer, Fail> {
    let get = |k: &str| q.get(k).map(String::as_str);
    let local = super::insight::tz_param(get("tz")).map_err(|e| app_error(&e))?;
    let query = super::export::Query::parse(
        app.inner().deps.clock.now(),
        local,
        get("since"),
        get("until"),
        get("format"),
        get("group"),
    )
    .map_err(|e| app_error(&e))?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    let store = app.store();
    let index = super::insight::transcripts(app);
    let q2 = query.clone();
    tokio::spawn(async move {
        if let Err(e) = super::export::write(store.as_ref(), &index, &q2, &tx).await {
            // The status is sent already: the body ends short, and the log says why.
            tracing::warn!(error = %e, "usage export stopped");
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|chunk| (Ok::<_, std::io::Error>(bytes::Bytes::from(chunk)), rx))
    });
    let body = Body::from_stream(stream);
    let mut r = Response::new(body);
    let headers = r.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(query.content_type()),
    );
    headers.insert(
        header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    if let Ok(v) =
        http::HeaderValue::from_str(&format!("attachment; filename=\"{}\"", query.file_name()))
    {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(Answer::Raw(r))
}

async fn route(app: &App, req: Request<Body>) -> Result<Answer, Fail> {
    let path = req
        .uri()
        .path()
        .strip_prefix(APP_PREFIX)
        .unwrap_or_default()
        .to_owned();
    let method = req.method().clone();
    let q = query(&req);
    let done = |r: Result<(), AppError>| r.map(|()| Answer::State).map_err(|e| app_error(&e));
    let json = |r: Result<Value, AppError>| r.map(Answer::Json).map_err(|e| app_error(&e));
    let days =
        || super::insight::days_param(q.get("days").map(String::as_str)).map_err(|e| app_error(&e));
    let tz =
        || super::insight::tz_param(q.get("tz").map(String::as_str)).map_err(|e| app_error(&e));
    match (method, path.as_str()) {
        (Method::GET, "state") => Ok(Answer::State),
        (Method::GET, "insight/projects") => {
            json(super::insight::projects(app, days()?, tz()?).await)
        }
        (Method::GET, "insight/sessions") => {
            let limit = limit_param(q.get("limit"))?;
            json(
                super::insight::sessions(
                    app,
                    days()?,
                    tz()?,
                    q.get("q").map(String::as_str),
                    limit,
                )
                .await,
            )
        }
        (Method::GET, p) if p.starts_with("insight/sessions/") => {
            let id = &p["insight/sessions/".len()..];
            match super::insight::session_detail(app, id).await {
                Ok(Some(v)) => Ok(Answer::Json(v)),
                Ok(None) => Err(Fail(
                    StatusCode::NOT_FOUND,
                    "not_found_error",
                    "no such session in the usage records".into(),
                )),
                Err(e) => Err(app_error(&e)),
            }
        }
        (Method::GET, "insight/charts") => json(super::insight::charts(app, days()?, tz()?).await),
        (Method::GET, "usage/export") => export(app, &q),
        (Method::GET, "statusline") => {
            json(super::setup::statusline(app, q.get("session_id").map(String::as_str)).await)
        }
        (Method::GET, "claude-code/preview") => {
            let statusline = q.get("statusline").is_some_and(|v| v == "true");
            json(app.preview_claude_code(statusline))
        }
        (Method::POST, "login") => done(app.login().await),
        (Method::POST, "logout") => done(app.logout().await),
        (Method::POST, "open") => {
            let body = json_body(req).await?;
            done(app.open_verification(text(&body, "url")?))
        }
        (Method::POST, "settings") => {
            let body = json_body(req).await?;
            done(app.update_settings(&body).await)
        }
        (Method::POST, "providers") => {
            let body = json_body(req).await?;
            done(app.add_provider(&body).await)
        }
        (Method::POST, p) if p.starts_with("providers/") && p.ends_with("/test") => {
            let name = &p["providers/".len()..p.len() - "/test".len()];
            done(app.test_provider(name).await)
        }
        (Method::POST, p) if p.starts_with("providers/") && p.ends_with("/primary") => {
            let name = &p["providers/".len()..p.len() - "/primary".len()];
            done(app.make_primary(name).await)
        }
        (Method::DELETE, p) if p.starts_with("providers/") => {
            done(app.remove_provider(&p["providers/".len()..]).await)
        }
        (Method::POST, "claude-code") => {
            let body = json_body(req).await?;
            match text(&body, "action")? {
                "configure" => {
                    let statusline = body.get("statusline").and_then(Value::as_bool) == Some(true);
                    done(app.configure_claude_code(false, statusline).await)
                }
                "undo" => done(app.configure_claude_code(true, false).await),
                _ => Err(Fail::bad("action must be \"configure\" or \"undo\"")),
            }
        }
        (Method::POST, "pause") => {
            let body = json_body(req).await?;
            let paused = body
                .get("paused")
                .and_then(Value::as_bool)
                .ok_or_else(|| Fail::bad("`paused` (true or false) is required"))?;
            app.set_paused(paused).await;
            Ok(Answer::State)
        }
        (m, p) => Err(Fail(
            StatusCode::NOT_FOUND,
            "not_found_error",
            format!("no route for {m} {APP_PREFIX}{p}"),
        )),
    }
}
