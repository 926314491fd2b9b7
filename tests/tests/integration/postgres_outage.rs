//! Issue 35, PostgreSQL going away under load: two replicas on a throwaway cluster of this
//! test's own ([`LocalCluster`], never the shared one of `scripts/postgres.sh`), steady
//! traffic from three callers the whole time — a capped person (`alice`, a cap far away),
//! a person whose cap is tight (`bo`, reached during the drill) and a client key
//! (uncapped, but matched by an operator traffic limit so its admission asks the store) —
//! and `/readyz` polled on both replicas. The drill: `pg_ctl stop -m fast` and start,
//! `pg_ctl stop -m immediate` and start, then a 10 s pause (SIGSTOP to the postmaster and
//! each of its children, SIGCONT after: the server answers nothing while the kernel still accepts
//! connections, as with dropped packets; no network namespace).
//!
//! While the store is away (from the moment both replicas answer `/readyz` 503 until it is
//! back): `/readyz` is 503 on both (`store.readiness_grace_seconds: 0`), capped inference
//! is refused with the fail-closed 429 (`spend limit unavailable`,
//! `enforcement.fail_closed_on_error: true`), the client key is served: its operator limit
//! cannot be counted and `rate_limits.fail_closed: false` (the default) lets it through
//! (`enforcement` governs spend caps only, so it does not apply to a caller with none).
//! Nothing panics and no request fails at the transport. Afterwards both replicas are
//! ready again without a restart (bounded), every request the fake upstream received has
//! exactly one usage row (none lost, none doubled) and was answered 200, no cap is
//! exceeded, the books balance and no reservation is left open.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gatehouse_engine::spend::GroupMode;
use gatehouse_tests::caps::{ADMIN, set_limit, token};
use gatehouse_tests::pg_cluster::LocalCluster;
use gatehouse_tests::{CLIENT_KEY, replicas};
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Caller {
    /// `alice`: a cap she never reaches.
    Capped,
    /// `bo`: a cap of a few cents, reached during the drill.
    Tight,
    /// The client key.
    Uncapped,
}

/// `alice`'s and `bo`'s daily caps, in cents.
const ALICE_CAP_CENTS: u64 = 100_000;
const BO_CAP_CENTS: u64 = 2;

#[derive(Debug, Clone)]
struct Answer {
    caller: Caller,
    replica: usize,
    tag: String,
    /// Since the drill's start.
    sent: Duration,
    done: Duration,
    /// 0: no HTTP answer at all.
    status: u16,
    body: String,
}

#[derive(Debug, Clone, Copy)]
struct Probe {
    replica: usize,
    sent: Duration,
    done: Duration,
    status: u16,
}

struct Drill {
    t0: Instant,
    /// `t0` in milliseconds since the epoch (the store's times).
    wall0: i64,
    answers: Mutex<Vec<Answer>>,
    probes: Mutex<Vec<Probe>>,
    stop: AtomicBool,
    next: AtomicUsize,
    client: reqwest::Client,
    urls: [String; 2],
}

impl Drill {
    fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    fn answers(&self) -> Vec<Answer> {
        self.answers.lock().unwrap().clone()
    }

    fn probes(&self) -> Vec<Probe> {
        self.probes.lock().unwrap().clone()
    }

    /// When every replica has answered a probe sent at or after `since` with `status`:
    /// the latest of their first such answers.
    fn all_probed(&self, since: Duration, status: u16) -> Option<Duration> {
        let probes = self.probes();
        let mut latest = Duration::ZERO;
        for replica in 0..2 {
            let first = probes
                .iter()
                .filter(|p| p.replica == replica && p.sent >= since && p.status == status)
                .map(|p| p.done)
                .min()?;
            latest = latest.max(first);
        }
        Some(latest)
    }

    /// Whether `caller` was answered 200 on every replica for a request sent at or after
    /// `since`.
    fn served_on_both(&self, caller: Caller, since: Duration) -> bool {
        let answers = self.answers();
        (0..2).all(|replica| {
            answers.iter().any(|a| {
                a.caller == caller && a.replica == replica && a.sent >= since && a.status == 200
            })
        })
    }
}

/// One caller's steady traffic, alternating replicas, until the drill stops.
async fn traffic(d: Arc<Drill>, caller: Caller, bearer: Option<String>) {
    let mut i = 0usize;
    while !d.stop.load(Ordering::SeqCst) {
        let replica = i % 2;
        i += 1;
        let tag = format!("drill-{}", d.next.fetch_add(1, Ordering::SeqCst));
        let body = json!({"model": "claude-sonnet-4-6", "max_tokens": 256, "stream": false,
            "messages": [{"role": "user", "content": tag}]});
        let req = d
            .client
            .post(format!("{}/v1/messages", d.urls[replica]))
            .header("x-client-request-id", &tag)
            .header("anthropic-version", "2023-06-01")
            .json(&body);
        let req = match &bearer {
            Some(t) => req.bearer_auth(t),
            None => req.header("x-api-key", CLIENT_KEY),
        };
        let sent = d.now();
        let (status, body) = match req.send().await {
            Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
            Err(e) => (0, e.to_string()),
        };
        let done = d.now();
        d.answers.lock().unwrap().push(Answer {
            caller,
            replica,
            tag,
            sent,
            done,
            status,
            body,
        });
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
}

/// `/readyz` on one replica every 100 ms until the drill stops.
async fn probe(d: Arc<Drill>, replica: usize) {
    while !d.stop.load(Ordering::SeqCst) {
        let sent = d.now();
        let status = match d
            .client
            .get(format!("{}/readyz", d.urls[replica]))
            .send()
            .await
        {
            Ok(r) => r.status().as_u16(),
            Err(_) => 0,
        };
        let done = d.now();
        d.probes.lock().unwrap().push(Probe {
            replica,
            sent,
            done,
            status,
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `check` every 50 ms until it gives a value; panics naming `what` after `bound`,
/// with the probes and answers since `since`.
async fn within<T>(
    d: &Drill,
    what: &str,
    since: Duration,
    bound: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if Instant::now() >= deadline {
            let probes: Vec<Probe> = d.probes().into_iter().filter(|p| p.done >= since).collect();
            let answers: Vec<(Caller, usize, Duration, Duration, u16)> = d
                .answers()
                .into_iter()
                .filter(|a| a.done >= since)
                .map(|a| (a.caller, a.replica, a.sent, a.done, a.status))
                .collect();
            panic!(
                "{what} within {bound:?} (now {:?}); probes since {since:?}: {probes:?}; answers: {answers:?}",
                d.now()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    Stop(&'static str),
    Pause,
}

#[derive(Debug)]
struct Window {
    name: &'static str,
    fault: Duration,
    /// Both replicas answered 503.
    unready: Duration,
    /// The store was given back.
    restore: Duration,
    /// Both replicas answered 200 again.
    ready: Duration,
}

impl Window {
    /// Sent once both replicas were unready and answered before the store came back.
    fn holds(&self, sent: Duration, done: Duration) -> bool {
        sent >= self.unready && done <= self.restore
    }

    fn around(&self, sent: Duration, done: Duration) -> bool {
        done >= self.fault && sent <= self.ready
    }
}

/// Usage rows by request id: how many each has.
async fn usage_rows(pg: &tokio_postgres::Client) -> BTreeMap<String, i64> {
    pg.query(
        "SELECT request_id, count(*) FROM usage_events GROUP BY request_id",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|row| (row.get::<_, String>(0), row.get::<_, i64>(1)))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_restarts_and_pauses_under_load_fail_closed_and_recover_exactly() {
    let panics = Arc::new(AtomicUsize::new(0));
    let counted = panics.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        counted.fetch_add(1, Ordering::SeqCst);
        previous(info);
    }));

    let cluster = Arc::new(tokio::task::block_in_place(LocalCluster::start));
    let store = format!(
        "store: {{postgres_url: \"{}\", max_connections: 8, readiness_grace_seconds: 0}}",
        cluster.url()
    );
    let extra = format!(
        "{ADMIN}enforcement: {{fail_closed_on_error: true}}\n\
         rate_limits:\n  inference: [{{match: {{client_keys: [tester]}}, rpm: 100000}}]\n  fail_closed: false\n"
    );
    let r = replicas::start(2, |_| store.clone(), &extra).await;
    let urls = [r.replicas[0].url.clone(), r.replicas[1].url.clone()];
    for (sub, cents) in [("alice", ALICE_CAP_CENTS), ("bo", BO_CAP_CENTS)] {
        set_limit(
            &r.client,
            &urls[0],
            json!({"scope": {"type": "user", "user_id": sub}, "amount": cents.to_string(), "period": "daily"}),
        )
        .await;
    }
    let drill = Arc::new(Drill {
        t0: Instant::now(),
        wall0: chrono::Utc::now().timestamp_millis(),
        answers: Mutex::default(),
        probes: Mutex::default(),
        stop: AtomicBool::new(false),
        next: AtomicUsize::new(0),
        client: reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap(),
        urls: urls.clone(),
    });
    let mut tasks = vec![
        tokio::spawn(traffic(
            drill.clone(),
            Caller::Capped,
            Some(token(&r.origin, "alice", &[])),
        )),
        tokio::spawn(traffic(
            drill.clone(),
            Caller::Tight,
            Some(token(&r.origin, "bo", &[])),
        )),
        tokio::spawn(traffic(drill.clone(), Caller::Uncapped, None)),
    ];
    for replica in 0..2 {
        tasks.push(tokio::spawn(probe(drill.clone(), replica)));
    }
    within(
        &drill,
        "steady traffic served on both replicas",
        Duration::ZERO,
        Duration::from_secs(20),
        || {
            (drill.served_on_both(Caller::Capped, Duration::ZERO)
                && drill.served_on_both(Caller::Uncapped, Duration::ZERO))
            .then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let drills = [
        ("fast shutdown", Fault::Stop("fast"), Duration::from_secs(3)),
        (
            "immediate shutdown",
            Fault::Stop("immediate"),
            Duration::from_secs(3),
        ),
        ("paused 10 s", Fault::Pause, Duration::from_secs(10)),
    ];
    let mut windows = Vec::new();
    for (name, fault, hold) in drills {
        let at = drill.now();
        tokio::task::block_in_place(|| match fault {
            Fault::Stop(mode) => cluster.stop(mode),
            Fault::Pause => cluster.pause(),
        });
        let unready = within(
            &drill,
            &format!("{name}: /readyz 503 on both replicas"),
            at,
            Duration::from_secs(15),
            || drill.all_probed(at, 503),
        )
        .await;
        // Hold the outage for `hold` from the fault, and at least 2 s of it unready.
        let until = (at + hold).max(unready + Duration::from_secs(2));
        tokio::time::sleep(until.saturating_sub(drill.now())).await;
        let restore = drill.now();
        tokio::task::block_in_place(|| match fault {
            Fault::Stop(_) => cluster.start_again(),
            Fault::Pause => cluster.resume(),
        });
        let ready = within(
            &drill,
            &format!("{name}: both replicas ready again without a restart"),
            restore,
            Duration::from_secs(30),
            || drill.all_probed(restore, 200),
        )
        .await;
        within(
            &drill,
            &format!("{name}: capped inference served again on both replicas"),
            restore,
            Duration::from_secs(20),
            || drill.served_on_both(Caller::Capped, restore).then_some(()),
        )
        .await;
        windows.push(Window {
            name,
            fault: at,
            unready,
            restore,
            ready,
        });
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    drill.stop.store(true, Ordering::SeqCst);
    for t in tasks {
        t.await.unwrap();
    }
    let answers = drill.answers();
    let probes = drill.probes();

    // A summary for the log (and the report).
    for w in &windows {
        let mut by: BTreeMap<(Caller, u16), usize> = BTreeMap::new();
        let mut slowest: BTreeMap<Caller, Duration> = BTreeMap::new();
        for a in answers.iter().filter(|a| w.around(a.sent, a.done)) {
            *by.entry((a.caller, a.status)).or_default() += 1;
            let took = a.done - a.sent;
            let s = slowest.entry(a.caller).or_default();
            *s = (*s).max(took);
        }
        eprintln!(
            "{}: fault at {:?}, both unready at {:?}, restored at {:?}, both ready at {:?}; \
             answers around it {by:?}; slowest {slowest:?}",
            w.name, w.fault, w.unready, w.restore, w.ready
        );
    }

    // No request went unanswered, and the uncapped caller was never refused.
    let unanswered: Vec<&Answer> = answers.iter().filter(|a| a.status == 0).collect();
    assert!(unanswered.is_empty(), "no HTTP answer: {unanswered:#?}");
    let refused: Vec<&Answer> = answers
        .iter()
        .filter(|a| a.caller == Caller::Uncapped && a.status != 200)
        .collect();
    assert!(
        refused.is_empty(),
        "rate_limits.fail_closed: false serves the client key: {refused:#?}"
    );
    for a in answers.iter().filter(|a| a.caller != Caller::Uncapped) {
        assert!(
            a.status == 200 || a.status == 429,
            "capped caller answered {}: {a:?}",
            a.status
        );
    }

    for w in &windows {
        // /readyz: 503 on both, the whole time.
        for replica in 0..2 {
            let during: Vec<&Probe> = probes
                .iter()
                .filter(|p| p.replica == replica && w.holds(p.sent, p.done))
                .collect();
            assert!(!during.is_empty(), "{}: replica {replica} probed", w.name);
            let ready: Vec<&&Probe> = during.iter().filter(|p| p.status != 503).collect();
            assert!(ready.is_empty(), "{}: /readyz while down {ready:?}", w.name);
        }
        // Capped inference fails closed.
        let capped: Vec<&Answer> = answers
            .iter()
            .filter(|a| a.caller == Caller::Capped && w.holds(a.sent, a.done))
            .collect();
        assert!(!capped.is_empty(), "{}: capped traffic while down", w.name);
        for a in &capped {
            assert_eq!(a.status, 429, "{}: capped while down {a:?}", w.name);
            let v: Value = serde_json::from_str(&a.body).unwrap_or_default();
            let message = v["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.starts_with("spend limit unavailable"),
                "{}: {a:?}",
                w.name
            );
        }
        for a in answers
            .iter()
            .filter(|a| a.caller == Caller::Tight && w.holds(a.sent, a.done))
        {
            assert_eq!(a.status, 429, "{}: tight cap while down {a:?}", w.name);
        }
        // The client key is served while the store is away (fail open), not only after.
        let served = answers
            .iter()
            .filter(|a| a.caller == Caller::Uncapped && w.holds(a.sent, a.done))
            .count();
        if matches!(w.name, "fast shutdown" | "immediate shutdown") {
            assert!(served > 0, "{}: the client key served while down", w.name);
        }
    }

    // Accounting. What the upstream received, by tag.
    let mut upstream: BTreeMap<String, usize> = BTreeMap::new();
    for req in r.fake.requests() {
        if let Some(tag) = req.body["messages"][0]["content"].as_str() {
            *upstream.entry(tag.to_owned()).or_default() += 1;
        }
    }
    let twice: Vec<_> = upstream.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "sent upstream more than once: {twice:?}");
    let answered: BTreeSet<String> = answers
        .iter()
        .filter(|a| a.status == 200)
        .map(|a| a.tag.clone())
        .collect();
    let upstream_tags: BTreeSet<String> = upstream.keys().cloned().collect();
    assert_eq!(
        upstream_tags.symmetric_difference(&answered).count(),
        0,
        "what the upstream served is what was answered 200"
    );

    // Every one of them has exactly one usage row, once the recorders have caught up.
    let pg = gatehouse_tests::postgres::connect(&cluster.url()).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut stored = usage_rows(&pg).await;
    while upstream_tags.iter().any(|t| !stored.contains_key(t)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        stored = usage_rows(&pg).await;
    }
    let by_tag: BTreeMap<&str, &Answer> = answers.iter().map(|a| (a.tag.as_str(), a)).collect();
    let doubled: Vec<_> = stored.iter().filter(|(_, n)| **n > 1).collect();
    let lost: Vec<_> = upstream_tags
        .iter()
        .filter(|t| !stored.contains_key(*t))
        .map(|t| {
            let a = by_tag[t.as_str()];
            let window = windows
                .iter()
                .find(|w| w.around(a.sent, a.done))
                .map_or("steady", |w| w.name);
            (t.clone(), a.caller, a.replica, a.sent, a.done, window)
        })
        .collect();
    let unknown: Vec<_> = stored
        .keys()
        .filter(|t| !upstream_tags.contains(*t))
        .collect();
    eprintln!(
        "upstream served {}, usage rows {}, doubled {}, lost {}, rows without an upstream request {}",
        upstream_tags.len(),
        stored.len(),
        doubled.len(),
        lost.len(),
        unknown.len()
    );
    assert!(doubled.is_empty(), "usage rows doubled: {doubled:?}");
    assert!(lost.is_empty(), "usage rows lost: {lost:#?}");
    assert!(
        unknown.is_empty(),
        "usage rows of nothing served: {unknown:?}"
    );

    // No reservation left open (leases are released once idle; releases the store
    // refused are retried).
    let open = || async {
        pg.query_one(
            "SELECT count(*) FROM reservations WHERE state = 'open'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while open().await > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let states: Vec<(String, i64)> = pg
        .query(
            "SELECT state, count(*) FROM reservations GROUP BY state ORDER BY state",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    eprintln!("reservations by state: {states:?}");
    let left: Vec<String> = pg
        .query(
            "SELECT id, principal, request_id, created_at, amount_micro, owner_key \
             FROM reservations WHERE state = 'open'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| {
            let at = row.get::<_, i64>(3) - drill.wall0;
            format!(
                "{} of {} (request {}) made at {:.3} s for {} micro-USD, owner lock {}",
                row.get::<_, String>(0),
                row.get::<_, String>(1),
                row.get::<_, String>(2),
                at as f64 / 1000.0,
                row.get::<_, i64>(4),
                row.get::<_, i32>(5)
            )
        })
        .collect();
    assert!(
        left.is_empty(),
        "reservations left open: {left:#?}; windows {windows:#?}"
    );
    let estimated = states
        .iter()
        .find(|(s, _)| s == "estimated")
        .map_or(0, |(_, n)| *n);

    // No cap exceeded, and each person's spend is what their rows cost.
    let store = r.replicas[1].handle.store();
    for (sub, cap_cents) in [("alice", ALICE_CAP_CENTS), ("bo", BO_CAP_CENTS)] {
        let st = store
            .standings(sub, &[], GroupMode::Min, chrono::Utc::now())
            .await
            .unwrap();
        let cost: i64 = pg
            .query_one(
                "SELECT COALESCE(sum(cost_micro_usd), 0)::BIGINT FROM usage_events WHERE principal = $1",
                &[&format!("user:{sub}")],
            )
            .await
            .unwrap()
            .get(0);
        eprintln!(
            "{sub}: spent {} micro-USD of a {cap_cents}-cent cap, rows cost {cost}",
            st[0].spent_micro
        );
        assert!(
            st[0].spent_micro <= cap_cents * 10_000,
            "{sub} spent {} past the cap {cap_cents} cents",
            st[0].spent_micro
        );
        assert_eq!(st[0].reserved_micro, 0, "{sub}: nothing held");
        if estimated == 0 {
            assert_eq!(st[0].spent_micro, cost as u64, "{sub}: the books balance");
        }
    }
    let bo_refused = answers
        .iter()
        .filter(|a| a.caller == Caller::Tight && a.body.contains("spend_limit_reached"))
        .count();
    eprintln!("bo refused at the cap {bo_refused} times");

    // Both replicas are up and ready (no restart), and nothing panicked.
    for url in &urls {
        let r = drill
            .client
            .get(format!("{url}/readyz"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    assert_eq!(panics.load(Ordering::SeqCst), 0, "panics during the drill");
    r.shutdown().await;
    drop(cluster);
}
