//! The console phase's data: a company of N people in a gateway store, written as the
//! gateway writes them (through the engine's `Store` trait), with the spend rows written
//! by SQL (the trait has no call that writes spend without a reservation).
//!
//! The shape, from a fixed seed: people `u00000`… with an email, a name from 24 × 24
//! first and last names, and 1 to 3 groups of [`GROUPS`] (every person one, 30% a second,
//! 10% a third; the first groups are larger). Spend limits: the organization's daily and
//! monthly, a monthly limit with a shared budget on 6 groups, a daily limit on 6 others and
//! a daily limit on every 100th person (each written with its audit row). Usage rows: in
//! sessions of 20 to 50 requests ~15 s to 2 min apart, each session one person's (people
//! weighted so a few use the gateway far more than most), one main model, one of three
//! upstreams, spread over the last 30 days and written in time order, [`BATCH`] rows per
//! `insert_usage` (its transaction also fills the hourly rollup; no row carries a
//! reservation, so nothing is charged). Then the `spend` rows those usage rows would have
//! left: one per person and day with spend, and per person the weeks and months they
//! touch. Last, [`AUDIT_ROWS`] audit rows of other admin actions (sessions revoked).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use gatehouse_engine::identity::user::UserIdentity;
use gatehouse_engine::spend::{AuditRow, Period, PooledBudget, ScopeType, new_id};
use gatehouse_engine::store::{ClientTags, Store, UsageRecord};

/// Groups of the directory.
pub const GROUPS: [&str; 36] = [
    "engineering",
    "eng-platform",
    "eng-infra",
    "eng-mobile",
    "eng-web",
    "eng-data",
    "eng-ml",
    "eng-security",
    "eng-payments",
    "eng-search",
    "eng-growth",
    "eng-devex",
    "product",
    "design",
    "research",
    "data-science",
    "support",
    "sales",
    "marketing",
    "finance",
    "legal",
    "people-ops",
    "it",
    "qa",
    "sre",
    "contractors",
    "interns",
    "emea",
    "apac",
    "americas",
    "leads",
    "managers",
    "oncall",
    "beta-testers",
    "gateway-admins",
    "all-hands",
];
const FIRST: [&str; 24] = [
    "Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivan", "Jun", "Kofi",
    "Lena", "Mateo", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Viktor",
    "Wen", "Yara",
];
const LAST: [&str; 24] = [
    "Adams",
    "Bauer",
    "Costa",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ito",
    "Jensen",
    "Kowalski",
    "Lindqvist",
    "Moreau",
    "Nakamura",
    "Okafor",
    "Petrov",
    "Quispe",
    "Rossi",
    "Silva",
    "Tanaka",
    "Ueda",
    "Varga",
    "Weber",
    "Zhou",
];
/// The surname the `/users?q=` call searches for (1 person in 24).
pub const NEEDLE: &str = "okafor";
const MODELS: [&str; 4] = [
    "claude-sonnet-4-5",
    "claude-opus-4-1",
    "claude-haiku-4-5",
    "claude-sonnet-4",
];
const UPSTREAMS: [&str; 3] = ["anthropic", "anthropic-backup", "bedrock"];
/// Rows per `insert_usage` call (one transaction each).
pub const BATCH: usize = 10_000;
/// Audit rows of other admin actions, besides the limits'.
pub const AUDIT_ROWS: usize = 3_000;
/// Groups with a shared monthly budget, and groups with a daily limit after them.
const POOLED_GROUPS: usize = 6;
const DAILY_GROUPS: usize = 6;
/// Every this many people has a daily limit of their own.
const USER_LIMIT_EVERY: usize = 100;
const DAY_MS: i64 = 86_400_000;
const WINDOW_MS: i64 = 30 * DAY_MS;

/// splitmix64: small, fast and reproducible.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi.saturating_sub(lo) + 1)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn uuid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | ((b >> 48) & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }
}

/// The sub of person `i`.
pub fn sub(i: usize) -> String {
    format!("u{i:05}")
}

/// Person `i` of the directory.
pub fn person(i: usize, rng: &mut Rng) -> UserIdentity {
    let (first, last) = (FIRST[i % FIRST.len()], LAST[(i / FIRST.len()) % LAST.len()]);
    // Skewed: the first groups are the large ones.
    let pick = |rng: &mut Rng| GROUPS[((GROUPS.len() as f64) * rng.unit().powi(2)) as usize];
    let mut groups = vec![pick(rng).to_owned()];
    for p in [0.3, 0.1] {
        let g = pick(rng);
        if rng.unit() < p && !groups.iter().any(|x| x == g) {
            groups.push(g.to_owned());
        }
    }
    UserIdentity {
        sub: sub(i),
        email: Some(format!(
            "{}.{}{i}@corp.example",
            first.to_lowercase(),
            last.to_lowercase()
        )),
        name: Some(format!("{first} {last}")),
        groups,
    }
}

/// How long each part took, and what was written.
#[derive(Debug, Clone, Default)]
pub struct Seeded {
    pub people: usize,
    pub rows: usize,
    pub sessions: usize,
    pub limits: usize,
    pub spend_rows: usize,
    pub audit_rows: usize,
    pub people_time: Duration,
    pub limits_time: Duration,
    pub rows_time: Duration,
    pub spend_time: Duration,
    pub audit_time: Duration,
    /// Store size after seeding (SQLite: file and WAL; PostgreSQL: the database).
    pub bytes: u64,
}

impl Seeded {
    pub fn total(&self) -> Duration {
        self.people_time + self.limits_time + self.rows_time + self.spend_time + self.audit_time
    }
}

/// One `spend` row: person, period, window start (ms), spent micro-USD.
pub type SpendRow = (String, &'static str, i64, i64);

/// The directory and the limits, through the trait (`parallel` calls at once).
pub async fn people_and_limits(
    store: &Arc<dyn Store>,
    people: usize,
    parallel: usize,
    now: DateTime<Utc>,
    out: &mut Seeded,
) -> anyhow::Result<()> {
    let t = Instant::now();
    let mut rng = Rng(0x243f_6a88_85a3_08d3);
    let who: Vec<UserIdentity> = (0..people).map(|i| person(i, &mut rng)).collect();
    let written: Vec<_> = futures_util::stream::iter(who.into_iter().map(|w| {
        let store = store.clone();
        async move { store.upsert_principal(w, now).await }
    }))
    .buffer_unordered(parallel)
    .collect()
    .await;
    for r in written {
        r.context("writing the directory")?;
    }
    out.people = people;
    out.people_time = t.elapsed();
    let t = Instant::now();
    out.limits = limits(store.as_ref(), people, now).await?;
    out.limits_time = t.elapsed();
    Ok(())
}

async fn limits(store: &dyn Store, people: usize, now: DateTime<Utc>) -> anyhow::Result<usize> {
    const ACTOR: &str = "admin_key:bench-admin";
    let mut n = 0;
    for (period, cents) in [(Period::Daily, 5_000_000), (Period::Monthly, 50_000_000)] {
        store
            .upsert_limit(ScopeType::Organization, "", period, Some(cents), ACTOR, now)
            .await?;
        n += 1;
    }
    for (k, g) in GROUPS.iter().take(POOLED_GROUPS).enumerate() {
        let pooled = PooledBudget {
            amount_cents: 2_000_000 + 500_000 * k as i64,
            paused: k == POOLED_GROUPS - 1,
        };
        store
            .upsert_pooled_limit(g, Some(100_000), Some(pooled), ACTOR, now)
            .await?;
        n += 1;
    }
    for g in GROUPS.iter().skip(POOLED_GROUPS).take(DAILY_GROUPS) {
        store
            .upsert_limit(
                ScopeType::RbacGroup,
                g,
                Period::Daily,
                Some(5_000),
                ACTOR,
                now,
            )
            .await?;
        n += 1;
    }
    for i in (0..people).step_by(USER_LIMIT_EVERY) {
        let cents = 1_000 + (i as i64 % 7) * 1_000;
        store
            .upsert_limit(
                ScopeType::User,
                &sub(i),
                Period::Daily,
                Some(cents),
                ACTOR,
                now,
            )
            .await?;
        n += 1;
    }
    Ok(n)
}

/// [`AUDIT_ROWS`] rows of people's sessions revoked, spread over the 30 days.
pub async fn audit(
    store: &Arc<dyn Store>,
    people: usize,
    parallel: usize,
    now: DateTime<Utc>,
    out: &mut Seeded,
) -> anyhow::Result<()> {
    let t = Instant::now();
    let mut rng = Rng(0x1319_8a2e_0370_7344);
    let now_ms = now.timestamp_millis();
    let rows: Vec<AuditRow> = (0..AUDIT_ROWS)
        .map(|_| {
            let who = sub(rng.below(people));
            let at =
                DateTime::from_timestamp_millis(now_ms - rng.range(0, WINDOW_MS as u64) as i64)
                    .unwrap_or(now);
            AuditRow {
                id: new_id("spla"),
                at,
                actor: format!("oidc:{}", sub(rng.below(people.min(20)))),
                action: "user.sessions_revoke".to_owned(),
                limit_id: Some(who.clone()),
                before: None,
                after: Some(serde_json::json!({"user_id": who, "revoked_before": at.to_rfc3339()})),
            }
        })
        .collect();
    let written: Vec<_> = futures_util::stream::iter(rows.into_iter().map(|r| {
        let store = store.clone();
        async move { store.append_audit(r).await }
    }))
    .buffer_unordered(parallel)
    .collect()
    .await;
    for r in written {
        r.context("writing audit rows")?;
    }
    out.audit_rows = AUDIT_ROWS;
    out.audit_time = t.elapsed();
    Ok(())
}

/// A planned session: its id, person, model and upstream.
struct Session {
    id: String,
    person: u32,
    model: u8,
    upstream: u8,
}

/// The sessions and every row's (time, session), oldest first.
fn plan(rng: &mut Rng, people: usize, rows: usize, now_ms: i64) -> (Vec<Session>, Vec<(i64, u32)>) {
    // A few people use the gateway far more than most.
    let mut cumulative = Vec::with_capacity(people);
    let mut sum = 0.0;
    for _ in 0..people {
        sum += 0.05 + rng.unit().powi(3);
        cumulative.push(sum);
    }
    let mut sessions = Vec::new();
    let mut events = Vec::with_capacity(rows);
    while events.len() < rows {
        let x = rng.unit() * sum;
        let person = cumulative.partition_point(|c| *c < x).min(people - 1) as u32;
        let n = (rng.range(20, 50) as usize).min(rows - events.len());
        let gaps: Vec<i64> = (0..n).map(|_| rng.range(15_000, 120_000) as i64).collect();
        let span: i64 = gaps.iter().sum();
        let mut at =
            now_ms - WINDOW_MS + 60_000 + (rng.unit() * (WINDOW_MS - span - 120_000) as f64) as i64;
        let s = sessions.len() as u32;
        for g in gaps {
            events.push((at, s));
            at += g;
        }
        let r = rng.unit();
        sessions.push(Session {
            id: rng.uuid(),
            person,
            model: if r < 0.6 {
                0
            } else if r < 0.8 {
                1
            } else if r < 0.9 {
                2
            } else {
                3
            },
            upstream: if r < 0.85 {
                0
            } else if r < 0.95 {
                1
            } else {
                2
            },
        });
    }
    events.sort_unstable();
    (sessions, events)
}

/// Price per token in micro-USD: input, output, cache read, cache write.
fn prices(model: &str) -> [f64; 4] {
    match model {
        "claude-opus-4-1" => [15.0, 75.0, 1.5, 18.75],
        "claude-haiku-4-5" => [1.0, 5.0, 0.1, 1.25],
        _ => [3.0, 15.0, 0.3, 3.75],
    }
}

fn row(rng: &mut Rng, s: &Session, n: usize, at_ms: i64) -> UsageRecord {
    let model = MODELS[usize::from(s.model)];
    let failed = rng.unit() < 0.01;
    let (input, output, read, write) = if failed {
        (0, 0, 0, 0)
    } else {
        (
            rng.range(1, 600),
            rng.range(40, 2_000),
            rng.range(5_000, 120_000),
            rng.range(0, 4_000),
        )
    };
    let [pi, po, pr, pw] = prices(model);
    let cost = input as f64 * pi + output as f64 * po + read as f64 * pr + write as f64 * pw;
    let latency = rng.range(1_500, 60_000);
    UsageRecord {
        request_id: format!("req_console{n:010}"),
        row_key: (rng.next() >> 1).max(1) as i64,
        created_at: DateTime::from_timestamp_millis(at_ms).unwrap_or_default(),
        principal: sub(s.person as usize),
        endpoint: "messages".to_owned(),
        model: model.to_owned(),
        upstream: Some(UPSTREAMS[usize::from(s.upstream)].to_owned()),
        upstream_model: Some(model.to_owned()),
        status: if failed { 529 } else { 200 },
        route_reason: "primary: first healthy".to_owned(),
        stream: true,
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: read,
        cache_write_5m_tokens: write,
        cache_write_1h_tokens: 0,
        web_search_requests: 0,
        cost_micro_usd: cost.round() as u64,
        usage_source: if failed { "none" } else { "reported" }.to_owned(),
        latency_ms: latency,
        ttfb_ms: (!failed).then(|| rng.range(300, 3_000).min(latency)),
        client_disconnected: false,
        reservation_id: None,
        tags: ClientTags {
            session_id: Some(s.id.clone()),
            client: Some("claude-cli/2.1.337".to_owned()),
            request_class: Some("main"),
            ..ClientTags::default()
        },
    }
}

/// Writes `rows` usage rows (`parallel` batches in flight) and returns the spend rows they
/// imply; progress on stderr.
pub async fn usage(
    store: &Arc<dyn Store>,
    people: usize,
    rows: usize,
    parallel: usize,
    now: DateTime<Utc>,
    label: &str,
    out: &mut Seeded,
) -> anyhow::Result<Vec<SpendRow>> {
    let t = Instant::now();
    let mut rng = Rng(0x6a09_e667_f3bc_c908);
    let (sessions, events) = plan(&mut rng, people, rows, now.timestamp_millis());
    let mut daily: HashMap<(u32, i64), i64> = HashMap::new();
    let batches = events.chunks(BATCH).enumerate().map(|(b, chunk)| {
        let batch: Vec<UsageRecord> = chunk
            .iter()
            .enumerate()
            .map(|(k, &(at, s))| {
                let s = &sessions[s as usize];
                let r = row(&mut rng, s, b * BATCH + k, at);
                *daily.entry((s.person, at.div_euclid(DAY_MS))).or_default() +=
                    r.cost_micro_usd as i64;
                r
            })
            .collect();
        let store = store.clone();
        async move {
            store
                .insert_usage(Arc::new(batch))
                .await
                .map(|()| chunk.len())
        }
    });
    let mut inserted = futures_util::stream::iter(batches).buffer_unordered(parallel);
    let mut last_report = Instant::now();
    while let Some(n) = inserted.next().await {
        out.rows += n.context("inserting usage rows")?;
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "  console ({label}): {} of {rows} usage rows ({:.0} s)",
                out.rows,
                t.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
    }
    drop(inserted);
    out.sessions = sessions.len();
    out.rows_time = t.elapsed();
    Ok(spend_rows(&daily, now))
}

/// Daily rows as summed, and per person the weekly and monthly windows of those days.
fn spend_rows(daily: &HashMap<(u32, i64), i64>, now: DateTime<Utc>) -> Vec<SpendRow> {
    let mut wider: HashMap<(u32, &'static str, i64), i64> = HashMap::new();
    let mut out = Vec::with_capacity(daily.len() * 2);
    for (&(p, day), &spent) in daily {
        let at = DateTime::from_timestamp_millis(day * DAY_MS).unwrap_or(now);
        out.push((sub(p as usize), "daily", day * DAY_MS, spent));
        for period in [Period::Weekly, Period::Monthly] {
            let start = period.window(at).start.timestamp_millis();
            *wider.entry((p, period.as_str(), start)).or_default() += spent;
        }
    }
    out.extend(
        wider
            .into_iter()
            .map(|((p, period, start), spent)| (sub(p as usize), period, start, spent)),
    );
    out
}

/// Writes the spend rows into a SQLite file (the store closed), one transaction.
pub fn spend_sqlite(
    db: &std::path::Path,
    rows: &[SpendRow],
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    let mut c = rusqlite::Connection::open(db)?;
    c.busy_timeout(Duration::from_secs(30))?;
    let tx = c.transaction()?;
    {
        let mut st = tx.prepare(
            "INSERT INTO spend (principal, period, period_start, spent_micro, reserved_micro, updated_at)
             VALUES (?1, ?2, ?3, ?4, 0, ?5)",
        )?;
        for (p, period, start, spent) in rows {
            st.execute(rusqlite::params![
                p,
                period,
                start,
                spent,
                now.timestamp_millis()
            ])?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// Writes the spend rows into a PostgreSQL database, 20,000 rows a statement.
pub async fn spend_postgres(
    client: &tokio_postgres::Client,
    rows: &[SpendRow],
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    for chunk in rows.chunks(20_000) {
        let subs: Vec<&str> = chunk.iter().map(|r| r.0.as_str()).collect();
        let periods: Vec<&str> = chunk.iter().map(|r| r.1).collect();
        let starts: Vec<i64> = chunk.iter().map(|r| r.2).collect();
        let spent: Vec<i64> = chunk.iter().map(|r| r.3).collect();
        client
            .execute(
                "INSERT INTO spend (principal, period, period_start, spent_micro, reserved_micro, updated_at)
                 SELECT p, d, s, m, 0, $5 FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::bigint[])
                     AS t (p, d, s, m)",
                &[&subs, &periods, &starts, &spent, &now.timestamp_millis()],
            )
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_plan_has_sessions_of_20_to_50_in_the_window() {
        let now = 1_800_000_000_000;
        let (sessions, events) = plan(&mut Rng(3), 500, 50_000, now);
        assert_eq!(events.len(), 50_000);
        assert!(events.windows(2).all(|w| w[0] <= w[1]));
        assert!(events.iter().all(|e| e.0 > now - WINDOW_MS && e.0 <= now));
        let mut per = vec![0usize; sessions.len()];
        for e in &events {
            per[e.1 as usize] += 1;
        }
        assert!(per[..per.len() - 1].iter().all(|n| (20..=50).contains(n)));
        let people: std::collections::BTreeSet<u32> = sessions.iter().map(|s| s.person).collect();
        assert!(people.len() > 300, "{}", people.len());
        assert!(
            sessions
                .iter()
                .all(|s| gatehouse_engine::metering::tags::valid_id(s.id.as_bytes()))
        );
    }

    #[test]
    fn people_have_one_to_three_groups_and_the_needle_finds_some() {
        let mut rng = Rng(1);
        let people: Vec<UserIdentity> = (0..2_000).map(|i| person(i, &mut rng)).collect();
        assert!(people.iter().all(|p| (1..=3).contains(&p.groups.len())));
        assert!(people.iter().filter(|p| p.groups.len() > 1).count() > 400);
        let found = people
            .iter()
            .filter(|p| p.name.as_deref().unwrap().to_lowercase().contains(NEEDLE))
            .count();
        assert!((50..=120).contains(&found), "{found}");
    }

    #[test]
    fn spend_rows_sum_days_into_weeks_and_months() {
        let now = DateTime::from_timestamp_millis(1_800_000_000_000).unwrap();
        let day = 1_800_000_000_000 / DAY_MS;
        let daily = HashMap::from([((7u32, day), 10), ((7u32, day - 1), 5)]);
        let rows = spend_rows(&daily, now);
        assert_eq!(rows.iter().filter(|r| r.1 == "daily").count(), 2);
        let monthly: i64 = rows.iter().filter(|r| r.1 == "monthly").map(|r| r.3).sum();
        assert_eq!(monthly, 15);
        assert!(rows.iter().all(|r| r.0 == "u00007"));
    }
}
