//! The spend-limits admin API under `/v1/organizations/spend_limits`: list, create or
//! replace, get, delete, and the audit trail. Authentication: an `x-api-key` from
//! `admin.write_keys` / `read_keys` (constant-time; when the header is present there is no
//! fallback to a bearer), else a session whose groups hit `admin.admin_groups`.

use axum::body::Body;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Period, ScopeType, SpendLimit};
use crate::config::ClientKeyConfig;
use crate::error::ApiError;
use crate::events::Event;
use crate::gateway::Gateway;

pub const PREFIX: &str = "/v1/organizations/spend_limits";

fn ok(body: Value, request_id: &str) -> Response<Body> {
    let mut r = crate::edge::json_response(StatusCode::OK, body);
    if let Ok(v) = HeaderValue::from_str(request_id) {
        r.headers_mut().insert("request-id", v);
    }
    r
}

fn key_matches(keys: &[ClientKeyConfig], presented: &str) -> Option<String> {
    let entries = keys.iter().map(|k| (k.id.as_str(), &k.hash));
    crate::auth::client_keys::find_hashed(entries, presented).map(str::to_owned)
}

/// Who is calling the admin API: `(actor, may_write)`.
pub async fn authenticate(
    gw: &Gateway,
    headers: &HeaderMap,
    admission: &crate::auth::Admission<'_>,
) -> Result<(String, bool), ApiError> {
    let spend = gw
        .config
        .spend
        .as_ref()
        .ok_or_else(|| ApiError::NotFound("spend limits are not configured".into()))?;
    if let Some(key) = headers.get("x-api-key") {
        // Present but not text is as wrong as a wrong key: never a fall back to the bearer.
        let Ok(key) = key.to_str() else {
            return Err(unauthenticated("invalid admin API key"));
        };
        if let Some(id) = key_matches(&spend.write_keys, key) {
            return Ok((format!("key:{id}"), true));
        }
        if let Some(id) = key_matches(&spend.read_keys, key) {
            return Ok((format!("key:{id}"), false));
        }
        return Err(unauthenticated("invalid admin API key"));
    }
    match crate::auth::admit(admission, headers).await {
        Ok(crate::auth::Principal::Session { user, .. })
            if user.groups.iter().any(|g| spend.admin_groups.contains(g)) =>
        {
            Ok((format!("user:{}", user.sub), true))
        }
        Ok(_) => Err(ApiError::Forbidden(
            "requires an admin key or an admin group".into(),
        )),
        Err(_) => Err(unauthenticated("missing or invalid credentials")),
    }
}

fn unauthenticated(message: &'static str) -> ApiError {
    ApiError::Unauthenticated {
        message,
        reason: message,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScopeBody {
    #[serde(rename = "type")]
    kind: String,
    rbac_group_id: Option<String>,
    user_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpsertBody {
    scope: ScopeBody,
    amount: Option<Value>,
    period: String,
    currency: Option<String>,
}

fn parse_upsert(bytes: &[u8]) -> Result<(ScopeType, String, Period, Option<i64>), String> {
    let b: UpsertBody = serde_json::from_slice(bytes).map_err(|e| format!("invalid body: {e}"))?;
    if b.currency.as_deref().is_some_and(|c| c != "USD") {
        return Err("currency: only USD is supported".into());
    }
    let period = Period::parse(&b.period).ok_or("period: must be daily, weekly or monthly")?;
    let (scope, id) = match (b.scope.kind.as_str(), b.scope.rbac_group_id, b.scope.user_id) {
        ("organization", None, None) => (ScopeType::Organization, String::new()),
        ("rbac_group", Some(g), None) if !g.trim().is_empty() => (ScopeType::RbacGroup, g),
        ("user", None, Some(u)) if !u.trim().is_empty() => (ScopeType::User, u),
        _ => return Err("scope: must be {type: organization}, {type: rbac_group, rbac_group_id} or {type: user, user_id}".into()),
    };
    let amount = match b.amount {
        None | Some(Value::Null) => None,
        Some(Value::String(s))
            if !s.is_empty() && s.len() <= 15 && s.bytes().all(|c| c.is_ascii_digit()) =>
        {
            Some(s.parse::<i64>().map_err(|_| "amount: too large")?)
        }
        Some(_) => {
            return Err(
                "amount: must be a string of whole US cents (e.g. \"50000\") or null".into(),
            );
        }
    };
    Ok((scope, id, period, amount))
}

fn query(uri: &http::Uri) -> Vec<(String, String)> {
    uri.query()
        .and_then(|q| serde_urlencoded::from_str(q).ok())
        .unwrap_or_default()
}

fn page_limit(q: &[(String, String)], default: usize) -> Result<usize, ApiError> {
    match q.iter().find(|(k, _)| k == "limit") {
        None => Ok(default),
        Some((_, v)) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| bad("limit: must be 1 to 1000")),
    }
}

pub async fn handle(
    gw: &Gateway,
    request_id: &str,
    admission: &crate::auth::Admission<'_>,
    req: Request<Body>,
) -> Response<Body> {
    match route(gw, request_id, admission, req).await {
        Ok(resp) => resp,
        Err(e) => e.into_response_for(request_id),
    }
}

async fn route(
    gw: &Gateway,
    request_id: &str,
    admission: &crate::auth::Admission<'_>,
    req: Request<Body>,
) -> Result<Response<Body>, ApiError> {
    let (actor, may_write) = match authenticate(gw, req.headers(), admission).await {
        Ok(a) => a,
        Err(e) => {
            gw.deps.emit(
                Event::new("admin.denied")
                    .with("request_id", request_id)
                    .with("reason", e.to_string()),
            );
            return Err(e);
        }
    };
    let now = gw.deps.clock.now();
    let path = req.uri().path().to_owned();
    let rest = path
        .strip_prefix(PREFIX)
        .unwrap_or_default()
        .trim_start_matches('/')
        .to_owned();
    let method = req.method().clone();
    if method != Method::GET && !may_write {
        gw.deps.emit(
            Event::new("admin.denied")
                .with("request_id", request_id)
                .with("actor", actor)
                .with("reason", "read_only_key"),
        );
        return Err(ApiError::Forbidden("requires write:spend_limits".into()));
    }
    let q = query(req.uri());
    let store = gw.store.as_ref();
    let fail = |e: crate::store::StoreError| {
        tracing::error!(error = %e, "spend limits store error");
        unavailable()
    };
    match (method, rest.as_str()) {
        (Method::GET, "") => {
            let limit = page_limit(&q, 20)?;
            let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            let scope = match get("scope_type").map(|s| ScopeType::parse(&s)) {
                Some(None) => return Err(bad("scope_type: unknown")),
                Some(s) => s,
                None => None,
            };
            let (rows, more) = store
                .list_limits(scope, get("after_id"), get("before_id"), limit)
                .await
                .map_err(fail)?;
            let data: Vec<Value> = rows.iter().map(SpendLimit::to_json).collect();
            let first = data.first().map(|d| d["id"].clone()).unwrap_or(Value::Null);
            let last = data.last().map(|d| d["id"].clone()).unwrap_or(Value::Null);
            Ok(ok(
                json!({"data": data, "has_more": more, "first_id": first, "last_id": last}),
                request_id,
            ))
        }
        (Method::POST, "") => {
            let bytes = match Limited::new(req.into_body(), 64 * 1024).collect().await {
                Ok(b) => b.to_bytes(),
                Err(e) if crate::edge::listener::is_body_timeout(e.as_ref()) => {
                    return Err(ApiError::BodyTimeout);
                }
                Err(_) => return Err(ApiError::PayloadTooLarge("body too large".into())),
            };
            let (scope, scope_id, period, amount) = parse_upsert(&bytes).map_err(|m| bad(&m))?;
            let l = store
                .upsert_limit(scope, &scope_id, period, amount, &actor, now)
                .await
                .map_err(fail)?;
            gw.ledger.retire_all();
            gw.deps.emit(
                Event::new("admin.limit.upsert")
                    .with("request_id", request_id)
                    .with("actor", actor)
                    .with("limit", l.to_json()),
            );
            Ok(ok(l.to_json(), request_id))
        }
        (Method::GET, "effective") => effective(gw, &q, request_id, now).await,
        (Method::GET, "audit") => {
            let limit = page_limit(&q, 100)?;
            let after = q
                .iter()
                .find(|(k, _)| k == "after_id")
                .map(|(_, v)| v.clone());
            let (rows, more) = store.list_audit(after, limit).await.map_err(fail)?;
            let last = rows
                .last()
                .map(|r| Value::String(r.id.clone()))
                .unwrap_or(Value::Null);
            Ok(ok(
                json!({"data": rows, "has_more": more, "last_id": last}),
                request_id,
            ))
        }
        (Method::GET, id) if !id.contains('/') => match store.get_limit(id).await.map_err(fail)? {
            Some(l) => Ok(ok(l.to_json(), request_id)),
            None => Err(ApiError::NotFound("no spend limit with that id".into())),
        },
        (Method::DELETE, id) if !id.is_empty() && !id.contains('/') => {
            if store
                .delete_limit(id, &actor, now)
                .await
                .map_err(fail)?
                .is_none()
            {
                return Err(ApiError::NotFound("no spend limit with that id".into()));
            }
            gw.ledger.retire_all();
            gw.deps.emit(
                Event::new("admin.limit.delete")
                    .with("request_id", request_id)
                    .with("actor", actor)
                    .with("id", id),
            );
            Ok(ok(
                json!({"type": "spend_limit_deleted", "id": id}),
                request_id,
            ))
        }
        _ => Err(ApiError::NotFound("no such spend limits route".into())),
    }
}

/// 400 `invalid_request_error`.
fn bad(message: &str) -> ApiError {
    ApiError::InvalidRequest(message.to_owned())
}

/// 503 when the store cannot answer.
fn unavailable() -> ApiError {
    ApiError::ServiceUnavailable("spend limits are unavailable".into())
}

/// `GET .../effective`: each known person's binding cap and spend per period.
/// Query: `user_ids[]`, `period[]`, `q` (matches id, email or name), `sort=spend_desc`,
/// `limit` (1-1000, default 20) and `page` (the `next_page` of the previous answer).
async fn effective(
    gw: &Gateway,
    q: &[(String, String)],
    request_id: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Response<Body>, ApiError> {
    let all = |k: &str| -> Vec<String> {
        q.iter()
            .filter(|(n, _)| n == k || n == &format!("{k}[]"))
            .map(|(_, v)| v.clone())
            .collect()
    };
    let one = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let limit = page_limit(q, 20)?;
    let mut periods = Vec::new();
    for p in all("period") {
        match Period::parse(&p) {
            Some(p) => periods.push(p),
            None => return Err(bad("period: must be daily, weekly or monthly")),
        }
    }
    let sort = one("sort");
    if sort.as_deref().is_some_and(|s| s != "spend_desc") {
        return Err(bad("sort: only spend_desc is supported"));
    }
    // The cursor is an offset; one whose page end cannot be counted is not a cursor.
    let offset = match one("page").map(|p| p.parse::<usize>()) {
        None => 0,
        Some(Ok(o)) if o.checked_add(limit).is_some() => o,
        Some(_) => {
            return Err(bad("page: use the next_page value of the previous answer"));
        }
    };
    let end = offset.saturating_add(limit);
    let users = all("user_ids");
    let needle = one("q").map(|s| s.to_lowercase());
    let people = match gw
        .store
        .principals((!users.is_empty()).then_some(users))
        .await
    {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %e, "identity directory unavailable");
            return Err(unavailable());
        }
    };
    let mode = gw
        .config
        .spend
        .as_ref()
        .map(|s| s.group_mode)
        .unwrap_or_default();
    let mut rows: Vec<(u64, Value)> = Vec::new();
    for who in people {
        if let Some(n) = &needle {
            let hay = format!(
                "{} {} {}",
                who.sub,
                who.email.clone().unwrap_or_default(),
                who.name.clone().unwrap_or_default()
            )
            .to_lowercase();
            if !hay.contains(n) {
                continue;
            }
        }
        let standings = gw
            .store
            .standings(&who.sub, &who.groups, mode, now)
            .await
            .map_err(|_| unavailable())?;
        for s in standings
            .into_iter()
            .filter(|s| periods.is_empty() || periods.contains(&s.period))
        {
            rows.push((
                s.spent_micro,
                json!({
                    "type": "spend_summary",
                    "user_id": who.sub,
                    "email": who.email,
                    "name": who.name,
                    "groups": who.groups,
                    "period": s.period.as_str(),
                    "limit": {"amount": s.cap_cents.map(|c| c.to_string()), "scope_type": s.cap_scope.map(ScopeType::as_str)},
                    "spent": (s.spent_micro / 10_000).to_string(),
                    "spent_micro_usd": s.spent_micro,
                    "reserved_micro_usd": s.reserved_micro,
                    "resets_at": s.reset.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                }),
            ));
        }
    }
    if sort.is_some() {
        rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    }
    let more = rows.len() > end;
    let data: Vec<Value> = rows
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|(_, v)| v)
        .collect();
    let next = more.then(|| end.to_string());
    Ok(ok(
        json!({"data": data, "has_more": more, "next_page": next}),
        request_id,
    ))
}
