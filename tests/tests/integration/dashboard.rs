//! The dashboard: its JSON snapshot against the store after real requests through the
//! gateway, refusals with the layer that refused, the detail rule behind a trusted proxy,
//! upstream health from real outcomes, the live event stream, the page under its CSP, and
//! the UI itself in headless Chromium (Playwright), which also takes the screenshots in
//! `docs/screenshots/` when the test runs with `GATEHOUSE_SCREENSHOTS=1`. Prompt cache
//! health after a real cache break is in [`prompt_cache`].

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod prompt_cache;

use std::time::Duration;

use fake_upstream::{FakeConfig, Fault};
use gatehouse_engine::identity::LOCAL_SUBJECT;
use gatehouse_engine::spend::{GroupMode, windows};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, base_yaml, load, sonnet};
use serde_json::{Value, json};

const WRITE_KEY: &str = "admin-write-key-0123456789abcdef0123456789";
const READ_KEY: &str = "admin-read-key-0123456789abcdef01234567890";
const ADMIN: &str = "admin:\n  write_keys: [{id: ops, key: admin-write-key-0123456789abcdef0123456789}]\n  read_keys: [{id: audit, key: admin-read-key-0123456789abcdef01234567890}]\n";
const CONTRACT_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Every request costs real money at the fake's usage: 120k input and 400 output tokens.
fn pricey() -> FakeConfig {
    FakeConfig {
        input_tokens: 120_000,
        output_tokens: 400,
        ..FakeConfig::default()
    }
}

/// A gateway with spend caps on and the per-install local key (as the desktop runs it).
async fn desktop_like(fake: FakeConfig, listen: Option<&str>) -> (TestGateway, String) {
    let fake = fake_upstream::FakeUpstream::start(fake).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut yaml = base_yaml(&fake.url(), &dir.path().join("gatehouse.db")) + ADMIN;
    if let Some(listen) = listen {
        yaml = yaml.replace("listen: {host: 127.0.0.1, port: 0}", listen);
    }
    let mut config = load(&yaml, dir.path());
    config.local_key = true;
    let gw = TestGateway::start_config(config, fake, dir).await;
    let key = gw
        .handle
        .issued_local_key()
        .expect("a fresh store issues the local key")
        .expose()
        .to_owned();
    (gw, key)
}

async fn infer(gw: &TestGateway, key: &str, body: Value) -> reqwest::Response {
    gw.client
        .post(gw.url("/v1/messages"))
        .header("x-api-key", key)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn drain(r: reqwest::Response) -> u16 {
    let status = r.status().as_u16();
    let _ = r.bytes().await;
    status
}

async fn snapshot(gw: &TestGateway, headers: &[(&str, &str)]) -> Value {
    let mut req = gw.client.get(gw.url("/gatehouse/api/dashboard"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    r.json().await.unwrap()
}

fn model(name: &str) -> Value {
    json!({"model": name, "max_tokens": 256, "messages": [{"role": "user", "content": "hello"}]})
}

fn totals_json(t: &gatehouse_engine::store::UsageTotals) -> Value {
    json!({"requests": t.requests, "input_tokens": t.input_tokens, "output_tokens": t.output_tokens, "cost_micro_usd": t.cost_micro_usd})
}

#[tokio::test]
async fn snapshot_matches_the_store_and_blocks_name_their_layer() {
    let (gw, local) = desktop_like(pricey(), None).await;
    let before = snapshot(&gw, &[]).await;
    assert_eq!(before["server"]["mode"], "server");
    assert_eq!(before["server"]["store"], "sqlite");
    assert_eq!(before["server"]["ready"], true);
    assert_eq!(before["upstreams"][0]["state"], "unknown");
    assert_eq!(before["usage"]["today"]["requests"], 0);
    assert_eq!(before["meters"][0]["limit_micro_usd"], Value::Null);
    assert_eq!(before["prompt_cache"], json!([]));
    assert_eq!(before["cache_breaks"], json!([]));

    // A $1 daily budget on the local key (a `user` cap on its subject; amounts in cents).
    let r = gw
        .client
        .post(gw.url("/v1/organizations/spend_limits"))
        .header("x-api-key", WRITE_KEY)
        .json(&json!({"scope": {"type": "user", "user_id": LOCAL_SUBJECT}, "amount": "100", "period": "daily"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    assert_eq!(drain(infer(&gw, &local, sonnet(false)).await).await, 200);
    assert_eq!(drain(infer(&gw, &local, sonnet(true)).await).await, 200);
    assert_eq!(
        drain(infer(&gw, CLIENT_KEY, model("claude-haiku-4-5")).await).await,
        200
    );
    gw.usage_rows(3).await;

    // Refusals, one per layer: the operator catalog, the cached central allowlist, pause.
    assert_eq!(drain(infer(&gw, &local, model("gpt-4o")).await).await, 400);
    gw.handle
        .local()
        .set_models(Some(vec!["claude-sonnet-4-6".into()]));
    assert_eq!(
        drain(infer(&gw, &local, model("claude-opus-4-6")).await).await,
        400
    );
    gw.handle.local().set_models(None);
    gw.handle.local().set_paused(true);
    assert_eq!(drain(infer(&gw, &local, sonnet(false)).await).await, 503);
    gw.handle.local().set_paused(false);
    // Spend the budget until the cap refuses (each request costs about $0.37).
    let mut admitted = 2;
    loop {
        let status = drain(infer(&gw, &local, sonnet(false)).await).await;
        if status == 429 {
            break;
        }
        assert_eq!(status, 200);
        admitted += 1;
        assert!(admitted < 10, "the $1 cap never refused");
        gw.usage_rows(admitted + 1).await;
    }
    let rows = gw.usage_rows(admitted + 1).await;
    assert_eq!(
        rows.len(),
        admitted + 1,
        "refused requests leave no usage row"
    );

    let snap = snapshot(&gw, &[]).await;
    assert_eq!(snap["detail"], true, "loopback callers see detail");
    let store = gw.handle.store();
    let now = chrono::Utc::now();
    let [day, week, month] = windows(now);
    for (name, w) in [("today", day), ("week", week), ("month", month)] {
        let t = store.usage_totals(w.start).await.unwrap();
        assert_eq!(snap["usage"][name], totals_json(&t), "{name}");
    }
    let sum = |f: fn(&gatehouse_engine::store::UsageRecord) -> u64| rows.iter().map(f).sum::<u64>();
    assert_eq!(snap["usage"]["today"]["requests"], rows.len() as u64);
    assert_eq!(
        snap["usage"]["today"]["input_tokens"],
        120_000 * rows.len() as u64
    );
    assert_eq!(
        snap["usage"]["today"]["cost_micro_usd"],
        sum(|r| r.cost_micro_usd)
    );
    // Spend per model, dearest first, from the rows themselves.
    let by_model = snap["by_model"].as_array().unwrap();
    assert_eq!(by_model.len(), 2);
    assert_eq!(by_model[0]["model"], "claude-sonnet-4-6");
    assert_eq!(by_model[1]["model"], "claude-haiku-4-5");
    for m in by_model {
        let mine: Vec<_> = rows.iter().filter(|r| r.model == m["model"]).collect();
        assert_eq!(m["requests"], mine.len() as u64);
        assert_eq!(
            m["cost_micro_usd"],
            mine.iter().map(|r| r.cost_micro_usd).sum::<u64>()
        );
    }
    // Prompt tokens per upstream and model (in memory): every answered turn, none cached
    // (this fake reports no cache use), so no break either.
    let tallies = snap["prompt_cache"].as_array().unwrap();
    assert_eq!(tallies.len(), 2, "{tallies:?}");
    for m in by_model {
        let t = tallies
            .iter()
            // Tallied under the id sent: a built-in alias's dated first-party id.
            .find(|t| {
                let sent = t["model"].as_str().unwrap_or_default();
                t["upstream"] == "primary" && sent.starts_with(m["model"].as_str().unwrap())
            })
            .unwrap_or_else(|| panic!("no prompt_cache row for {}: {tallies:?}", m["model"]));
        assert_eq!(t["turns"], m["requests"]);
        assert_eq!(t["uncached_tokens"], m["input_tokens"]);
        assert_eq!(
            (
                &t["cache_read_tokens"],
                &t["cache_write_tokens"],
                &t["breaks"]
            ),
            (&json!(0), &json!(0), &json!(0))
        );
    }
    assert_eq!(snap["cache_breaks"], json!([]));
    // Recent requests: newest first, as stored, without principals.
    let recent = snap["recent"].as_array().unwrap();
    assert_eq!(recent.len(), rows.len());
    for (r, row) in recent.iter().zip(&rows) {
        assert_eq!(r["request_id"], row.request_id);
        assert_eq!(r["model"], row.model);
        assert_eq!(r["upstream"], "primary");
        assert_eq!(r["status"], 200);
        assert_eq!(r["cost_micro_usd"], row.cost_micro_usd);
        assert_eq!(r["route_reason"], row.route_reason);
        assert!(r.get("principal").is_none());
    }
    // Meters: the local subject's standings, as `/v1/me/spend` computes them.
    let standings = store
        .standings(LOCAL_SUBJECT, &[], GroupMode::Min, now)
        .await
        .unwrap();
    let local_spent: u64 = rows
        .iter()
        .filter(|r| r.principal == "key:local")
        .map(|r| r.cost_micro_usd)
        .sum();
    let daily = &snap["meters"][0];
    assert_eq!(daily["period"], "daily");
    assert_eq!(daily["limit_micro_usd"], 1_000_000);
    assert_eq!(daily["spent_micro_usd"], standings[0].spent_micro);
    assert_eq!(daily["spent_micro_usd"], local_spent);
    assert!(local_spent > 1_000_000 - 400_000, "{local_spent}");
    let u = daily["utilization"].as_f64().unwrap();
    assert!((u - local_spent as f64 / 1e6).abs() < 1e-4, "{u}");
    assert_eq!(
        daily["resets_at"].as_str().unwrap(),
        day.reset
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    );
    assert_eq!(snap["meters"][1]["limit_micro_usd"], Value::Null);
    assert_eq!(snap["meters"][1]["utilization"], Value::Null);

    // Blocks, newest first, each with the layer that refused and what the caller saw.
    let blocks = snap["blocks"].as_array().unwrap();
    let layers: Vec<&str> = blocks
        .iter()
        .map(|b| b["layer"].as_str().unwrap())
        .collect();
    assert_eq!(layers, ["spend", "paused", "policy", "catalog"]);
    assert_eq!(blocks[0]["status"], 429);
    assert_eq!(blocks[0]["model"], "claude-sonnet-4-6");
    assert!(!blocks[0]["message"].as_str().unwrap().is_empty());
    assert_eq!(blocks[1]["status"], 503);
    assert_eq!(blocks[1]["model"], Value::Null);
    assert_eq!(blocks[2]["model"], "claude-opus-4-6");
    assert!(
        blocks[2]["message"]
            .as_str()
            .unwrap()
            .contains("not allowed")
    );
    assert_eq!(blocks[3]["model"], "gpt-4o");
    assert_eq!(blocks[3]["status"], 400);
    assert!(blocks[3]["message"].as_str().unwrap().contains("gpt-4o"));

    let up = &snap["upstreams"][0];
    assert_eq!(
        (&up["name"], &up["state"], &up["last_status"]),
        (&json!("primary"), &json!("healthy"), &json!(200))
    );
    assert_eq!(up["host"], "127.0.0.1");
    assert!(up["last_ok_at"].is_string());

    // Nothing secret: keys, the local key, principal ids.
    let text = snap.to_string();
    for secret in [
        OPERATOR_KEY,
        CLIENT_KEY,
        local.as_str(),
        WRITE_KEY,
        READ_KEY,
    ] {
        assert!(!text.contains(secret), "the snapshot leaks a key");
    }
    assert!(!text.contains("key:") && !text.contains("tester"), "{text}");
}

async fn status(gw: &TestGateway, path: &str, headers: &[(&str, &str)]) -> u16 {
    let mut req = gw.client.get(gw.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    drain(req.send().await.unwrap()).await
}

#[tokio::test]
async fn detail_only_for_loopback_or_an_admin_key() {
    const LISTEN: &str = "listen: {host: 127.0.0.1, port: 0, trusted_proxies: [127.0.0.0/8]}";
    let remote = ("x-forwarded-for", "203.0.113.9");
    // By default the status data is private off loopback: no key, a client key or a
    // wrong key gets 401 on both data routes; the page itself stays public.
    let (private, local) = desktop_like(FakeConfig::default(), Some(LISTEN)).await;
    for key in [
        None,
        Some(CLIENT_KEY),
        Some(local.as_str()),
        Some("not-a-key"),
    ] {
        let h: Vec<(&str, &str)> = std::iter::once(remote)
            .chain(key.map(|k| ("x-api-key", k)))
            .collect();
        assert_eq!(status(&private, "/gatehouse/api/dashboard", &h).await, 401);
        assert_eq!(status(&private, "/gatehouse/api/events", &h).await, 401);
    }
    assert_eq!(status(&private, "/", &[remote]).await, 200);

    // `dashboard.public: true`: aggregates for anyone, detail and hosts only for admins.
    let listen = format!("{LISTEN}\ndashboard: {{public: true}}");
    let cached = FakeConfig {
        prompt_cache: true,
        ..FakeConfig::default()
    };
    let (gw, local) = desktop_like(cached, Some(&listen)).await;
    assert_eq!(drain(infer(&gw, &local, sonnet(false)).await).await, 200);
    assert_eq!(drain(infer(&gw, &local, model("gpt-4o")).await).await, 400);
    gw.usage_rows(1).await;
    let snap = snapshot(&gw, &[remote]).await;
    assert_eq!(snap["detail"], false);
    assert_eq!(snap["recent"], json!([]));
    assert_eq!(snap["blocks"], json!([]));
    assert_eq!(snap["usage"]["today"]["requests"], 1, "aggregates stay");
    assert_eq!(snap["upstreams"][0]["state"], "healthy");
    assert!(
        snap["upstreams"][0].get("host").is_none(),
        "no upstream host for the public: {snap}"
    );
    for key in [CLIENT_KEY, local.as_str(), "not-a-key"] {
        let snap = snapshot(&gw, &[remote, ("x-api-key", key)]).await;
        assert_eq!(snap["detail"], false, "a client key is not an admin key");
    }
    for key in [READ_KEY, WRITE_KEY] {
        let snap = snapshot(&gw, &[remote, ("x-api-key", key)]).await;
        assert_eq!(snap["detail"], true);
        assert_eq!(snap["recent"].as_array().unwrap().len(), 1);
        assert_eq!(snap["blocks"][0]["layer"], "catalog");
        assert!(snap["upstreams"][0]["host"].is_string());
    }
    // A loopback client behind the trusted proxy is still local.
    let snap = snapshot(&gw, &[("x-forwarded-for", "127.0.0.1")]).await;
    assert_eq!(snap["detail"], true);

    // Cache breaks name sessions, so they are detail; the prompt token tallies are not.
    // A conversation whose system prompt changes between turns loses its cache.
    let session = "5d1e7c3a-0f52-4e8b-a6d9-2c7b8e4f1a90";
    for system in [prompt_cache::SYSTEM, "You are Claude Code, in plan mode. "] {
        prompt_cache::send(&gw, session, prompt_cache::turn(system, 1)).await;
    }
    gw.usage_rows(3).await;
    let admin = snapshot(&gw, &[remote, ("x-api-key", READ_KEY)]).await;
    assert_eq!(
        admin["cache_breaks"][0]["cause"], "system_changed",
        "{admin}"
    );
    // The snapshot without detail is reused for a second.
    gatehouse_tests::wait_until("the public snapshot counts the new turns", || async {
        snapshot(&gw, &[remote]).await["prompt_cache"][0]["turns"] == 3
    })
    .await;
    let public = snapshot(&gw, &[remote]).await;
    assert_eq!(public["detail"], false);
    assert_eq!(public["cache_breaks"], json!([]));
    assert_eq!(public["prompt_cache"], admin["prompt_cache"]);
    let tally = &public["prompt_cache"][0];
    assert_eq!(
        (
            &tally["upstream"],
            &tally["model"],
            &tally["turns"],
            &tally["breaks"]
        ),
        (
            &json!("primary"),
            &json!("claude-sonnet-4-6"),
            &json!(3),
            &json!(1)
        )
    );
    assert!(tally["cache_write_tokens"].as_u64().unwrap() > 0, "{tally}");
}

#[tokio::test]
async fn upstream_health_follows_real_outcomes() {
    let gw = TestGateway::start().await;
    let mut events = gw.handle.subscribe_events();
    for _ in 0..3 {
        gw.fake.push_fault(Fault::Status {
            status: 503,
            retry_after: None,
            error_type: None,
            message: None,
        });
    }
    let mut states = Vec::new();
    for _ in 0..3 {
        assert_eq!(
            drain(gw.messages(sonnet(false)).send().await.unwrap()).await,
            502
        );
        let snap = snapshot(&gw, &[]).await;
        states.push(snap["upstreams"][0]["state"].as_str().unwrap().to_owned());
    }
    assert_eq!(states, ["degraded", "degraded", "down"]);
    let snap = snapshot(&gw, &[]).await;
    let up = &snap["upstreams"][0];
    assert_eq!(up["last_status"], 503);
    assert_eq!(up["last_error"], "HTTP 503");
    assert!(up["last_error_at"].is_string() && up["last_ok_at"].is_null());
    assert_eq!(
        drain(gw.messages(sonnet(false)).send().await.unwrap()).await,
        200
    );
    let snap = snapshot(&gw, &[]).await;
    assert_eq!(snap["upstreams"][0]["state"], "healthy");
    assert_eq!(
        snap["upstreams"][0]["last_error"], "HTTP 503",
        "kept for the view"
    );
    // The state changes were events, seen by the desktop's subscribers.
    let mut changes = Vec::new();
    while let Ok(e) = events.try_recv() {
        if e.evt == "upstream.state" {
            changes.push(e.fields["state"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(changes, ["degraded", "down", "healthy"]);
    assert_eq!(gw.events.named("upstream.state").len(), 3, "and logged");
}

#[tokio::test]
async fn a_failed_store_is_reported_and_memory_still_shows() {
    use std::io::{Seek, Write};
    let gw = TestGateway::start().await;
    assert_eq!(
        drain(gw.messages(sonnet(false)).send().await.unwrap()).await,
        200
    );
    assert_eq!(
        drain(gw.messages(model("gpt-4o")).send().await.unwrap()).await,
        400
    );
    gw.usage_rows(1).await;
    // Destroy the database under the open connection (as `store_down` does).
    std::fs::OpenOptions::new()
        .write(true)
        .open(gw.db_path())
        .unwrap()
        .set_len(0)
        .unwrap();
    for ext in ["db-wal", "db-shm"] {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .write(true)
            .open(gw.db_path().with_extension(ext))
        {
            f.seek(std::io::SeekFrom::Start(0)).unwrap();
            f.write_all(&[0xA5; 32768]).unwrap();
            f.sync_all().unwrap();
        }
    }
    let snap = snapshot(&gw, &[]).await;
    assert_eq!(snap["server"]["ready"], false);
    assert_eq!(snap["usage"]["today"]["requests"], 0);
    assert_eq!(snap["recent"], json!([]));
    assert_eq!(snap["upstreams"][0]["state"], "healthy");
    assert_eq!(snap["blocks"][0]["layer"], "catalog");
}

/// Reads the SSE body until a `dashboard` message arrives (bounded), returning its data.
async fn next_message(body: &mut reqwest::Response, buf: &mut String) -> Value {
    loop {
        if let Some(end) = buf.find("\n\n") {
            let frame: String = buf.drain(..end + 2).collect();
            if let Some(data) = frame
                .strip_prefix("event: dashboard\ndata: ")
                .map(str::trim_end)
            {
                return serde_json::from_str(data).unwrap();
            }
            assert!(frame.starts_with(':'), "only comments otherwise: {frame:?}");
            continue;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(20), body.chunk())
            .await
            .expect("an event within 20 s")
            .unwrap()
            .expect("the stream stays open");
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

#[tokio::test]
async fn event_stream_carries_names_only_and_ends_at_shutdown() {
    let gw = TestGateway::start().await;
    let mut sse = gw
        .client
        .get(gw.url("/gatehouse/api/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(sse.status(), 200);
    assert_eq!(sse.headers()["content-type"], "text/event-stream");
    let mut full = gw.handle.subscribe_events();
    let mut buf = String::new();
    assert_eq!(
        drain(gw.messages(sonnet(false)).send().await.unwrap()).await,
        200
    );
    // The upstream turning healthy may come first; the usage record follows.
    let mut names = Vec::new();
    while names.last().is_none_or(|n| n != "inference") {
        let msg = next_message(&mut sse, &mut buf).await;
        assert_eq!(
            msg.as_object().unwrap().len(),
            1,
            "only the name goes out: {msg}"
        );
        names.push(msg["evt"].as_str().unwrap().to_owned());
        assert!(names.len() <= 3, "{names:?}");
    }
    // The desktop's subscribers get the whole event.
    let inference = loop {
        let e = tokio::time::timeout(Duration::from_secs(20), full.recv())
            .await
            .unwrap()
            .unwrap();
        if e.evt == "inference" {
            break e;
        }
    };
    assert!(inference.fields["request_id"].is_string());
    gw.handle
        .publish(gatehouse_engine::events::Event::new("app.state"));
    assert_eq!(
        next_message(&mut sse, &mut buf).await,
        json!({"evt": "app.state"})
    );
    assert!(
        gw.events.named("app.state").is_empty(),
        "published events are not logged"
    );

    // Shutdown ends the open stream instead of waiting for it.
    gw.handle.shutdown().await;
    let end = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match sse.chunk().await {
                Ok(Some(_)) => {}
                other => break other.map(|_| ()),
            }
        }
    })
    .await
    .expect("the stream ended");
    assert!(end.is_ok(), "ended cleanly: {end:?}");
}

#[tokio::test]
async fn page_and_assets_under_the_contract_csp() {
    let gw = TestGateway::start().await;
    let page = gw.client.get(gw.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-security-policy"], CONTRACT_CSP);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    let html = page.text().await.unwrap();
    let assets: Vec<&str> = html
        .split('"')
        .filter(|s| s.starts_with("/assets/"))
        .collect();
    assert!(assets.iter().any(|a| a.ends_with(".js")), "{html}");
    assert!(assets.iter().any(|a| a.ends_with(".css")), "{html}");
    for a in assets {
        let r = gw.client.get(gw.url(a)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{a}");
        let kind = r.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(
            kind.starts_with(if a.ends_with(".js") {
                "text/javascript"
            } else {
                "text/css"
            }),
            "{a}: {kind}"
        );
        assert_eq!(
            r.headers()["cache-control"],
            "public, max-age=31536000, immutable"
        );
    }
    for (path, kind) in [
        ("/status.css", "text/css"),
        ("/favicon.svg", "image/svg+xml"),
    ] {
        let r = gw.client.get(gw.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with(kind)
        );
    }
    let r = gw
        .client
        .get(gw.url("/assets/missing.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // The desktop API is not there on a server.
    let r = gw
        .client
        .get(gw.url("/gatehouse/app/state"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// Formats micro-USD the way a person reads it (the UI's rule, written again here).
fn money(micro: u64) -> String {
    if micro > 0 && micro < 10_000 {
        return "<$0.01".into();
    }
    let cents = (micro + 5_000) / 10_000;
    format!("${}.{:02}", grouped(cents / 100), cents % 100)
}

fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn money_rule() {
    assert_eq!(money(0), "$0.00");
    assert_eq!(money(9_999), "<$0.01");
    assert_eq!(money(366_000), "$0.37");
    assert_eq!(money(1_234_567_890), "$1,234.57");
    assert_eq!(grouped(360_000), "360,000");
}

/// Screenshots go to the repo's docs only when asked for (`GATEHOUSE_SCREENSHOTS=1`).
fn screenshot_dir(temp: &tempfile::TempDir) -> std::path::PathBuf {
    if std::env::var("GATEHOUSE_SCREENSHOTS").as_deref() == Ok("1") {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/screenshots")
    } else {
        temp.path().to_owned()
    }
}

async fn line_of(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(90), lines.next_line())
        .await
        .expect("the browser script answered within 90 s")
        .unwrap()
        .expect("the browser script printed a line");
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"));
    assert!(v.get("error").is_none(), "browser: {v}");
    v
}

#[tokio::test]
async fn browser_shows_real_numbers_blocks_and_live_updates() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let (gw, local) = desktop_like(pricey(), None).await;
    let r = gw
        .client
        .post(gw.url("/v1/organizations/spend_limits"))
        .header("x-api-key", WRITE_KEY)
        .json(&json!({"scope": {"type": "user", "user_id": LOCAL_SUBJECT}, "amount": "500", "period": "daily"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for body in [sonnet(false), sonnet(true), sonnet(false)] {
        assert_eq!(drain(infer(&gw, &local, body).await).await, 200);
    }
    assert_eq!(
        drain(infer(&gw, CLIENT_KEY, model("claude-haiku-4-5")).await).await,
        200
    );
    gw.usage_rows(4).await;
    gw.handle.local().set_models(Some(vec![
        "claude-sonnet-4-6".into(),
        "claude-haiku-4-5".into(),
    ]));
    assert_eq!(
        drain(infer(&gw, &local, model("claude-opus-4-6")).await).await,
        400
    );
    gw.handle.local().set_models(None);
    assert_eq!(drain(infer(&gw, &local, model("gpt-4o")).await).await, 400);
    let snap = snapshot(&gw, &[]).await;

    let shots = tempfile::tempdir().unwrap();
    let shot_dir = screenshot_dir(&shots);
    let mut child = tokio::process::Command::new("node")
        .arg(gatehouse_tests::e2e_dir().join("dashboard.mjs"))
        .current_dir(gatehouse_tests::e2e_dir())
        .env("BASE_URL", gw.handle.base_url())
        .env("SCREENSHOT_DIR", &shot_dir)
        .env("TIMEOUT_SECS", "80")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = line_of(&mut lines).await;
    assert_eq!(first["phase"], "first");
    assert_eq!(first["csp"], CONTRACT_CSP);
    assert_eq!(
        first["tabs"],
        json!(["tab-dashboard", "tab-blocks", "tab-upstreams"]),
        "no app token: the read-only status page"
    );
    // The Upstreams view shows the health routing obeys, as the snapshot has it.
    let up = &snap["upstreams"][0];
    let shown = &first["upstreams"][0];
    assert_eq!(shown["state"], "healthy");
    assert_eq!(shown["breaker"], "closed");
    assert_eq!(
        shown["ttfb"],
        format!("{} ms / {} ms", up["ttfb_p50_ms"], up["ttfb_p95_ms"])
    );
    assert_eq!(shown["errors"], "0 %");
    assert!(
        first["transitions"][0]
            .as_str()
            .unwrap()
            .ends_with("healthy"),
        "{}",
        first["transitions"]
    );
    let d = &first["dashboard"];
    assert_eq!(d["read_only"], "read-only status page");
    for period in ["today", "week", "month"] {
        let t = &snap["usage"][period];
        let shown = &d["totals"][period];
        assert_eq!(
            shown["cost"],
            money(t["cost_micro_usd"].as_u64().unwrap()),
            "{period}"
        );
        assert_eq!(shown["requests"], grouped(t["requests"].as_u64().unwrap()));
        assert_eq!(shown["input"], grouped(t["input_tokens"].as_u64().unwrap()));
        assert_eq!(
            shown["output"],
            grouped(t["output_tokens"].as_u64().unwrap())
        );
    }
    assert_eq!(d["totals"]["today"]["requests"], "4");
    assert_eq!(d["totals"]["today"]["input"], "480,000");
    let daily = &snap["meters"][0];
    let shown = &d["meters"]["daily"];
    assert_eq!(
        shown["spent"],
        money(daily["spent_micro_usd"].as_u64().unwrap())
    );
    assert_eq!(shown["limit"], "$5.00");
    let pct = (daily["utilization"].as_f64().unwrap() * 100.0).round() as u64;
    assert!(pct > 0);
    assert_eq!(shown["percent"], format!("{pct}% used"));
    assert_eq!(shown["aria_valuenow"], pct.to_string());
    assert_eq!(shown["role"], "progressbar");
    assert_eq!(d["meters"]["weekly"]["limit"], "no limit");
    let models: Vec<(String, String)> = snap["by_model"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["model"].as_str().unwrap().to_owned(),
                money(m["cost_micro_usd"].as_u64().unwrap()),
            )
        })
        .collect();
    let shown_models: Vec<(String, String)> = d["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["model"].as_str().unwrap().to_owned(),
                m["cost"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(shown_models, models);
    assert_eq!(d["recent"].as_array().unwrap().len(), 4);
    assert_eq!(
        d["recent"][0]["cost"],
        money(snap["recent"][0]["cost_micro_usd"].as_u64().unwrap())
    );
    let blocks = first["blocks"].as_array().unwrap();
    let shown_layers: Vec<&str> = blocks
        .iter()
        .map(|b| b["layer"].as_str().unwrap())
        .collect();
    assert_eq!(shown_layers, ["catalog", "policy"]);
    assert_eq!(blocks[0]["model"], "gpt-4o");
    assert_eq!(blocks[1]["label"], "Policy allowlist");
    assert_eq!(blocks[1]["message"], snap["blocks"][1]["message"]);
    // Prompt cache: a row per upstream and model; this fake reports no cache use.
    let cache = &d["prompt_cache"];
    assert_eq!(cache["heading"], "Prompt cache");
    let shown_tallies: Vec<(&str, &str, &str, &str, &str)> = cache["tallies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let s = |k: &str| t[k].as_str().unwrap();
            (
                s("upstream"),
                s("model"),
                s("turns"),
                s("ratio"),
                s("breaks"),
            )
        })
        .collect();
    assert_eq!(
        shown_tallies,
        [
            ("primary", "claude-haiku-4-5-20251001", "1", "0.0%", "0"),
            ("primary", "claude-sonnet-4-6", "3", "0.0%", "0"),
        ]
    );
    assert_eq!(cache["breaks"], json!([]));
    assert!(
        cache["empty"]
            .as_str()
            .unwrap()
            .starts_with("No conversation lost its prompt cache since the gateway started."),
        "{cache}"
    );

    // One more request: the open page shows it without a reload.
    assert_eq!(drain(infer(&gw, &local, sonnet(false)).await).await, 200);
    gw.usage_rows(5).await;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"next\n").await.unwrap();
    stdin.flush().await.unwrap();
    let second = line_of(&mut lines).await;
    assert_eq!(second["phase"], "second");
    assert_eq!(second["dashboard"]["totals"]["today"]["requests"], "5");
    let snap = snapshot(&gw, &[]).await;
    assert_eq!(
        second["dashboard"]["totals"]["today"]["cost"],
        money(snap["usage"]["today"]["cost_micro_usd"].as_u64().unwrap())
    );
    assert_eq!(second["console_errors"], json!([]), "no console errors");
    assert_eq!(second["csp_violations"], json!([]), "no CSP violations");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
    for name in ["dashboard.png", "policy-blocks.png", "upstreams.png"] {
        let png = std::fs::read(shot_dir.join(name)).unwrap();
        assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{name}");
    }
}

/// The desktop side of the UI contract (`/gatehouse/app/*`), answered from a fixed
/// `AppState` so the browser can drive the Login and Settings tabs; the desktop crate
/// tests its real implementation. Records every call; refuses calls without the token.
struct ContractApp {
    token: String,
    state: std::sync::Mutex<Value>,
    calls: std::sync::Mutex<Vec<(String, String, Value)>>,
}

#[async_trait::async_trait]
impl gatehouse_engine::local_control::AppRoutes for ContractApp {
    async fn handle(
        &self,
        req: http::Request<axum::body::Body>,
    ) -> http::Response<axum::body::Body> {
        let reply = |status: u16, body: Value| {
            let mut r = http::Response::new(axum::body::Body::from(body.to_string()));
            *r.status_mut() = http::StatusCode::from_u16(status).unwrap();
            r.headers_mut().insert(
                "content-type",
                http::HeaderValue::from_static("application/json"),
            );
            r
        };
        if req
            .headers()
            .get("x-gatehouse-app-token")
            .and_then(|v| v.to_str().ok())
            != Some(self.token.as_str())
        {
            return reply(
                401,
                json!({"error": {"type": "unauthorized", "message": "bad app token"}}),
            );
        }
        let method = req.method().to_string();
        let path = req
            .uri()
            .path()
            .trim_start_matches("/gatehouse/app/")
            .to_owned();
        let bytes = axum::body::to_bytes(req.into_body(), 1 << 20)
            .await
            .unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        self.calls
            .lock()
            .unwrap()
            .push((method.clone(), path.clone(), body.clone()));
        let mut state = self.state.lock().unwrap();
        match (method.as_str(), path.as_str()) {
            ("GET", "state") | ("POST", "open") => {}
            ("POST", "pause") => state["paused"] = body["paused"].clone(),
            ("POST", "claude-code") if body["action"] == "configure" => {
                state["claude_code"]["status"] = json!("configured");
            }
            _ => {
                return reply(
                    404,
                    json!({"error": {"type": "not_found", "message": path}}),
                );
            }
        }
        reply(200, state.clone())
    }
}

#[tokio::test]
async fn browser_drives_login_and_settings_through_the_app_api() {
    use tokio::io::AsyncBufReadExt;
    let gw = TestGateway::start().await;
    let verify = "https://gatehouse.corp.example/device?user_code=WDJB-MJHT";
    let app = std::sync::Arc::new(ContractApp {
        token: "app-token-0123456789abcdef".into(),
        state: std::sync::Mutex::new(json!({
            "mode": "connected", "paused": false, "listen": gw.handle.base_url(),
            "keychain": {"available": false, "error": "no Secret Service on the session bus"},
            "bootstrap": {"path": "/etc/gatehouse/bootstrap.json", "present": true, "error": null,
                "central_url": "https://gatehouse.corp.example", "login_notice": "Use your corp account."},
            "locks": {"mode": true, "central_url": true, "local_providers": true, "claude_code": false},
            "central": {"url": "https://gatehouse.corp.example", "reachable": true, "last_sync_at": null, "last_error": null},
            "login": {"state": "pending", "user_code": "WDJB-MJHT", "verification_uri": "https://gatehouse.corp.example/device",
                "verification_uri_complete": verify,
                "expires_at": (chrono::Utc::now() + chrono::Duration::minutes(10)).to_rfc3339(),
                "email": null, "name": null, "groups": [], "error": null},
            "central_spend": null, "policy": null, "providers": [],
            "budgets": {"daily_cents": null, "weekly_cents": null, "monthly_cents": null},
            "start_at_login": false,
            "claude_code": {"status": "not_configured", "settings_path": "/home/dev/.claude/settings.json", "detail": null}
        })),
        calls: std::sync::Mutex::default(),
    });
    assert!(gw.handle.local().mount(app.clone()));
    let shots = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new("node")
        .arg(gatehouse_tests::e2e_dir().join("dashboard.mjs"))
        .current_dir(gatehouse_tests::e2e_dir())
        .env("BASE_URL", gw.handle.base_url())
        .env("APP_TOKEN", &app.token)
        .env("SCREENSHOT_DIR", screenshot_dir(&shots))
        .env("TIMEOUT_SECS", "80")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let out = line_of(&mut lines).await;
    assert_eq!(out["phase"], "app");
    assert!(
        !out["url_after"].as_str().unwrap().contains("token"),
        "the token left the address bar: {}",
        out["url_after"]
    );
    assert_eq!(out["stored"], app.token.as_str(), "kept for this tab");
    assert_eq!(
        out["tabs"],
        json!([
            "tab-setup",
            "tab-dashboard",
            "tab-projects",
            "tab-sessions",
            "tab-blocks",
            "tab-login",
            "tab-upstreams",
            "tab-settings"
        ])
    );
    assert!(
        out["keychain_banner"]
            .as_str()
            .unwrap()
            .contains("no Secret Service")
    );
    assert_eq!(out["login"]["user_code"], "WDJB-MJHT");
    assert_eq!(out["login"]["state"], "Waiting for you to sign in");
    assert_eq!(out["login"]["notice"], "Use your corp account.");
    assert!(
        out["login"]["expiry"]
            .as_str()
            .unwrap()
            .starts_with("The code expires in ")
    );
    assert_eq!(out["settings"]["locks"], 2, "mode and central URL");
    assert_eq!(out["settings"]["mode_disabled"], true);
    assert_eq!(out["settings"]["url_disabled"], true);
    assert_eq!(
        out["settings"]["url_value"],
        "https://gatehouse.corp.example"
    );
    assert_eq!(out["console_errors"], json!([]));
    assert_eq!(out["csp_violations"], json!([]));
    assert!(child.wait().await.unwrap().success());
    let calls = app.calls.lock().unwrap().clone();
    let posts: Vec<(&str, &Value)> = calls
        .iter()
        .filter(|(m, _, _)| m == "POST")
        .map(|(_, p, b)| (p.as_str(), b))
        .collect();
    assert_eq!(
        posts,
        [
            ("open", &json!({"url": verify})),
            ("claude-code", &json!({"action": "configure"})),
            ("pause", &json!({"paused": true})),
        ]
    );
    assert!(calls.iter().any(|(m, p, _)| m == "GET" && p == "state"));
}
