//! Client disconnects at random points of a stream: whatever the point, once the gateway
//! has drained the upstream in the background, the charge recorded for the request (its
//! usage row and the settled reservation against a cap) equals the cost of the usage the
//! fake upstream reported for it, output tokens of the final `message_delta` included.
//!
//! The points come from a seeded RNG; the seed is printed (set `SPEND_DISCONNECT_SEED` to
//! replay one).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use fake_upstream::{FakeConfig, Fault};
use futures_util::StreamExt;
use gatehouse_engine::deps::Clock;
use gatehouse_engine::spend::{GroupMode, Standing};
use gatehouse_tests::{
    SESSION_SECRET_A, SignInGateway, reported_usage, sign_in_gateway, wait_until,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

const WRITE_KEY: &str = "admin-write-key-0123456789abcdef0123456789";
const ADMIN: &str =
    "admin:\n  write_keys: [{id: ops, key: admin-write-key-0123456789abcdef0123456789}]\n";
const MODEL: &str = "claude-sonnet-4-6";
const SUB: &str = "dora";
const POINTS: usize = 20;
/// Every wait below gives up after this long.
const DEADLINE: Duration = Duration::from_secs(30);
/// How long the upstream holds its answer for the "before any response byte" point; far
/// longer than the test, so an answer never comes while the test looks.
const HANG_MS: u64 = 600_000;

/// Where the client goes away.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// The upstream has the request but holds its answer: the client leaves before the
    /// first response byte, while the gateway is still routing.
    BeforeResponse,
    /// The response head arrived; no body byte was read.
    AfterHead,
    /// At least this many SSE events arrived (1: right after `message_start`).
    AfterEvents(usize),
    /// At least this many body bytes arrived.
    AfterBytes(usize),
}

/// A stream of random length and usage, paced so that it is still running when the
/// client leaves.
fn random_answer(rng: &mut StdRng) -> FakeConfig {
    FakeConfig {
        output_tokens: rng.random_range(3..=40),
        input_tokens: rng.random_range(1..=3000),
        cache_read_input_tokens: rng.random_range(0..=5000),
        cache_creation_5m_tokens: rng.random_range(0..=2000),
        cache_creation_1h_tokens: rng.random_range(0..=2000),
        web_search_requests: rng.random_range(0..=3),
        first_token_delay_ms: 10,
        token_interval_ms: 10,
        ..FakeConfig::default()
    }
}

/// The fixed points first, then random ones over events and bytes of this answer.
fn cut_for(i: usize, answer: &FakeConfig, rng: &mut StdRng) -> Cut {
    // message_start, content_block_start, ping, the deltas, content_block_stop,
    // message_delta, message_stop.
    let events = answer.output_tokens as usize + 6;
    match i {
        0 => Cut::BeforeResponse,
        1 => Cut::AfterHead,
        2 => Cut::AfterEvents(1),
        // Up to the event before `message_stop`: the final usage is always still to come
        // or just arrived.
        _ if rng.random_bool(0.5) => Cut::AfterEvents(rng.random_range(2..events)),
        // A delta event is over 100 bytes, so this stays inside the stream.
        _ => Cut::AfterBytes(rng.random_range(1..=events * 60)),
    }
}

fn seed() -> u64 {
    std::env::var("SPEND_DISCONNECT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

/// The caller's daily standing (the first of daily, weekly, monthly).
async fn daily(s: &SignInGateway) -> Standing {
    let standings =
        s.gw.handle
            .store()
            .standings(SUB, &[], GroupMode::Min, s.clock.now())
            .await
            .unwrap();
    standings.into_iter().next().unwrap()
}

/// Sends the request and leaves at `cut`.
async fn run_until_cut(s: &SignInGateway, req: reqwest::RequestBuilder, cut: Cut, tag: &str) {
    match cut {
        Cut::BeforeResponse => {
            s.gw.fake
                .push_fault(Fault::HangBeforeHeaders { ms: HANG_MS });
            let task = tokio::spawn(req.send());
            let fake = &s.gw.fake;
            wait_until("the upstream received the request", || async {
                fake.requests()
                    .iter()
                    .any(|r| r.body["metadata"]["user_id"] == tag)
            })
            .await;
            task.abort();
            assert!(task.await.unwrap_err().is_cancelled());
        }
        Cut::AfterHead => {
            let r = tokio::time::timeout(DEADLINE, req.send())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(r.status(), 200);
            drop(r);
        }
        Cut::AfterEvents(want) | Cut::AfterBytes(want) => {
            let r = tokio::time::timeout(DEADLINE, req.send())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(r.status(), 200);
            let mut body = r.bytes_stream();
            let mut seen = Vec::new();
            loop {
                let got = match cut {
                    Cut::AfterEvents(_) => seen.windows(2).filter(|w| w == b"\n\n").count(),
                    _ => seen.len(),
                };
                if got >= want {
                    break;
                }
                match tokio::time::timeout(DEADLINE, body.next()).await.unwrap() {
                    Some(chunk) => seen.extend_from_slice(&chunk.unwrap()),
                    None => break,
                }
            }
        }
    }
}

#[tokio::test]
async fn the_charge_equals_the_reported_usage_wherever_the_client_leaves() {
    let seed = seed();
    println!("spend_disconnect seed: {seed} (replay with SPEND_DISCONNECT_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed);
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    // A cap binds the caller, so every request holds a reservation that must settle.
    let r =
        s.gw.client
            .post(s.gw.url("/v1/organizations/spend_limits"))
            .header("x-api-key", WRITE_KEY)
            .json(&json!({"scope": {"type": "user", "user_id": SUB}, "amount": "100000", "period": "daily"}))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    let token = gatehouse_tests::session_token(&s.origin, SUB, "dora@corp.example", &[]);
    let pricing = &s.gw.handle.gateway().pricing;
    let store = s.gw.handle.store();
    let mut total = 0u64;
    for i in 0..POINTS {
        let mut answer = random_answer(&mut rng);
        let cut = cut_for(i, &answer, &mut rng);
        // The early cuts wait a while for the first token, so the gateway is surely still
        // streaming when the client leaves and has to drain the rest in the background.
        let early = matches!(cut, Cut::AfterHead | Cut::AfterEvents(1));
        if early {
            answer.first_token_delay_ms = 1000;
        }
        let tag = format!("disc-{i:02}");
        s.gw.fake.set_config(answer.clone());
        let before = daily(&s).await;
        let body = json!({
            "model": MODEL,
            "max_tokens": 1024,
            "stream": true,
            "metadata": {"user_id": tag},
            "messages": [{"role": "user", "content": "hello"}]
        });
        let req =
            s.gw.client
                .post(s.gw.url("/v1/messages"))
                .bearer_auth(&token)
                .header("x-client-request-id", &tag)
                .json(&body);
        run_until_cut(&s, req, cut, &tag).await;
        // The background drain (or the release of an unused reservation) settles it.
        wait_until("the reservation settled", || async {
            store.open_reservations().await.unwrap().is_empty()
        })
        .await;
        let after = daily(&s).await;
        let charged = store.usage_cost(&tag).await.unwrap();
        let expected = match gatehouse_tests::stream_for(&s.gw.fake, &tag) {
            Some(record) => {
                // Drained to the end: the upstream sent its final usage.
                assert!(
                    record.completed,
                    "{tag} ({cut:?}): upstream stream not finished"
                );
                let usage = reported_usage(&record, &answer);
                assert_eq!(usage.output_tokens, u64::from(answer.output_tokens));
                Some(pricing.cost_micro_usd(MODEL, &usage).0)
            }
            // The upstream never answered, so it reported nothing: nothing is charged.
            None => None,
        };
        if early {
            let event =
                s.gw.events
                    .named("inference")
                    .into_iter()
                    .find(|e| e["request_id"] == tag.as_str())
                    .unwrap();
            assert_eq!(event["client_disconnected"], true, "{event}");
            assert_eq!(event["usage_source"], "reported", "{event}");
        }
        println!("{tag}: {cut:?} -> charged {charged:?}, reported usage costs {expected:?}");
        assert_eq!(charged, expected, "{tag} ({cut:?}): usage row");
        if before.reset == after.reset {
            assert_eq!(
                after.spent_micro - before.spent_micro,
                expected.unwrap_or(0),
                "{tag} ({cut:?}): charge against the cap"
            );
        }
        assert_eq!(after.reserved_micro, 0);
        total += expected.unwrap_or(0);
    }
    let rows = store.recent_usage(1000).await.unwrap();
    assert_eq!(
        rows.iter().map(|r| r.cost_micro_usd).sum::<u64>(),
        total,
        "no other charge"
    );
}
