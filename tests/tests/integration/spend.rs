//! Spend caps: reservations keep concurrent requests under a cap, 429 `billing_error` with
//! the documented headers, usage headers past 75 % and 95 %, the admin API with its audit
//! trail, the self-service endpoints, and reconciliation of reservations a crash left open.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fake_upstream::FakeConfig;
use gatehouse_tests::{SESSION_SECRET_A, SignInGateway, sign_in_gateway};
use serde_json::{Value, json};

use gatehouse_tests::caps::{ADMIN, READ_KEY, WRITE_KEY, msg};

fn token(s: &SignInGateway, sub: &str, groups: &[&str]) -> String {
    gatehouse_tests::caps::token(&s.origin, sub, groups)
}

async fn set_limit(s: &SignInGateway, body: Value) -> Value {
    gatehouse_tests::caps::set_limit(&s.gw.client, &s.gw.url(""), body).await
}

async fn infer(s: &SignInGateway, t: &str, body: &Value) -> reqwest::Response {
    gatehouse_tests::caps::infer(&s.gw.client, &s.gw.url(""), t, body).await
}

#[tokio::test]
async fn concurrent_requests_never_overshoot_a_cap() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    // The upstream answers slowly, so every request is in flight at once.
    s.gw.fake.set_config(FakeConfig {
        header_delay_ms: 400,
        ..FakeConfig::default()
    });
    set_limit(
        &s,
        json!({"scope": {"type": "user", "user_id": "alice"}, "amount": "2", "period": "daily"}),
    )
    .await;
    let alice = token(&s, "alice", &["engineering"]);
    let body = msg(256);
    let worst = gatehouse_tests::caps::worst_case(&body);
    let fits = (2 * 10_000 / worst) as usize;
    assert!(fits >= 2, "test premise: {worst}");
    let results = futures_util::future::join_all((0..30).map(|_| infer(&s, &alice, &body))).await;
    let admitted = results.iter().filter(|r| r.status() == 200).count();
    let refused: Vec<&reqwest::Response> = results.iter().filter(|r| r.status() == 429).collect();
    assert_eq!(admitted, fits, "exactly what the reservations allow");
    assert_eq!(admitted + refused.len(), 30);
    assert!(
        refused
            .iter()
            .all(|r| r.headers()["x-should-retry"] == "false")
    );
    assert_eq!(
        s.gw.fake.requests().len(),
        admitted,
        "refused requests never reached the upstream"
    );
    let rows = s.gw.usage_rows(admitted).await;
    let charged: u64 = rows.iter().map(|r| r.cost_micro_usd).sum();
    assert!(
        charged <= 20_000,
        "charged {charged} micro-USD against a 2-cent cap"
    );
    // Settled: what is charged is the usage, and once the leases are released nothing
    // stays reserved.
    let base = s.gw.url("");
    let me = || gatehouse_tests::caps::my_daily(&s.gw.client, &base, &alice);
    gatehouse_tests::wait_until("the leases released", || async {
        me().await["reserved_micro_usd"] == 0
    })
    .await;
    let daily = &me().await;
    assert_eq!(daily["period"], "daily");
    assert_eq!(daily["spent_micro_usd"], charged);
    assert_eq!(daily["limit_cents"], 2);
    assert_eq!(daily["limit_scope"], "user");
    // The person's own cap names itself (Claude Code 2.1.333 passes it on to Desktop).
    let r = infer(&s, &alice, &msg(64_000)).await;
    assert_eq!(r.status(), 429);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["details"]["error_code"], "spend_limit_reached");
}

#[tokio::test]
async fn usage_headers_past_thresholds_then_the_block() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    set_limit(&s, json!({"scope": {"type": "rbac_group", "rbac_group_id": "engineering"}, "amount": "100", "period": "monthly", "currency": "USD"})).await;
    let bob = token(&s, "bob", &["engineering"]);
    let out = |n: u32| FakeConfig {
        output_tokens: n,
        ..FakeConfig::default()
    };
    let h = |r: &reqwest::Response, n: &str| {
        r.headers()
            .get(format!("anthropic-ratelimit-unified-{n}"))
            .map(|v| v.to_str().unwrap().to_owned())
    };
    // 52,000 output tokens of Sonnet: 78 cents.
    s.gw.fake.set_config(out(52_000));
    let r = infer(&s, &bob, &msg(60_000)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(h(&r, "status").as_deref(), Some("allowed"));
    assert_eq!(h(&r, "overage-surpassed-threshold"), None);
    s.gw.usage_rows(1).await;
    // 12,000 more: 96 cents. This response reports 78 % used.
    s.gw.fake.set_config(out(12_000));
    let r = infer(&s, &bob, &msg(12_000)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(h(&r, "status").as_deref(), Some("allowed_warning"));
    assert_eq!(
        h(&r, "overage-surpassed-threshold").as_deref(),
        Some("0.75")
    );
    assert_eq!(h(&r, "overage-utilization").as_deref(), Some("0.78"));
    assert_eq!(h(&r, "representative-claim").as_deref(), Some("overage"));
    s.gw.usage_rows(2).await;
    s.gw.fake.set_config(out(100));
    let r = infer(&s, &bob, &msg(100)).await;
    assert_eq!(
        h(&r, "overage-surpassed-threshold").as_deref(),
        Some("0.95")
    );
    s.gw.usage_rows(3).await;
    // A request whose worst case does not fit is refused, before any upstream.
    let before = s.gw.fake.requests().len();
    let r = infer(&s, &bob, &msg(12_000)).await;
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["x-should-retry"], "false");
    assert_eq!(h(&r, "status").as_deref(), Some("rejected"));
    assert_eq!(h(&r, "overage-period").as_deref(), Some("monthly"));
    assert_eq!(
        h(&r, "overage-disabled-reason").as_deref(),
        Some("org_spend_cap_reached")
    );
    assert!(h(&r, "representative-claim").is_none() && h(&r, "overage-status").is_none());
    let retry: i64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry > 0);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "billing_error");
    assert!(
        v["error"].get("details").is_none(),
        "a group's cap is not the person's own"
    );
    let m = v["error"]["message"].as_str().unwrap();
    assert!(
        m.starts_with("spend limit reached (monthly; resets ")
            && m.ends_with(" · Ask the platform team for more."),
        "{m}"
    );
    assert_eq!(s.gw.fake.requests().len(), before);
    // count_tokens is never blocked.
    let r =
        s.gw.client
            .post(s.gw.url("/v1/messages/count_tokens"))
            .bearer_auth(&bob)
            .json(&msg(10))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    // The usage endpoint Claude Code reads for `/usage`.
    let u: Value =
        s.gw.client
            .get(s.gw.url("/api/oauth/usage"))
            .bearer_auth(&bob)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(u["extra_usage"]["monthly_limit"], 100);
    assert!(u["extra_usage"]["used_credits"].as_u64().unwrap() >= 96);
    assert_eq!(u["limits"][0]["group"], "monthly");
    assert_eq!(u["limits"][0]["is_active"], true);
    // A person without a cap: spend only, no limits.
    let carol = token(&s, "carol", &["sales"]);
    let u: Value =
        s.gw.client
            .get(s.gw.url("/api/oauth/usage"))
            .bearer_auth(&carol)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(u["limits"], json!([]));
    assert_eq!(u["extra_usage"]["monthly_limit"], Value::Null);
    assert_eq!(u["extra_usage"]["daily"]["limit"], Value::Null);
}

#[tokio::test]
async fn admin_api_auth_shapes_and_audit() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    let url = s.gw.url("/v1/organizations/spend_limits");
    let c = &s.gw.client;
    let created = set_limit(
        &s,
        json!({"scope": {"type": "organization"}, "amount": "50000", "period": "monthly"}),
    )
    .await;
    assert_eq!(created["type"], "spend_limit");
    assert!(created["id"].as_str().unwrap().starts_with("spl_"));
    assert_eq!(created["amount"], "50000");
    assert_eq!(created["currency"], "USD");
    assert_eq!(created["scope"], json!({"type": "organization"}));
    // Create-or-replace by scope and period keeps the id.
    let replaced = set_limit(
        &s,
        json!({"scope": {"type": "organization"}, "amount": null, "period": "monthly"}),
    )
    .await;
    assert_eq!(replaced["id"], created["id"]);
    assert_eq!(replaced["amount"], Value::Null);
    let g = set_limit(&s, json!({"scope": {"type": "rbac_group", "rbac_group_id": "eng"}, "amount": "0", "period": "daily"})).await;
    set_limit(
        &s,
        json!({"scope": {"type": "user", "user_id": "dave"}, "amount": "700", "period": "weekly"}),
    )
    .await;

    // Read key: GET yes, mutation no.
    let r = c
        .get(&url)
        .header("x-api-key", READ_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("request-id").is_some());
    let list: Value = r.json().await.unwrap();
    assert_eq!(list["data"].as_array().unwrap().len(), 3);
    let r = c
        .post(&url)
        .header("x-api-key", READ_KEY)
        .json(&json!({"scope": {"type": "organization"}, "amount": "1", "period": "daily"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["message"], "requires write:spend_limits");
    assert!(e["request_id"].is_string());
    // A present x-api-key never falls back to the bearer, even an admin's.
    let admin = token(&s, "pat", &["platform"]);
    let r = c
        .get(&url)
        .header("x-api-key", "wrong-key")
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // Nor one that is not text at all (bytes that are not visible ASCII / UTF-8).
    for raw in [&b"\xff\xfe-not-utf8"[..], "admin-wr\u{e9}te-key".as_bytes()] {
        let r = c
            .get(&url)
            .header(
                "x-api-key",
                reqwest::header::HeaderValue::from_bytes(raw).unwrap(),
            )
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{raw:?}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(
            e["error"]["message"],
            "missing or invalid admin credentials"
        );
    }
    assert_eq!(
        c.get(&url)
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        c.get(&url)
            .bearer_auth(token(&s, "eve", &["sales"]))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(c.get(&url).send().await.unwrap().status(), 401);

    // Paging and filtering.
    let page: Value = c
        .get(format!("{url}?limit=1"))
        .header("x-api-key", READ_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["has_more"], true);
    let next: Value = c
        .get(format!(
            "{url}?limit=5&after_id={}",
            page["last_id"].as_str().unwrap()
        ))
        .header("x-api-key", READ_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(next["data"].as_array().unwrap().len(), 2);
    let groups: Value = c
        .get(format!("{url}?scope_type=rbac_group"))
        .header("x-api-key", READ_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        groups["data"][0]["scope"],
        json!({"type": "rbac_group", "rbac_group_id": "eng"})
    );

    // Bad bodies.
    for body in [
        json!({"scope": {"type": "user"}, "amount": "1", "period": "daily"}),
        json!({"scope": {"type": "organization"}, "amount": 5, "period": "daily"}),
        json!({"scope": {"type": "organization"}, "amount": "-5", "period": "daily"}),
        json!({"scope": {"type": "organization"}, "amount": "5", "period": "hourly"}),
        json!({"scope": {"type": "organization"}, "amount": "5", "period": "daily", "currency": "EUR"}),
    ] {
        let r = c
            .post(&url)
            .header("x-api-key", WRITE_KEY)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{body}");
    }

    // Get, delete, and the audit trail matches every mutation.
    let id = g["id"].as_str().unwrap();
    let got: Value = c
        .get(format!("{url}/{id}"))
        .header("x-api-key", READ_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["amount"], "0");
    let del: Value = c
        .delete(format!("{url}/{id}"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(del, json!({"type": "spend_limit_deleted", "id": id}));
    assert_eq!(
        c.get(format!("{url}/{id}"))
            .header("x-api-key", READ_KEY)
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    let audit: Value = c
        .get(format!("{url}/audit"))
        .header("x-api-key", READ_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows = audit["data"].as_array().unwrap();
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(
        actions,
        vec![
            "spend_limit.delete",
            "spend_limit.upsert",
            "spend_limit.upsert",
            "spend_limit.upsert",
            "spend_limit.upsert"
        ]
    );
    let changes: Vec<&Value> = rows.iter().map(|r| &r["change"]).collect();
    assert_eq!(changes[3], "update");
    assert_eq!(changes[4], "create");
    assert_eq!(rows[0]["type"], "audit_event");
    assert_eq!(rows[0]["target_id"], id);
    assert_eq!(rows[0]["actor"], "oidc:pat");
    assert_eq!(rows[0]["before"]["amount"], "0");
    assert_eq!(rows[0]["after"], Value::Null);
    assert_eq!(rows[3]["before"]["amount"], "50000");
    assert_eq!(rows[3]["after"]["amount"], Value::Null);
    assert_eq!(rows[4]["actor"], "admin-key:ops");
    assert_eq!(rows[4]["after"]["scope"], json!({"type": "organization"}));
    assert!(rows[4]["after"].get("type").is_none(), "{}", rows[4]);
}

#[tokio::test]
async fn a_zero_cap_blocks_and_unused_reservations_are_reconciled() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    set_limit(&s, json!({"scope": {"type": "rbac_group", "rbac_group_id": "interns"}, "amount": "0", "period": "daily"})).await;
    let intern = token(&s, "ivy", &["interns"]);
    assert_eq!(infer(&s, &intern, &msg(10)).await.status(), 429);

    // Reservations a crash left open: one whose request id also names a usage row, one
    // without.
    let store = s.gw.handle.store();
    let now = chrono::Utc::now();
    let reserve = |id: &str, req: &str| gatehouse_engine::spend::ReserveRequest {
        reservation_id: id.into(),
        request_id: req.into(),
        sub: "zed".into(),
        groups: vec![],
        amount_micro: 50_000,
        family: None,
        keep_free_micro: 0,
        windows: gatehouse_engine::spend::windows(now),
        mode: gatehouse_engine::spend::GroupMode::Min,
        pool_rule: Default::default(),
        now,
    };
    store.reserve(reserve("rsv_a", "req-a")).await.unwrap();
    store.reserve(reserve("rsv_b", "req-b")).await.unwrap();
    let mut row = s.gw.usage_rows(0).await.into_iter().next();
    let _ = row.take();
    store
        .insert_usage(
            vec![gatehouse_engine::store::UsageRecord {
                request_id: "req-a".into(),
                row_key: gatehouse_engine::store::UsageRecord::new_row_key(),
                created_at: now,
                principal: "user:zed".into(),
                endpoint: "messages".into(),
                model: "claude-sonnet-4-6".into(),
                upstream: Some("primary".into()),
                upstream_model: Some("claude-sonnet-4-6".into()),
                status: 200,
                route_reason: "primary: first in order, ok 200".into(),
                stream: true,
                input_tokens: 10,
                output_tokens: 10,
                cache_read_tokens: 0,
                cache_write_5m_tokens: 0,
                cache_write_1h_tokens: 0,
                web_search_requests: 0,
                cost_micro_usd: 180,
                usage_source: "reported".into(),
                latency_ms: 5,
                ttfb_ms: Some(1),
                client_disconnected: false,
                reservation_id: None,
                tags: Default::default(),
            }]
            .into(),
        )
        .await
        .unwrap();
    // Restart on the same database.
    let gatehouse_tests::SignInGateway {
        gw,
        idp,
        clock,
        origin,
    } = s;
    let gatehouse_tests::TestGateway {
        handle, fake, dir, ..
    } = gw;
    let config = handle.gateway().config.clone();
    handle.shutdown().await;
    let restarted = gatehouse_tests::TestGateway::start_config(config, fake, dir).await;
    // Both are charged their reserved worst case, flagged estimated: the upstream may have
    // served them before the crash. The usage row under `req-a` is another request's (a
    // reused request id: a usage row settles its own reservation in its transaction), so
    // it neither settles `rsv_a` nor is charged again.
    let estimated = restarted.events.named("spend.reservation_estimated");
    let mut ids: Vec<String> = estimated
        .iter()
        .map(|e| e["reservation"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    assert_eq!(ids, ["rsv_a", "rsv_b"]);
    assert!(estimated.iter().all(|e| e["charged_micro_usd"] == 50_000));
    let standing = restarted
        .handle
        .store()
        .standings("zed", &[], gatehouse_engine::spend::GroupMode::Min, now)
        .await
        .unwrap();
    assert_eq!(standing[0].spent_micro, 100_000);
    assert_eq!(standing[0].reserved_micro, 0);
    assert!(
        restarted
            .handle
            .store()
            .open_reservations()
            .await
            .unwrap()
            .is_empty()
    );
    drop((idp, clock, origin));
}

#[tokio::test]
async fn claude_code_stops_at_a_spend_block_without_retrying() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    set_limit(
        &s,
        json!({"scope": {"type": "user", "user_id": "quinn"}, "amount": "0", "period": "daily"}),
    )
    .await;
    let quinn = token(&s, "quinn", &["engineering"]);
    let home = tempfile::tempdir().unwrap();
    let out = gatehouse_tests::claude_print(
        "hello",
        home.path(),
        &[
            ("CLAUDE_CODE_USE_GATEWAY", "1"),
            ("ANTHROPIC_BASE_URL", s.origin.as_str()),
            ("ANTHROPIC_AUTH_TOKEN", quinn.as_str()),
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains("spend limit reached (daily; resets"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Ask the platform team for more."),
        "{stdout}"
    );
    // Exactly one attempt (default retries left on), and nothing reached the upstream.
    assert_eq!(s.gw.events.named("spend.blocked").len(), 1);
    assert!(s.gw.fake.requests().is_empty());
}

#[tokio::test]
async fn effective_caps_per_person_from_the_directory() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    set_limit(&s, json!({"scope": {"type": "rbac_group", "rbac_group_id": "engineering"}, "amount": "100", "period": "daily"})).await;
    set_limit(
        &s,
        json!({"scope": {"type": "organization"}, "amount": "1000", "period": "monthly"}),
    )
    .await;
    let alice = token(&s, "alice", &["engineering"]);
    let bob = token(&s, "bob", &["sales"]);
    s.gw.fake.set_config(FakeConfig {
        output_tokens: 1000,
        ..FakeConfig::default()
    });
    assert_eq!(infer(&s, &alice, &msg(2000)).await.status(), 200);
    assert_eq!(infer(&s, &bob, &msg(10)).await.status(), 200);
    s.gw.usage_rows(2).await;
    let url = s.gw.url("/v1/organizations/spend_limits/effective");
    let get = |q: &str| {
        s.gw.client
            .get(format!("{url}{q}"))
            .header("x-api-key", READ_KEY)
            .send()
    };
    let mut rows = json!(null);
    for _ in 0..100 {
        rows = get("?period[]=daily&sort=spend_desc")
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if rows["data"].as_array().map_or(0, Vec::len) == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let data = rows["data"].as_array().unwrap();
    assert_eq!(data.len(), 2, "{rows}");
    assert_eq!(data[0]["actor"]["user_id"], "alice", "sorted by spend");
    assert_eq!(data[0]["actor"]["type"], "user_actor");
    assert_eq!(
        data[0]["scope"],
        json!({"type": "user", "user_id": "alice"})
    );
    assert_eq!(data[0]["amount"], "100");
    assert_eq!(
        data[0]["source"],
        json!({"type": "rbac_group", "rbac_group_id": "engineering"})
    );
    assert!(
        data[0]["spend_limit_id"]
            .as_str()
            .unwrap()
            .starts_with("spl_")
    );
    assert_eq!(
        data[0]["period_to_date_spend"],
        effective_cents(data[0]["spent_micro_usd"].as_u64().unwrap())
    );
    assert_eq!(data[0]["groups"], json!(["engineering"]));
    assert_eq!(data[1]["actor"]["user_id"], "bob");
    assert_eq!(data[1]["amount"], Value::Null);
    assert_eq!(data[1]["source"], Value::Null);
    assert_eq!(data[1]["spend_limit_id"], Value::Null);
    let monthly: Value = get("?user_ids[]=bob&period[]=monthly")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        monthly["data"][0]["source"],
        json!({"type": "organization"})
    );
    let found: Value = get("?q=ALICE@corp").await.unwrap().json().await.unwrap();
    assert_eq!(
        found["data"].as_array().unwrap().len(),
        3,
        "one row per period"
    );
    let page: Value = get("?limit=1").await.unwrap().json().await.unwrap();
    assert_eq!(page["has_more"], true);
    assert_eq!(page["data"].as_array().unwrap().len(), 3, "one person");
    let next: Value = get(&format!(
        "?limit=1&page={}",
        page["next_page"].as_str().unwrap()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(next["data"].as_array().unwrap().len(), 3);
    assert_eq!(get("?period[]=yearly").await.unwrap().status(), 400);
    // The cursor is the reference's keyset token: anything else is refused; one past the
    // last person is an empty last page.
    for bad in [
        format!("?page={}", usize::MAX),
        "?page=-1".to_owned(),
        "?page=nope".to_owned(),
        // A spend-sorted token on an unsorted list.
        format!("?page={}", base64_url(r#"{"p":"alice","c":1,"s":true}"#)),
    ] {
        let r = get(&bad).await.unwrap();
        assert_eq!(r.status(), 400, "{bad}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["message"], "page: invalid page token", "{bad}");
    }
    let past: Value = get(&format!("?page={}", base64_url(r#"{"p":"zzz"}"#)))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(past["data"], json!([]));
    assert_eq!(past["has_more"], false);
    assert_eq!(past["next_page"], Value::Null);
    // Sorted by spend, page by page: alice (the most), then bob.
    let first: Value = get("?period[]=daily&sort=spend_desc&limit=1")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(first["data"][0]["actor"]["user_id"], "alice");
    let second: Value = get(&format!(
        "?period[]=daily&sort=spend_desc&limit=1&page={}",
        first["next_page"].as_str().unwrap()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(second["data"][0]["actor"]["user_id"], "bob");
    assert_eq!(second["next_page"], Value::Null);
}

fn base64_url(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
}

/// `max_tokens` of 2^64 - 1 from a person without a cap, several at once: each is
/// reserved at the model's output limit (the request still reaches the upstream, which is
/// the one to refuse it), the spend rows stay integers, and `/effective` keeps answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absurd_max_tokens_never_breaks_the_spend_rows() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    s.gw.fake.set_config(FakeConfig {
        header_delay_ms: 600,
        ..FakeConfig::default()
    });
    let alice = token(&s, "alice", &["engineering"]);
    let body = msg(u64::MAX);
    let me = || async {
        let r =
            s.gw.client
                .get(s.gw.url("/v1/me/spend"))
                .bearer_auth(&alice)
                .send()
                .await
                .unwrap();
        assert_eq!(r.status(), 200);
        r.json::<Value>().await.unwrap()
    };
    let requests = futures_util::future::join_all((0..3).map(|_| infer(&s, &alice, &body)));
    let watch = async {
        // While all three wait for the upstream, the lease they were admitted under holds
        // at least their output limit's worth.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        me().await
    };
    let (results, during) = tokio::join!(requests, watch);
    assert!(results.iter().all(|r| r.status() == 200));
    let worst = gatehouse_tests::caps::worst_case(&body);
    assert!(worst < 100_000_000, "{worst}");
    let held = during["periods"][0]["reserved_micro_usd"].as_u64().unwrap();
    assert!(held >= 3 * worst, "{during}");
    s.gw.usage_rows(3).await;
    // The lease is released once idle: nothing stays reserved.
    gatehouse_tests::wait_until("the idle lease released", || async {
        me().await["periods"][0]["reserved_micro_usd"] == 0
    })
    .await;
    let r =
        s.gw.client
            .get(s.gw.url("/v1/organizations/spend_limits/effective?user_ids[]=alice"))
            .header("x-api-key", READ_KEY)
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let rows = v["data"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{v}");
    for row in rows {
        assert_eq!(row["reserved_micro_usd"], 0, "{row}");
        assert!(
            row["spent_micro_usd"].as_u64().unwrap() < 1_000_000,
            "{row}"
        );
    }
    assert_eq!(me().await["periods"][0]["reserved_micro_usd"], 0);
}

/// Cents with up to three decimals, as `period_to_date_spend` prints them.
fn effective_cents(micro: u64) -> String {
    let t = (micro + 5) / 10;
    let s = format!("{}.{:03}", t / 1000, t % 1000);
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Claude Code sessions for the team's admins (`/v1/organizations/analytics/sessions`, an
/// extension): who ran each session, its cost equal to the usage rows, the subagents'
/// share, paging, the same credentials as the cost report, and bad queries refused.
#[tokio::test]
async fn sessions_report_for_admins() {
    let s = sign_in_gateway(&[SESSION_SECRET_A], ADMIN).await;
    let sonnet = json!({"model": "claude-sonnet-4-6", "max_tokens": 16,
                        "messages": [{"role": "user", "content": "hi"}]});
    for (sub, session, agent) in [
        ("alice", "sess-a", None),
        ("alice", "sess-a", Some("agent-1")),
        ("bob", "sess-b", None),
        ("bob", "", None),
    ] {
        let mut r =
            s.gw.client
                .post(s.gw.url("/v1/messages"))
                .bearer_auth(token(&s, sub, &["eng"]))
                .json(&sonnet);
        if !session.is_empty() {
            r = r.header("x-claude-code-session-id", session);
        }
        if let Some(a) = agent {
            r = r.header("x-claude-code-agent-id", a);
        }
        assert_eq!(r.send().await.unwrap().status(), 200);
    }
    let rows = s.gw.usage_rows(4).await;
    let cost = |sess: &str| -> u64 {
        rows.iter()
            .filter(|r| r.tags.session_id.as_deref() == Some(sess))
            .map(|r| r.cost_micro_usd)
            .sum()
    };
    let get = |path: &str, key: Option<&str>| {
        let mut r = s.gw.client.get(s.gw.url(path));
        if let Some(k) = key {
            r = r.header("x-api-key", k);
        }
        r.send()
    };
    let path = "/v1/organizations/analytics/sessions";
    let r = get(path, Some(READ_KEY)).await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 2, "{v}");
    let a = data.iter().find(|d| d["session_id"] == "sess-a").unwrap();
    assert_eq!(
        a["actor"],
        json!({"type": "user_actor", "user_id": "alice"})
    );
    assert_eq!(a["requests"], 2);
    assert_eq!(a["subagent_requests"], 1);
    let cents = |micro: u64| format!("{}.{:04}00", micro / 10_000, micro % 10_000);
    assert_eq!(a["cost"], cents(cost("sess-a")));
    // One person's sessions, and a page at a time.
    let v: Value = get(&format!("{path}?actor_ids[]=bob"), Some(READ_KEY))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["data"].as_array().unwrap().len(), 1);
    assert_eq!(v["data"][0]["session_id"], "sess-b");
    let first: Value = get(&format!("{path}?limit=1"), Some(READ_KEY))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(first["has_more"], true);
    let next = first["next_page"].as_str().unwrap();
    let second: Value = get(&format!("{path}?limit=1&page={next}"), Some(READ_KEY))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(second["has_more"], false);
    assert_ne!(
        second["data"][0]["session_id"],
        first["data"][0]["session_id"]
    );
    // The cost report's credentials and refusals.
    assert_eq!(get(path, None).await.unwrap().status(), 401);
    let person =
        s.gw.client
            .get(s.gw.url(path))
            .bearer_auth(token(&s, "mallory", &["eng"]))
            .send()
            .await
            .unwrap();
    assert_ne!(person.status(), 200, "not an admin");
    for bad in [
        "?starting_at=yesterday",
        "?starting_at=2026-01-01T00:00:00Z&ending_at=2026-03-01T00:00:00Z",
        "?limit=0",
        "?page=%21%21",
    ] {
        let r = get(&format!("{path}{bad}"), Some(READ_KEY)).await.unwrap();
        assert_eq!(r.status(), 400, "{bad}");
    }
    let r =
        s.gw.client
            .post(s.gw.url(path))
            .header("x-api-key", WRITE_KEY)
            .send()
            .await
            .unwrap();
    assert!(r.status().is_client_error());
}
