//! The CLI side of sign-in: discovery metadata, RFC 8628 device authorization, the token
//! endpoint (device and refresh grants) and RFC 7009 revocation.

use std::collections::HashMap;
use std::net::IpAddr;

use axum::body::Body;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use rand::{Rng, RngCore};
use serde_json::{Value, json};

use super::keys::SealKind;
use super::session::{self, UserIdentity};
use super::{
    DEVICE_GRANT_SECS, Grant, GrantState, Identity, IssuedTokens, POLL_INTERVAL_SECS,
    RefreshPayload, sha256_hex,
};
use crate::events::Event;
use crate::gateway::Gateway;

/// RFC 8628 section 6.1: consonants only, no ambiguous characters.
const USER_CODE_ALPHABET: &[u8; 20] = b"BCDFGHJKLMNPQRSTVWXZ";
const FORM_LIMIT: usize = 64 * 1024;
const DEVICE_GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:device_code";

pub fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response<Body> {
    json_no_store(
        status,
        json!({"error": error, "error_description": description}),
    )
}

pub fn json_no_store(status: StatusCode, body: Value) -> Response<Body> {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// Reads an `application/x-www-form-urlencoded` body (bounded). Unknown fields are kept
/// and ignored by callers, as RFC 6749 asks.
pub async fn read_form(req: Request<Body>) -> Result<HashMap<String, String>, Response<Body>> {
    let bytes = Limited::new(req.into_body(), FORM_LIMIT)
        .collect()
        .await
        .map_err(|e| {
            if crate::edge::listener::is_body_timeout(e.as_ref()) {
                oauth_error(
                    StatusCode::REQUEST_TIMEOUT,
                    "invalid_request",
                    "the form body arrived too slowly",
                )
            } else {
                oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "form body missing or too large",
                )
            }
        })?
        .to_bytes();
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(&bytes).map_err(|_| {
        oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "body must be form-encoded",
        )
    })?;
    Ok(pairs.into_iter().collect())
}

/// The version of the gateway protocol the reference advertises (Claude Code 2.1.333).
pub const GATEWAY_PROTOCOL_VERSION: u32 = 1;

/// The discovery document; `cri` adds `cri_enabled: true` (workload callers accepted).
pub fn discovery(id: &Identity, cri: bool) -> Response<Body> {
    let o = id.base();
    let mut doc = json!({
            "issuer": o,
            "device_authorization_endpoint": format!("{o}/oauth/device_authorization"),
            "token_endpoint": format!("{o}/oauth/token"),
            "revocation_endpoint": format!("{o}/oauth/revoke"),
            "grant_types_supported": [DEVICE_GRANT_TYPE, "refresh_token"],
            "response_types_supported": [],
            "token_endpoint_auth_methods_supported": ["none"],
            "revocation_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": ["openid", "profile", "email"],
            "gateway_protocol_version": GATEWAY_PROTOCOL_VERSION,
    });
    if cri {
        doc["cri_enabled"] = json!(true);
    }
    json_no_store(StatusCode::OK, doc)
}

/// The discovery document of a workload-only gateway (`cri` without `oidc`): no device or
/// token endpoints, `cri_enabled: true`. The issuer is `listen.public_url`, or the bound
/// address on a loopback listener.
pub fn discovery_without_sign_in(listen: &crate::config::Listen) -> Response<Body> {
    let origin = match &listen.public_url {
        Some(u) => u.as_str().trim_end_matches('/').to_owned(),
        None => {
            let scheme = if listen.tls.is_some() {
                "https"
            } else {
                "http"
            };
            format!(
                "{scheme}://{}",
                std::net::SocketAddr::new(listen.host, listen.port)
            )
        }
    };
    json_no_store(
        StatusCode::OK,
        json!({
            "issuer": origin,
            "grant_types_supported": [],
            "response_types_supported": [],
            "token_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": ["openid", "profile", "email"],
            "gateway_protocol_version": GATEWAY_PROTOCOL_VERSION,
            "cri_enabled": true,
        }),
    )
}

fn user_code() -> String {
    let mut rng = rand::rng();
    let mut s = String::with_capacity(9);
    for i in 0..8 {
        if i == 4 {
            s.push('-');
        }
        s.push(USER_CODE_ALPHABET[rng.random_range(0..USER_CODE_ALPHABET.len())] as char);
    }
    s
}

/// `WDJB-MJHT`, `wdjbmjht` and `wdjb mjht` are the same code.
pub fn normalize_user_code(s: &str) -> String {
    s.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

pub fn grant_key(device_code: &str) -> String {
    format!("device:dc:{}", sha256_hex(device_code))
}

pub fn user_code_key(code: &str) -> String {
    format!("device:uc:{}", normalize_user_code(code))
}

/// Grants stay readable this long after they expire, to answer `expired_token`.
const GRANT_GRACE_SECS: i64 = 600;

pub fn grant_expiry(grant: &Grant) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(grant.expires_at + GRANT_GRACE_SECS, 0)
}

/// What a sign-in rate limit says about a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateCheck {
    Allowed,
    Over,
    /// The counter could not be read: refused too (fail closed), as a 503.
    Unavailable,
}

/// Whom a sign-in rate counter counts: an IPv4 address whole (an IPv4-mapped IPv6 address
/// as its IPv4), an IPv6 address by its /64, the network one subscriber is handed.
pub fn limit_subject(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let net = std::net::Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX));
            format!("{net}/64")
        }
    }
}

/// Per-address fixed-window limit (see [`limit_subject`]).
pub async fn rate_check(
    gw: &Gateway,
    bucket: &str,
    ip: IpAddr,
    limit: crate::config::RateLimit,
) -> RateCheck {
    let key = format!("rl:{bucket}:{}", limit_subject(ip));
    match gw
        .store
        .kv_incr(&key, limit.window, gw.deps.clock.now())
        .await
    {
        Ok(n) if n > u64::from(limit.limit) => {
            warn_limited_once(bucket, limit);
            RateCheck::Over
        }
        Ok(_) => RateCheck::Allowed,
        Err(e) => {
            tracing::error!(error = %e, bucket, "rate counter unavailable; refusing the request");
            gw.deps.emit(
                Event::new("device.rate_limit_unavailable")
                    .with("client_ip", ip.to_string())
                    .with("endpoint", bucket.to_owned()),
            );
            RateCheck::Unavailable
        }
    }
}

/// The first refusal of each sign-in limit, naming the key that sets it.
fn warn_limited_once(bucket: &str, limit: crate::config::RateLimit) {
    static AUTHORIZATION: crate::once::Once = crate::once::Once::new();
    static VERIFY: crate::once::Once = crate::once::Once::new();
    let once = if bucket == "device_authorization" {
        &AUTHORIZATION
    } else {
        &VERIFY
    };
    if once.first() {
        tracing::warn!(
            "rate_limits.{bucket}.max ({} per {} s per client address) refused a request. If many people share one address (NAT, a proxy not in listen.trusted_proxies), raise rate_limits.{bucket}.max (logged once)",
            limit.limit,
            limit.window.as_secs()
        );
    }
}

pub async fn device_authorization(
    gw: &Gateway,
    id: &Identity,
    ip: IpAddr,
    req: Request<Body>,
) -> Response<Body> {
    match rate_check(
        gw,
        "device_authorization",
        ip,
        id.cfg.device_authorization_limit,
    )
    .await
    {
        RateCheck::Allowed => {}
        RateCheck::Unavailable => {
            return oauth_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "sign-in storage unavailable",
            );
        }
        RateCheck::Over => return slowed_down(gw, id, ip),
    }
    let form = match read_form(req).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    new_grant(gw, id, ip, &form).await
}

/// The 429 of a device authorization over its limit.
fn slowed_down(gw: &Gateway, id: &Identity, ip: IpAddr) -> Response<Body> {
    gw.deps.emit(
        Event::new("device.rate_limited")
            .with("client_ip", ip.to_string())
            .with("endpoint", "device_authorization"),
    );
    let mut r = oauth_error(
        StatusCode::TOO_MANY_REQUESTS,
        "slow_down",
        "too many sign-in attempts from this address; wait and retry",
    );
    r.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(id.cfg.device_authorization_limit.window.as_secs()),
    );
    r
}

/// A new pending grant with a fresh device code and an unused user code.
async fn new_grant(
    gw: &Gateway,
    id: &Identity,
    ip: IpAddr,
    form: &HashMap<String, String>,
) -> Response<Body> {
    let now = gw.deps.clock.now();
    let mut raw = [0u8; 32];
    rand::rng().fill_bytes(&mut raw);
    let device_code = URL_SAFE_NO_PAD.encode(raw);
    let grant = Grant {
        state: GrantState::Pending,
        user_code: String::new(),
        expires_at: now.timestamp() + DEVICE_GRANT_SECS,
        interval: POLL_INTERVAL_SECS,
        last_poll_ms: 0,
        surface: form.get("surface").map(|s| s.chars().take(64).collect()),
        issued: None,
        denial: None,
    };
    let expires = DateTime::from_timestamp(grant.expires_at, 0);
    // Find an unused user code (collisions are rare: 20^8 codes).
    let mut code = String::new();
    for _ in 0..8 {
        let candidate = user_code();
        match gw.store.kv_get(&user_code_key(&candidate), now).await {
            Ok(None) => {
                code = candidate;
                break;
            }
            Ok(Some(_)) => continue,
            Err(e) => {
                tracing::error!(error = %e, "device authorization: store unavailable");
                return oauth_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "temporarily_unavailable",
                    "sign-in storage unavailable",
                );
            }
        }
    }
    if code.is_empty() {
        return oauth_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            "could not allocate a user code",
        );
    }
    let grant = Grant {
        user_code: code.clone(),
        ..grant
    };
    let Some(sealed) = id.keys.seal(SealKind::DeviceGrant, &grant) else {
        return oauth_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "could not seal the grant",
        );
    };
    let dc_key = grant_key(&device_code);
    let stored = async {
        gw.store
            .kv_put(&dc_key, sealed.into_bytes(), grant_expiry(&grant))
            .await?;
        gw.store
            .kv_put(&user_code_key(&code), dc_key.clone().into_bytes(), expires)
            .await
    };
    if let Err(e) = stored.await {
        tracing::error!(error = %e, "device authorization: store unavailable");
        return oauth_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            "sign-in storage unavailable",
        );
    }
    gw.deps.emit(
        Event::new("device.authorize")
            .with("client_ip", ip.to_string())
            .with("surface", grant.surface.clone()),
    );
    let o = id.base();
    let mut body = json!({
        "device_code": device_code,
        "user_code": code,
        "verification_uri": format!("{o}/device"),
        "verification_uri_complete": format!("{o}/device?user_code={code}"),
        "expires_in": DEVICE_GRANT_SECS,
        "interval": POLL_INTERVAL_SECS,
    });
    if let Some(notice) = &id.cfg.oidc.login_notice {
        body["login_notice"] = Value::String(notice.clone());
    }
    json_no_store(StatusCode::OK, body)
}

pub async fn token(gw: &Gateway, id: &Identity, req: Request<Body>) -> Response<Body> {
    let form = match read_form(req).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    match form.get("grant_type").map(String::as_str) {
        Some(DEVICE_GRANT_TYPE) => device_grant(gw, id, &form).await,
        Some("refresh_token") => refresh_grant(gw, id, &form).await,
        Some(_) => oauth_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "use the device_code or refresh_token grant",
        ),
        None => oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "grant_type is required",
        ),
    }
}

async fn device_grant(
    gw: &Gateway,
    id: &Identity,
    form: &HashMap<String, String>,
) -> Response<Body> {
    let Some(device_code) = form.get("device_code").filter(|c| !c.is_empty()) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "device_code is required",
        );
    };
    let key = grant_key(device_code);
    let now = gw.deps.clock.now();
    let stored = match gw.store.kv_get(&key, now).await {
        Ok(Some(v)) => v,
        Ok(None) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_grant",
                "unknown device code",
            );
        }
        Err(e) => {
            tracing::error!(error = %e, "token: store unavailable");
            return oauth_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "sign-in storage unavailable",
            );
        }
    };
    let Ok(mut grant) = std::str::from_utf8(&stored).map_err(|_| ()).and_then(|s| {
        id.keys
            .open::<Grant>(SealKind::DeviceGrant, s)
            .map_err(|_| ())
    }) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "unknown device code",
        );
    };
    if grant.state == GrantState::Redeemed {
        gw.deps.emit(
            Event::new("auth.denied")
                .with("reason", "device_code_replayed")
                .with("endpoint", "token"),
        );
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "this device code was already used",
        );
    }
    if now.timestamp() >= grant.expires_at {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "expired_token",
            "the device code expired; start the sign-in again",
        );
    }
    match grant.state {
        GrantState::Denied => {
            let _ = gw.store.kv_delete(&key, Some(stored)).await;
            oauth_error(
                StatusCode::BAD_REQUEST,
                "access_denied",
                grant.denial.as_deref().unwrap_or("sign-in was refused"),
            )
        }
        GrantState::Pending => {
            let now_ms = now.timestamp_millis();
            // A poll sooner than the interval (one second of slack) slows the client down.
            let too_fast =
                grant.last_poll_ms > 0 && now_ms - grant.last_poll_ms < (grant.interval - 1) * 1000;
            if too_fast {
                grant.interval += 5;
            }
            grant.last_poll_ms = now_ms;
            if let Some(sealed) = id.keys.seal(SealKind::DeviceGrant, &grant) {
                let _ = gw
                    .store
                    .kv_replace(&key, stored, sealed.into_bytes(), grant_expiry(&grant), now)
                    .await;
            }
            if too_fast {
                oauth_error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "slow_down",
                    "polling too fast; add 5 seconds to the interval",
                )
            } else {
                oauth_error(
                    StatusCode::BAD_REQUEST,
                    "authorization_pending",
                    "waiting for the user to approve in the browser",
                )
            }
        }
        GrantState::Approved => {
            let Some(issued) = grant.issued.take() else {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "grant has no tokens",
                );
            };
            grant.state = GrantState::Redeemed;
            let Some(sealed) = id.keys.seal(SealKind::DeviceGrant, &grant) else {
                return oauth_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    "could not seal the grant",
                );
            };
            // Compare-and-swap: of concurrent redemptions exactly one wins.
            match gw
                .store
                .kv_replace(&key, stored, sealed.into_bytes(), grant_expiry(&grant), now)
                .await
            {
                Ok(true) => {}
                Ok(false) => {
                    return oauth_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_grant",
                        "this device code was already used",
                    );
                }
                Err(_) => {
                    return oauth_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "temporarily_unavailable",
                        "sign-in storage unavailable",
                    );
                }
            }
            let mut body = json!({
                "access_token": issued.access_token,
                "token_type": "Bearer",
                "expires_in": issued.expires_in,
                "refresh_token": issued.refresh_token,
            });
            if let Some(email) = issued.email {
                body["email"] = Value::String(email);
            }
            json_no_store(StatusCode::OK, body)
        }
        GrantState::Redeemed => oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "this device code was already used",
        ),
    }
}

/// Mints a session token and a sealed refresh token for `who`.
pub fn issue(
    id: &Identity,
    who: &UserIdentity,
    idp_refresh_token: Option<String>,
    now: DateTime<Utc>,
) -> Option<(IssuedTokens, session::SessionClaims)> {
    let ttl = id.cfg.session_ttl.as_secs() as i64;
    let (access, claims) = session::mint_tagged(
        &id.keys,
        &id.base(),
        ttl,
        now,
        who,
        id.cfg.billing_group_tag.as_deref(),
    )?;
    let refresh = id.keys.seal(
        SealKind::RefreshToken,
        &RefreshPayload {
            sub: who.sub.clone(),
            idp_refresh_token,
            iat: now.timestamp(),
            id: uuid::Uuid::new_v4().to_string(),
        },
    )?;
    Some((
        IssuedTokens {
            access_token: access,
            refresh_token: refresh,
            expires_in: ttl,
            email: who.email.clone(),
        },
        claims,
    ))
}

async fn refresh_grant(
    gw: &Gateway,
    id: &Identity,
    form: &HashMap<String, String>,
) -> Response<Body> {
    let invalid = |why: &'static str| {
        gw.deps
            .emit(Event::new("session.refresh_denied").with("reason", why));
        oauth_error(StatusCode::UNAUTHORIZED, "invalid_grant", "sign in again")
    };
    let Some(token) = form.get("refresh_token").filter(|t| !t.is_empty()) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "refresh_token is required",
        );
    };
    let now = gw.deps.clock.now();
    let Ok(payload) = id
        .keys
        .open::<RefreshPayload>(SealKind::RefreshToken, token)
    else {
        return invalid("refresh_token_unreadable");
    };
    let Some(idp_rt) = payload.idp_refresh_token.as_deref() else {
        return invalid("no_idp_refresh_token");
    };
    if !super::refresh_in_time(payload.iat, now) {
        return invalid("refresh_token_expired");
    }
    if id.issued_before_revocation(&payload.sub, payload.iat) {
        return invalid("refresh_token_revoked");
    }
    // Single use on every replica: the token is claimed in the store before the IdP sees
    // it, so of two concurrent redemptions only one reaches the IdP.
    let claim = match id.claim_refresh(gw.store.as_ref(), token, now).await {
        Ok(Some(claim)) => claim,
        Ok(None) => return invalid("refresh_token_revoked"),
        Err(e) => {
            tracing::error!(error = %e, "refresh: store unavailable");
            return oauth_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "sign-in storage unavailable",
            );
        }
    };
    let tokens = match id.oidc.refresh(idp_rt).await {
        Ok(t) => t,
        Err(super::oidc::RefreshError::Invalid(m)) => {
            tracing::info!(sub = %payload.sub, reason = %m, "IdP refused a refresh");
            return invalid("idp_invalid_grant");
        }
        Err(super::oidc::RefreshError::Transient(m)) => {
            tracing::warn!(reason = %m, "IdP refresh failed transiently");
            // Nothing was spent: the token stays usable for a retry.
            id.release_refresh(gw.store.as_ref(), token, claim).await;
            gw.deps
                .emit(Event::new("session.refresh_unavailable").with("sub", payload.sub.clone()));
            return oauth_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "the identity provider is unavailable; retry later",
            );
        }
    };
    let who = match id.admit(&tokens.claims).await {
        Ok(w) if w.sub == payload.sub => w,
        Ok(_) => return invalid("subject_changed"),
        Err(e) => return invalid(e.reason()),
    };
    let Some((issued, claims)) = issue(id, &who, tokens.refresh_token, now) else {
        return oauth_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "could not mint a session",
        );
    };
    gw.deps.emit(
        Event::new("session.refresh")
            .with("sub", who.sub.clone())
            .with("jti", claims.jti.clone())
            .with("groups", who.groups.clone()),
    );
    json_no_store(
        StatusCode::OK,
        json!({
            "access_token": issued.access_token,
            "token_type": "Bearer",
            "expires_in": issued.expires_in,
            "refresh_token": issued.refresh_token,
        }),
    )
}

/// RFC 7009: always 200 for a well-formed request, whether or not the token was known.
pub async fn revoke(gw: &Gateway, id: &Identity, req: Request<Body>) -> Response<Body> {
    let form = match read_form(req).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    let Some(token) = form.get("token").filter(|t| !t.is_empty()) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "token is required",
        );
    };
    let now = gw.deps.clock.now();
    // A session token (expired ones too: revoking them is harmless).
    if let Ok(claims) = session::decode(&id.keys, &id.base(), token) {
        if let Err(e) = id
            .revoke_session(gw.store.as_ref(), &claims.jti, claims.exp, now)
            .await
        {
            tracing::error!(error = %e, "could not record a revoked session");
            return oauth_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "storage unavailable",
            );
        }
        gw.deps.emit(
            Event::new("session.revoke")
                .with("sub", claims.sub)
                .with("jti", claims.jti),
        );
    } else if id
        .keys
        .open::<RefreshPayload>(SealKind::RefreshToken, token)
        .is_ok()
    {
        if let Err(e) = id.revoke_refresh(gw.store.as_ref(), token, now).await {
            tracing::error!(error = %e, "could not record a revoked refresh token");
            return oauth_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "storage unavailable",
            );
        }
        gw.deps
            .emit(Event::new("session.revoke").with("kind", "refresh_token"));
    }
    json_no_store(StatusCode::OK, json!({}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject(ip: &str) -> String {
        limit_subject(ip.parse().unwrap_or(IpAddr::from([0, 0, 0, 0])))
    }

    #[test]
    fn rate_limits_count_ipv6_by_its_64_and_mapped_ipv4_as_ipv4() {
        assert_eq!(subject("203.0.113.5"), "203.0.113.5");
        assert_eq!(subject("::ffff:203.0.113.5"), "203.0.113.5");
        assert_eq!(subject("2001:db8:1:2::a"), "2001:db8:1:2::/64");
        assert_eq!(
            subject("2001:db8:1:2:ffff:ffff:ffff:ffff"),
            "2001:db8:1:2::/64"
        );
        assert_eq!(subject("2001:db8:1:3::1"), "2001:db8:1:3::/64");
        assert_eq!(subject("::1"), "::/64");
    }
}
