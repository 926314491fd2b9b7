//! The spend-limits admin API under `/v1/organizations/spend_limits`: list, create or
//! replace, get, delete, the audit trail (here) and the people's standings (`effective`),
//! answering with the reference's objects and error messages (`body` checks a new limit as
//! it does). Authentication: an `x-api-key` from `admin.write_keys` / `read_keys`
//! (constant-time; when the header is present there is no fallback to a bearer), else a
//! session whose groups hit `admin.admin_groups`. Audit actors are named as the reference
//! names them: `admin-key:<id>` or `oidc:<sub>`. The same credentials read the cost
//! report (`cost`, parameters checked in `cost_query`) at `/v1/organizations/analytics/cost`;
//! Claude Code sessions (`sessions`, an extension) at `/v1/organizations/analytics/sessions`;
//! `pooled` merges and shows shared group budgets. Limits may name a model family and the
//! `total` period (Gatehouse extensions, see `body`); one is identified by scope, period
//! and model.

mod body;
mod cost;
mod cost_query;
pub(crate) mod effective;
mod pooled;
mod preview;
pub(crate) mod sessions;

pub(crate) use effective::all_limits;
pub use effective::cents_text;

use axum::body::Body;
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Limited};
use serde_json::{Value, json};

use super::{Period, ScopeType, SpendLimit};
use crate::error::ApiError;
use crate::events::Event;
use crate::gateway::Gateway;

pub const PREFIX: &str = "/v1/organizations/spend_limits";
/// The cost report, served to the same admin credentials.
pub const COST: &str = "/v1/organizations/analytics/cost";

pub use crate::admin::caller::authenticate;
use crate::admin::{bad, ok, query};

pub(crate) fn page_limit(q: &[(String, String)], default: usize) -> Result<usize, ApiError> {
    match q.iter().find(|(k, _)| k == "limit") {
        None => Ok(default),
        Some((_, v)) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| bad("limit: must be between 1 and 1000")),
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
    let caller = match authenticate(gw, req.method(), req.headers(), admission).await {
        Ok(c) => c,
        Err(e) => {
            gw.deps.emit(
                Event::new("admin.denied")
                    .with("request_id", request_id)
                    .with("reason", e.to_string()),
            );
            return Err(e);
        }
    };
    let (actor, may_write) = (caller.actor.clone(), caller.may_write());
    let now = gw.deps.clock.now();
    let path = req.uri().path().to_owned();
    let q = query(req.uri());
    if !path.starts_with(PREFIX) && path != COST && path != sessions::SESSIONS {
        return crate::admin::route(gw, request_id, &caller, req).await;
    }
    if path == COST || path == sessions::SESSIONS {
        if req.method() != Method::GET {
            return Err(ApiError::NotFound("not found".into()));
        }
        return if path == COST {
            cost::report(gw, &q, request_id, now).await
        } else {
            sessions::report(gw, &q, request_id, now).await
        };
    }
    let rest = path
        .strip_prefix(PREFIX)
        .unwrap_or_default()
        .trim_start_matches('/')
        .to_owned();
    let method = req.method().clone();
    let writes = (method == Method::POST && rest.is_empty())
        || (method == Method::DELETE && !rest.is_empty());
    if writes && !may_write {
        gw.deps.emit(
            Event::new("admin.denied")
                .with("request_id", request_id)
                .with("actor", actor)
                .with("reason", "read_only_key"),
        );
        return Err(ApiError::Forbidden("requires write:spend_limits".into()));
    }
    match (method, rest.as_str()) {
        (Method::GET, "") => list(gw, &q, request_id, now).await,
        (Method::POST, "") => upsert(gw, req, &actor, request_id, now).await,
        (Method::GET, "effective") => effective::effective(gw, &q, request_id, now).await,
        (Method::GET, "audit") => audit(gw, &q, request_id).await,
        (Method::POST, "preview") => preview::preview(gw, req, request_id).await,
        (Method::GET, id) if !id.is_empty() => {
            match gw.store.get_limit(id).await.map_err(store_failed)? {
                Some(l) => Ok(ok(one(gw, l, now).await?, request_id)),
                None => Err(not_found()),
            }
        }
        (Method::DELETE, id) if !id.is_empty() => {
            if gw
                .store
                .delete_limit(id, &actor, now)
                .await
                .map_err(store_failed)?
                .is_none()
            {
                return Err(not_found());
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
        _ => Err(ApiError::NotFound("not found".into())),
    }
}

fn not_found() -> ApiError {
    ApiError::NotFound("spend limit not found".into())
}

fn store_failed(e: crate::store::StoreError) -> ApiError {
    tracing::error!(error = %e, "spend limits store error");
    unavailable()
}

/// The admin API's objects of these limits: shared budgets with the group's spend this
/// month.
async fn objects(
    gw: &Gateway,
    limits: &[SpendLimit],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<Value>, ApiError> {
    let groups: Vec<String> = limits
        .iter()
        .filter(|l| l.holds_pool() && l.pooled.is_some())
        .map(|l| l.scope_id.clone())
        .collect();
    let spent = if groups.is_empty() {
        Vec::new()
    } else {
        gw.store
            .pool_totals(groups, now)
            .await
            .map_err(store_failed)?
    };
    Ok(limits.iter().map(|l| pooled::object(l, &spent)).collect())
}

async fn one(
    gw: &Gateway,
    limit: SpendLimit,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Value, ApiError> {
    Ok(objects(gw, &[limit], now)
        .await?
        .into_iter()
        .next()
        .unwrap_or_default())
}

/// `GET /v1/organizations/spend_limits`: `limit`, `after_id` / `before_id`, `scope_type`.
async fn list(
    gw: &Gateway,
    q: &[(String, String)],
    request_id: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Response<Body>, ApiError> {
    let limit = page_limit(q, 20)?;
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let scope = match get("scope_type").map(|s| ScopeType::parse(&s)) {
        Some(None) => {
            return Err(bad(
                "scope_type: must be one of organization, rbac_group, user",
            ));
        }
        Some(s) => s,
        None => None,
    };
    let (after, before) = (get("after_id"), get("before_id"));
    if after.is_some() && before.is_some() {
        return Err(bad("after_id and before_id are mutually exclusive"));
    }
    for (name, cursor) in [("after_id", &after), ("before_id", &before)] {
        if let Some(id) = cursor
            && gw
                .store
                .get_limit(id)
                .await
                .map_err(store_failed)?
                .is_none()
        {
            return Err(bad(&format!("{name}: no spend limit with this id")));
        }
    }
    let (rows, more) = gw
        .store
        .list_limits(scope, after, before, limit)
        .await
        .map_err(store_failed)?;
    let data = objects(gw, &rows, now).await?;
    let first = data.first().map(|d| d["id"].clone()).unwrap_or(Value::Null);
    let last = data.last().map(|d| d["id"].clone()).unwrap_or(Value::Null);
    Ok(ok(
        json!({"data": data, "has_more": more, "first_id": first, "last_id": last}),
        request_id,
    ))
}

/// `POST /v1/organizations/spend_limits`: create or replace the cap of a scope and period.
async fn upsert(
    gw: &Gateway,
    req: Request<Body>,
    actor: &str,
    request_id: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Response<Body>, ApiError> {
    let bytes = match Limited::new(req.into_body(), 64 * 1024).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if crate::edge::listener::is_body_timeout(e.as_ref()) => {
            return Err(ApiError::BodyTimeout);
        }
        Err(_) => return Err(ApiError::PayloadTooLarge("body too large".into())),
    };
    let b = body::parse(&bytes).map_err(|m| bad(&m))?;
    // Read first, then written: two admins replacing one limit at once keep the last write.
    let stored = if b.amount.is_none() || b.pooled.is_some() {
        existing(gw, b.scope, &b.scope_id, b.period, b.model).await?
    } else {
        None
    };
    let (amount, pool) = pooled::merge(&b, stored.as_ref()).map_err(|m| bad(&m))?;
    let pooled_limit = b.scope == ScopeType::RbacGroup && b.period == Period::Monthly;
    let written = if let Some(model) = b.model {
        gw.store
            .upsert_model_limit(b.scope, &b.scope_id, b.period, model, amount, actor, now)
            .await
    } else if b.pooled.is_some() && pooled_limit {
        gw.store
            .upsert_pooled_limit(&b.scope_id, amount, pool, actor, now)
            .await
    } else {
        // The stored shared budget, if any, stays as it is.
        gw.store
            .upsert_limit(b.scope, &b.scope_id, b.period, amount, actor, now)
            .await
    };
    let l = written.map_err(store_failed)?;
    gw.ledger.retire_all();
    gw.deps.emit(
        Event::new("admin.limit.upsert")
            .with("request_id", request_id)
            .with("actor", actor)
            .with("limit", l.to_json()),
    );
    Ok(ok(one(gw, l, now).await?, request_id))
}

/// The stored limit of one scope, period and model family, if any.
async fn existing(
    gw: &Gateway,
    scope: ScopeType,
    scope_id: &str,
    period: super::Period,
    model: Option<super::Family>,
) -> Result<Option<SpendLimit>, ApiError> {
    let mut after = None;
    loop {
        let (page, more) = gw
            .store
            .list_limits(Some(scope), after, None, 1000)
            .await
            .map_err(store_failed)?;
        if let Some(l) = page
            .iter()
            .find(|l| l.scope_id == scope_id && l.period == period && l.model == model)
        {
            return Ok(Some(l.clone()));
        }
        if !more {
            return Ok(None);
        }
        after = page.last().map(|l| l.id.clone());
    }
}

/// `GET .../audit`: newest first, `after_id` and `limit` (default 100), filters `actor`,
/// `action` and `target_id`; `format=csv` for every matching row (at most
/// [`AUDIT_CSV_ROWS`]). Rows are the reference's `audit_event`s; a create or a replace are
/// both `spend_limit.upsert`, as there (`change` keeps which one it was).
async fn audit(
    gw: &Gateway,
    q: &[(String, String)],
    request_id: &str,
) -> Result<Response<Body>, ApiError> {
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let csv = match get("format").as_deref() {
        None | Some("json") => false,
        Some("csv") => true,
        Some(_) => return Err(bad("format: must be json or csv")),
    };
    let after = get("after_id");
    if after.as_deref().is_some_and(|a| !audit_cursor(a)) {
        return Err(bad("after_id: must be an audit event id"));
    }
    let filter = |k: &str| {
        get(k)
            .filter(|v| !v.is_empty())
            .map(|v| {
                if v.len() > 256 {
                    Err(bad(&format!("{k}: at most 256 characters")))
                } else {
                    Ok(v)
                }
            })
            .transpose()
    };
    let actions = match filter("action")?.as_deref() {
        None => Vec::new(),
        Some("spend_limit.upsert") => {
            vec!["spend_limit.create".into(), "spend_limit.update".into()]
        }
        Some(a) => vec![a.to_owned()],
    };
    let mut query = crate::store::AuditQuery {
        after_id: after,
        limit: if csv { 1000 } else { page_limit(q, 100)? },
        actor: filter("actor")?,
        actions,
        target_id: filter("target_id")?,
    };
    let (mut rows, mut more) = gw
        .store
        .audit_page(query.clone())
        .await
        .map_err(store_failed)?;
    while csv && more && rows.len() < AUDIT_CSV_ROWS {
        query.after_id = rows.last().map(|r| r.id.clone());
        let (page, m) = gw
            .store
            .audit_page(query.clone())
            .await
            .map_err(store_failed)?;
        rows.extend(page);
        more = m;
    }
    let data: Vec<Value> = rows.iter().map(audit_event).collect();
    if csv {
        let flat: Vec<Value> = data
            .iter()
            .map(|d| {
                let mut d = d.clone();
                for k in ["before", "after"] {
                    d[k] = match &d[k] {
                        Value::Null => Value::Null,
                        v => Value::String(v.to_string()),
                    };
                }
                d
            })
            .collect();
        let cols = [
            "id",
            "created_at",
            "actor",
            "action",
            "change",
            "target_id",
            "before",
            "after",
        ];
        return Ok(crate::admin::csv::response(
            "gatehouse-audit.csv",
            crate::admin::csv::document(&cols, &flat),
        ));
    }
    let last = rows
        .last()
        .map(|r| Value::String(r.id.clone()))
        .unwrap_or(Value::Null);
    Ok(ok(
        json!({"data": data, "has_more": more, "last_id": last}),
        request_id,
    ))
}

/// Whether `after_id` names an audit event: one of Gatehouse's own ids (`spla_…`), or one
/// of the reference's numbered ids (1 to 18 digits, as it checks them), which name no event
/// here and sort before every id here (their page is empty, as the reference's page after
/// its first event is). Anything else is refused with the reference's message.
fn audit_cursor(a: &str) -> bool {
    let numbered = (1..=18).contains(&a.len()) && a.bytes().all(|b| b.is_ascii_digit());
    let own = a.strip_prefix("spla_").is_some_and(|t| {
        (1..=64).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_alphanumeric())
    });
    numbered || own
}

/// Rows an audit CSV holds at most.
const AUDIT_CSV_ROWS: usize = 100_000;

fn audit_event(r: &super::AuditRow) -> Value {
    let strip = |v: &Option<Value>| {
        v.clone().map(|mut v| {
            if let Some(o) = v.as_object_mut() {
                o.remove("type");
            }
            v
        })
    };
    let (action, change) = match r.action.as_str() {
        "spend_limit.create" => ("spend_limit.upsert", Some("create")),
        "spend_limit.update" => ("spend_limit.upsert", Some("update")),
        other => (other, None),
    };
    json!({
        "type": "audit_event",
        "id": r.id,
        "created_at": r.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "actor": r.actor,
        "action": action,
        "change": change,
        "target_id": r.limit_id,
        "before": strip(&r.before),
        "after": strip(&r.after),
        "reason": null,
    })
}

/// 503 when the store cannot answer.
fn unavailable() -> ApiError {
    ApiError::ServiceUnavailable("spend limits are unavailable".into())
}

#[cfg(test)]
mod tests {
    use super::audit_cursor;

    #[test]
    fn audit_cursors_are_ours_or_the_references() {
        assert!(audit_cursor("spla_019ae3c1f2a80001a1b2c3d4e5f6"));
        assert!(audit_cursor("1"));
        assert!(audit_cursor("123456789012345678"));
        for bad in [
            "",
            "abc",
            "-1",
            "1234567890123456789",
            "spl_019ae3c1f2a80001a1b2c3d4e5f6",
            "spla_",
            "spla_x y",
        ] {
            assert!(!audit_cursor(bad), "{bad:?}");
        }
    }
}
