//! The SQLite side of spend: reservations and their settlement, caps with their audit
//! rows, the identity directory (principals) and retention. Synchronous functions run on
//! the store's own thread; each mutation is one `BEGIN IMMEDIATE` transaction (SQLite has
//! one writer, so a check and the write that follows it cannot interleave with another
//! request's). The cap arithmetic itself is in [`crate::spend::caps`]. A person's spend of
//! every model is in `spend` (one row per period, `total`'s starting at 0), a model
//! family's in `family_spend`; a reservation holds on both kinds of rows
//! ([`caps::held_meters`]) and its settlement moves them together. Sums in the spend
//! rows saturate at `i64::MAX`: SQLite would turn an overflowing sum into a float, which no
//! reader could take back as an integer.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use crate::identity::user::UserIdentity;
use crate::spend::{
    Family, GroupMode, Meter, Period, PoolStanding, PooledBudget, ReserveOutcome, ReserveRequest,
    ScopeType, SpendLimit, Standing, caps, new_id,
};
use crate::store::convert::{from_ms, i, ms, u};
use crate::store::{OpenReservation, StoreError};

/// A stored `model` column: `''` for every model, else a family this binary knows (a row
/// of a family it does not know is refused rather than read as one of every model).
fn model_of(r: &rusqlite::Row<'_>, col: usize) -> rusqlite::Result<Option<Family>> {
    let model: String = r.get(col)?;
    if model.is_empty() {
        return Ok(None);
    }
    Family::parse(&model).map(Some).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            col,
            rusqlite::types::Type::Text,
            format!("unknown model family `{model}`").into(),
        )
    })
}

fn limit_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SpendLimit> {
    let scope: String = r.get(1)?;
    let period: String = r.get(3)?;
    Ok(SpendLimit {
        model: model_of(r, 9)?,
        id: r.get(0)?,
        scope_type: ScopeType::parse(&scope).unwrap_or(ScopeType::Organization),
        scope_id: r.get(2)?,
        period: Period::parse(&period).unwrap_or(Period::Monthly),
        amount_cents: r.get(4)?,
        created_at: from_ms(r.get(5)?),
        updated_at: from_ms(r.get(6)?),
        pooled: r
            .get::<_, Option<i64>>(7)?
            .map(|amount_cents| -> rusqlite::Result<PooledBudget> {
                Ok(PooledBudget {
                    amount_cents,
                    paused: !r.get::<_, bool>(8)?,
                })
            })
            .transpose()?,
    })
}

const LIMIT_COLS: &str = "id, scope_type, scope_id, period, amount_cents, created_at, updated_at, \
     pooled_amount_cents, pooled_enabled, model";

/// Every cap that can bind this person.
fn candidate_limits(
    tx: &Connection,
    sub: &str,
    groups: &[String],
) -> Result<Vec<SpendLimit>, StoreError> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {LIMIT_COLS} FROM spend_limits
         WHERE scope_type = 'organization' OR (scope_type = 'user' AND scope_id = ?1) OR scope_type = 'rbac_group'"
    ))?;
    let rows = stmt
        .query_map(params![sub], limit_row)?
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .filter(|l| l.scope_type != ScopeType::RbacGroup || groups.contains(&l.scope_id))
        .collect();
    Ok(rows)
}

/// The start of a period's window as stored (`total`: 0).
fn start_of(period: Period, now: DateTime<Utc>) -> i64 {
    ms(period.window(now).start)
}

/// A meter's `(spent, reserved)` in the window containing `now`.
fn meter_row(
    tx: &Connection,
    sub: &str,
    m: &Meter,
    now: DateTime<Utc>,
) -> Result<(u64, u64), StoreError> {
    let start = start_of(m.period, now);
    let read = |r: &rusqlite::Row<'_>| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?));
    let row = match m.family {
        None => tx
            .prepare_cached(
                "SELECT spent_micro, reserved_micro FROM spend WHERE principal = ?1 AND period = ?2 AND period_start = ?3",
            )?
            .query_row(params![sub, m.period.as_str(), start], read)
            .optional()?,
        Some(f) => tx
            .prepare_cached(
                "SELECT spent_micro, reserved_micro FROM family_spend
                 WHERE principal = ?1 AND family = ?2 AND period = ?3 AND period_start = ?4",
            )?
            .query_row(params![sub, f.as_str(), m.period.as_str(), start], read)
            .optional()?,
    };
    Ok(row.map_or((0, 0), |(s, r)| (u(s), u(r))))
}

/// The person's candidate caps and their standing against them: on the meters a
/// reservation of `held` holds (`None`: every meter a cap binds them on).
fn standings_in(
    tx: &Connection,
    sub: &str,
    groups: &[String],
    mode: GroupMode,
    now: DateTime<Utc>,
    held: Option<&[Meter]>,
) -> Result<(Vec<SpendLimit>, Vec<Standing>), StoreError> {
    let limits = candidate_limits(tx, sub, groups)?;
    let meters = caps::shown(&limits, held, sub, groups, mode);
    let mut totals = Vec::with_capacity(meters.len());
    for m in &meters {
        totals.push((*m, meter_row(tx, sub, m, now)?));
    }
    let found = |m: &Meter| totals.iter().find(|t| t.0 == *m).map_or((0, 0), |t| t.1);
    let standings = caps::standings(&limits, &meters, found, now, sub, groups, mode);
    Ok((limits, standings))
}

/// A shared budget's `(spent, reserved)` in the month starting at `month_start`.
fn pool_row(tx: &Connection, group: &str, month_start: i64) -> Result<(u64, u64), StoreError> {
    let row = tx
        .prepare_cached(
            "SELECT spent_micro, reserved_micro FROM pool_spend WHERE group_id = ?1 AND period_start = ?2",
        )?
        .query_row(params![group, month_start], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
        })
        .optional()?;
    Ok(row.map_or((0, 0), |(s, r)| (u(s), u(r))))
}

/// The shared budgets' `(group, spent, reserved)` in the month starting at `month_start`.
pub fn pool_totals(
    conn: &mut Connection,
    groups: &[String],
    month_start: i64,
) -> Result<Vec<(String, u64, u64)>, StoreError> {
    groups
        .iter()
        .map(|g| pool_row(conn, g, month_start).map(|(s, r)| (g.clone(), s, r)))
        .collect()
}

/// Which of the person's shared budgets pays for `amount` (the first in paying order with
/// room): `Ok(None)` without pools, `Err` (the first pool's standing) when all are used up.
fn choose_pool(
    tx: &Connection,
    limits: &[SpendLimit],
    req: &ReserveRequest,
    amount: u64,
) -> Result<Result<Option<String>, PoolStanding>, StoreError> {
    let pools = caps::pools(limits, &req.groups, &req.pool_rule);
    let month = req.windows[2];
    let mut first = None;
    for (group, cap) in pools {
        let (spent, reserved) = pool_row(tx, &group, ms(month.start))?;
        if caps::pool_fits(cap, spent, reserved, amount) {
            return Ok(Ok(Some(group)));
        }
        first.get_or_insert(PoolStanding {
            group,
            cap_cents: cap,
            spent_micro: spent,
            reserved_micro: reserved,
            reset: month.reset,
        });
    }
    Ok(first.map_or(Ok(None), Err))
}

pub fn standings(
    conn: &mut Connection,
    sub: &str,
    groups: &[String],
    mode: GroupMode,
    now: DateTime<Utc>,
) -> Result<Vec<Standing>, StoreError> {
    let tx = conn.transaction()?;
    let (_, s) = standings_in(&tx, sub, groups, mode, now, None)?;
    tx.commit()?;
    Ok(s)
}

/// Checks every binding cap and reserves, inside the writer's transaction (a refusal
/// writes nothing).
pub fn reserve(tx: &Connection, req: &ReserveRequest) -> Result<ReserveOutcome, StoreError> {
    let held = caps::held_meters(req.family);
    let (limits, mut standings) =
        standings_in(tx, &req.sub, &req.groups, req.mode, req.now, Some(&held))?;
    let wanted = req.amount_micro.saturating_add(req.keep_free_micro);
    let exceeded = caps::exceeded(&standings, wanted);
    if !exceeded.is_empty() {
        return Ok(ReserveOutcome::Refused {
            standings,
            exceeded,
            pool: None,
        });
    }
    let payer = match choose_pool(tx, &limits, req, wanted)? {
        Ok(payer) => payer,
        Err(pool) => {
            return Ok(ReserveOutcome::Refused {
                standings,
                exceeded: vec![Meter::all(Period::Monthly)],
                pool: Some(pool),
            });
        }
    };
    let now = ms(req.now);
    let amount = i(req.amount_micro);
    if let Some(group) = &payer {
        tx.prepare_cached(
            "INSERT INTO pool_spend (group_id, period_start, spent_micro, reserved_micro, updated_at)
             VALUES (?1, ?2, 0, ?3, ?4)
             ON CONFLICT (group_id, period_start)
             DO UPDATE SET reserved_micro = CASE
                 WHEN reserved_micro > 9223372036854775807 - excluded.reserved_micro THEN 9223372036854775807
                 ELSE reserved_micro + excluded.reserved_micro END,
               updated_at = excluded.updated_at",
        )?
        .execute(params![group, ms(req.windows[2].start), amount, now])?;
    }
    for m in &held {
        hold_on(tx, &req.sub, m, start_of(m.period, req.now), amount, now)?;
    }
    tx.prepare_cached(
        "INSERT INTO reservations (id, principal, request_id, created_at, amount_micro, daily_start, weekly_start,
            monthly_start, state, pool_group, family)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'open', ?9, ?10)",
    )?
    .execute(params![
            req.reservation_id,
            req.sub,
            req.request_id,
            now,
            amount,
            ms(req.windows[0].start),
            ms(req.windows[1].start),
            ms(req.windows[2].start),
            payer,
            req.family.map(Family::as_str),
        ],
    )?;
    caps::add_hold(&mut standings, req.amount_micro);
    Ok(ReserveOutcome::Reserved(standings))
}

/// Adds `amount` (saturating) to the hold on one meter's row, creating the row.
fn hold_on(
    tx: &Connection,
    sub: &str,
    m: &Meter,
    start: i64,
    amount: i64,
    now: i64,
) -> Result<(), StoreError> {
    const ADD: &str = "DO UPDATE SET reserved_micro = CASE
             WHEN reserved_micro > 9223372036854775807 - excluded.reserved_micro THEN 9223372036854775807
             ELSE reserved_micro + excluded.reserved_micro END,
           updated_at = excluded.updated_at";
    match m.family {
        None => tx
            .prepare_cached(&format!(
                "INSERT INTO spend (principal, period, period_start, spent_micro, reserved_micro, updated_at)
                 VALUES (?1, ?2, ?3, 0, ?4, ?5)
                 ON CONFLICT (principal, period, period_start) {ADD}"
            ))?
            .execute(params![sub, m.period.as_str(), start, amount, now])?,
        Some(f) => tx
            .prepare_cached(&format!(
                "INSERT INTO family_spend (principal, family, period, period_start, spent_micro,
                    reserved_micro, updated_at)
                 VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6)
                 ON CONFLICT (principal, family, period, period_start) {ADD}"
            ))?
            .execute(params![sub, f.as_str(), m.period.as_str(), start, amount, now])?,
    };
    Ok(())
}

/// Settles an open reservation inside the writer's transaction (also used by the
/// usage-row insert); `state` is `settled`, `released` or `estimated`.
pub fn settle(
    tx: &Connection,
    id: &str,
    actual_micro: u64,
    state: &str,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let row = tx
        .prepare_cached(
            "SELECT principal, amount_micro, daily_start, weekly_start, monthly_start, pool_group,
                family
             FROM reservations WHERE id = ?1 AND state = 'open'",
        )?
        .query_row(params![id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                held_rows(r, 2, 6)?,
                r.get::<_, Option<String>>(5)?,
            ))
        })
        .optional()?;
    let Some((sub, amount, held, pool)) = row else {
        return Ok(false);
    };
    let actual = i(actual_micro);
    let starts = held.starts;
    spend_rows(tx, &sub, &held, amount, actual, now)?;
    pool_rows(tx, pool.as_deref(), starts[2], amount, actual, now)?;
    tx.prepare_cached(
        "UPDATE reservations SET state = ?2, settled_micro = CASE
             WHEN COALESCE(settled_micro, 0) > 9223372036854775807 - ?3 THEN 9223372036854775807
             ELSE COALESCE(settled_micro, 0) + ?3 END
         WHERE id = ?1",
    )?
    .execute(params![id, state, actual])?;
    Ok(true)
}

/// Charges one request's metered cost against its reservation (a spend lease) inside the
/// usage row's transaction: the open amount shrinks by the cost (never below zero) and the
/// person's spend grows by it; the reservation stays open. Against a reservation already
/// charged as `estimated` the cost is only recorded (the estimate covered it); against one
/// released or settled it is charged in full, since nothing spent may be lost.
pub fn charge(
    tx: &Connection,
    id: &str,
    actual_micro: u64,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let row = tx
        .prepare_cached(
            "SELECT principal, amount_micro, state, daily_start, weekly_start, monthly_start, pool_group,
                family
             FROM reservations WHERE id = ?1",
        )?
        .query_row(params![id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                held_rows(r, 3, 7)?,
                r.get::<_, Option<String>>(6)?,
            ))
        })
        .optional()?;
    let Some((sub, amount, state, held, pool)) = row else {
        return Ok(false);
    };
    let starts = held.starts;
    let actual = i(actual_micro);
    let (dropped, added) = match state.as_str() {
        "open" => (actual.min(amount.max(0)), actual),
        "estimated" => (0, 0),
        _ => (0, actual),
    };
    tx.prepare_cached(
        "UPDATE reservations SET amount_micro = amount_micro - ?2, settled_micro = CASE
             WHEN COALESCE(settled_micro, 0) > 9223372036854775807 - ?3 THEN 9223372036854775807
             ELSE COALESCE(settled_micro, 0) + ?3 END
         WHERE id = ?1",
    )?
    .execute(params![id, dropped, actual])?;
    spend_rows(tx, &sub, &held, dropped, added, now)?;
    pool_rows(tx, pool.as_deref(), starts[2], dropped, added, now)?;
    Ok(true)
}

/// Drops `hold` from a shared budget's reserved amount and adds `charge` to its spend (the
/// reservation's pool, if it has one).
fn pool_rows(
    tx: &Connection,
    pool: Option<&str>,
    month_start: i64,
    hold: i64,
    charge: i64,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let Some(group) = pool else { return Ok(()) };
    tx.prepare_cached(
        "UPDATE pool_spend SET reserved_micro = MAX(reserved_micro - ?3, 0),
            spent_micro = CASE WHEN spent_micro > 9223372036854775807 - ?4 THEN 9223372036854775807
                ELSE spent_micro + ?4 END,
            updated_at = ?5
         WHERE group_id = ?1 AND period_start = ?2",
    )?
    .execute(params![group, month_start, hold, charge, ms(now)])?;
    Ok(())
}

/// The rows a stored reservation holds on: its daily, weekly and monthly windows' starts
/// (`total`'s is 0) and its model family.
struct Held {
    starts: [i64; 3],
    family: Option<Family>,
}

/// Reads [`Held`] from a reservation row: the three starts from `first`, the family at
/// `family`.
fn held_rows(r: &rusqlite::Row<'_>, first: usize, family: usize) -> rusqlite::Result<Held> {
    let name: Option<String> = r.get(family)?;
    Ok(Held {
        starts: [r.get(first)?, r.get(first + 1)?, r.get(first + 2)?],
        family: name.as_deref().and_then(Family::parse),
    })
}

/// Drops `hold` from the person's reserved amounts and adds `charge` (saturating) to their
/// spend, in every period's row of every model and, for a family's reservation, of the
/// family.
fn spend_rows(
    tx: &Connection,
    sub: &str,
    held: &Held,
    hold: i64,
    charge: i64,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    const MOVE: &str = "SET reserved_micro = MAX(reserved_micro - ?4, 0),
                spent_micro = CASE WHEN spent_micro > 9223372036854775807 - ?5 THEN 9223372036854775807
                    ELSE spent_micro + ?5 END,
                updated_at = ?6";
    let [d, w, m] = held.starts;
    for (period, start) in Period::EVERY.iter().zip([d, w, m, 0]) {
        tx.prepare_cached(&format!(
            "UPDATE spend {MOVE} WHERE principal = ?1 AND period = ?2 AND period_start = ?3"
        ))?
        .execute(params![sub, period.as_str(), start, hold, charge, ms(now)])?;
        if let Some(f) = held.family {
            tx.prepare_cached(&format!(
                "UPDATE family_spend {MOVE}
                 WHERE principal = ?1 AND period = ?2 AND period_start = ?3 AND family = ?7"
            ))?
            .execute(params![
                sub,
                period.as_str(),
                start,
                hold,
                charge,
                ms(now),
                f.as_str()
            ])?;
        }
    }
    Ok(())
}

pub fn open_reservations(conn: &mut Connection) -> Result<Vec<OpenReservation>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT id, request_id, amount_micro FROM reservations WHERE state = 'open' ORDER BY created_at",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok(OpenReservation {
                id: r.get(0)?,
                request_id: r.get(1)?,
                amount_micro: u(r.get(2)?),
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

fn audit(
    tx: &Connection,
    actor: &str,
    action: &str,
    limit_id: &str,
    before: Option<&SpendLimit>,
    after: Option<&SpendLimit>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let row = crate::spend::AuditRow {
        id: new_id("spla"),
        at: now,
        actor: actor.to_owned(),
        action: action.to_owned(),
        limit_id: Some(limit_id.to_owned()),
        before: before.map(SpendLimit::to_json),
        after: after.map(SpendLimit::to_json),
    };
    super::admin_views::append_audit(tx, &row)
}

/// Creates or replaces a cap; `pooled` replaces its shared budget (`None`: kept as stored).
#[allow(clippy::too_many_arguments)]
pub fn upsert_limit(
    tx: &Connection,
    scope_type: ScopeType,
    scope_id: &str,
    period: Period,
    model: Option<Family>,
    amount: Option<i64>,
    pooled: Option<Option<PooledBudget>>,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<SpendLimit, StoreError> {
    let model_col = model.map_or("", Family::as_str);
    let before = tx
        .query_row(
            &format!(
                "SELECT {LIMIT_COLS} FROM spend_limits
                      WHERE scope_type = ?1 AND scope_id = ?2 AND period = ?3 AND model = ?4"
            ),
            params![scope_type.as_str(), scope_id, period.as_str(), model_col],
            limit_row,
        )
        .optional()?;
    let after = SpendLimit {
        id: before
            .as_ref()
            .map_or_else(|| new_id("spl"), |b| b.id.clone()),
        scope_type,
        scope_id: scope_id.to_owned(),
        period,
        model,
        amount_cents: amount,
        pooled: pooled.unwrap_or_else(|| before.as_ref().and_then(|b| b.pooled)),
        created_at: before.as_ref().map_or(now, |b| b.created_at),
        updated_at: now,
    };
    tx.execute(
        "INSERT INTO spend_limits (id, scope_type, scope_id, period, amount_cents, created_at, updated_at,
            pooled_amount_cents, pooled_enabled, model)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (scope_type, scope_id, period, model) DO UPDATE SET amount_cents = excluded.amount_cents,
            updated_at = excluded.updated_at, pooled_amount_cents = excluded.pooled_amount_cents,
            pooled_enabled = excluded.pooled_enabled",
        params![
            after.id,
            scope_type.as_str(),
            scope_id,
            period.as_str(),
            amount,
            ms(after.created_at),
            ms(now),
            after.pooled.map(|p| p.amount_cents),
            after.pooled.is_some_and(|p| !p.paused),
            model_col,
        ],
    )?;
    let action = if before.is_some() {
        "spend_limit.update"
    } else {
        "spend_limit.create"
    };
    audit(
        tx,
        actor,
        action,
        &after.id,
        before.as_ref(),
        Some(&after),
        now,
    )?;
    Ok(after)
}

pub fn get_limit(conn: &mut Connection, id: &str) -> Result<Option<SpendLimit>, StoreError> {
    Ok(conn
        .query_row(
            &format!("SELECT {LIMIT_COLS} FROM spend_limits WHERE id = ?1"),
            params![id],
            limit_row,
        )
        .optional()?)
}

pub fn delete_limit(
    tx: &Connection,
    id: &str,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<Option<SpendLimit>, StoreError> {
    let before = tx
        .query_row(
            &format!("SELECT {LIMIT_COLS} FROM spend_limits WHERE id = ?1"),
            params![id],
            limit_row,
        )
        .optional()?;
    if let Some(b) = &before {
        tx.execute("DELETE FROM spend_limits WHERE id = ?1", params![id])?;
        audit(tx, actor, "spend_limit.delete", id, Some(b), None, now)?;
    }
    Ok(before)
}

pub fn list_limits(
    conn: &mut Connection,
    scope_type: Option<ScopeType>,
    after_id: Option<String>,
    before_id: Option<String>,
    limit: usize,
) -> Result<(Vec<SpendLimit>, bool), StoreError> {
    let take = i64::try_from(limit + 1).unwrap_or(i64::MAX);
    let scope = scope_type.map(ScopeType::as_str);
    let (order, cursor, cmp) = match (&after_id, &before_id) {
        (_, Some(b)) => ("DESC", Some(b.clone()), "<"),
        (Some(a), None) => ("ASC", Some(a.clone()), ">"),
        (None, None) => ("ASC", None, ">"),
    };
    let sql = format!(
        "SELECT {LIMIT_COLS} FROM spend_limits WHERE (?1 IS NULL OR scope_type = ?1) AND (?2 IS NULL OR id {cmp} ?2)
         ORDER BY id {order} LIMIT ?3"
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt
        .query_map(params![scope, cursor, take], limit_row)?
        .collect::<Result<Vec<_>, _>>()?;
    let more = rows.len() > limit;
    rows.truncate(limit);
    if before_id.is_some() {
        rows.reverse();
    }
    Ok((rows, more))
}

pub fn upsert_principal(
    conn: &Connection,
    who: &UserIdentity,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let groups = serde_json::to_string(&who.groups).unwrap_or_else(|_| "[]".into());
    conn.execute(
        "INSERT INTO principals (sub, email, name, groups, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (sub) DO UPDATE SET email = excluded.email, name = excluded.name, groups = excluded.groups,
            updated_at = excluded.updated_at",
        params![who.sub, who.email, who.name, groups, ms(now)],
    )?;
    Ok(())
}

pub fn principals(
    conn: &mut Connection,
    subs: Option<Vec<String>>,
) -> Result<Vec<UserIdentity>, StoreError> {
    let mut stmt = conn.prepare("SELECT sub, email, name, groups FROM principals ORDER BY sub")?;
    let rows = stmt
        .query_map([], |r| {
            let groups: String = r.get(3)?;
            Ok(UserIdentity {
                sub: r.get(0)?,
                email: r.get(1)?,
                name: r.get(2)?,
                groups: serde_json::from_str(&groups).unwrap_or_default(),
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(match subs {
        Some(s) => rows.into_iter().filter(|p| s.contains(&p.sub)).collect(),
        None => rows,
    })
}

/// Settled spend per person and UTC day for the days starting in `[from, to)`.
pub fn daily_spend(
    conn: &mut Connection,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<(String, DateTime<Utc>, u64)>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT principal, period_start, spent_micro FROM spend
         WHERE period = 'daily' AND period_start >= ?1 AND period_start < ?2 AND spent_micro > 0
         ORDER BY period_start, principal",
    )?;
    let rows = stmt
        .query_map(params![ms(from), ms(to)], |r| {
            Ok((r.get(0)?, from_ms(r.get(1)?), u(r.get(2)?)))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// At most this many rows per statement, and this many statements per table and sweep.
pub const RETENTION_BATCH: i64 = 10_000;
pub const RETENTION_BATCHES: usize = 50;

/// The retention statements with their cut-offs, in the order a sweep runs them; each
/// deletes at most [`RETENTION_BATCH`] rows older than its cut-off. Lifetime (`total`)
/// spend rows are never expired: a `total` cap counts everything ever spent.
pub fn retention_steps(
    audit_before: DateTime<Utc>,
    spend_before: DateTime<Utc>,
    principals_before: DateTime<Utc>,
) -> [(&'static str, DateTime<Utc>); 8] {
    [
        (
            "DELETE FROM admin_audit WHERE rowid IN (SELECT rowid FROM admin_audit WHERE at < ?1 LIMIT ?2)",
            audit_before,
        ),
        (
            "DELETE FROM spend WHERE rowid IN (SELECT rowid FROM spend
                WHERE updated_at < ?1 AND reserved_micro = 0 AND period != 'total' LIMIT ?2)",
            spend_before,
        ),
        (
            "DELETE FROM family_spend WHERE rowid IN (SELECT rowid FROM family_spend
                WHERE updated_at < ?1 AND reserved_micro = 0 AND period != 'total' LIMIT ?2)",
            spend_before,
        ),
        (
            "DELETE FROM pool_spend WHERE rowid IN (SELECT rowid FROM pool_spend WHERE updated_at < ?1 AND reserved_micro = 0 LIMIT ?2)",
            spend_before,
        ),
        (
            "DELETE FROM usage_events WHERE rowid IN (SELECT rowid FROM usage_events WHERE created_at < ?1 LIMIT ?2)",
            spend_before,
        ),
        (
            "DELETE FROM usage_rollup WHERE (hour, session_id, principal, model, subagent) IN (
                SELECT hour, session_id, principal, model, subagent FROM usage_rollup
                WHERE last_at < ?1 LIMIT ?2)",
            spend_before,
        ),
        (
            "DELETE FROM reservations WHERE rowid IN (SELECT rowid FROM reservations WHERE created_at < ?1 AND state != 'open' LIMIT ?2)",
            spend_before,
        ),
        (
            "DELETE FROM principals WHERE rowid IN (SELECT rowid FROM principals WHERE updated_at < ?1 LIMIT ?2)",
            principals_before,
        ),
    ]
}

/// One retention batch (a short write, so the writer interleaves it with requests' writes);
/// the number of rows deleted.
pub fn retention_batch(
    conn: &Connection,
    sql: &str,
    cut: DateTime<Utc>,
) -> Result<u64, StoreError> {
    let n = conn
        .prepare_cached(sql)?
        .execute(params![ms(cut), RETENTION_BATCH])?;
    Ok(n as u64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use chrono::Utc;

    use super::super::usage::tests::record;
    use crate::identity::user::UserIdentity;
    use crate::spend::{Period, ScopeType};
    use crate::store::{SqliteStore, Store};

    #[tokio::test]
    async fn retention_removes_only_old_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("r.db"), Utc::now()).unwrap();
        let now = Utc::now();
        let old = now - chrono::Duration::days(400);
        store
            .upsert_limit(
                ScopeType::Organization,
                "",
                Period::Daily,
                Some(5),
                "key:a",
                old,
            )
            .await
            .unwrap();
        store
            .upsert_limit(
                ScopeType::Organization,
                "",
                Period::Weekly,
                Some(5),
                "key:a",
                now,
            )
            .await
            .unwrap();
        let who = |s: &str| UserIdentity {
            sub: s.into(),
            email: None,
            name: None,
            groups: vec![],
        };
        store
            .upsert_principal(who("gone"), now - chrono::Duration::days(91))
            .await
            .unwrap();
        store.upsert_principal(who("here"), now).await.unwrap();
        store
            .insert_usage(
                vec![
                    record("old", old.timestamp_millis(), 1),
                    record("new", now.timestamp_millis(), 1),
                ]
                .into(),
            )
            .await
            .unwrap();
        let days = chrono::Duration::days;
        let removed = store
            .retention(now - days(365), now - days(396), now - days(90))
            .await
            .unwrap();
        // The old audit row, the old usage row and its rollup row, the old person.
        assert_eq!(removed, 4);
        let (audit, _) = store
            .audit_page(crate::store::AuditQuery {
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(audit.len(), 1);
        let people = store.principals(None).await.unwrap();
        assert_eq!(people.len(), 1);
        assert_eq!(people[0].sub, "here");
        assert_eq!(store.recent_usage(10).await.unwrap().len(), 1);
        assert_eq!(
            store
                .list_limits(None, None, None, 10)
                .await
                .unwrap()
                .0
                .len(),
            2,
            "caps are never expired"
        );
    }
}
