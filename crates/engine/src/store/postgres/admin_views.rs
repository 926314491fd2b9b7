//! PostgreSQL reads (and the one audit write) of the admin API's views: the identity
//! directory a page at a time, the filtered audit trail, spend per upstream.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;

use super::{PgError, exec, rows};
use crate::identity::user::UserIdentity;
use crate::spend::AuditRow;
use crate::store::convert::{from_ms, i, like_pattern, ms, u};
use crate::store::{AuditQuery, DirectoryEntry, DirectoryQuery, UsageTotals};

pub async fn directory(
    c: &impl GenericClient,
    q: DirectoryQuery,
) -> Result<(Vec<DirectoryEntry>, bool), PgError> {
    let take = i(q.limit as u64 + 1);
    let pattern = q.needle.as_deref().map(like_pattern);
    let found = rows(
        c,
        "SELECT sub, email, name, groups, updated_at FROM principals
         WHERE ($1::text IS NULL OR sub COLLATE \"C\" > $1)
           AND ($2::text IS NULL OR lower(sub) LIKE $2 OR lower(COALESCE(email, '')) LIKE $2
                OR lower(COALESCE(name, '')) LIKE $2)
           AND ($4::text IS NULL OR sub = $4)
         ORDER BY sub COLLATE \"C\" LIMIT $3",
        &[&q.after, &pattern, &take, &q.exact],
    )
    .await?;
    let mut out = Vec::with_capacity(found.len());
    for r in &found {
        let groups: String = r.try_get(3)?;
        out.push(DirectoryEntry {
            who: UserIdentity {
                sub: r.try_get(0)?,
                email: r.try_get(1)?,
                name: r.try_get(2)?,
                groups: serde_json::from_str(&groups).unwrap_or_default(),
            },
            seen_at: from_ms(r.try_get(4)?),
        });
    }
    let more = out.len() > q.limit;
    out.truncate(q.limit);
    Ok((out, more))
}

pub async fn audit_page(
    c: &impl GenericClient,
    q: AuditQuery,
) -> Result<(Vec<AuditRow>, bool), PgError> {
    let take = i(q.limit as u64 + 1);
    let actions = (!q.actions.is_empty()).then_some(q.actions);
    let found = rows(
        c,
        "SELECT id, at, actor, action, limit_id, before, after FROM admin_audit
         WHERE ($1::text IS NULL OR id < $1) AND ($2::text IS NULL OR actor = $2)
           AND ($3::text[] IS NULL OR action = ANY($3))
           AND ($4::text IS NULL OR limit_id = $4)
         ORDER BY id DESC LIMIT $5",
        &[&q.after_id, &q.actor, &actions, &q.target_id, &take],
    )
    .await?;
    let parse = |s: Option<String>| s.and_then(|s| serde_json::from_str(&s).ok());
    let mut out = Vec::with_capacity(found.len());
    for r in &found {
        out.push(AuditRow {
            id: r.try_get(0)?,
            at: from_ms(r.try_get(1)?),
            actor: r.try_get(2)?,
            action: r.try_get(3)?,
            limit_id: r.try_get(4)?,
            before: parse(r.try_get(5)?),
            after: parse(r.try_get(6)?),
        });
    }
    let more = out.len() > q.limit;
    out.truncate(q.limit);
    Ok((out, more))
}

pub async fn append_audit(c: &impl GenericClient, row: &AuditRow) -> Result<(), PgError> {
    let j = |v: &Option<serde_json::Value>| v.as_ref().map(|v| v.to_string());
    exec(
        c,
        "INSERT INTO admin_audit (id, at, actor, action, limit_id, before, after)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            &row.id,
            &ms(row.at),
            &row.actor,
            &row.action,
            &row.limit_id,
            &j(&row.before),
            &j(&row.after),
        ],
    )
    .await?;
    Ok(())
}

pub async fn usage_by_upstream(
    c: &impl GenericClient,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<(String, UsageTotals)>, PgError> {
    let found = rows(
        c,
        "SELECT COALESCE(upstream, ''), COUNT(*)::BIGINT, COALESCE(SUM(input_tokens), 0)::BIGINT,
                COALESCE(SUM(output_tokens), 0)::BIGINT, COALESCE(SUM(cost_micro_usd), 0)::BIGINT
         FROM usage_events WHERE created_at >= $1 AND created_at < $2
         GROUP BY 1 ORDER BY 5 DESC, COALESCE(upstream, '') COLLATE \"C\" ASC LIMIT 100",
        &[&ms(from), &ms(to)],
    )
    .await?;
    let mut out = Vec::with_capacity(found.len());
    for r in &found {
        out.push((
            r.try_get(0)?,
            UsageTotals {
                requests: u(r.try_get(1)?),
                input_tokens: u(r.try_get(2)?),
                output_tokens: u(r.try_get(3)?),
                cost_micro_usd: u(r.try_get(4)?),
            },
        ));
    }
    Ok(out)
}
