//! The admin API against the reference gateway (`claude gateway` from the pinned
//! `@anthropic-ai/claude-code`, on its own fresh PostgreSQL database): the same sequence of
//! spend-limit calls (create, list, get, effective, audit, delete and the error cases) goes
//! to both, and every answer's status and body must match once ids and timestamps are
//! masked. Gatehouse's deliberate additions are removed first; they are listed, each with
//! its reason, in [`EXTENSIONS`] (README "Admin API" lists them too).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use gatehouse_tests::postgres::TestDatabase;
use gatehouse_tests::{TestGateway, base_yaml};
use serde_json::{Value, json};

const WRITE: &str = "admin-write-key-0123456789abcdef0123456789";
const READ: &str = "admin-read-key-0123456789abcdef01234567890";

/// Fields Gatehouse adds to the reference's objects: `(calls, field, why)`. They are
/// removed from Gatehouse's answers to the calls whose name starts with `calls` before the
/// comparison; every other field must match.
const EXTENSIONS: &[(&str, &str, &str)] = &[
    (
        "effective",
        "spent_micro_usd",
        "the exact spend in micro-USD beside the reference's rounded cents",
    ),
    (
        "effective",
        "reserved_micro_usd",
        "what open reservations hold: the reference reserves nothing",
    ),
    (
        "effective",
        "resets_at",
        "when the period's window resets, so a tool need not compute UTC weeks",
    ),
    (
        "effective",
        "has_more",
        "a plain flag beside next_page, as the list routes have",
    ),
    (
        "effective",
        "model",
        "the model family a row's cap binds (null: every model); a family's cap has rows of its own",
    ),
    // `model` on every spend_limit object (null: every model): per-family limits.
    (
        "create",
        "model",
        "the model family a limit binds (null: every model)",
    ),
    (
        "replace",
        "model",
        "the model family a limit binds (null: every model)",
    ),
    (
        "list",
        "model",
        "the model family a limit binds (null: every model)",
    ),
    (
        "get",
        "model",
        "the model family a limit binds (null: every model)",
    ),
    (
        "pause",
        "model",
        "the model family a limit binds (null: every model)",
    ),
    (
        "member",
        "model",
        "the model family a limit binds (null: every model)",
    ),
    (
        "resume",
        "model",
        "the model family a limit binds (null: every model)",
    ),
    (
        "audit",
        "model",
        "the model family a limit binds (null: every model)",
    ),
    (
        "audit",
        "change",
        "create or update: the reference records both as spend_limit.upsert",
    ),
    (
        "audit",
        "last_id",
        "the after_id of the next page (the reference's audit ids are numbers, ours sortable strings)",
    ),
];

/// Keys whose values differ by nature (ids, times), masked on both sides.
const MASKED: &[&str] = &[
    "id",
    "spend_limit_id",
    "target_id",
    "first_id",
    "last_id",
    "request_id",
    "created_at",
    "updated_at",
    "data_refreshed_at",
    // Page tokens are opaque; each side's own token is followed by the next call.
    "next_page",
];

/// Masks ids and times; `call` names Gatehouse's call whose extensions go (`None`: the
/// reference's answer, kept whole).
fn mask(v: &mut Value, call: Option<&str>) {
    match v {
        Value::Object(o) => {
            for (calls, field, _) in EXTENSIONS {
                if call.is_some_and(|c| c.starts_with(calls)) {
                    o.remove(*field);
                }
            }
            for (k, x) in o.iter_mut() {
                if MASKED.contains(&k.as_str()) && !x.is_null() {
                    *x = json!("<masked>");
                } else {
                    mask(x, call);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| mask(x, call)),
        _ => {}
    }
}

fn config_yaml(port: u16, postgres_url: &str) -> String {
    format!(
        "listen: {{host: 127.0.0.1, port: {port}}}\n\
         upstreams:\n  - {{name: fake, provider: anthropic, base_url: \"http://127.0.0.1:9\", auth: {{api_key: operator-key-not-secret}}}}\n\
         cri: {{enabled: true, audience: [gw], org_allowlist: [00000000-0000-0000-0000-000000000001]}}\n\
         session: {{jwt_secret: \"reference-session-secret-0123456789abcdef\"}}\n\
         store: {{postgres_url: \"{postgres_url}\"}}\n\
         admin:\n  write_keys: [{{id: ops, key: \"{WRITE}\"}}]\n  read_keys: [{{id: audit, key: \"{READ}\"}}]\n"
    )
}

/// The reference on a free port, killed when dropped.
struct Reference {
    child: tokio::process::Child,
    base: String,
    _dir: tempfile::TempDir,
    _db: TestDatabase,
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

async fn start_reference(client: &reqwest::Client) -> Reference {
    let claude = gatehouse_tests::reference_claude();
    assert!(
        claude.exists(),
        "{} is missing: scripts/test.sh installs the pinned Claude Code (npm ci in tests/e2e)",
        claude.display()
    );
    let db = TestDatabase::create().await;
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let conf = dir.path().join("gateway.yaml");
    std::fs::write(&conf, config_yaml(port, &db.url)).unwrap();
    let log = std::fs::File::create(dir.path().join("reference.log")).unwrap();
    let child = tokio::process::Command::new(&claude)
        .args(["gateway", "--config"])
        .arg(&conf)
        .env("CLAUDE_GATEWAY_ALLOW_LOOPBACK", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = client.get(format!("{base}/healthz")).send().await
            && r.status().is_success()
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the reference did not start: {}",
            std::fs::read_to_string(dir.path().join("reference.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Reference {
        child,
        base,
        _dir: dir,
        _db: db,
    }
}

/// One call: a name for messages, method, path (`{alice}`, `{eng}` stand for the ids the
/// same side returned for those limits), key and body.
struct Call {
    name: &'static str,
    method: &'static str,
    path: &'static str,
    key: Option<&'static str>,
    body: Option<&'static str>,
}

const fn call(
    name: &'static str,
    method: &'static str,
    path: &'static str,
    key: Option<&'static str>,
    body: Option<&'static str>,
) -> Call {
    Call {
        name,
        method,
        path,
        key,
        body,
    }
}

const L: &str = "/v1/organizations/spend_limits";

fn calls() -> Vec<Call> {
    let w = Some(WRITE);
    let r = Some(READ);
    vec![
        call(
            "create org",
            "POST",
            "",
            w,
            Some(r#"{"scope":{"type":"organization"},"amount":"5000","period":"monthly"}"#),
        ),
        call(
            "create user",
            "POST",
            "",
            w,
            Some(r#"{"scope":{"type":"user","user_id":"alice"},"amount":"100","period":"daily"}"#),
        ),
        call(
            "create group (period defaults to monthly)",
            "POST",
            "",
            w,
            Some(r#"{"scope":{"type":"rbac_group","rbac_group_id":"eng"},"amount":null}"#),
        ),
        call(
            "replace user (unknown field ignored)",
            "POST",
            "",
            w,
            Some(
                r#"{"scope":{"type":"user","user_id":"alice"},"amount":"250","period":"daily","note":"x"}"#,
            ),
        ),
        call("list", "GET", "", r, None),
        call("list page", "GET", "?limit=1", r, None),
        call("list groups", "GET", "?scope_type=rbac_group", r, None),
        call("get", "GET", "/{alice}", r, None),
        call(
            "effective",
            "GET",
            "/effective?user_ids[]=alice&user_ids[]=bob",
            r,
            None,
        ),
        call(
            "effective monthly",
            "GET",
            "/effective?user_ids[]=alice&period[]=monthly",
            r,
            None,
        ),
        call("delete", "DELETE", "/{eng}", w, None),
        call("get deleted", "GET", "/{eng}", r, None),
        call("audit", "GET", "/audit", r, None),
        call("audit", "GET", "/audit?limit=2", r, None),
        // Errors.
        call("bad JSON", "POST", "", w, Some("nope")),
        call("body not an object", "POST", "", w, Some("[]")),
        call("no scope", "POST", "", w, Some("{}")),
        call(
            "bad scope type",
            "POST",
            "",
            w,
            Some(r#"{"scope":{"type":"team"},"amount":"1"}"#),
        ),
        call(
            "user without id",
            "POST",
            "",
            w,
            Some(r#"{"scope":{"type":"user"},"amount":"1"}"#),
        ),
        call(
            "empty user id",
            "POST",
            "",
            w,
            Some(r#"{"scope":{"type":"user","user_id":""},"amount":"1"}"#),
        ),
        call(
            "number amount",
            "POST",
            "",
            w,
            Some(r#"{"scope":{"type":"organization"},"amount":100}"#),
        ),
        call(
            "fractional amount",
            "POST",
            "",
            w,
            Some(r#"{"scope":{"type":"organization"},"amount":"1.5"}"#),
        ),
        call(
            "no amount",
            "POST",
            "",
            w,
            Some(r#"{"scope":{"type":"organization"},"period":"daily"}"#),
        ),
        call(
            "bad period",
            "POST",
            "",
            w,
            Some(r#"{"scope":{"type":"organization"},"amount":"1","period":"yearly"}"#),
        ),
        call(
            "euro",
            "POST",
            "",
            w,
            Some(r#"{"scope":{"type":"organization"},"amount":"1","currency":"EUR"}"#),
        ),
        call(
            "pooled on a user",
            "POST",
            "",
            w,
            Some(
                r#"{"scope":{"type":"user","user_id":"a"},"amount":"1","pooled_budget":{"amount":"5"}}"#,
            ),
        ),
        call(
            "pooled daily",
            "POST",
            "",
            w,
            Some(
                r#"{"scope":{"type":"rbac_group","rbac_group_id":"eng"},"amount":"1","period":"daily","pooled_budget":{"amount":"5"}}"#,
            ),
        ),
        // Shared group budgets.
        call(
            "create pooled group",
            "POST",
            "",
            w,
            Some(
                r#"{"scope":{"type":"rbac_group","rbac_group_id":"ops"},"amount":"100","pooled_budget":{"amount":"5000"}}"#,
            ),
        ),
        call("get pooled", "GET", "/{ops}", r, None),
        call(
            "pause pooled (amount kept)",
            "POST",
            "",
            w,
            Some(
                r#"{"scope":{"type":"rbac_group","rbac_group_id":"ops"},"pooled_budget":{"paused":true}}"#,
            ),
        ),
        call(
            "member amount only (budget kept)",
            "POST",
            "",
            w,
            Some(r#"{"scope":{"type":"rbac_group","rbac_group_id":"ops"},"amount":"150"}"#),
        ),
        call(
            "resume pooled",
            "POST",
            "",
            w,
            Some(
                r#"{"scope":{"type":"rbac_group","rbac_group_id":"ops"},"pooled_budget":{"paused":false,"amount":"6000"}}"#,
            ),
        ),
        call(
            "pooled only on a new limit",
            "POST",
            "",
            w,
            Some(
                r#"{"scope":{"type":"rbac_group","rbac_group_id":"qa"},"pooled_budget":{"amount":"5"}}"#,
            ),
        ),
        call(
            "pooled without a member amount",
            "POST",
            "",
            w,
            Some(
                r#"{"scope":{"type":"rbac_group","rbac_group_id":"qa"},"amount":null,"pooled_budget":{"amount":"5"}}"#,
            ),
        ),
        call(
            "running pooled without an amount",
            "POST",
            "",
            w,
            Some(
                r#"{"scope":{"type":"rbac_group","rbac_group_id":"qa"},"amount":"5","pooled_budget":{"paused":false}}"#,
            ),
        ),
        call(
            "paused pooled without an amount",
            "POST",
            "",
            w,
            Some(
                r#"{"scope":{"type":"rbac_group","rbac_group_id":"qa"},"amount":"5","pooled_budget":{"paused":true}}"#,
            ),
        ),
        call(
            "pooled in euro",
            "POST",
            "",
            w,
            Some(
                r#"{"scope":{"type":"rbac_group","rbac_group_id":"qa"},"amount":"5","pooled_budget":{"amount":"5","currency":"EUR"}}"#,
            ),
        ),
        call(
            "pooled paused not a boolean",
            "POST",
            "",
            w,
            Some(
                r#"{"scope":{"type":"rbac_group","rbac_group_id":"qa"},"amount":"5","pooled_budget":{"paused":"yes"}}"#,
            ),
        ),
        call("list after pools", "GET", "?scope_type=rbac_group", r, None),
        // Effective, page by page (the seeded people: alice, bob).
        call("effective people", "GET", "/effective", r, None),
        call("effective page 1", "GET", "/effective?limit=1", r, None),
        call(
            "effective page 2",
            "GET",
            "/effective?limit=1&page={eff_next}",
            r,
            None,
        ),
        call("effective bad page", "GET", "/effective?page=nope", r, None),
        call(
            "effective sorted with a plain token",
            "GET",
            "/effective?period[]=daily&sort=spend_desc&page=eyJwIjoiYm9iIn0",
            r,
            None,
        ),
        call("audit", "GET", "/audit?limit=3", r, None),
        // The cost report over the seeded days.
        call(
            "cost total",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&ending_at=2026-01-10T00:00:00Z",
            r,
            None,
        ),
        call(
            "cost daily by actor",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&ending_at=2026-01-10T00:00:00Z&time_bucket_width=1d&group_by[]=actor",
            r,
            None,
        ),
        call(
            "cost by group",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&ending_at=2026-01-10T00:00:00Z&group_by[]=rbac_group_id&order=asc",
            r,
            None,
        ),
        call(
            "cost by time",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&ending_at=2026-01-10T00:00:00Z&time_bucket_width=1d&group_by[]=actor&order_by=time&order=asc",
            r,
            None,
        ),
        call(
            "cost one actor",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&ending_at=2026-01-10T00:00:00Z&group_by[]=actor&actor_ids[]=bob&actor_types[]=user_actor",
            r,
            None,
        ),
        call(
            "cost page 1",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&ending_at=2026-01-10T00:00:00Z&time_bucket_width=1d&group_by[]=actor&limit=2",
            r,
            None,
        ),
        call(
            "cost page 2",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&ending_at=2026-01-10T00:00:00Z&time_bucket_width=1d&group_by[]=actor&limit=2&page={cost_next}",
            r,
            None,
        ),
        call(
            "cost page of other parameters",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&ending_at=2026-01-10T00:00:00Z&limit=2&page={cost_next}",
            r,
            None,
        ),
        call("cost no start", "GET", "{cost}", r, None),
        call(
            "cost unknown parameter",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&foo=1",
            r,
            None,
        ),
        call(
            "cost bad time",
            "GET",
            "{cost}?starting_at=2026-01-01",
            r,
            None,
        ),
        call(
            "cost hourly",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&ending_at=2026-01-02T00:00:00Z&time_bucket_width=1h",
            r,
            None,
        ),
        call(
            "cost width without end",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&time_bucket_width=1d",
            r,
            None,
        ),
        call(
            "cost too long",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&ending_at=2026-03-01T00:00:00Z",
            r,
            None,
        ),
        call(
            "cost backwards",
            "GET",
            "{cost}?starting_at=2026-01-05T00:00:00Z&ending_at=2026-01-01T00:00:00Z",
            r,
            None,
        ),
        call(
            "cost by model",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&group_by[]=model",
            r,
            None,
        ),
        call(
            "cost api actors",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&actor_types[]=api_actor",
            r,
            None,
        ),
        call(
            "cost bad order",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&order=up",
            r,
            None,
        ),
        call(
            "cost bad order_by",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&order_by=name",
            r,
            None,
        ),
        call(
            "cost deleted users without actors",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&exclude_deleted_users=true",
            r,
            None,
        ),
        call(
            "cost bad page",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&page=nope",
            r,
            None,
        ),
        call(
            "cost limit 0",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z&limit=0",
            r,
            None,
        ),
        call("cost by POST", "POST", "{cost}", w, Some("{}")),
        call(
            "cost without a key",
            "GET",
            "{cost}?starting_at=2026-01-01T00:00:00Z",
            None,
            None,
        ),
        call("get unknown", "GET", "/spl_0123456789abcdef", r, None),
        call("delete unknown", "DELETE", "/spl_0123456789abcdef", w, None),
        call(
            "read key creates",
            "POST",
            "",
            r,
            Some(r#"{"scope":{"type":"organization"},"amount":"1"}"#),
        ),
        call("read key deletes", "DELETE", "/{alice}", r, None),
        call("no key", "GET", "", None, None),
        call(
            "wrong key",
            "GET",
            "",
            Some("not-a-key-0123456789abcdef0123456789"),
            None,
        ),
        call("unsupported method", "PUT", "", r, None),
        call("limit 0", "GET", "?limit=0", r, None),
        call("bad scope_type", "GET", "?scope_type=team", r, None),
        call("both cursors", "GET", "?after_id=a&before_id=b", r, None),
        call("unknown cursor", "GET", "?after_id=spl_nope", r, None),
        call(
            "sort without one period",
            "GET",
            "/effective?sort=spend_desc",
            r,
            None,
        ),
        call("bad sort", "GET", "/effective?sort=name", r, None),
        call("bad period[]", "GET", "/effective?period[]=yearly", r, None),
        call("audit limit 0", "GET", "/audit?limit=0", r, None),
    ]
}

/// Runs the calls against one gateway; `(name, status, body)` per call.
async fn run(client: &reqwest::Client, base: &str) -> Vec<(&'static str, u16, Value)> {
    let mut ids: Vec<(&str, String)> = Vec::new();
    let mut out = Vec::new();
    for c in calls() {
        let mut path = match c.path.strip_prefix("{cost}") {
            Some(rest) => format!("{base}/v1/organizations/analytics/cost{rest}"),
            None => format!("{base}{L}{}", c.path),
        };
        for (name, id) in &ids {
            path = path.replace(&format!("{{{name}}}"), id);
        }
        let method = reqwest::Method::from_bytes(c.method.as_bytes()).unwrap();
        let mut req = client.request(method, &path);
        if let Some(k) = c.key {
            req = req.header("x-api-key", k);
        }
        if let Some(b) = c.body {
            req = req.header("content-type", "application/json").body(b);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        assert!(r.headers().contains_key("request-id"), "{}: {base}", c.name);
        let body: Value = r.json().await.unwrap_or(Value::Null);
        if status == 200 {
            let remember = match c.name {
                "create user" => Some(("alice", "id")),
                "create group (period defaults to monthly)" => Some(("eng", "id")),
                "create pooled group" => Some(("ops", "id")),
                "effective page 1" => Some(("eff_next", "next_page")),
                "cost page 1" => Some(("cost_next", "next_page")),
                _ => None,
            };
            if let Some((n, field)) = remember {
                let v = body[field].as_str();
                assert!(v.is_some(), "{}: no {field} in {body} ({base})", c.name);
                ids.push((n, v.unwrap().to_owned()));
            }
        }
        out.push((c.name, status, body));
    }
    out
}

#[tokio::test]
async fn the_admin_api_answers_as_the_reference_does() {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let reference = start_reference(&client).await;
    let gatehouse = TestGateway::start_with(Default::default(), |fake, db| {
        format!(
            "{}admin:\n  write_keys: [{{id: ops, key: \"{WRITE}\"}}]\n  read_keys: [{{id: audit, key: \"{READ}\"}}]\n",
            base_yaml(fake, db)
        )
    })
    .await;
    seed_reference(&reference._db).await;
    seed_gatehouse(&gatehouse.handle.store()).await;
    let theirs = run(&client, &reference.base).await;
    let ours = run(&client, &gatehouse.handle.base_url()).await;
    // The seeded data reached the reference's answers (so agreeing is not agreeing on
    // nothing).
    let answer = |name: &str| &theirs.iter().find(|a| a.0 == name).unwrap().2;
    assert_eq!(
        answer("cost total")["data"][0]["cost"]["amount"],
        "3.623500"
    );
    assert_eq!(answer("cost page 2")["data"].as_array().unwrap().len(), 1);
    assert_eq!(
        answer("cost by group")["data"][1]["group"]["rbac_group_id"],
        "eng"
    );
    assert_eq!(
        answer("effective page 2")["data"][0]["actor"]["user_id"],
        "bob"
    );
    assert_eq!(answer("get pooled")["pooled_budget"]["amount"], "5000");
    let mut differences = Vec::new();
    for ((name, s1, mut b1), (_, s2, mut b2)) in theirs.into_iter().zip(ours) {
        mask(&mut b1, None);
        mask(&mut b2, Some(name));
        if (s1, &b1) != (s2, &b2) {
            differences.push(format!(
                "{name}:\n  reference {s1} {b1}\n  gatehouse {s2} {b2}"
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} answers differ:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

/// The people and their past spend, per UTC day (cents), as both gateways record them.
const SEED: &[(&str, &str, u64)] = &[
    ("alice", "2026-01-05", 1_234),
    ("bob", "2026-01-05", 25_000),
    ("alice", "2026-01-06", 10_001),
];

fn groups_of(sub: &str) -> Vec<String> {
    match sub {
        "alice" => vec!["eng".into()],
        _ => vec!["ops".into(), "eng".into()],
    }
}

/// The reference keeps people, their groups per day and spend per day (cents, a float)
/// in its own tables; its gateway writes them as it meters.
async fn seed_reference(db: &TestDatabase) {
    let c = db.client().await;
    for sub in ["alice", "bob"] {
        let groups = serde_json::to_string(&groups_of(sub)).unwrap();
        let (email, name) = match sub {
            "alice" => (Some("alice@corp.example"), Some("Alice")),
            _ => (None, None),
        };
        c.execute(
            "INSERT INTO principal_emails (principal, email, name, groups) VALUES ($1, $2, $3, $4::text::jsonb)",
            &[&sub, &email, &name, &groups],
        )
        .await
        .unwrap();
    }
    for (sub, day, micro) in SEED {
        let groups = serde_json::to_string(&groups_of(sub)).unwrap();
        c.execute(
            "INSERT INTO principal_groups (day, principal, groups) VALUES ($1, $2, $3::text::jsonb)
             ON CONFLICT DO NOTHING",
            &[day, sub, &groups],
        )
        .await
        .unwrap();
        let cents = *micro as f64 / 10_000.0;
        c.execute(
            "INSERT INTO spend (principal, period, cents) VALUES ($1, $2, $3)",
            &[sub, day, &cents],
        )
        .await
        .unwrap();
    }
}

/// The same people and spend in Gatehouse's store: the identity directory, and a
/// reservation charged on each day.
async fn seed_gatehouse(store: &std::sync::Arc<dyn gatehouse_engine::store::Store>) {
    use gatehouse_engine::spend::{GroupMode, ReserveRequest, windows};
    for sub in ["alice", "bob"] {
        let (email, name) = match sub {
            "alice" => (
                Some("alice@corp.example".to_owned()),
                Some("Alice".to_owned()),
            ),
            _ => (None, None),
        };
        store
            .upsert_principal(
                gatehouse_engine::identity::user::UserIdentity {
                    sub: sub.into(),
                    email,
                    name,
                    groups: groups_of(sub),
                },
                chrono::Utc::now(),
            )
            .await
            .unwrap();
    }
    for (k, (sub, day, micro)) in SEED.iter().enumerate() {
        let at = format!("{day}T12:00:00Z")
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap();
        let id = format!("rsv_seed_{k}");
        store
            .reserve(ReserveRequest {
                reservation_id: id.clone(),
                request_id: format!("req_seed_{k}"),
                sub: (*sub).into(),
                groups: groups_of(sub),
                amount_micro: *micro,
                family: None,
                keep_free_micro: 0,
                windows: windows(at),
                mode: GroupMode::Min,
                pool_rule: Default::default(),
                now: at,
            })
            .await
            .unwrap();
        let charged = store
            .settle(&id, *micro, gatehouse_engine::store::SettleAs::Charged, at)
            .await
            .unwrap();
        assert!(charged);
    }
}
