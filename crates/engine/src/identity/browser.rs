//! The browser side of sign-in: `GET/POST /device` and the IdP's `/oauth/callback`.
//!
//! `POST /device` must come from this origin (Sec-Fetch-Site, else an exact Origin match),
//! is rate limited per IP, and binds the browser: a random secret goes into an HttpOnly
//! SameSite=Lax cookie (`__Host-` under HTTPS) and only its hash into the sealed, 5-minute
//! OAuth state. The callback checks the state's kind and expiry, the cookie (constant
//! time) and that the grant is still pending, then exchanges the code.

use std::net::IpAddr;

use axum::body::Body;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::device::{
    RateCheck, grant_expiry, issue, normalize_user_code, rate_check, read_form, user_code_key,
};
use super::keys::SealKind;
use super::{Grant, GrantState, Identity, STATE_SECS, pages};
use crate::events::Event;
use crate::gateway::Gateway;

#[derive(Debug, Serialize, Deserialize)]
struct OAuthState {
    grant_key: String,
    cookie_hash: String,
    pkce: Option<String>,
    nonce: String,
    exp: i64,
}

fn cookie_name(id: &Identity) -> &'static str {
    if id.secure_cookies() {
        "__Host-gw_dev"
    } else {
        "gw_dev"
    }
}

fn set_cookie(id: &Identity, value: &str, max_age: i64) -> Option<HeaderValue> {
    cookie(cookie_name(id), value, "Lax", max_age, id.secure_cookies())
}

/// A `Set-Cookie` value: `HttpOnly`, `Path=/`, `Secure` when asked.
pub(super) fn cookie(
    name: &str,
    value: &str,
    same_site: &str,
    max_age: i64,
    secure: bool,
) -> Option<HeaderValue> {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; HttpOnly; SameSite={same_site}; Path=/; Max-Age={max_age}{secure}"
    ))
    .ok()
}

pub(super) fn read_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

pub(super) fn query_param(uri: &http::Uri, name: &str) -> Option<String> {
    let q = uri.query()?;
    serde_urlencoded::from_str::<Vec<(String, String)>>(q)
        .ok()?
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

/// `GET /device`: shows the code form, pre-filled from `user_code` when given.
pub fn show(id: &Identity, uri: &http::Uri) -> Response<Body> {
    let code = query_param(uri, "user_code")
        .map(|c| {
            let n = normalize_user_code(&c);
            if n.len() == 8 {
                format!("{}-{}", &n[..4], &n[4..])
            } else {
                n.chars().take(16).collect()
            }
        })
        .unwrap_or_default();
    pages::device_form(StatusCode::OK, &code, None, &id.oidc.authorization_origin)
}

pub(super) fn same_origin(id: &Identity, headers: &HeaderMap) -> bool {
    match headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        Some("same-origin") | Some("none") => return true,
        Some(_) => return false,
        None => {}
    }
    headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|o| o == id.origin())
}

async fn load_grant(gw: &Gateway, id: &Identity, key: &str) -> Option<(Grant, Vec<u8>)> {
    let raw = gw.store.kv_get(key, gw.deps.clock.now()).await.ok()??;
    let grant = id
        .keys
        .open::<Grant>(SealKind::DeviceGrant, std::str::from_utf8(&raw).ok()?)
        .ok()?;
    Some((grant, raw))
}

/// Changes a pending grant and stores it, compare-and-swap against `loaded`. The client's
/// polls rewrite a pending grant (`last_poll_ms`, `interval`) while the browser is away at
/// the IdP, so a lost swap reloads the grant and applies `change` again while it is still
/// pending. The stored grant, or `None` when it is gone, no longer pending or unsealable.
async fn settle(
    gw: &Gateway,
    id: &Identity,
    key: &str,
    loaded: (Grant, Vec<u8>),
    now: DateTime<Utc>,
    change: impl Fn(&mut Grant),
) -> Option<Grant> {
    let (mut grant, mut raw) = loaded;
    for _ in 0..SETTLE_TRIES {
        change(&mut grant);
        let sealed = id.keys.seal(SealKind::DeviceGrant, &grant)?;
        let expiry = grant_expiry(&grant);
        match gw
            .store
            .kv_replace(key, raw, sealed.into_bytes(), expiry, now)
            .await
        {
            Ok(true) => return Some(grant),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "storing a device grant failed");
                return None;
            }
        }
        (grant, raw) = load_grant(gw, id, key).await?;
        if grant.state != GrantState::Pending {
            return None;
        }
    }
    None
}

/// Swaps lost to the client's polls before a callback gives up (a poll comes every few
/// seconds, the swap follows its reload within microseconds).
const SETTLE_TRIES: usize = 3;

/// `POST /device`: starts the IdP authorization-code flow for a pending grant.
pub async fn submit(gw: &Gateway, id: &Identity, ip: IpAddr, req: Request<Body>) -> Response<Body> {
    let idp = id.oidc.authorization_origin.clone();
    if !same_origin(id, req.headers()) {
        gw.deps.emit(
            Event::new("device.verify")
                .with("outcome", "cross_origin")
                .with("client_ip", ip.to_string()),
        );
        return pages::result(
            StatusCode::FORBIDDEN,
            false,
            "This form can only be submitted from the Gatehouse sign-in page.",
        );
    }
    match rate_check(gw, "device_verify", ip, id.cfg.device_verify_limit).await {
        RateCheck::Allowed => {}
        RateCheck::Over => {
            gw.deps.emit(
                Event::new("device.rate_limited")
                    .with("client_ip", ip.to_string())
                    .with("endpoint", "device_verify"),
            );
            return pages::device_form(
                StatusCode::TOO_MANY_REQUESTS,
                "",
                Some("Too many attempts from this address. Wait a few minutes and try again."),
                &idp,
            );
        }
        RateCheck::Unavailable => {
            return pages::device_form(
                StatusCode::SERVICE_UNAVAILABLE,
                "",
                Some("Sign-in is unavailable right now. Try again in a few minutes."),
                &idp,
            );
        }
    }
    let form = match read_form(req).await {
        Ok(f) => f,
        Err(_) => {
            return pages::device_form(
                StatusCode::BAD_REQUEST,
                "",
                Some("The form could not be read."),
                &idp,
            );
        }
    };
    let code = form.get("user_code").cloned().unwrap_or_default();
    let now = gw.deps.clock.now();
    let not_found = || {
        pages::device_form(
            StatusCode::BAD_REQUEST,
            &code,
            Some(
                "That code is not valid or has expired. Start the sign-in again from your terminal.",
            ),
            &idp,
        )
    };
    let Ok(Some(grant_key)) = gw.store.kv_get(&user_code_key(&code), now).await else {
        return not_found();
    };
    let grant_key = String::from_utf8_lossy(&grant_key).into_owned();
    let Some((grant, _)) = load_grant(gw, id, &grant_key).await else {
        return not_found();
    };
    if grant.state != GrantState::Pending || now.timestamp() >= grant.expires_at {
        return not_found();
    }
    let cookie_value = random_token(32);
    let nonce = random_token(24);
    let pkce = id.oidc.uses_pkce().then(|| random_token(32));
    let state = OAuthState {
        grant_key,
        cookie_hash: hex::encode(Sha256::digest(cookie_value.as_bytes())),
        pkce: pkce.clone(),
        nonce: nonce.clone(),
        exp: now.timestamp() + STATE_SECS,
    };
    let Some(sealed) = id.keys.seal(SealKind::OAuthState, &state) else {
        return pages::result(
            StatusCode::INTERNAL_SERVER_ERROR,
            false,
            "The sign-in could not be started.",
        );
    };
    let url = id.oidc.authorize_url(sealed, nonce, pkce.as_deref());
    gw.deps.emit(
        Event::new("device.verify")
            .with("outcome", "redirect")
            .with("client_ip", ip.to_string()),
    );
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(v) = HeaderValue::from_str(url.as_str()) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    if let Some(c) = set_cookie(id, &cookie_value, 600) {
        resp.headers_mut().insert(header::SET_COOKIE, c);
    }
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

pub(super) fn random_token(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    URL_SAFE_NO_PAD.encode(buf)
}

/// `GET /oauth/callback`: the IdP sends the browser back here.
pub async fn callback(gw: &Gateway, id: &Identity, req: Request<Body>) -> Response<Body> {
    let uri = req.uri().clone();
    let headers = req.headers().clone();
    let now = gw.deps.clock.now();
    let fail = |status: StatusCode, reason: &'static str, detail: &str| {
        gw.deps.emit(
            Event::new("device.callback")
                .with("outcome", "denied")
                .with("reason", reason),
        );
        pages::result(status, false, detail)
    };
    let Some(sealed) = query_param(&uri, "state") else {
        return fail(
            StatusCode::BAD_REQUEST,
            "missing_state",
            "The sign-in link is incomplete. Start again from your terminal.",
        );
    };
    // The team console signs in through the same redirect URI.
    if super::console::is_console_state(id, &sealed) {
        return super::console::callback(gw, id, req).await;
    }
    let Ok(state) = id.keys.open::<OAuthState>(SealKind::OAuthState, &sealed) else {
        return fail(
            StatusCode::BAD_REQUEST,
            "bad_state",
            "The sign-in state is not valid. Start again from your terminal.",
        );
    };
    if now.timestamp() >= state.exp {
        return fail(
            StatusCode::BAD_REQUEST,
            "state_expired",
            "The sign-in took too long. Start again from your terminal.",
        );
    }
    let cookie_ok = read_cookie(&headers, cookie_name(id)).is_some_and(|c| {
        let h: [u8; 32] = Sha256::digest(c.as_bytes()).into();
        hex::decode(&state.cookie_hash)
            .is_ok_and(|want| want.len() == 32 && bool::from(h.as_slice().ct_eq(&want)))
    });
    let clear = set_cookie(id, "", 0);
    let with_clear = |mut r: Response<Body>| {
        if let Some(c) = clear.clone() {
            r.headers_mut().insert(header::SET_COOKIE, c);
        }
        r
    };
    if !cookie_ok {
        return with_clear(fail(
            StatusCode::BAD_REQUEST,
            "browser_mismatch",
            "This sign-in was started in a different browser. Open the link from your terminal in this browser and try again.",
        ));
    }
    let Some((grant, raw)) = load_grant(gw, id, &state.grant_key).await else {
        return fail(
            StatusCode::BAD_REQUEST,
            "grant_gone",
            "This sign-in request has expired. Start again from your terminal.",
        );
    };
    if grant.state != GrantState::Pending || now.timestamp() >= grant.expires_at {
        return fail(
            StatusCode::BAD_REQUEST,
            "grant_not_pending",
            "This sign-in request was already completed or has expired.",
        );
    }
    let uc_key = user_code_key(&grant.user_code);
    let outcome = match query_param(&uri, "code") {
        None => Err((
            "idp_error",
            query_param(&uri, "error").unwrap_or_else(|| "no authorization code".into()),
        )),
        Some(code) => match id
            .oidc
            .exchange(code, state.pkce.clone(), &state.nonce)
            .await
        {
            Err(e) => {
                tracing::warn!(error = %e, "OIDC code exchange failed");
                Err((
                    "exchange_failed",
                    "the identity provider did not confirm the sign-in".to_owned(),
                ))
            }
            Ok(tokens) => match id.admit(&tokens.claims).await {
                Err(g) => Err((g.reason(), g.to_string())),
                Ok(who) => match issue(id, &who, tokens.refresh_token, now) {
                    None => Err(("mint_failed", "the session could not be created".to_owned())),
                    Some((issued, claims)) => Ok((who, issued, claims)),
                },
            },
        },
    };
    let _ = gw.store.kv_delete(&uc_key, None).await;
    match outcome {
        Ok((who, issued, claims)) => {
            let approve = |g: &mut Grant| {
                g.state = GrantState::Approved;
                g.issued = Some(issued.clone());
            };
            let Some(grant) = settle(gw, id, &state.grant_key, (grant, raw), now, approve).await
            else {
                return with_clear(fail(
                    StatusCode::CONFLICT,
                    "grant_changed",
                    "This sign-in request changed while you were signing in. Start again.",
                ));
            };
            gw.deps.emit(
                Event::new("session.mint")
                    .with("sub", who.sub.clone())
                    .with("email", who.email.clone())
                    .with("groups", who.groups.clone())
                    .with("jti", claims.jti)
                    .with("surface", grant.surface.clone()),
            );
            gw.deps.emit(
                Event::new("device.callback")
                    .with("outcome", "approved")
                    .with("sub", who.sub.clone()),
            );
            let who_text = who.email.clone().unwrap_or(who.sub);
            with_clear(pages::result(
                StatusCode::OK,
                true,
                &format!(
                    "You are signed in as {who_text}. You can close this window and return to your terminal."
                ),
            ))
        }
        Err((reason, detail)) => {
            let deny = |g: &mut Grant| {
                g.state = GrantState::Denied;
                g.denial = Some(detail.clone());
            };
            settle(gw, id, &state.grant_key, (grant, raw), now, deny).await;
            with_clear(fail(
                StatusCode::FORBIDDEN,
                reason,
                &format!("Sign-in was refused: {detail}."),
            ))
        }
    }
}
