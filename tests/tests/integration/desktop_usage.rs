//! Where the money went, through the tray's app API: the real Claude Code CLI run in three
//! project directories against the tray's gateway writes its own transcripts; the usage
//! rows carry its session ids; Projects and Sessions name every project with costs equal
//! to the rows; a subagent Claude Code starts (its Agent tool, called by the fake model)
//! is counted as the subagent's; the status line's
//! figures and the export (CSV parsed back) agree with the rows; hostile ids and queries
//! are refused or dropped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use fake_upstream::{FakeConfig, FakeUpstream};
use gatehouse_desktop::app::App;
use gatehouse_engine::deps::{CredentialStore, MapEnvironment};
use gatehouse_engine::store::UsageRecord;
use gatehouse_tests::OPERATOR_KEY;
use gatehouse_tests::desktop::{Desk, desktop_deps};
use serde_json::{Value, json};

/// Claude Code in `cwd` against the tray's gateway, its transcripts under `claude_dir`.
async fn claude_in(cwd: &Path, claude_dir: &Path, base_url: &str, token: &str, extra: &[&str]) {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(gatehouse_tests::e2e_bin("claude"));
    cmd.args(["-p", "Say hello", "--output-format", "json"])
        .args(extra)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home.path())
        .env("TERM", "dumb")
        .env("CLAUDE_CONFIG_DIR", claude_dir)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_GATEWAY_HINT_HEADERS", "1")
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", token)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("claude finished within 60 s")
        .expect("claude ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "claude in {}: {stdout}\n{}",
        cwd.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["is_error"], false, "{stdout}");
}

/// The rows once `n` have landed (they are written in batches after the answers).
async fn rows(app: &App, n: usize) -> Vec<UsageRecord> {
    for _ in 0..100 {
        let rows = app.store().recent_usage(10_000).await.unwrap();
        if rows.len() >= n {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("fewer than {n} usage rows landed");
}

async fn get(desk: &Desk, path: &str) -> (u16, Value) {
    desk.call(reqwest::Method::GET, path, None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_sessions_become_projects_sessions_exports_and_a_status_line() {
    let fake = FakeUpstream::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let claude_dir = dir.path().join("claude");
    let env = MapEnvironment::default()
        .with_var("GATEHOUSE_ANTHROPIC_BASE_URL", &fake.url())
        .with_var(
            "GATEHOUSE_BOOTSTRAP_FILE",
            dir.path().join("no-bootstrap.json").to_str().unwrap(),
        )
        .with_var("CLAUDE_CONFIG_DIR", claude_dir.to_str().unwrap());
    let (deps, parts) = desktop_deps(dir.path(), env);
    let app = App::start(deps).await.unwrap();
    let desk = Desk::new(&app);

    // The tray's state at a glance, as `gatehouse status` reads it.
    let tray = || async {
        let v: Value = desk
            .http
            .get(format!("{}/gatehouse/api/status", app.base_url()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["sign_in"]["app"]["tray"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(tray().await, "setup_needed");

    // A fresh install opens on Get started: no provider yet.
    let (_, state) = get(&desk, "state").await;
    assert_eq!(state["setup"]["needed"], true, "{}", state["setup"]);
    assert_eq!(state["setup"]["first_request"], Value::Null);
    let (status, _) = desk
        .post(
            "providers",
            json!({"kind": "anthropic", "api_key": OPERATOR_KEY}),
        )
        .await;
    assert_eq!(status, 200);
    let (_, state) = get(&desk, "state").await;
    assert_eq!(state["setup"]["needed"], false);
    assert_eq!(state["setup"]["provider_ready"], true);
    assert_eq!(tray().await, "ready");
    app.set_paused(true).await;
    assert_eq!(tray().await, "paused");
    app.set_paused(false).await;

    // What configuring would change is shown before anything changes.
    let (status, preview) = get(&desk, "claude-code/preview?statusline=true").await;
    assert_eq!(status, 200, "{preview}");
    let keys: Vec<&str> = preview["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        ["env.ANTHROPIC_BASE_URL", "apiKeyHelper", "statusLine"]
    );
    assert!(
        !claude_dir.join("settings.json").exists(),
        "a preview writes nothing"
    );

    // The real Claude Code in two projects.
    let local = parts
        .keychain
        .get("gatehouse", "local-token")
        .unwrap()
        .unwrap();
    let projects = dir.path().join("work");
    for name in ["shop", "blog"] {
        let cwd = projects.join(name);
        std::fs::create_dir_all(&cwd).unwrap();
        claude_in(&cwd, &claude_dir, &app.base_url(), local.expose(), &[]).await;
    }
    // A third project whose conversation hands work to a subagent: the fake model calls
    // Claude Code's Agent tool once, the subagent answers, then the main agent does.
    fake.set_config(FakeConfig {
        tool_uses: vec![fake_upstream::ToolUse {
            id: "toolu_agent_1".into(),
            name: "Agent".into(),
            input: json!({"description": "Greet", "prompt": "Say hi",
                          "subagent_type": "greeter"}),
        }],
        ..FakeConfig::default()
    });
    let docs = projects.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    // A subagent without the Agent tool, so the scripted call cannot recurse in it.
    let agents =
        r#"{"greeter": {"description": "Greets", "prompt": "Greet the user.", "tools": ["Read"]}}"#;
    claude_in(
        &docs,
        &claude_dir,
        &app.base_url(),
        local.expose(),
        &["--agents", agents],
    )
    .await;
    fake.set_config(FakeConfig::default());
    let landed = rows(&app, 4).await;
    let by_session: BTreeMap<String, Vec<&UsageRecord>> =
        landed.iter().fold(BTreeMap::new(), |mut m, r| {
            if let Some(s) = &r.tags.session_id {
                m.entry(s.clone()).or_insert_with(Vec::new).push(r);
            }
            m
        });
    assert_eq!(by_session.len(), 3, "one session per run: {landed:?}");
    for r in &landed {
        assert!(r.tags.from_claude_code(), "{:?}", r.tags);
    }

    // The first request from Claude Code is what step 3 waits for.
    let (_, state) = get(&desk, "state").await;
    let first = &state["setup"]["first_request"];
    assert!(
        first["client"].as_str().unwrap().starts_with("claude-cli/"),
        "{first}"
    );

    // A subagent of the shop session, as Claude Code sends it.
    let shop_session = landed
        .iter()
        .filter_map(|r| r.tags.session_id.clone())
        .find(|s| {
            gatehouse_desktop::transcripts::scan(&claude_dir, &Default::default())
                .project_of(s)
                .is_some_and(|p| p.name == "shop")
        })
        .expect("the transcripts name the shop session");
    let r = desk
        .http
        .post(format!("{}/v1/messages", app.base_url()))
        .bearer_auth(local.expose())
        .header("x-claude-code-session-id", &shop_session)
        .header("x-claude-code-agent-id", "agent-7")
        .header("x-claude-code-request-class", "subagent")
        .header("user-agent", "claude-cli/2.1.337 (external, cli)")
        .json(&json!({"model": "claude-haiku-4-5", "max_tokens": 16,
                      "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap();
    // Wait for that row itself: a late row of the runs above must not stand in for it.
    let mut all = rows(&app, landed.len() + 1).await;
    for _ in 0..100 {
        if all
            .iter()
            .any(|r| r.tags.agent_id.as_deref() == Some("agent-7"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        all = app.store().recent_usage(10_000).await.unwrap();
    }
    let cost_of = |s: &str| -> u64 {
        all.iter()
            .filter(|r| r.tags.session_id.as_deref() == Some(s))
            .map(|r| r.cost_micro_usd)
            .sum()
    };

    // Projects: both, named by their directories, costs equal to the rows.
    let (status, p) = get(&desk, "insight/projects?days=30").await;
    assert_eq!(status, 200, "{p}");
    let list = p["projects"].as_array().unwrap();
    let names: BTreeSet<&str> = list.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, BTreeSet::from(["blog", "docs", "shop"]), "{p}");
    for proj in list {
        let sessions: Vec<&String> = by_session
            .keys()
            .filter(|s| {
                gatehouse_desktop::transcripts::scan(&claude_dir, &Default::default())
                    .project_of(s)
                    .is_some_and(|x| Some(x.name.as_str()) == proj["name"].as_str())
            })
            .collect();
        assert_eq!(proj["sessions"], sessions.len(), "{proj}");
        let cost: u64 = sessions.iter().map(|s| cost_of(s)).sum();
        assert_eq!(proj["cost_month_micro_usd"], cost, "{proj}");
        assert_eq!(proj["cost_today_micro_usd"], cost, "{proj}");
        assert!(
            proj["path"]
                .as_str()
                .unwrap()
                .ends_with(proj["name"].as_str().unwrap())
        );
    }
    let shop = list.iter().find(|p| p["name"] == "shop").unwrap();
    assert!(
        shop["subagent_cost_micro_usd"].as_u64().unwrap() > 0,
        "{shop}"
    );

    // Sessions, searchable; the shop session's detail splits main and subagent.
    let (_, s) = get(&desk, "insight/sessions?days=30").await;
    assert_eq!(s["total"], 3, "{s}");
    for row in s["sessions"].as_array().unwrap() {
        let id = row["session_id"].as_str().unwrap();
        assert_eq!(row["cost_micro_usd"], cost_of(id), "{row}");
        assert_eq!(row["project"]["known"], true);
    }
    let (_, found) = get(&desk, "insight/sessions?q=SHOP").await;
    assert_eq!(found["total"], 1);
    assert_eq!(found["sessions"][0]["session_id"], shop_session.as_str());
    let (status, detail) = get(&desk, &format!("insight/sessions/{shop_session}")).await;
    assert_eq!(status, 200, "{detail}");
    let agents = detail["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2, "{detail}");
    let sub = agents.iter().find(|a| a["kind"] == "subagent").unwrap();
    assert_eq!(sub["agent_id"], "agent-7");
    assert_eq!(sub["requests"], 1);
    assert_eq!(detail["session"]["subagent_requests"], 1);
    let listed = detail["requests"].as_array().unwrap();
    assert_eq!(listed.len(), by_session[&shop_session].len() + 1);
    assert!(listed.iter().any(|r| r["request_class"] == "subagent"));

    // Charts: today holds every cost.
    let (_, charts) = get(&desk, "insight/charts?days=7").await;
    assert_eq!(charts["days"].as_array().unwrap().len(), 7);
    let total: u64 = all.iter().map(|r| r.cost_micro_usd).sum();
    let charted: u64 = charts["by_model"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["cost_micro_usd"][6].as_u64().unwrap())
        .sum();
    assert_eq!(charted, total);
    let hourly: u64 = charts["today_by_hour"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(hourly, all.len() as u64);

    // Export: the raw CSV parses back to the rows.
    let csv = desk
        .http
        .get(format!(
            "{}/gatehouse/app/usage/export?format=csv&group=raw",
            app.base_url()
        ))
        .header("x-gatehouse-app-token", &desk.token)
        .send()
        .await
        .unwrap();
    assert_eq!(csv.status(), 200);
    assert!(
        csv.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .contains("gatehouse-usage-raw-")
    );
    let text = csv.text().await.unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let parsed: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(parsed.len(), all.len(), "{text}");
    let exported: BTreeSet<&str> = parsed.iter().map(|r| r[col("request_id")]).collect();
    let stored: BTreeSet<&str> = all.iter().map(|r| r.request_id.as_str()).collect();
    assert_eq!(exported, stored);
    let micro = |usd: &str| -> u64 {
        let (d, f) = usd.split_once('.').unwrap();
        d.parse::<u64>().unwrap() * 1_000_000 + f.parse::<u64>().unwrap()
    };
    assert_eq!(
        parsed
            .iter()
            .map(|r| micro(r[col("cost_usd")]))
            .sum::<u64>(),
        total
    );
    assert!(parsed.iter().any(|r| r[col("project")] == "shop"));
    let (status, grouped) = {
        let r = desk
            .http
            .get(format!(
                "{}/gatehouse/app/usage/export?format=json&group=session",
                app.base_url()
            ))
            .header("x-gatehouse-app-token", &desk.token)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json::<Value>().await.unwrap())
    };
    assert_eq!(status, 200);
    assert_eq!(grouped.as_array().unwrap().len(), 3, "{grouped}");

    // The status line's figures, read with the local token (what `gatehouse statusline` holds).
    let line = |key: &str, session: &str| {
        desk.http
            .get(format!(
                "{}/gatehouse/app/statusline?session_id={session}",
                app.base_url()
            ))
            .bearer_auth(key.to_owned())
            .send()
    };
    let r = line(local.expose(), &shop_session).await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["session_cost_micro_usd"], cost_of(&shop_session));
    assert_eq!(v["today_cost_micro_usd"], total);
    assert_eq!(
        line("gth_wrong", &shop_session).await.unwrap().status(),
        401
    );
    let r = line(local.expose(), "<script>").await.unwrap();
    assert_eq!(r.status(), 200, "a hostile id is no session, not an error");
    assert_eq!(
        r.json::<Value>().await.unwrap()["session_cost_micro_usd"],
        Value::Null
    );
    // The local token opens only the status line and the export, nothing else.
    let r = desk
        .http
        .get(format!("{}/gatehouse/app/state", app.base_url()))
        .bearer_auth(local.expose())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // Bad queries get a reason; a hostile session header is dropped, not stored.
    for (path, want) in [
        ("insight/projects?days=0", 400),
        ("insight/sessions?days=abc", 400),
        ("insight/sessions?limit=0", 400),
        ("insight/sessions/..%2F..%2Fetc", 404),
        ("insight/sessions/unknown-session", 404),
        ("usage/export?since=2026-13-01", 400),
        ("usage/export?format=xlsx", 400),
    ] {
        assert_eq!(get(&desk, path).await.0, want, "{path}");
    }
    let r = desk
        .http
        .post(format!("{}/v1/messages", app.base_url()))
        .bearer_auth(local.expose())
        .header("x-claude-code-session-id", "=HYPERLINK(\"http://evil\")")
        .json(&json!({"model": "claude-haiku-4-5", "max_tokens": 16,
                      "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let newest = rows(&app, all.len() + 1).await;
    assert_eq!(newest[0].tags.session_id, None);

    // A daily budget below today's spend: the tray says over budget.
    let (status, _) = desk
        .post("settings", json!({"budgets": {"daily_cents": 0}}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(tray().await, "over_budget");
    app.shutdown().await;
}
