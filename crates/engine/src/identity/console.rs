//! Sign-in to the team console: the company IdP's authorization-code flow with PKCE, and
//! the console's browser session.
//!
//! `GET /console/login` binds the browser (a random secret in a `SameSite=Lax` cookie, only
//! its hash in the sealed 5-minute state) and sends it to the IdP; the IdP returns to the
//! gateway's one redirect URI, `/oauth/callback`, which hands a state sealed as
//! [`SealKind::ConsoleState`] here. Members of `admin.admin_groups` (role admin) or
//! `admin.viewer_groups` (role viewer) get a session: a random cookie value whose SHA-256
//! keys the sealed [`ConsoleSession`] in the store, so sign-out, a person's revocation and
//! expiry end it on every replica. The cookie is `HttpOnly`, `SameSite=Strict`, `Secure`
//! and `__Host-` under https, and lives [`SESSION_SECS`] at most; over plain http the
//! console signs in only on a loopback public URL.
//!
//! Every [`RECHECK_SECS`] of use the person's groups are read again from the IdP (refresh
//! grant; one request per session does it while the others go on); a refused refresh or
//! lost groups end the session. Without an IdP refresh token a session lasts
//! [`NO_REFRESH_SECS`]. Mutations need the session's CSRF token in `x-csrf-token` and a
//! same-origin request ([`Console::check_mutation`]).

use std::net::IpAddr;

use axum::body::Body;
use chrono::{DateTime, Utc};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use super::browser::{query_param, random_token, read_cookie, same_origin};
use super::device::{RateCheck, rate_check};
use super::keys::SealKind;
use super::{Identity, STATE_SECS, UserIdentity, pages, sha256_hex};
use crate::events::Event;
use crate::gateway::Gateway;

/// The longest a console session lives.
pub const SESSION_SECS: i64 = 8 * 3600;
/// How often a session's groups are read again from the IdP.
pub const RECHECK_SECS: i64 = 300;
/// How long a session goes on unchecked while the IdP cannot answer.
const RECHECK_GRACE_SECS: i64 = 900;
/// The life of a session whose IdP issued no refresh token (it cannot be checked again).
pub const NO_REFRESH_SECS: i64 = 3600;

/// What a console user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsoleRole {
    Admin,
    Viewer,
}

impl ConsoleRole {
    pub fn as_str(self) -> &'static str {
        match self {
            ConsoleRole::Admin => "admin",
            ConsoleRole::Viewer => "viewer",
        }
    }

    /// The role `groups` give under `admin.admin_groups` / `admin.viewer_groups`.
    pub fn of(groups: &[String], admin: &[String], viewer: &[String]) -> Option<Self> {
        if groups.iter().any(|g| admin.contains(g)) {
            Some(ConsoleRole::Admin)
        } else if groups.iter().any(|g| viewer.contains(g)) {
            Some(ConsoleRole::Viewer)
        } else {
            None
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct ConsoleState {
    cookie_hash: String,
    pkce: String,
    nonce: String,
    exp: i64,
}

/// A console session as stored (sealed) under `console:s:<sha256(cookie)>`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConsoleSession {
    pub user: UserIdentity,
    pub role: ConsoleRole,
    pub csrf: String,
    pub iat: i64,
    pub exp: i64,
    checked_at: i64,
    idp_refresh_token: Option<String>,
}

/// A signed-in console user, found from the request's cookie.
#[derive(Debug, Clone)]
pub struct Console {
    pub session: ConsoleSession,
}

/// Why a console request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleRefusal {
    /// No live session behind the cookie (never issued, ended, revoked, lost its groups).
    SignedOut(&'static str),
    /// A mutation without the CSRF token, or from another origin.
    Csrf,
    /// The store cannot answer.
    Unavailable,
}

fn cookie_name(id: &Identity) -> &'static str {
    if id.secure_cookies() {
        "__Host-gh_console"
    } else {
        "gh_console"
    }
}

fn login_cookie_name(id: &Identity) -> &'static str {
    if id.secure_cookies() {
        "__Host-gh_console_login"
    } else {
        "gh_console_login"
    }
}

/// The shared `Set-Cookie` builder; our own names and random values always make a valid one.
fn cookie(name: &str, value: &str, same_site: &str, max_age: i64, secure: bool) -> HeaderValue {
    super::browser::cookie(name, value, same_site, max_age, secure)
        .unwrap_or_else(|| HeaderValue::from_static("gh_console=; Max-Age=0"))
}

/// The `Set-Cookie` that ends the console session in this browser.
pub fn clear_cookie(id: &Identity) -> HeaderValue {
    cookie(cookie_name(id), "", "Strict", 0, id.secure_cookies())
}

fn session_key(cookie_value: &str) -> String {
    format!("console:s:{}", sha256_hex(cookie_value))
}

fn redirect(to: &str) -> Response<Body> {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(v) = HeaderValue::from_str(to) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// `GET /console/login`: binds the browser and sends it to the IdP.
pub async fn login(gw: &Gateway, id: &Identity, ip: IpAddr) -> Response<Body> {
    if !id.secure_cookies() && !loopback_origin(id) {
        return pages::console_result(
            StatusCode::FORBIDDEN,
            "The team console signs in only over https (listen.public_url), or on a loopback \
             address: its session cookie must not travel in the clear.",
        );
    }
    match rate_check(gw, "console_login", ip, id.cfg.device_verify_limit).await {
        RateCheck::Allowed => {}
        RateCheck::Over => {
            return pages::console_result(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many sign-in attempts from this address. Wait a few minutes and try again.",
            );
        }
        RateCheck::Unavailable => {
            return pages::console_result(
                StatusCode::SERVICE_UNAVAILABLE,
                "Sign-in is unavailable right now. Try again in a few minutes.",
            );
        }
    }
    let binding = random_token(32);
    let state = ConsoleState {
        cookie_hash: sha256_hex(&binding),
        pkce: random_token(32),
        nonce: random_token(24),
        exp: gw.deps.clock.now().timestamp() + STATE_SECS,
    };
    let Some(sealed) = id.keys.seal(SealKind::ConsoleState, &state) else {
        return pages::console_result(
            StatusCode::INTERNAL_SERVER_ERROR,
            "The sign-in could not be started.",
        );
    };
    let url = id
        .oidc
        .authorize_url(sealed, state.nonce.clone(), Some(&state.pkce));
    let mut resp = redirect(url.as_str());
    // Lax: the IdP's redirect back is a cross-site navigation.
    let c = cookie(
        login_cookie_name(id),
        &binding,
        "Lax",
        STATE_SECS,
        id.secure_cookies(),
    );
    resp.headers_mut().insert(header::SET_COOKIE, c);
    gw.deps
        .emit(Event::new("console.login").with("client_ip", ip.to_string()));
    resp
}

/// Whether the public URL names this machine (plain http is allowed only there).
fn loopback_origin(id: &Identity) -> bool {
    match id.cfg.public_url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        None => false,
    }
}

/// Whether the callback's `state` is a console sign-in's.
pub fn is_console_state(id: &Identity, sealed: &str) -> bool {
    id.keys
        .open::<ConsoleState>(SealKind::ConsoleState, sealed)
        .is_ok()
}

/// The IdP's return to `/oauth/callback` for a console sign-in.
pub async fn callback(gw: &Gateway, id: &Identity, req: Request<Body>) -> Response<Body> {
    let now = gw.deps.clock.now();
    let clear_login = cookie(login_cookie_name(id), "", "Lax", 0, id.secure_cookies());
    let mut resp = match complete(gw, id, req.uri(), req.headers(), now).await {
        Ok((value, session)) => {
            gw.deps.emit(
                Event::new("console.sign_in")
                    .with("sub", session.user.sub.clone())
                    .with("role", session.role.as_str()),
            );
            let mut r = redirect("/console");
            let c = cookie(
                cookie_name(id),
                &value,
                "Strict",
                session.exp - now.timestamp(),
                id.secure_cookies(),
            );
            r.headers_mut().append(header::SET_COOKIE, c);
            r
        }
        Err((status, reason, detail)) => {
            gw.deps.emit(
                Event::new("console.sign_in_denied")
                    .with("reason", reason)
                    .with("status", status.as_u16()),
            );
            pages::console_result(status, &detail)
        }
    };
    resp.headers_mut().append(header::SET_COOKIE, clear_login);
    resp
}

type Refused = (StatusCode, &'static str, String);

/// Checks the state and the browser, exchanges the code, and stores a session.
async fn complete(
    gw: &Gateway,
    id: &Identity,
    uri: &http::Uri,
    headers: &HeaderMap,
    now: DateTime<Utc>,
) -> Result<(String, ConsoleSession), Refused> {
    let bad = |reason, text: &str| (StatusCode::BAD_REQUEST, reason, text.to_owned());
    let sealed = query_param(uri, "state").unwrap_or_default();
    let state = id
        .keys
        .open::<ConsoleState>(SealKind::ConsoleState, &sealed)
        .map_err(|_| {
            bad(
                "bad_state",
                "The sign-in state is not valid. Sign in again.",
            )
        })?;
    if now.timestamp() >= state.exp {
        return Err(bad(
            "state_expired",
            "The sign-in took too long. Sign in again.",
        ));
    }
    let bound = read_cookie(headers, login_cookie_name(id)).is_some_and(|c| {
        bool::from(
            sha256_hex(&c)
                .as_bytes()
                .ct_eq(state.cookie_hash.as_bytes()),
        )
    });
    if !bound {
        return Err(bad(
            "browser_mismatch",
            "This sign-in was started in a different browser. Sign in again from the console.",
        ));
    }
    let Some(code) = query_param(uri, "code") else {
        let why = query_param(uri, "error").unwrap_or_else(|| "no authorization code".into());
        return Err((
            StatusCode::FORBIDDEN,
            "idp_error",
            format!("The identity provider did not sign you in ({why})."),
        ));
    };
    let tokens = id
        .oidc
        .exchange(code, Some(state.pkce), &state.nonce)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "console: OIDC code exchange failed");
            (
                StatusCode::FORBIDDEN,
                "exchange_failed",
                "The identity provider did not confirm the sign-in.".to_owned(),
            )
        })?;
    let who = id.admit(&tokens.claims).await.map_err(|g| {
        (
            StatusCode::FORBIDDEN,
            g.reason(),
            format!("Sign-in was refused: {g}."),
        )
    })?;
    let role = role_of(gw, &who).ok_or_else(|| {
        (
            StatusCode::FORBIDDEN,
            "not_admin",
            "Your account is not in an administrator or viewer group of this Gatehouse \
             (admin.admin_groups, admin.viewer_groups). Ask the people who run it."
                .to_owned(),
        )
    })?;
    let t = now.timestamp();
    let life = if tokens.refresh_token.is_some() {
        SESSION_SECS
    } else {
        NO_REFRESH_SECS
    };
    let session = ConsoleSession {
        user: who,
        role,
        csrf: random_token(32),
        iat: t,
        exp: t + life,
        checked_at: t,
        idp_refresh_token: tokens.refresh_token,
    };
    let value = random_token(32);
    store(gw, id, &session_key(&value), &session)
        .await
        .map_err(|()| {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "The session could not be stored. Try again in a few minutes.".to_owned(),
            )
        })?;
    Ok((value, session))
}

fn role_of(gw: &Gateway, who: &UserIdentity) -> Option<ConsoleRole> {
    let spend = gw.config.spend.as_ref()?;
    ConsoleRole::of(&who.groups, &spend.admin_groups, &spend.viewer_groups)
}

async fn store(gw: &Gateway, id: &Identity, key: &str, s: &ConsoleSession) -> Result<(), ()> {
    let sealed = id.keys.seal(SealKind::ConsoleSession, s).ok_or(())?;
    let until = DateTime::from_timestamp(s.exp, 0);
    gw.store
        .kv_put(key, sealed.into_bytes(), until)
        .await
        .map_err(|e| tracing::warn!(error = %e, "console: storing a session failed"))
}

/// The console session behind the request's cookie: `Ok(None)` without the cookie.
pub async fn find(
    gw: &Gateway,
    id: &Identity,
    headers: &HeaderMap,
) -> Result<Option<Console>, ConsoleRefusal> {
    let Some(value) = read_cookie(headers, cookie_name(id)).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let key = session_key(&value);
    let now = gw.deps.clock.now();
    let raw = match gw.store.kv_get(&key, now).await {
        Ok(Some(raw)) => raw,
        Ok(None) => return Err(ConsoleRefusal::SignedOut("no_session")),
        Err(e) => {
            tracing::warn!(error = %e, "console: reading a session failed");
            return Err(ConsoleRefusal::Unavailable);
        }
    };
    let session = std::str::from_utf8(&raw)
        .ok()
        .and_then(|s| {
            id.keys
                .open::<ConsoleSession>(SealKind::ConsoleSession, s)
                .ok()
        })
        .ok_or(ConsoleRefusal::SignedOut("unreadable"))?;
    let t = now.timestamp();
    if t >= session.exp {
        return Err(ConsoleRefusal::SignedOut("expired"));
    }
    if id.issued_before_revocation(&session.user.sub, session.iat) {
        let _ = gw.store.kv_delete(&key, None).await;
        return Err(ConsoleRefusal::SignedOut("revoked"));
    }
    if t - session.checked_at < RECHECK_SECS {
        return Ok(Some(Console { session }));
    }
    recheck(gw, id, &key, raw, session, now).await.map(Some)
}

/// Reads the person's groups again from the IdP. One request per session does it (a
/// short claim in the store); the others go on with the session as it was.
async fn recheck(
    gw: &Gateway,
    id: &Identity,
    key: &str,
    raw: Vec<u8>,
    mut session: ConsoleSession,
    now: DateTime<Utc>,
) -> Result<Console, ConsoleRefusal> {
    let t = now.timestamp();
    let sub = session.user.sub.clone();
    let end = |reason| end_session(gw, key, sub.clone(), reason);
    let Some(rt) = session.idp_refresh_token.clone() else {
        // Nothing to check with: the session simply lives its shorter life.
        return Ok(Console { session });
    };
    let claim = format!("{key}:recheck");
    let until = now + chrono::Duration::seconds(30);
    match gw
        .store
        .kv_insert(&claim, b"1".to_vec(), Some(until), now)
        .await
    {
        Ok(true) => {}
        Ok(false) => return Ok(Console { session }),
        Err(_) => return Err(ConsoleRefusal::Unavailable),
    }
    let tokens = match id.oidc.refresh(&rt).await {
        Ok(tokens) => tokens,
        Err(super::oidc::RefreshError::Invalid(_)) => return end("idp_refused").await,
        Err(super::oidc::RefreshError::Transient(m)) => {
            tracing::warn!(reason = %m, "console: the IdP could not check a session");
            if t - session.checked_at > RECHECK_GRACE_SECS {
                return end("idp_unreachable").await;
            }
            return Ok(Console { session });
        }
    };
    let who = match id.admit(&tokens.claims).await {
        Ok(who) => who,
        Err(_) => return end("sign_in_gate").await,
    };
    let Some(role) = role_of(gw, &who) else {
        return end("not_admin").await;
    };
    session.user = who;
    session.role = role;
    session.checked_at = t;
    if let Some(new) = tokens.refresh_token {
        session.idp_refresh_token = Some(new);
    }
    let sealed = id
        .keys
        .seal(SealKind::ConsoleSession, &session)
        .ok_or(ConsoleRefusal::Unavailable)?;
    let until = DateTime::from_timestamp(session.exp, 0);
    // A sign-out meanwhile wins: the swap only replaces the session as it was read.
    match gw
        .store
        .kv_replace(key, raw, sealed.into_bytes(), until, now)
        .await
    {
        Ok(true) => Ok(Console { session }),
        Ok(false) => Err(ConsoleRefusal::SignedOut("no_session")),
        Err(_) => Err(ConsoleRefusal::Unavailable),
    }
}

async fn end_session(
    gw: &Gateway,
    key: &str,
    sub: String,
    reason: &'static str,
) -> Result<Console, ConsoleRefusal> {
    let _ = gw.store.kv_delete(key, None).await;
    gw.deps.emit(
        Event::new("console.session_ended")
            .with("sub", sub)
            .with("reason", reason),
    );
    Err(ConsoleRefusal::SignedOut(reason))
}

impl Console {
    /// A mutation needs the session's CSRF token and a same-origin request.
    pub fn check_mutation(
        &self,
        id: &Identity,
        method: &Method,
        headers: &HeaderMap,
    ) -> Result<(), ConsoleRefusal> {
        if matches!(*method, Method::GET | Method::HEAD) {
            return Ok(());
        }
        let token_ok = headers
            .get("x-csrf-token")
            .is_some_and(|v| bool::from(v.as_bytes().ct_eq(self.session.csrf.as_bytes())));
        if token_ok && same_origin(id, headers) {
            Ok(())
        } else {
            Err(ConsoleRefusal::Csrf)
        }
    }
}

/// `POST /console/logout`: ends the session (with its CSRF token).
pub async fn logout(
    gw: &Gateway,
    id: &Identity,
    method: &Method,
    headers: &HeaderMap,
) -> Response<Body> {
    let outcome = match find(gw, id, headers).await {
        Ok(Some(console)) => match console.check_mutation(id, method, headers) {
            Ok(()) => {
                let value = read_cookie(headers, cookie_name(id)).unwrap_or_default();
                match gw.store.kv_delete(&session_key(&value), None).await {
                    Ok(_) => {
                        gw.deps.emit(
                            Event::new("console.sign_out").with("sub", console.session.user.sub),
                        );
                        Ok(())
                    }
                    Err(_) => Err(ConsoleRefusal::Unavailable),
                }
            }
            Err(e) => Err(e),
        },
        // Signed out already: say so, and clear the cookie.
        Ok(None) | Err(ConsoleRefusal::SignedOut(_)) => Ok(()),
        Err(e) => Err(e),
    };
    let mut resp = match outcome {
        Ok(()) => {
            crate::edge::json_response(StatusCode::OK, serde_json::json!({"type": "signed_out"}))
        }
        Err(e) => refusal_error(e).into_response(),
    };
    resp.headers_mut()
        .append(header::SET_COOKIE, clear_cookie(id));
    resp
}

/// The admin API's error for a refused console request.
pub fn refusal_error(r: ConsoleRefusal) -> crate::error::ApiError {
    use crate::error::ApiError;
    match r {
        ConsoleRefusal::SignedOut(reason) => ApiError::Unauthenticated {
            message: "the console session has ended; sign in again",
            reason,
        },
        ConsoleRefusal::Csrf => ApiError::Forbidden(
            "this change needs the console's CSRF token (x-csrf-token) from this origin".into(),
        ),
        ConsoleRefusal::Unavailable => {
            ApiError::ServiceUnavailable("console sessions are unavailable right now".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ConsoleRole;

    #[test]
    fn admin_groups_win_over_viewer_groups_and_others_get_nothing() {
        let g = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let (admin, viewer) = (g(&["ops"]), g(&["audit"]));
        let of = |groups: &[&str]| ConsoleRole::of(&g(groups), &admin, &viewer);
        assert_eq!(of(&["audit", "ops"]), Some(ConsoleRole::Admin));
        assert_eq!(of(&["audit"]), Some(ConsoleRole::Viewer));
        assert_eq!(of(&["eng"]), None);
        assert_eq!(of(&[]), None);
    }
}
