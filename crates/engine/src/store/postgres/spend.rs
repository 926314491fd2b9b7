//! The PostgreSQL side of spend: reservations (via `gatehouse_reserve`) and their
//! settlement, caps with their audit rows, the identity directory and retention. Each
//! mutation is one transaction; the locking that keeps caps exact across replicas is
//! described in the `store::postgres` module doc. The cap arithmetic itself is in
//! [`crate::spend::caps`]. A person's spend of every model is in `spend` (one row per
//! period, `total`'s starting at 0), a model family's in `family_spend` (migration 0010); a
//! reservation holds on both kinds of rows ([`caps::held_meters`]) and its settlement moves
//! them together, every model's rows first.

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Transaction};
use futures_util::try_join;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::{Client, OWNER_LOCK_NAMESPACE, PgError, exec, row_opt, rows};
use crate::identity::user::UserIdentity;
use crate::spend::{
    Family, GroupMode, Meter, Period, PoolStanding, PooledBudget, ReserveOutcome, ReserveRequest,
    ScopeType, SpendLimit, Standing, caps, new_id,
};
use crate::store::convert::{from_ms, i, ms, u};
use crate::store::{OpenReservation, SettleAs};

/// Advisory-lock namespace of cap mutations, keyed by a hash of (scope, period).
const LIMIT_LOCK_NAMESPACE: i32 = 0x4748_4c4d; // "GHLM"

const LIMIT_COLS: &str = "id, scope_type, scope_id, period, amount_cents, created_at, updated_at, \
     pooled_amount_cents, pooled_enabled, model";

/// A stored `model` column: `''` for every model, else a family this binary knows (a row
/// of a family it does not know is refused rather than read as one of every model).
struct StoredModel(Option<Family>);

impl<'a> tokio_postgres::types::FromSql<'a> for StoredModel {
    fn from_sql(
        ty: &tokio_postgres::types::Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let model = <&str as tokio_postgres::types::FromSql>::from_sql(ty, raw)?;
        if model.is_empty() {
            return Ok(StoredModel(None));
        }
        Family::parse(model)
            .map(|f| StoredModel(Some(f)))
            .ok_or_else(|| format!("unknown model family `{model}`").into())
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        <&str as tokio_postgres::types::FromSql>::accepts(ty)
    }
}

fn limit_row(r: &Row) -> Result<SpendLimit, PgError> {
    let scope: String = r.try_get(1)?;
    let period: String = r.try_get(3)?;
    Ok(SpendLimit {
        model: r.try_get::<_, StoredModel>(9)?.0,
        id: r.try_get(0)?,
        scope_type: ScopeType::parse(&scope).unwrap_or(ScopeType::Organization),
        scope_id: r.try_get(2)?,
        period: Period::parse(&period).unwrap_or(Period::Monthly),
        amount_cents: r.try_get(4)?,
        created_at: from_ms(r.try_get(5)?),
        updated_at: from_ms(r.try_get(6)?),
        pooled: match r.try_get::<_, Option<i64>>(7)? {
            Some(amount_cents) => Some(PooledBudget {
                amount_cents,
                paused: !r.try_get::<_, bool>(8)?,
            }),
            None => None,
        },
    })
}

/// Every cap that can bind this person.
async fn candidate_limits(
    c: &impl GenericClient,
    sub: &str,
    groups: &[String],
) -> Result<Vec<SpendLimit>, PgError> {
    let all = rows(
        c,
        &format!(
            "SELECT {LIMIT_COLS} FROM spend_limits
             WHERE scope_type = 'organization' OR (scope_type = 'user' AND scope_id = $1)
                OR scope_type = 'rbac_group'"
        ),
        &[&sub],
    )
    .await?;
    let mut out = Vec::with_capacity(all.len());
    for r in &all {
        let l = limit_row(r)?;
        if l.scope_type != ScopeType::RbacGroup || groups.contains(&l.scope_id) {
            out.push(l);
        }
    }
    Ok(out)
}

/// A meter's `(spent, reserved)`.
type Total = (Meter, (u64, u64));

/// `(spent, reserved)` per meter, from rows of `(period, family, spent, reserved)` (family
/// NULL: every model's).
fn totals_by_meter(found: &[Row]) -> Result<Vec<Total>, PgError> {
    let mut out = Vec::with_capacity(found.len());
    for r in found {
        let period: String = r.try_get(0)?;
        let family: Option<String> = r.try_get(1)?;
        let Some(period) = Period::parse(&period) else {
            continue;
        };
        let family = match family {
            None => None,
            Some(f) => match Family::parse(&f) {
                Some(f) => Some(f),
                None => continue,
            },
        };
        out.push((
            Meter { period, family },
            (u(r.try_get(2)?), u(r.try_get(3)?)),
        ));
    }
    Ok(out)
}

fn lookup(totals: &[Total]) -> impl Fn(&Meter) -> (u64, u64) + '_ {
    |m| totals.iter().find(|t| t.0 == *m).map_or((0, 0), |t| t.1)
}

/// The stored starts of every period's window containing `now` (`total`'s is 0).
fn starts_of(now: DateTime<Utc>) -> [i64; 4] {
    Period::EVERY.map(|p| ms(p.window(now).start))
}

pub async fn standings(
    c: &mut Client,
    sub: &str,
    groups: &[String],
    mode: GroupMode,
    now: DateTime<Utc>,
) -> Result<Vec<Standing>, PgError> {
    // One snapshot for the caps and the totals.
    let tx = c
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let starts = starts_of(now);
    let params: [&(dyn ToSql + Sync); 5] = [&sub, &starts[0], &starts[1], &starts[2], &starts[3]];
    let current = "((period = 'daily' AND period_start = $2)
                OR (period = 'weekly' AND period_start = $3)
                OR (period = 'monthly' AND period_start = $4)
                OR (period = 'total' AND period_start = $5))";
    let every_sql = format!(
        "SELECT period, NULL::TEXT, spent_micro, reserved_micro FROM spend
         WHERE principal = $1 AND {current}"
    );
    let family_sql = format!(
        "SELECT period, family, spent_micro, reserved_micro FROM family_spend
         WHERE principal = $1 AND {current}"
    );
    let (limits, every, families) = try_join!(
        candidate_limits(&tx, sub, groups),
        rows(&tx, &every_sql, &params),
        rows(&tx, &family_sql, &params)
    )?;
    tx.commit().await?;
    let mut totals = totals_by_meter(&every)?;
    totals.extend(totals_by_meter(&families)?);
    let meters = caps::shown(&limits, None, sub, groups, mode);
    Ok(caps::standings(
        &limits,
        &meters,
        lookup(&totals),
        now,
        sub,
        groups,
        mode,
    ))
}

pub async fn reserve(
    c: &impl GenericClient,
    req: &ReserveRequest,
    owner_key: i32,
) -> Result<ReserveOutcome, PgError> {
    // The caps are resolved first; `gatehouse_reserve_meters` (migration 0010) then locks
    // the person's rows, checks and writes in one statement. A cap changed in between is as
    // if it changed just after this reservation.
    let limits = candidate_limits(c, &req.sub, &req.groups).await?;
    let held = caps::held_meters(req.family);
    // The headroom to keep free is taken off the caps the function checks against (rounded
    // up to whole cents, so never less than asked).
    let keep_cents = i64::try_from(req.keep_free_micro.div_ceil(10_000)).unwrap_or(i64::MAX);
    let cap_cents: Vec<Option<i64>> =
        caps::binding_caps(&limits, &held, &req.sub, &req.groups, req.mode)
            .iter()
            .map(|c| c.map(|c| c.saturating_sub(keep_cents)))
            .collect();
    // The person's shared budgets in paying order, each with the same headroom kept.
    let pools = caps::pools(&limits, &req.groups, &req.pool_rule);
    let pool_names: Vec<&str> = pools.iter().map(|p| p.0.as_str()).collect();
    let pool_caps: Vec<i64> = pools
        .iter()
        .map(|p| p.1.saturating_sub(keep_cents))
        .collect();
    let starts: Vec<i64> = starts_of(req.now).to_vec();
    let found = rows(
        c,
        "SELECT period, family, spent_micro, reserved_micro, reserved, pool, pool_used_up,
                pool_spent, pool_reserved
         FROM gatehouse_reserve_meters($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        &[
            &req.sub,
            &req.family.map(Family::as_str),
            &starts,
            &cap_cents,
            &i(req.amount_micro),
            &ms(req.now),
            &req.reservation_id,
            &req.request_id,
            &owner_key,
            &pool_names,
            &pool_caps,
        ],
    )
    .await?;
    let first = found.first();
    let flag = |col: usize| -> Result<bool, PgError> {
        Ok(first
            .map(|r| r.try_get::<_, bool>(col))
            .transpose()?
            .unwrap_or(false))
    };
    let (made, used_up) = (flag(4)?, flag(6)?);
    let totals = totals_by_meter(&found)?;
    let meters = caps::shown(&limits, Some(&held), &req.sub, &req.groups, req.mode);
    let mut standings = caps::standings(
        &limits,
        &meters,
        lookup(&totals),
        req.now,
        &req.sub,
        &req.groups,
        req.mode,
    );
    if let (false, true, Some(r), Some((group, cap))) = (made, used_up, first, pools.first()) {
        return Ok(ReserveOutcome::Refused {
            standings,
            exceeded: vec![Meter::all(Period::Monthly)],
            pool: Some(PoolStanding {
                group: group.clone(),
                cap_cents: *cap,
                spent_micro: u(r.try_get(7)?),
                reserved_micro: u(r.try_get(8)?),
                reset: req.windows[2].reset,
            }),
        });
    }
    if !made {
        let exceeded = caps::exceeded(&standings, req.amount_micro);
        return Ok(ReserveOutcome::Refused {
            standings,
            exceeded,
            pool: None,
        });
    }
    caps::add_hold(&mut standings, req.amount_micro);
    Ok(ReserveOutcome::Reserved(standings))
}

/// Settles inside an open transaction (also used by the usage-row insert).
pub async fn settle_in(
    tx: &Transaction<'_>,
    id: &str,
    actual_micro: u64,
    how: SettleAs,
    now: DateTime<Utc>,
) -> Result<bool, PgError> {
    let actual = i(actual_micro);
    let state = how.as_str();
    let flipped = row_opt(
        tx,
        "UPDATE reservations SET state = $2,
             settled_micro = LEAST(COALESCE(settled_micro, 0)::NUMERIC + $3::BIGINT, 9223372036854775807)::BIGINT
         WHERE id = $1 AND state = 'open'
         RETURNING principal, amount_micro, daily_start, weekly_start, monthly_start, pool_group,
            family",
        &[&id, &state, &actual],
    )
    .await?;
    // (principal, hold to drop, charge to add, rows held, paying pool)
    type Closed = (String, i64, i64, Held, Option<String>);
    let (sub, amount, charge, held, pool): Closed = match flipped {
        Some(r) => (
            r.try_get(0)?,
            r.try_get(1)?,
            actual,
            Held::read(&r, 2, 6)?,
            r.try_get(5)?,
        ),
        None if how == SettleAs::Charged => {
            // Closed by another replica's reconciliation (as estimated, or released by an
            // older version) while this one still served the request: the hold is gone;
            // the estimate is replaced by the metered cost.
            let late = row_opt(
                tx,
                "UPDATE reservations r SET state = 'settled', settled_micro = $2
                 FROM (SELECT id, settled_micro AS was FROM reservations WHERE id = $1 FOR UPDATE) old
                 WHERE r.id = old.id AND r.state IN ('estimated', 'released')
                 RETURNING r.principal, old.was, r.daily_start, r.weekly_start, r.monthly_start,
                    r.pool_group, r.family",
                &[&id, &actual],
            )
            .await?;
            let Some(r) = late else { return Ok(false) };
            let was: Option<i64> = r.try_get(1)?;
            (
                r.try_get(0)?,
                0,
                actual - was.unwrap_or(0),
                Held::read(&r, 2, 6)?,
                r.try_get(5)?,
            )
        }
        None => return Ok(false),
    };
    spend_rows(tx, &sub, &held, amount, charge, now).await?;
    if let Some(group) = pool {
        let moved = PoolCharge {
            group,
            month_start: held.starts[2],
            hold: amount,
            charge,
        };
        pool_charges(tx, vec![moved], now).await?;
    }
    Ok(true)
}

/// What a settlement moves on a shared budget's row: `hold` off its reserved amount,
/// `charge` onto its spend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolCharge {
    pub group: String,
    pub month_start: i64,
    pub hold: i64,
    pub charge: i64,
}

/// Applies pool charges in (group, month) order, after every person's rows the
/// transaction locks (the lock order of the module doc).
pub async fn pool_charges(
    tx: &Transaction<'_>,
    mut charges: Vec<PoolCharge>,
    now: DateTime<Utc>,
) -> Result<(), PgError> {
    charges.sort_by(|a, b| (&a.group, a.month_start).cmp(&(&b.group, b.month_start)));
    for p in charges {
        exec(
            tx,
            "UPDATE pool_spend SET reserved_micro = GREATEST(reserved_micro - $3, 0),
                 spent_micro = LEAST(spent_micro::NUMERIC + $4::BIGINT, 9223372036854775807)::BIGINT,
                 updated_at = $5
             WHERE group_id = $1 AND period_start = $2",
            &[&p.group, &p.month_start, &p.hold, &p.charge, &ms(now)],
        )
        .await?;
    }
    Ok(())
}

/// Shared budgets' `(group, spent, reserved)` in the month containing `now`.
pub async fn pool_totals(
    c: &impl GenericClient,
    groups: &[String],
    now: DateTime<Utc>,
) -> Result<Vec<(String, u64, u64)>, PgError> {
    let start = ms(Period::Monthly.window(now).start);
    let found = rows(
        c,
        "SELECT group_id, spent_micro, reserved_micro FROM pool_spend
         WHERE group_id = ANY($1) AND period_start = $2 ORDER BY group_id",
        &[&groups, &start],
    )
    .await?;
    found
        .iter()
        .map(|r| Ok((r.try_get(0)?, u(r.try_get(1)?), u(r.try_get(2)?))))
        .collect()
}

/// The rows a stored reservation holds on: its daily, weekly and monthly windows' starts
/// (`total`'s is 0) and its model family.
struct Held {
    starts: [i64; 3],
    family: Option<String>,
}

impl Held {
    /// The three starts from column `first` on, the family at `family`.
    fn read(r: &Row, first: usize, family: usize) -> Result<Held, PgError> {
        Ok(Held {
            starts: [
                r.try_get(first)?,
                r.try_get(first + 1)?,
                r.try_get(first + 2)?,
            ],
            family: r.try_get(family)?,
        })
    }
}

/// Drops `hold` from the person's reserved amounts and adds `charge` to their spend, in
/// every period's row of every model, then (for a family's reservation) of the family.
async fn spend_rows(
    tx: &Transaction<'_>,
    sub: &str,
    held: &Held,
    hold: i64,
    charge: i64,
    now: DateTime<Utc>,
) -> Result<(), PgError> {
    let sql = "UPDATE spend SET reserved_micro = GREATEST(reserved_micro - $4, 0),
                   spent_micro = LEAST(spent_micro::NUMERIC + $5::BIGINT, 9223372036854775807)::BIGINT,
                   updated_at = $6
               WHERE principal = $1 AND period = $2 AND period_start = $3";
    let at = ms(now);
    let [d, w, m] = held.starts;
    let total = 0i64;
    // One statement per period, sent together and run in this order: the same order in
    // which `reserve` locks them. The family's rows come after, as `reserve` locks them.
    let [daily, weekly, monthly, lifetime] = Period::EVERY.map(Period::as_str);
    let p: [[&(dyn ToSql + Sync); 6]; 4] = [
        [&sub, &daily, &d, &hold, &charge, &at],
        [&sub, &weekly, &w, &hold, &charge, &at],
        [&sub, &monthly, &m, &hold, &charge, &at],
        [&sub, &lifetime, &total, &hold, &charge, &at],
    ];
    let family = async {
        let Some(f) = &held.family else {
            return Ok(0);
        };
        exec(
            tx,
            "UPDATE family_spend f SET reserved_micro = GREATEST(f.reserved_micro - $3, 0),
                 spent_micro = LEAST(f.spent_micro::NUMERIC + $4::BIGINT, 9223372036854775807)::BIGINT,
                 updated_at = $5
             FROM unnest($6::TEXT[], $7::BIGINT[]) AS w(period, start)
             WHERE f.principal = $1 AND f.family = $2 AND f.period = w.period
               AND f.period_start = w.start",
            &[
                &sub,
                f,
                &hold,
                &charge,
                &at,
                &[daily, weekly, monthly, lifetime].as_slice(),
                &[d, w, m, total].as_slice(),
            ],
        )
        .await
    };
    try_join!(
        exec(tx, sql, &p[0]),
        exec(tx, sql, &p[1]),
        exec(tx, sql, &p[2]),
        exec(tx, sql, &p[3]),
        family,
    )?;
    Ok(())
}

/// Charges one lease's metered costs inside the usage rows' transaction: the open amount
/// shrinks by the cost (never below zero) and the person's spend grows by it; the lease
/// stays open. Against a lease another replica already charged as `estimated` the cost is
/// only recorded (the estimate covered everything admitted under it); against one released
/// or settled it is charged in full, since nothing spent may be lost. The same move on the
/// lease's shared budget is returned, for the caller to apply after every person's rows.
pub async fn charge_in(
    tx: &Transaction<'_>,
    id: &str,
    actual_micro: u64,
    now: DateTime<Utc>,
) -> Result<Option<PoolCharge>, PgError> {
    let actual = i(actual_micro);
    let found = row_opt(
        tx,
        "UPDATE reservations r SET
             amount_micro = CASE WHEN old.state = 'open'
                 THEN r.amount_micro - LEAST($2::BIGINT, r.amount_micro) ELSE r.amount_micro END,
             settled_micro = LEAST(COALESCE(r.settled_micro, 0)::NUMERIC + $2::BIGINT, 9223372036854775807)::BIGINT
         FROM (SELECT id, state, amount_micro AS was FROM reservations WHERE id = $1 FOR UPDATE) old
         WHERE r.id = old.id
         RETURNING r.principal, old.state, old.was, r.daily_start, r.weekly_start, r.monthly_start,
            r.pool_group, r.family",
        &[&id, &actual],
    )
    .await?;
    let Some(r) = found else { return Ok(None) };
    let pool: Option<String> = r.try_get(6)?;
    let (sub, state, was): (String, String, i64) = (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
    let held = Held::read(&r, 3, 7)?;
    let (dropped, added) = match state.as_str() {
        "open" => (actual.min(was.max(0)), actual),
        "estimated" => (0, 0),
        _ => (0, actual),
    };
    spend_rows(tx, &sub, &held, dropped, added, now).await?;
    Ok(pool.map(|group| PoolCharge {
        group,
        month_start: held.starts[2],
        hold: dropped,
        charge: added,
    }))
}

pub async fn settle(
    c: &mut Client,
    id: &str,
    actual_micro: u64,
    how: SettleAs,
    now: DateTime<Utc>,
) -> Result<bool, PgError> {
    let tx = c.transaction().await?;
    let done = settle_in(&tx, id, actual_micro, how, now).await?;
    tx.commit().await?;
    Ok(done)
}

/// Open reservations whose gateway no longer holds its ownership lock.
pub async fn orphaned_reservations(
    c: &impl GenericClient,
) -> Result<Vec<OpenReservation>, PgError> {
    let found = rows(
        c,
        "SELECT r.id, r.request_id, r.amount_micro FROM reservations r
         WHERE r.state = 'open' AND NOT EXISTS (
             SELECT 1 FROM pg_locks l
             WHERE l.locktype = 'advisory' AND l.granted
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND l.classid = $1::integer::oid AND l.objid = r.owner_key::oid AND l.objsubid = 2)
         ORDER BY r.created_at, r.id",
        &[&OWNER_LOCK_NAMESPACE],
    )
    .await?;
    found
        .iter()
        .map(|r| {
            Ok(OpenReservation {
                id: r.try_get(0)?,
                request_id: r.try_get(1)?,
                amount_micro: u(r.try_get(2)?),
            })
        })
        .collect()
}

async fn audit(
    tx: &Transaction<'_>,
    actor: &str,
    action: &str,
    limit_id: &str,
    before: Option<&SpendLimit>,
    after: Option<&SpendLimit>,
    now: DateTime<Utc>,
) -> Result<(), PgError> {
    let row = crate::spend::AuditRow {
        id: new_id("spla"),
        at: now,
        actor: actor.to_owned(),
        action: action.to_owned(),
        limit_id: Some(limit_id.to_owned()),
        before: before.map(SpendLimit::to_json),
        after: after.map(SpendLimit::to_json),
    };
    super::admin_views::append_audit(tx, &row).await
}

/// Serialises mutations of one (scope, period, model) until the transaction ends.
async fn lock_scope(
    tx: &Transaction<'_>,
    scope_type: ScopeType,
    scope_id: &str,
    period: Period,
    model: Option<Family>,
) -> Result<(), PgError> {
    let mut key = format!("{}\n{scope_id}\n{}", scope_type.as_str(), period.as_str());
    if let Some(f) = model {
        key.push('\n');
        key.push_str(f.as_str());
    }
    exec(
        tx,
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        &[&LIMIT_LOCK_NAMESPACE, &key],
    )
    .await?;
    Ok(())
}

/// Creates or replaces a cap; `pooled` replaces its shared budget (`None`: kept as stored).
#[allow(clippy::too_many_arguments)]
pub async fn upsert_limit(
    c: &mut Client,
    scope_type: ScopeType,
    scope_id: &str,
    period: Period,
    model: Option<Family>,
    amount: Option<i64>,
    pooled: Option<Option<PooledBudget>>,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<SpendLimit, PgError> {
    let tx = c.transaction().await?;
    lock_scope(&tx, scope_type, scope_id, period, model).await?;
    let model_col = model.map_or("", Family::as_str);
    let before = row_opt(
        &tx,
        &format!(
            "SELECT {LIMIT_COLS} FROM spend_limits
             WHERE scope_type = $1 AND scope_id = $2 AND period = $3 AND model = $4"
        ),
        &[
            &scope_type.as_str(),
            &scope_id,
            &period.as_str(),
            &model_col,
        ],
    )
    .await?
    .map(|r| limit_row(&r))
    .transpose()?;
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
    exec(
        &tx,
        "INSERT INTO spend_limits (id, scope_type, scope_id, period, amount_cents, created_at, updated_at,
            pooled_amount_cents, pooled_enabled, model)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         ON CONFLICT (scope_type, scope_id, period, model) DO UPDATE SET amount_cents = excluded.amount_cents,
            updated_at = excluded.updated_at, pooled_amount_cents = excluded.pooled_amount_cents,
            pooled_enabled = excluded.pooled_enabled",
        &[
            &after.id,
            &scope_type.as_str(),
            &scope_id,
            &period.as_str(),
            &amount,
            &ms(after.created_at),
            &ms(now),
            &after.pooled.map(|p| p.amount_cents),
            &after.pooled.is_some_and(|p| !p.paused),
            &model_col,
        ],
    )
    .await?;
    let action = if before.is_some() {
        "spend_limit.update"
    } else {
        "spend_limit.create"
    };
    audit(
        &tx,
        actor,
        action,
        &after.id,
        before.as_ref(),
        Some(&after),
        now,
    )
    .await?;
    tx.commit().await?;
    Ok(after)
}

pub async fn get_limit(c: &impl GenericClient, id: &str) -> Result<Option<SpendLimit>, PgError> {
    row_opt(
        c,
        &format!("SELECT {LIMIT_COLS} FROM spend_limits WHERE id = $1"),
        &[&id],
    )
    .await?
    .map(|r| limit_row(&r))
    .transpose()
}

pub async fn delete_limit(
    c: &mut Client,
    id: &str,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<Option<SpendLimit>, PgError> {
    let tx = c.transaction().await?;
    let Some(seen) = get_limit(&tx, id).await? else {
        tx.commit().await?;
        return Ok(None);
    };
    // The same lock as create-or-replace of that scope and period, then read it again.
    lock_scope(
        &tx,
        seen.scope_type,
        &seen.scope_id,
        seen.period,
        seen.model,
    )
    .await?;
    let before = get_limit(&tx, id).await?;
    if let Some(b) = &before {
        exec(&tx, "DELETE FROM spend_limits WHERE id = $1", &[&id]).await?;
        audit(&tx, actor, "spend_limit.delete", id, Some(b), None, now).await?;
    }
    tx.commit().await?;
    Ok(before)
}

pub async fn list_limits(
    c: &impl GenericClient,
    scope_type: Option<ScopeType>,
    after_id: Option<String>,
    before_id: Option<String>,
    limit: usize,
) -> Result<(Vec<SpendLimit>, bool), PgError> {
    let take = i64::try_from(limit + 1).unwrap_or(i64::MAX);
    let scope = scope_type.map(ScopeType::as_str);
    let (order, cursor, cmp) = match (&after_id, &before_id) {
        (_, Some(b)) => ("DESC", Some(b.clone()), "<"),
        (Some(a), None) => ("ASC", Some(a.clone()), ">"),
        (None, None) => ("ASC", None, ">"),
    };
    let found = rows(
        c,
        &format!(
            "SELECT {LIMIT_COLS} FROM spend_limits
             WHERE ($1::text IS NULL OR scope_type = $1) AND ($2::text IS NULL OR id {cmp} $2)
             ORDER BY id {order} LIMIT $3"
        ),
        &[&scope, &cursor, &take],
    )
    .await?;
    let mut out = found.iter().map(limit_row).collect::<Result<Vec<_>, _>>()?;
    let more = out.len() > limit;
    out.truncate(limit);
    if before_id.is_some() {
        out.reverse();
    }
    Ok((out, more))
}

pub async fn upsert_principal(
    c: &impl GenericClient,
    who: &UserIdentity,
    now: DateTime<Utc>,
) -> Result<(), PgError> {
    let groups = serde_json::to_string(&who.groups).unwrap_or_else(|_| "[]".into());
    exec(
        c,
        "INSERT INTO principals (sub, email, name, groups, updated_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (sub) DO UPDATE SET email = excluded.email, name = excluded.name,
            groups = excluded.groups, updated_at = excluded.updated_at",
        &[&who.sub, &who.email, &who.name, &groups, &ms(now)],
    )
    .await?;
    Ok(())
}

pub async fn principals(
    c: &impl GenericClient,
    subs: Option<Vec<String>>,
) -> Result<Vec<UserIdentity>, PgError> {
    let found = rows(
        c,
        "SELECT sub, email, name, groups FROM principals
         WHERE $1::text[] IS NULL OR sub = ANY($1) ORDER BY sub",
        &[&subs],
    )
    .await?;
    found
        .iter()
        .map(|r| {
            let groups: String = r.try_get(3)?;
            Ok(UserIdentity {
                sub: r.try_get(0)?,
                email: r.try_get(1)?,
                name: r.try_get(2)?,
                groups: serde_json::from_str(&groups).unwrap_or_default(),
            })
        })
        .collect()
}

/// Settled spend per person and UTC day for the days starting in `[from, to)`.
pub async fn daily_spend(
    c: &impl GenericClient,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<(String, DateTime<Utc>, u64)>, PgError> {
    let found = rows(
        c,
        "SELECT principal, period_start, spent_micro FROM spend
         WHERE period = 'daily' AND period_start >= $1 AND period_start < $2 AND spent_micro > 0
         ORDER BY period_start, principal",
        &[&ms(from), &ms(to)],
    )
    .await?;
    found
        .iter()
        .map(|r| Ok((r.try_get(0)?, from_ms(r.try_get(1)?), u(r.try_get(2)?))))
        .collect()
}

/// At most this many rows per statement, and this many statements per table and sweep.
const RETENTION_BATCH: i64 = 10_000;
const RETENTION_BATCHES: usize = 50;

pub async fn retention(
    c: &impl GenericClient,
    audit_before: DateTime<Utc>,
    spend_before: DateTime<Utc>,
    principals_before: DateTime<Utc>,
) -> Result<u64, PgError> {
    let mut total = 0u64;
    for (table, condition, cut) in [
        ("admin_audit", "at < $1", audit_before),
        // Lifetime (`total`) rows are never expired: a `total` cap counts everything.
        (
            "spend",
            "updated_at < $1 AND reserved_micro = 0 AND period <> 'total'",
            spend_before,
        ),
        (
            "family_spend",
            "updated_at < $1 AND reserved_micro = 0 AND period <> 'total'",
            spend_before,
        ),
        (
            "pool_spend",
            "updated_at < $1 AND reserved_micro = 0",
            spend_before,
        ),
        ("usage_events", "created_at < $1", spend_before),
        ("usage_rollup", "last_at < $1", spend_before),
        (
            "reservations",
            "created_at < $1 AND state <> 'open'",
            spend_before,
        ),
        ("principals", "updated_at < $1", principals_before),
    ] {
        let sql = format!(
            "DELETE FROM {table} WHERE ctid = ANY(ARRAY(
                 SELECT ctid FROM {table} WHERE {condition} LIMIT $2))"
        );
        for _ in 0..RETENTION_BATCHES {
            let n = exec(c, &sql, &[&ms(cut), &RETENTION_BATCH]).await?;
            total += n;
            if (n as i64) < RETENTION_BATCH {
                break;
            }
        }
    }
    Ok(total)
}
