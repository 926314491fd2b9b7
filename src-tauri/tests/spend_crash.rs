//! Crash: the real `gatehouse serve` process is killed with SIGKILL while streams hold
//! reservations against a cap; restarted on the same SQLite file, it reconciles them and
//! the books balance against what the fake upstream reported.
//!
//! Before the kill: two streams finished (charged their reported usage), four are
//! mid-stream (one of them a retry reusing a finished request's `x-client-request-id`),
//! one waits for upstream headers, and one more is refused because the open reservations
//! fill the cap. A usage row and its settlement are one transaction, so a request the
//! crash interrupted has neither; at restart each of its reservations is charged its
//! reserved worst case with a `spend.reservation_estimated` event (the upstream may have
//! served it), nothing is charged twice, the total never passes the cap, and the next
//! request is refused: crashing the gateway cannot lift a cap.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_upstream::{FakeConfig, FakeUpstream, Fault};
use gatehouse_engine::metering::pricing::Pricing;
use gatehouse_engine::spend::GroupMode;
use gatehouse_engine::store::{SqliteStore, Store};
use gatehouse_tests::{IDP_CLIENT_ID, IDP_CLIENT_SECRET, Idp, OPERATOR_KEY, SESSION_SECRET_A};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

const WRITE_KEY: &str = "admin-write-key-0123456789abcdef0123456789";
/// The gateway's public origin: the issuer of its session tokens.
const ORIGIN: &str = "http://localhost";
const MODEL: &str = "claude-sonnet-4-6";
const MAX_TOKENS: u64 = 1024;
const SUB: &str = "dana";
/// Every wait below gives up after this long.
const DEADLINE: Duration = Duration::from_secs(60);
/// Requests the cap admits at once on top of the finished ones (4 streams + 1 waiting).
const HELD: u64 = 5;
const DONE: [&str; 2] = ["crash-done-0", "crash-done-1"];
/// Mid-stream at the kill, as (tag, request id): the last is a retry of `DONE[0]` with the
/// same `x-client-request-id`.
const LIVE: [(&str, &str); 4] = [
    ("crash-live-0", "crash-live-0"),
    ("crash-live-1", "crash-live-1"),
    ("crash-live-2", "crash-live-2"),
    ("crash-live-3", DONE[0]),
];
const HANG: &str = "crash-hang-0";
const OVER: &str = "crash-over-0";

/// A finished answer with every kind of usage (unpaced).
fn finished(input: u32, output: u32, read: u32, five: u32, hour: u32, web: u32) -> FakeConfig {
    FakeConfig {
        input_tokens: input,
        output_tokens: output,
        cache_read_input_tokens: read,
        cache_creation_5m_tokens: five,
        cache_creation_1h_tokens: hour,
        web_search_requests: web,
        ..FakeConfig::default()
    }
}

/// A stream that lasts a minute: it is surely running when the gateway is killed.
fn endless() -> FakeConfig {
    FakeConfig {
        token_interval_ms: 200,
        ..finished(300, 300, 200, 100, 50, 1)
    }
}

/// Same length for every tag of the same length, so every worst case is the same.
fn body(tag: &str) -> Value {
    json!({
        "model": MODEL,
        "max_tokens": MAX_TOKENS,
        "stream": true,
        "metadata": {"user_id": tag},
        "messages": [{"role": "user", "content": "word ".repeat(400)}]
    })
}

/// A running `gatehouse serve` and the lines of its stderr.
struct Serve {
    child: Child,
    base: String,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Serve {
    async fn start(config: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gatehouse"))
            .args(["serve", "--config", config.to_str().unwrap()])
            .env_clear()
            // The fake upstream is on loopback: the reference's switch allows it.
            .env("CLAUDE_GATEWAY_ALLOW_LOOPBACK", "1")
            .env("PATH", "/usr/bin:/bin")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let sink = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                sink.lock().unwrap().push(line);
            }
        });
        let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(DEADLINE, stdout.next_line())
            .await
            .expect("gatehouse serve printed its address in time")
            .unwrap()
            .unwrap_or_else(|| panic!("gatehouse serve exited: {:?}", stderr.lock().unwrap()));
        let base = line
            .strip_prefix("gatehouse: listening on ")
            .expect("listening line")
            .to_owned();
        let serve = Self {
            child,
            base,
            stderr,
        };
        // Reconciliation runs before `gateway.start`: once that line is read, so are its.
        serve
            .wait("the gateway.start event", |s| {
                !s.events("gateway.start").is_empty()
            })
            .await;
        serve
    }

    /// The JSON event lines named `evt`.
    fn events(&self, evt: &str) -> Vec<Value> {
        self.stderr
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["evt"] == evt)
            .collect()
    }

    async fn wait(&self, what: &str, check: impl Fn(&Self) -> bool) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while !check(self) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "gave up waiting for {what}; stderr: {:?}",
                self.stderr.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

struct Caller {
    http: reqwest::Client,
    token: String,
}

impl Caller {
    /// [`SUB`], signed in, after a daily cap of `cap_cents` is set for them on `serve`.
    async fn with_daily_cap(serve: &Serve, cap_cents: u64) -> Self {
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let r = http
            .post(format!("{}/v1/organizations/spend_limits", serve.base))
            .header("x-api-key", WRITE_KEY)
            .json(&json!({"scope": {"type": "user", "user_id": SUB}, "amount": cap_cents.to_string(), "period": "daily"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        Caller {
            http,
            token: gatehouse_tests::session_token(ORIGIN, SUB, "dana@corp.example", &[]),
        }
    }

    /// A stream tagged `tag` (the fake records it) with request id `id`.
    fn messages(&self, serve: &Serve, tag: &str, id: &str) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}/v1/messages", serve.base))
            .bearer_auth(&self.token)
            .header("x-client-request-id", id)
            .json(&body(tag))
    }

    /// Daily `spent_micro_usd` and `reserved_micro_usd` as the gateway reports them.
    async fn daily(&self, serve: &Serve) -> (u64, u64) {
        let me: Value = self
            .http
            .get(format!("{}/v1/me/spend", serve.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let daily = &me["periods"][0];
        assert_eq!(daily["period"], "daily", "{me}");
        (
            daily["spent_micro_usd"].as_u64().unwrap(),
            daily["reserved_micro_usd"].as_u64().unwrap(),
        )
    }

    /// Waits until the daily standing is `want` (spent, reserved).
    async fn wait_daily(&self, serve: &Serve, want: (u64, u64)) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let got = self.daily(serve).await;
            if got == want {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "daily standing {got:?}, expected {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// One whole stream with `answer`; returns the cost of the usage the fake reported.
    async fn finish(
        &self,
        serve: &Serve,
        fake: &FakeUpstream,
        pricing: &Pricing,
        tag: &str,
        answer: FakeConfig,
    ) -> u64 {
        fake.set_config(answer.clone());
        let r = self.messages(serve, tag, tag).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let text = tokio::time::timeout(DEADLINE, r.text())
            .await
            .unwrap()
            .unwrap();
        assert!(text.contains("event: message_stop"), "{text}");
        let record = gatehouse_tests::stream_for(fake, tag).unwrap();
        assert!(record.completed);
        let usage = gatehouse_tests::reported_usage(&record, &answer);
        pricing.cost_micro_usd(MODEL, &usage).0
    }
}

/// Caps reset at 00:00 UTC; a run never spans that moment (it takes seconds), so it waits
/// for it when it is less than two minutes away.
async fn clear_of_midnight() {
    let now = chrono::Utc::now();
    let midnight = (now.date_naive() + chrono::Days::new(1))
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc();
    let left = (midnight - now).to_std().unwrap_or_default();
    if left < Duration::from_secs(120) {
        tokio::time::sleep(left + Duration::from_secs(1)).await;
    }
}

/// The gateway's config: sessions from `idp`, caps on, SQLite at `db`.
fn config_yaml(fake: &FakeUpstream, idp: &Idp, db: &Path) -> String {
    format!(
        r#"
listen: {{host: 127.0.0.1, port: 0, public_url: "{ORIGIN}"}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - {{name: primary, provider: anthropic, base_url: "{fake}", auth: {{api_key: "{OPERATOR_KEY}"}}}}
session: {{jwt_secret: ["{SESSION_SECRET_A}"], ttl_hours: 1}}
oidc:
  issuer: "{issuer}"
  client_id: {IDP_CLIENT_ID}
  client_secret: {IDP_CLIENT_SECRET}
  allow_loopback: true
admin:
  write_keys: [{{id: ops, key: {WRITE_KEY}}}]
"#,
        db = db.display(),
        fake = fake.url(),
        issuer = idp.issuer,
    )
}

/// Reads a 200 stream until `n` text deltas have arrived.
async fn read_deltas(r: reqwest::Response, n: usize) -> reqwest::Response {
    assert_eq!(r.status(), 200);
    let mut r = r;
    let mut seen = String::new();
    while seen.matches("event: content_block_delta").count() < n {
        let chunk = tokio::time::timeout(DEADLINE, r.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    r
}

/// Streams open at the kill in the fault drill.
const DRILL_STREAMS: usize = 500;

/// Fault drill: `kill -9` with 500 streams open. Every one of them reached the upstream;
/// after the restart every one is accounted (the spend leases they were admitted under are
/// charged what they held, at least each stream's worst case, flagged estimated), nothing
/// stays reserved and the cap is not exceeded.
#[tokio::test]
async fn kill_9_with_500_streams_open_accounts_for_every_one() {
    clear_of_midnight().await;
    let fake = FakeUpstream::start(endless()).await.unwrap();
    let idp = Idp::start(&format!("{ORIGIN}/oauth/callback")).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gatehouse.db");
    let yaml = config_yaml(&fake, &idp, &db);
    let config_path = dir.path().join("gateway.yaml");
    std::fs::write(&config_path, &yaml).unwrap();
    let pricing = Pricing::new(gatehouse_tests::load(&yaml, dir.path()).pricing);
    let worst = gatehouse_engine::spend::worst_case_micro(
        &pricing,
        &gatehouse_engine::metering::pricing::PricedAs::model(MODEL),
        serde_json::to_vec(&body("drill-000")).unwrap().len(),
        Some(MAX_TOKENS),
        &Default::default(),
    );
    let streams = DRILL_STREAMS as u64;
    // Room for every stream and ten more, not for twice as many.
    let cap_cents = ((streams + 10) * worst).div_ceil(10_000);
    let mut first = Serve::start(&config_path).await;
    let caller = Caller::with_daily_cap(&first, cap_cents).await;
    // Opened in waves, so no listen queue overflows; each read to its first delta.
    let mut open = Vec::with_capacity(DRILL_STREAMS);
    for wave in 0..DRILL_STREAMS / 50 {
        let started = (0..50).map(|i| {
            let tag = format!("drill-{:03}", wave * 50 + i);
            let send = caller.messages(&first, &tag, &tag).send();
            async move { read_deltas(send.await.unwrap(), 1).await }
        });
        open.extend(futures_util::future::join_all(started).await);
    }
    assert_eq!(
        fake.requests().len(),
        DRILL_STREAMS,
        "each reached the upstream"
    );
    // The spend leases they were admitted under hold at least their worst cases, within
    // the cap.
    let (spent, held) = caller.daily(&first).await;
    assert_eq!(spent, 0);
    assert!(held >= streams * worst, "{held} < {streams} × {worst}");
    assert!(held <= cap_cents * 10_000, "the cap holds");

    first.child.kill().await.unwrap();
    tokio::time::timeout(DEADLINE, first.child.wait())
        .await
        .unwrap()
        .unwrap();
    drop(open);

    let second = Serve::start(&config_path).await;
    // Every open lease is charged what it held (so every stream its worst case at least),
    // flagged estimated.
    let estimated = second.events("spend.reservation_estimated");
    assert!(!estimated.is_empty() && estimated.len() <= DRILL_STREAMS);
    let total: u64 = estimated
        .iter()
        .map(|e| e["charged_micro_usd"].as_u64().unwrap())
        .sum();
    assert_eq!(total, held);
    assert_eq!(caller.daily(&second).await, (total, 0));
    assert!(total <= cap_cents * 10_000, "the cap holds");
    let store = SqliteStore::open(&db, chrono::Utc::now()).unwrap();
    assert!(store.open_reservations().await.unwrap().is_empty());
    drop(idp);
}

#[tokio::test]
async fn kill_9_mid_stream_then_the_books_balance_after_restart() {
    clear_of_midnight().await;
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let idp = Idp::start(&format!("{ORIGIN}/oauth/callback")).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gatehouse.db");
    let yaml = config_yaml(&fake, &idp, &db);
    let config_path = dir.path().join("gateway.yaml");
    std::fs::write(&config_path, &yaml).unwrap();
    // The gateway's own price table, from the same config.
    let pricing = Pricing::new(gatehouse_tests::load(&yaml, dir.path()).pricing);
    let worst = gatehouse_engine::spend::worst_case_micro(
        &pricing,
        &gatehouse_engine::metering::pricing::PricedAs::model(MODEL),
        serde_json::to_vec(&body(OVER)).unwrap().len(),
        Some(MAX_TOKENS),
        &Default::default(),
    );
    let done = [
        (DONE[0], finished(420, 37, 600, 120, 80, 2)),
        (DONE[1], finished(55, 300, 0, 0, 700, 0)),
    ];
    let expected_done: Vec<u64> = done
        .iter()
        .map(|(_, a)| {
            let usage = gatehouse_engine::metering::usage::Usage {
                input_tokens: a.input_tokens.into(),
                output_tokens: a.output_tokens.into(),
                cache_read_tokens: a.cache_read_input_tokens.into(),
                cache_write_5m_tokens: a.cache_creation_5m_tokens.into(),
                cache_write_1h_tokens: a.cache_creation_1h_tokens.into(),
                web_search_requests: a.web_search_requests.into(),
            };
            pricing.cost_micro_usd(MODEL, &usage).0
        })
        .collect();
    let spent_before_crash: u64 = expected_done.iter().sum();
    // The cap fits the finished spend plus HELD worst cases, and not one more.
    let cap_cents = (spent_before_crash + HELD * worst).div_ceil(10_000);
    assert!(
        cap_cents * 10_000 < spent_before_crash + (HELD + 1) * worst,
        "test premise: worst case {worst} is more than a cent"
    );

    let mut first = Serve::start(&config_path).await;
    let caller = Caller::with_daily_cap(&first, cap_cents).await;

    // Two streams finish and are charged what the fake reported.
    for ((tag, answer), expected) in done.iter().zip(&expected_done) {
        let cost = caller
            .finish(&first, &fake, &pricing, tag, answer.clone())
            .await;
        assert_eq!(cost, *expected);
    }
    caller.wait_daily(&first, (spent_before_crash, 0)).await;

    // Four streams are mid-stream (two deltas received) ...
    fake.set_config(endless());
    let mut live = Vec::new();
    for (tag, id) in LIVE {
        let r = caller.messages(&first, tag, id).send().await.unwrap();
        live.push(read_deltas(r, 2).await);
    }
    // ... one waits for the upstream's headers ...
    fake.push_fault(Fault::HangBeforeHeaders { ms: 600_000 });
    let waiting = tokio::spawn(caller.messages(&first, HANG, HANG).send());
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !fake
        .requests()
        .iter()
        .any(|r| r.body["metadata"]["user_id"] == HANG)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{HANG} never reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // ... and their reservations fill the cap: one more is refused before any upstream.
    assert_eq!(
        caller.daily(&first).await,
        (spent_before_crash, HELD * worst)
    );
    let upstream_calls = fake.requests().len();
    let r = caller.messages(&first, OVER, OVER).send().await.unwrap();
    assert_eq!(r.status(), 429);
    let refusal: Value = r.json().await.unwrap();
    assert_eq!(refusal["error"]["type"], "billing_error");
    assert_eq!(fake.requests().len(), upstream_calls);

    // kill -9.
    first.child.kill().await.unwrap();
    let status = tokio::time::timeout(DEADLINE, first.child.wait())
        .await
        .unwrap()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "{status}");
    drop(live);
    waiting.abort();
    // Only the finished requests were recorded; the fake never sent the final usage of
    // the interrupted ones.
    let recorded: Vec<Value> = first
        .events("inference")
        .iter()
        .map(|e| e["request_id"].clone())
        .collect();
    assert_eq!(recorded, DONE);
    for (tag, _) in LIVE {
        assert!(!gatehouse_tests::stream_for(&fake, tag).unwrap().completed);
    }
    assert!(gatehouse_tests::stream_for(&fake, HANG).is_none());

    // Restart on the same database: every interrupted reservation is charged its worst
    // case, with its event; the retry is not settled from the usage of the request whose
    // id it reused.
    let mut second = Serve::start(&config_path).await;
    let estimated = second.events("spend.reservation_estimated");
    let mut estimated_tags: Vec<&str> = estimated
        .iter()
        .map(|e| e["request_id"].as_str().unwrap())
        .collect();
    estimated_tags.sort_unstable();
    assert_eq!(
        estimated_tags,
        [DONE[0], HANG, LIVE[0].1, LIVE[1].1, LIVE[2].1],
        "{estimated:?}"
    );
    let mut reservations: Vec<&str> = estimated
        .iter()
        .map(|e| e["reservation"].as_str().unwrap())
        .collect();
    reservations.sort_unstable();
    reservations.dedup();
    assert_eq!(reservations.len(), LIVE.len() + 1);
    assert!(estimated.iter().all(|e| e["charged_micro_usd"] == worst));
    let total = spent_before_crash + HELD * worst;
    assert_eq!(
        caller.daily(&second).await,
        (total, 0),
        "the finished requests plus each interrupted one's worst case; nothing held"
    );
    assert!(total <= cap_cents * 10_000);

    // The estimates fill the cap: the next request is refused before any upstream.
    let upstream_calls = fake.requests().len();
    let r = caller
        .messages(&second, "crash-post-0", "crash-post-0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(fake.requests().len(), upstream_calls);

    // Stop it and read the books directly.
    let _ = Command::new("kill")
        .args(["-TERM", &second.child.id().unwrap().to_string()])
        .status()
        .await;
    tokio::time::timeout(DEADLINE, second.child.wait())
        .await
        .unwrap()
        .unwrap();
    let store = SqliteStore::open(&db, chrono::Utc::now()).unwrap();
    assert!(store.open_reservations().await.unwrap().is_empty());
    for ((tag, _), cost) in done.iter().zip(&expected_done) {
        assert_eq!(store.usage_cost(tag).await.unwrap(), Some(*cost), "{tag}");
    }
    for id in [LIVE[0].1, LIVE[1].1, LIVE[2].1, HANG, OVER, "crash-post-0"] {
        assert_eq!(store.usage_cost(id).await.unwrap(), None, "{id}");
    }
    let standings = store
        .standings(SUB, &[], GroupMode::Min, chrono::Utc::now())
        .await
        .unwrap();
    for s in &standings {
        assert_eq!(
            (s.spent_micro, s.reserved_micro),
            (total, 0),
            "{:?}",
            s.period
        );
    }
    drop(idp);
}
