//! Inference traffic limits (`rate_limits.inference`, the per-key concurrency): a refusal
//! is a 429 `rate_limit_error` with `retry-after` and the unified headers that never
//! reaches the upstream; the first matching rule applies; tokens are corrected at
//! settlement; a concurrency slot is held for the whole stream and freed at its end or
//! when the client leaves; two replicas on one PostgreSQL share one budget exactly; and
//! Claude Code (the CLI) refused by a limit backs off and succeeds when it reopens.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use fake_upstream::FakeConfig;
use gatehouse_tests::caps::{infer, token};
use gatehouse_tests::postgres::TestDatabase;
use gatehouse_tests::replicas::{self, Replicas};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, sonnet};
use serde_json::{Value, json};

const READ_KEY: &str = "metrics-read-key-0123456789abcdef0123";

async fn gateway(fake: FakeConfig, rate_limits: &str) -> TestGateway {
    let rate_limits = rate_limits.to_owned();
    TestGateway::start_with(fake, move |url: &str, db: &Path| {
        format!(
            r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - {{name: primary, provider: anthropic, base_url: "{url}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
client_keys: [{{id: tester, key: "{CLIENT_KEY}"}}]
admin: {{read_keys: [{{id: prom, key: "{READ_KEY}"}}]}}
metrics: {{listen: "127.0.0.1:0"}}
rate_limits: {rate_limits}
"#,
            db = db.display()
        )
    })
    .await
}

/// A stream that lasts about `ms` milliseconds.
fn paced(ms: u64) -> FakeConfig {
    FakeConfig {
        output_tokens: u32::try_from(ms / 50).unwrap(),
        first_token_delay_ms: 10,
        token_interval_ms: 50,
        ..FakeConfig::default()
    }
}

/// `GET /metrics` on the separate listener (`metrics.listen`), which needs no key.
async fn scrape(gw: &TestGateway) -> String {
    let addr = gw.handle.metrics_addr().unwrap();
    let r = gw
        .client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.text().await.unwrap()
}

/// Sends until the answer is not a 429 (a freed slot may take a moment to be seen).
async fn eventually_admitted(gw: &TestGateway, body: Value) -> reqwest::Response {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = gw.messages(body.clone()).send().await.unwrap();
        if r.status() != 429 || Instant::now() > deadline {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_rpm_refusal_is_a_429_with_retry_after_that_reaches_no_upstream() {
    let gw = gateway(FakeConfig::default(), "{inference: [{rpm: 2}]}").await;
    for _ in 0..2 {
        let r = gw.messages(sonnet(false)).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    let r = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(r.status(), 429);
    let h = r.headers().clone();
    let retry: u64 = h["retry-after"].to_str().unwrap().parse().unwrap();
    // Two requests a minute: the next token comes within 30 s.
    assert!((1..=30).contains(&retry), "retry-after {retry}");
    assert_eq!(h["x-should-retry"], "true");
    assert_eq!(h["anthropic-ratelimit-unified-status"], "rejected");
    let reset: i64 = h["anthropic-ratelimit-unified-reset"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(reset > chrono::Utc::now().timestamp() - 1);
    assert_eq!(h["anthropic-ratelimit-requests-limit"], "2");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "rate_limit_error");
    assert!(v["error"]["message"].as_str().unwrap().contains("rpm"));
    assert_eq!(
        gw.fake.requests().len(),
        2,
        "the refused request reached no upstream"
    );
    let blocked = gw.events.named("ratelimit.blocked");
    assert_eq!(blocked.len(), 1);
    assert_eq!(blocked[0]["kind"], "rpm");
    assert_eq!(blocked[0]["rule"], "rate_limits.inference[0]");
    // Two usage rows: the refusal never reached routing.
    assert_eq!(gw.usage_rows(2).await.len(), 2);

    // The OpenAI front door is limited by the same budget and answers in its envelope.
    let r = gw
        .client
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .json(&json!({"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().contains_key("retry-after"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "rate_limit_exceeded");

    // Prometheus: the refusals by kind, no principal in any label.
    let text = gw
        .client
        .get(gw.url("/metrics"))
        .header("x-api-key", READ_KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("gatehouse_rate_limit_refusals_total{kind=\"rpm\"} 2"),
        "{text}"
    );
    assert!(!text.contains("tester"), "no key id in the labels");
    // No caps here: nothing is reserved.
    assert!(text.contains("gatehouse_open_reservations 0\n"), "{text}");
    // Store operations are timed by name (usage rows were written).
    assert!(
        text.contains("gatehouse_store_operation_seconds_count{op=\"insert_usage\"}"),
        "{text}"
    );
}

#[tokio::test]
async fn a_slot_is_held_for_the_whole_stream_and_freed_at_its_end_or_on_disconnect() {
    let gw = gateway(paced(1500), "{client_key_concurrency: 1}").await;
    // A stream in flight holds the key's only slot.
    let first = gw.messages(sonnet(true)).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let r = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "1");
    let blocked = gw.events.named("ratelimit.blocked");
    assert_eq!(blocked[0]["kind"], "concurrent");
    assert_eq!(blocked[0]["rule"], "client_key_default");
    assert_eq!(gw.fake.requests().len(), 1);
    let text = scrape(&gw).await;
    assert!(
        text.contains("gatehouse_concurrency_slots_in_use 1\n"),
        "{text}"
    );
    assert!(text.contains("gatehouse_rate_limit_refusals_total{kind=\"concurrent\"} 1"));
    // The metrics listener serves nothing else.
    let addr = gw.handle.metrics_addr().unwrap();
    let other = gw
        .client
        .get(format!("http://{addr}/v1/models"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 404);
    // Read to its end: the slot is free again.
    first.bytes().await.unwrap();
    let r = eventually_admitted(&gw, sonnet(false)).await;
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap();

    // A client that leaves mid-stream frees its slot too (long before the stream's end).
    gw.fake.set_config(paced(20_000));
    let left = gw.messages(sonnet(true)).send().await.unwrap();
    assert_eq!(left.status(), 200);
    let r = gw.messages(sonnet(true)).send().await.unwrap();
    assert_eq!(r.status(), 429, "the slot is held while the stream runs");
    let started = Instant::now();
    drop(left);
    let r = eventually_admitted(&gw, sonnet(false)).await;
    assert_eq!(r.status(), 200);
    assert!(started.elapsed() < Duration::from_secs(10));
    r.bytes().await.unwrap();
    let text = scrape(&gw).await;
    assert!(
        text.contains("gatehouse_concurrency_slots_in_use 0\n"),
        "{text}"
    );
}

#[tokio::test]
async fn tokens_are_charged_from_the_estimate_and_corrected_at_settlement() {
    // An estimate of about 537 tokens (max_tokens 500 and the body's bytes / 4) fits
    // once into 1000; only the correction to the real usage lets a second one in.
    let small = FakeConfig {
        input_tokens: 10,
        output_tokens: 20,
        ..FakeConfig::default()
    };
    let gw = gateway(small, "{inference: [{tpm: 1000}]}").await;
    let body = json!({"model": "claude-sonnet-4-6", "max_tokens": 500, "stream": false,
        "messages": [{"role": "user", "content": "hello there, how are you doing today? ".repeat(3)}]});
    let r = gw.messages(body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap();
    gw.usage_rows(1).await;
    // Settled at 30 tokens: the rest came back.
    let r = gw.messages(body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200, "the correction gave the estimate back");
    r.bytes().await.unwrap();
    gw.usage_rows(2).await;
    // This one uses far more than its estimate: the settlement takes the difference.
    gw.fake.set_config(FakeConfig {
        input_tokens: 900,
        output_tokens: 20,
        ..FakeConfig::default()
    });
    let r = gw.messages(body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap();
    gw.usage_rows(3).await;
    let r = gw.messages(body).send().await.unwrap();
    assert_eq!(
        r.status(),
        429,
        "920 tokens used leave less than an estimate"
    );
    let v: Value = r.json().await.unwrap();
    assert!(v["error"]["message"].as_str().unwrap().contains("tpm"));
    assert_eq!(gw.fake.requests().len(), 3);
}

#[tokio::test]
async fn the_first_matching_rule_applies_and_the_catch_all_takes_the_rest() {
    let extra = "rate_limits:\n  inference:\n    - {match: {groups: [interns]}, rpm: 1}\n    - {match: {users: [Carol@corp.example]}, rpm: 2}\n    - {rpm: 3}\n";
    let r = replicas::start(
        1,
        |dir| format!("store: {{sqlite_path: \"{}\"}}", dir.join("g.db").display()),
        extra,
    )
    .await;
    let url = &r.replicas[0].url;
    let body = gatehouse_tests::caps::msg(16);
    let admitted = |who: String| {
        let (client, url, body) = (r.client.clone(), url.clone(), body.clone());
        async move {
            let mut n = 0;
            for _ in 0..5 {
                if infer(&client, &url, &who, &body).await.status() == 200 {
                    n += 1;
                }
            }
            n
        }
    };
    // An intern who is also in engineering: the interns rule comes first.
    assert_eq!(
        admitted(token(&r.origin, "ivy", &["interns", "engineering"])).await,
        1
    );
    assert_eq!(
        admitted(token(&r.origin, "carol", &["engineering"])).await,
        2
    );
    assert_eq!(admitted(token(&r.origin, "dan", &["engineering"])).await, 3);
    // Each person has their own bucket under a rule.
    assert_eq!(
        admitted(token(&r.origin, "erin", &["engineering"])).await,
        3
    );
    assert_eq!(r.fake.requests().len(), 9);
    r.shutdown().await;
}

/// Slots rows on PostgreSQL (none left when every answer ended).
async fn slot_rows(db: &TestDatabase) -> i64 {
    let c = gatehouse_tests::postgres::connect(&db.url).await;
    c.query_one("SELECT count(*) FROM limit_slots", &[])
        .await
        .unwrap()
        .get(0)
}

async fn fire(r: &Replicas, who: &str, n: usize, stream: bool) -> Vec<reqwest::Response> {
    let mut body = gatehouse_tests::caps::msg(64);
    body["stream"] = stream.into();
    futures_util::future::join_all((0..n).map(|i| {
        let replica = &r.replicas[i % r.replicas.len()];
        infer(&r.client, &replica.url, who, &body)
    }))
    .await
}

/// Slots the replicas hold now (their gauge).
fn slots_held(r: &Replicas) -> i64 {
    r.replicas
        .iter()
        .map(|x| x.handle.gateway().limits.slots_in_use())
        .sum()
}

/// A burst against one rpm budget, then one against one concurrency budget, spread over
/// the replicas: exactly the limit is admitted each time, and every slot is freed.
async fn shared_budget(r: &Replicas, db: Option<&TestDatabase>) {
    let alice = token(&r.origin, "alice", &["engineering"]);
    let results = fire(r, &alice, 60, false).await;
    let admitted = results.iter().filter(|x| x.status() == 200).count();
    assert_eq!(admitted, 12, "exactly the burst, across the replicas");
    assert!(
        results
            .iter()
            .all(|x| [200, 429].contains(&x.status().as_u16()))
    );
    for (k, replica) in r.replicas.iter().enumerate() {
        assert!(
            !replica.events.named("ratelimit.blocked").is_empty(),
            "replica {k} refused some"
        );
        assert!(replica.events.named("limits.unavailable").is_empty());
    }
    assert_eq!(
        r.fake.requests().len(),
        12,
        "refused requests reached no upstream"
    );
    drop(results);

    // Concurrency: streams that outlast the burst hold their slots.
    r.fake.set_config(paced(3000));
    let bob = token(&r.origin, "bob", &["oncall"]);
    let results = fire(r, &bob, 30, true).await;
    let (open, refused): (Vec<_>, Vec<_>) = results.into_iter().partition(|x| x.status() == 200);
    assert_eq!(
        open.len(),
        5,
        "exactly the concurrency limit, across the replicas"
    );
    assert!(refused.iter().all(|x| x.status() == 429));
    assert_eq!(slots_held(r), 5);
    if let Some(db) = db {
        assert_eq!(slot_rows(db).await, 5);
    }
    // One client leaves, the others read to the end: every slot is freed.
    let mut open = open.into_iter();
    drop(open.next());
    for x in open {
        x.bytes().await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while slots_held(r) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(slots_held(r), 0, "every slot freed");
    if let Some(db) = db {
        while slot_rows(db).await > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(slot_rows(db).await, 0, "every slot row deleted");
    }
    let again = fire(r, &bob, 1, false).await;
    assert_eq!(again[0].status(), 200);
}

/// rpm 1 with a burst of 12: a burst admits exactly 12 (the next token is a minute
/// away); 5 streams at once for the on-call group.
const SHARED: &str = "rate_limits:\n  inference:\n    - {match: {groups: [oncall]}, concurrent: 5}\n    - {match: {groups: [engineering]}, rpm: 1, burst: 12}\n";

#[tokio::test]
async fn two_postgres_replicas_share_one_rpm_and_concurrency_budget_exactly() {
    let db = TestDatabase::create().await;
    let r = replicas::start(2, |_| db.store_yaml(), SHARED).await;
    assert!(
        r.replicas
            .iter()
            .all(|x| x.handle.store().backend() == "postgres")
    );
    shared_budget(&r, Some(&db)).await;
    r.shutdown().await;
}

#[tokio::test]
async fn one_sqlite_gateway_admits_exactly_its_budget_under_a_burst() {
    let r = replicas::start(
        1,
        |dir| format!("store: {{sqlite_path: \"{}\"}}", dir.join("g.db").display()),
        SHARED,
    )
    .await;
    shared_budget(&r, None).await;
    r.shutdown().await;
}

#[tokio::test]
async fn daily_tokens_refuse_until_the_next_utc_day() {
    let used = FakeConfig {
        input_tokens: 500,
        output_tokens: 20,
        ..FakeConfig::default()
    };
    let gw = gateway(used, "{inference: [{daily_tokens: 600}]}").await;
    let r = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap();
    gw.usage_rows(1).await;
    // 520 of 600 used: the next request's estimate does not fit today.
    let r = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(r.status(), 429);
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (1..=60).contains(&retry),
        "retry-after {retry} is capped at a minute"
    );
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("daily_tokens")
    );
    assert_eq!(gw.fake.requests().len(), 1);
}

#[tokio::test]
async fn claude_code_backs_off_on_a_rate_limit_and_succeeds_when_the_window_reopens() {
    // A bucket of one refilled every 3 s, emptied before Claude Code starts: its first
    // request is refused with `retry-after: 3`, and its own retry gets through.
    let gw = gateway(
        FakeConfig {
            reply_text: "LIMITS-OK".into(),
            ..FakeConfig::default()
        },
        "{inference: [{match: {client_keys: [tester]}, rpm: 20, burst: 1}]}",
    )
    .await;
    let r = gw.messages(sonnet(false)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap();
    let answer = gatehouse_tests::claude_answer(
        "claude -p",
        "Reply with the magic words.",
        &[
            ("ANTHROPIC_BASE_URL", gw.handle.base_url().as_str()),
            ("ANTHROPIC_AUTH_TOKEN", CLIENT_KEY),
        ],
    )
    .await;
    assert!(answer.contains("LIMITS-OK"), "{answer}");
    let blocked = gw.events.named("ratelimit.blocked");
    assert!(!blocked.is_empty(), "Claude Code met the limit");
    assert!(
        blocked
            .iter()
            .all(|b| b["retry_after"].as_u64().unwrap() <= 3)
    );
    // Every refusal stayed at the gateway: the upstream saw only admitted requests.
    gw.usage_rows(2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let admitted = gw.handle.store().recent_usage(100).await.unwrap().len();
    assert_eq!(gw.fake.requests().len(), admitted);
}

/// Takes a slot of a key that allows two, through `store`'s limit rows.
async fn admit(
    store: &gatehouse_engine::store::PostgresStore,
    id: &str,
) -> gatehouse_engine::limits::Verdict {
    use gatehouse_engine::store::Store;
    let slot = gatehouse_engine::limits::SlotDraw {
        key: "r0:concurrent:key:ci".into(),
        limit: 2,
        id: id.into(),
        per_replica: false,
    };
    store
        .limit_rows()
        .unwrap()
        .limit_admit(vec![], Some(slot), chrono::Utc::now().timestamp_millis())
        .await
        .unwrap()
}

#[tokio::test]
async fn slots_of_a_gateway_that_is_gone_are_freed_by_the_others_never_a_live_ones() {
    use gatehouse_engine::store::{PostgresStore, Store};
    let db = TestDatabase::create().await;
    let now = chrono::Utc::now();
    let live = PostgresStore::open(&db.config(), now).await.unwrap();
    let gone = PostgresStore::open(&db.config(), now).await.unwrap();
    assert!(admit(&live, "a").await.admitted);
    assert!(admit(&gone, "b").await.admitted);
    assert!(!admit(&live, "c").await.admitted, "two slots, both held");
    // The second gateway dies (its ownership lock is released with its session).
    drop(gone);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        live.limit_rows().unwrap().limit_reap(0).await.unwrap();
        if slot_rows(&db).await == 1 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(slot_rows(&db).await, 1, "the live gateway's slot stays");
    assert!(
        admit(&live, "d").await.admitted,
        "the dead gateway's slot was freed"
    );
}

/// A client key's default slot on PostgreSQL: counted in each replica's memory (no slot
/// row, no statement), so each replica admits the default for the key.
#[tokio::test]
async fn the_per_key_default_slot_is_counted_per_replica_without_a_database_row() {
    let db = TestDatabase::create().await;
    let extra = "rate_limits: {client_key_concurrency: 1}\n";
    let r = replicas::start(2, |_| db.store_yaml(), extra).await;
    r.fake.set_config(paced(3000));
    let mut body = gatehouse_tests::caps::msg(64);
    body["stream"] = true.into();
    let send = |k: usize| {
        r.client
            .post(format!("{}/v1/messages", r.replicas[k].url))
            .header("x-api-key", CLIENT_KEY)
            .json(&body)
            .send()
    };
    let held = send(0).await.unwrap();
    assert_eq!(held.status(), 200);
    let refused = send(0).await.unwrap();
    assert_eq!(
        refused.status(),
        429,
        "the key's one slot on replica 0 is held"
    );
    let blocked = r.replicas[0].events.named("ratelimit.blocked");
    assert_eq!(blocked[0]["rule"], "client_key_default");
    let other = send(1).await.unwrap();
    assert_eq!(other.status(), 200, "replica 1 counts its own");
    assert_eq!(slot_rows(&db).await, 0, "no slot row was written");
    assert_eq!(slots_held(&r), 2);
    drop((held, other));
    let deadline = Instant::now() + Duration::from_secs(10);
    while slots_held(&r) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(slots_held(&r), 0, "both slots freed when the clients left");
    let again = send(0).await.unwrap();
    assert_eq!(again.status(), 200);
    r.shutdown().await;
}

/// The store cannot answer for an operator's limit (its admission function is gone):
/// by default the request goes through, with `rate_limits.fail_closed: true` it is
/// refused with a 503; a `limits.unavailable` event says which either way.
#[tokio::test]
async fn a_store_that_cannot_answer_lets_through_or_refuses_as_configured() {
    for closed in [false, true] {
        let db = TestDatabase::create().await;
        let extra = format!("{SHARED}  fail_closed: {closed}\n");
        let r = replicas::start(1, |_| db.store_yaml(), &extra).await;
        let alice = token(&r.origin, "alice", &["engineering"]);
        let ok = infer(
            &r.client,
            &r.replicas[0].url,
            &alice,
            &gatehouse_tests::caps::msg(64),
        )
        .await;
        assert_eq!(ok.status(), 200);
        let c = gatehouse_tests::postgres::connect(&db.url).await;
        c.batch_execute(
            "ALTER FUNCTION gatehouse_limit_admit RENAME TO gatehouse_limit_admit_gone",
        )
        .await
        .unwrap();
        let resp = infer(
            &r.client,
            &r.replicas[0].url,
            &alice,
            &gatehouse_tests::caps::msg(64),
        )
        .await;
        let status = resp.status().as_u16();
        let body: serde_json::Value = resp.json().await.unwrap_or_default();
        let events = r.replicas[0].events.named("limits.unavailable");
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["fail_closed"], closed);
        if closed {
            assert_eq!(status, 503, "{body}");
            assert_eq!(
                body["error"]["message"],
                "traffic limits unavailable; try again shortly"
            );
        } else {
            assert_eq!(status, 200, "{body}");
        }
        r.shutdown().await;
    }
}
