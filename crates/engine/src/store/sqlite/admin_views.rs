//! SQLite reads (and the one audit write) of the admin API's views: the identity directory
//! a page at a time, the filtered audit trail, spend per upstream.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, params};

use crate::identity::user::UserIdentity;
use crate::spend::AuditRow;
use crate::store::convert::{from_ms, i, like_pattern, ms, u};
use crate::store::{AuditQuery, DirectoryEntry, DirectoryQuery, StoreError, UsageTotals};

pub fn directory(
    conn: &Connection,
    q: DirectoryQuery,
) -> Result<(Vec<DirectoryEntry>, bool), StoreError> {
    let take = i(q.limit as u64 + 1);
    let pattern = q.needle.as_deref().map(like_pattern);
    let mut stmt = conn.prepare_cached(
        "SELECT sub, email, name, groups, updated_at FROM principals
         WHERE (?1 IS NULL OR sub > ?1)
           AND (?2 IS NULL OR lower(sub) LIKE ?2 ESCAPE '\\'
                OR lower(COALESCE(email, '')) LIKE ?2 ESCAPE '\\'
                OR lower(COALESCE(name, '')) LIKE ?2 ESCAPE '\\')
           AND (?4 IS NULL OR sub = ?4)
         ORDER BY sub LIMIT ?3",
    )?;
    let mut found = stmt
        .query_map(params![q.after, pattern, take, q.exact], |r| {
            let groups: String = r.get(3)?;
            Ok(DirectoryEntry {
                who: UserIdentity {
                    sub: r.get(0)?,
                    email: r.get(1)?,
                    name: r.get(2)?,
                    groups: serde_json::from_str(&groups).unwrap_or_default(),
                },
                seen_at: from_ms(r.get(4)?),
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let more = found.len() > q.limit;
    found.truncate(q.limit);
    Ok((found, more))
}

pub fn audit_page(conn: &Connection, q: AuditQuery) -> Result<(Vec<AuditRow>, bool), StoreError> {
    let take = i(q.limit as u64 + 1);
    let actions = (!q.actions.is_empty())
        .then(|| serde_json::to_string(&q.actions).unwrap_or_else(|_| "[]".into()));
    let mut stmt = conn.prepare_cached(
        "SELECT id, at, actor, action, limit_id, before, after FROM admin_audit
         WHERE (?1 IS NULL OR id < ?1) AND (?2 IS NULL OR actor = ?2)
           AND (?3 IS NULL OR action IN (SELECT value FROM json_each(?3)))
           AND (?4 IS NULL OR limit_id = ?4)
         ORDER BY id DESC LIMIT ?5",
    )?;
    let parse = |s: Option<String>| s.and_then(|s| serde_json::from_str(&s).ok());
    let mut rows = stmt
        .query_map(
            params![q.after_id, q.actor, actions, q.target_id, take],
            |r| {
                Ok(AuditRow {
                    id: r.get(0)?,
                    at: from_ms(r.get(1)?),
                    actor: r.get(2)?,
                    action: r.get(3)?,
                    limit_id: r.get(4)?,
                    before: parse(r.get(5)?),
                    after: parse(r.get(6)?),
                })
            },
        )?
        .collect::<Result<Vec<_>, _>>()?;
    let more = rows.len() > q.limit;
    rows.truncate(q.limit);
    Ok((rows, more))
}

pub fn append_audit(conn: &Connection, row: &AuditRow) -> Result<(), StoreError> {
    let j = |v: &Option<serde_json::Value>| v.as_ref().map(|v| v.to_string());
    conn.execute(
        "INSERT INTO admin_audit (id, at, actor, action, limit_id, before, after)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            row.id,
            ms(row.at),
            row.actor,
            row.action,
            row.limit_id,
            j(&row.before),
            j(&row.after)
        ],
    )?;
    Ok(())
}

pub fn usage_by_upstream(
    conn: &Connection,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<(String, UsageTotals)>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT COALESCE(upstream, ''), COUNT(*), COALESCE(SUM(input_tokens), 0),
                COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cost_micro_usd), 0)
         FROM usage_events WHERE created_at >= ?1 AND created_at < ?2
         GROUP BY 1 ORDER BY 5 DESC, 1 ASC LIMIT 100",
    )?;
    let rows = stmt
        .query_map(params![ms(from), ms(to)], |r| {
            Ok((
                r.get::<_, String>(0)?,
                UsageTotals {
                    requests: u(r.get(1)?),
                    input_tokens: u(r.get(2)?),
                    output_tokens: u(r.get(3)?),
                    cost_micro_usd: u(r.get(4)?),
                },
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}
