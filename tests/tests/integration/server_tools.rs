//! Anthropic server tools on an upstream that cannot run them (`server_tools`): the
//! gateway runs `web_search` against a SearXNG instance (here a fake one serving SearXNG's
//! JSON shape) and `web_fetch` under the outbound address rules, in front of the fake's
//! OpenAI-compatible face as a `searcher` model: it calls the tool the gateway offers once,
//! then answers quoting the result. Checked with raw
//! HTTP (JSON and SSE), with the official Anthropic SDK (`tests/e2e/server_tools.mjs`), on
//! the usage row (searches counted and priced as configured), and unconfigured: a 400 that
//! names the tool, the upstream and the setting.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::header;
use axum::routing::get;
use fake_upstream::{FakeConfig, RecordedRequest, SEARCHER_ANSWER_PREFIX};
use gatehouse_tests::{CLIENT_KEY, OPERATOR_KEY, TestGateway, e2e_dir};
use serde_json::{Value, json};

/// What the fake SearXNG was asked: each request's query parameters.
type Asked = Arc<Mutex<Vec<Vec<(String, String)>>>>;

/// A SearXNG instance's `/search?format=json` (the fields a real one sends) and a page to
/// fetch at `/page`.
async fn searxng() -> (SocketAddr, Asked) {
    async fn search(
        State(asked): State<Asked>,
        Query(params): Query<Vec<(String, String)>>,
    ) -> axum::response::Response {
        use axum::response::IntoResponse;
        asked.lock().unwrap().push(params.clone());
        let q = params
            .iter()
            .find(|(k, _)| k == "q")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        if !params.iter().any(|(k, v)| k == "format" && v == "json") {
            return (axum::http::StatusCode::FORBIDDEN, "json format only").into_response();
        }
        axum::Json(json!({
            "query": q,
            "number_of_results": 0,
            "results": [
                {"url": "https://github.com/example/gatehouse", "title": "Gatehouse on GitHub",
                 "content": "An LLM gateway for Claude Code.", "engine": "duckduckgo",
                 "parsed_url": ["https", "github.com", "/example/gatehouse", "", "", ""],
                 "template": "default.html", "engines": ["duckduckgo", "brave"], "positions": [1, 1],
                 "publishedDate": "2025-05-01T00:00:00", "score": 4.0, "category": "general"},
                {"url": "https://docs.example.com/gatehouse", "title": "Gatehouse docs",
                 "content": "Routing, failover and spend caps.", "engine": "brave",
                 "parsed_url": ["https", "docs.example.com", "/gatehouse", "", "", ""],
                 "template": "default.html", "engines": ["brave"], "positions": [2],
                 "publishedDate": null, "score": 1.0, "category": "general"}
            ],
            "answers": [], "corrections": [], "infoboxes": [], "suggestions": [],
            "unresponsive_engines": []
        }))
        .into_response()
    }
    let asked = Asked::default();
    let app = Router::new()
        .route("/search", get(search))
        .route(
            "/page",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html")],
                    "<html><head><title>A page</title></head><body><p>Hello from the page.</p><script>x()</script></body></html>",
                )
            }),
        )
        .with_state(asked.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, asked)
}

/// An OpenAI-compatible upstream `compat` at the fake serving `claude-sonnet-4-6` as the
/// fake's `fake-searcher`, its tokens priced at a millionth of a dollar per million (the
/// lowest price is above 0, and this one rounds to nothing per token, so a row costs only
/// its searches),
/// and `server_tools` when `tools` is given.
fn yaml(fake_url: &str, db: &Path, tools: Option<&str>) -> String {
    let server_tools = tools
        .map(|t| format!("server_tools:\n{t}"))
        .unwrap_or_default();
    format!(
        r#"
listen: {{host: 127.0.0.1, port: 0}}
store: {{sqlite_path: "{db}"}}
upstreams:
  - name: compat
    provider: openai
    base_url: "{fake_url}/v1"
    auth: {{api_key: "{OPERATOR_KEY}"}}
models:
  - {{id: claude-sonnet-4-6, upstream_model: {{compat: fake-searcher}}}}
pricing:
  overrides:
    - {{model: fake-searcher, input: 1e-6, output: 1e-6, cache_read: 1e-6, cache_write: 1e-6}}
client_keys:
  - {{id: tester, key: "{CLIENT_KEY}"}}
{server_tools}
"#,
        db = db.display()
    )
}

async fn gateway(tools: Option<String>) -> TestGateway {
    TestGateway::start_with(FakeConfig::default(), |url: &str, db: &Path| {
        yaml(url, db, tools.as_deref())
    })
    .await
}

fn search_tools(addr: SocketAddr) -> String {
    format!(
        "  web_search: {{searxng_url: \"http://{addr}/\", price_per_1000_usd: 20}}\n  web_fetch: {{enabled: true}}\n  allow_loopback: true\n"
    )
}

fn search_request(stream: bool) -> Value {
    json!({
        "model": "claude-sonnet-4-6",
        "max_tokens": 512,
        "stream": stream,
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 8}],
        "tool_choice": {"type": "tool", "name": "web_search"},
        "messages": [{"role": "user", "content": "Perform a web search for the query: gatehouse gateway"}],
    })
}

fn completions(gw: &TestGateway) -> Vec<RecordedRequest> {
    gw.fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/chat/completions")
        .collect()
}

/// The SSE events of a body: `(event, data)`.
fn events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|f| !f.trim().is_empty())
        .map(|f| {
            let (event, data) = f.split_once('\n').unwrap();
            (
                event.strip_prefix("event: ").unwrap().to_owned(),
                serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn web_search_runs_in_the_gateway_as_json_and_as_a_stream() {
    let (addr, asked) = searxng().await;
    let gw = gateway(Some(search_tools(addr))).await;

    let resp = gw.messages(search_request(false)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    assert_eq!(resp.headers()["x-gatehouse-upstream"], "compat");
    // Two upstream calls, no failover.
    assert_eq!(resp.headers()["x-gatehouse-failover-count"], "0");
    let m: Value = resp.json().await.unwrap();
    let types: Vec<&str> = m["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["server_tool_use", "web_search_tool_result", "text"]);
    let use_ = &m["content"][0];
    assert!(use_["id"].as_str().unwrap().starts_with("srvtoolu_"));
    assert_eq!(use_["name"], "web_search");
    assert_eq!(use_["input"], json!({"query": "gatehouse gateway"}));
    let result = &m["content"][1];
    assert_eq!(result["tool_use_id"], use_["id"]);
    assert_eq!(result["content"][0]["type"], "web_search_result");
    assert_eq!(
        result["content"][0]["url"],
        "https://github.com/example/gatehouse"
    );
    assert_eq!(result["content"][0]["title"], "Gatehouse on GitHub");
    assert_eq!(result["content"][0]["page_age"], "May 1, 2025");
    assert!(
        !result["content"][0]["encrypted_content"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    assert_eq!(result["content"][1]["page_age"], Value::Null);
    // The model read the results (the fake quotes the tool's output back).
    let text = m["content"][2]["text"].as_str().unwrap();
    assert!(text.starts_with(SEARCHER_ANSWER_PREFIX), "{text}");
    assert!(
        text.contains("Gatehouse on GitHub") && text.contains("An LLM gateway"),
        "{text}"
    );
    assert_eq!(m["stop_reason"], "end_turn");
    // Two steps of 120 prompt tokens (20 cached) and 9 completion tokens each.
    assert_eq!(m["usage"]["input_tokens"], 200);
    assert_eq!(m["usage"]["cache_read_input_tokens"], 40);
    assert_eq!(m["usage"]["output_tokens"], 18);
    assert_eq!(m["usage"]["server_tool_use"]["web_search_requests"], 1);
    assert_eq!(m["usage"]["server_tool_use"]["web_fetch_requests"], 0);

    // SearXNG was asked once, for JSON; the upstream twice, the second time with results.
    let queries = asked.lock().unwrap().clone();
    assert_eq!(queries.len(), 1);
    assert!(queries[0].contains(&("q".into(), "gatehouse gateway".into())));
    let reqs = completions(&gw);
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body["model"], "fake-searcher");
    let tool = &reqs[0].body["tools"][0]["function"];
    assert_eq!(tool["name"], "web_search");
    assert_eq!(tool["parameters"]["required"], json!(["query"]));
    assert!(reqs[0].body.get("stream").is_none_or(|s| s == false));
    assert_eq!(
        reqs[0].body["tool_choice"]["function"]["name"],
        "web_search"
    );
    assert_eq!(reqs[1].body["tool_choice"], "auto");
    let messages = reqs[1].body["messages"].as_array().unwrap();
    let tool_msg = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .contains("Routing, failover and spend caps.")
    );

    let resp = gw.messages(search_request(true)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let body = resp.text().await.unwrap();
    let ev = events(&body);
    assert_eq!(ev.first().unwrap().0, "message_start");
    assert_eq!(ev.last().unwrap().0, "message_stop");
    let starts: Vec<&str> = ev
        .iter()
        .filter(|(e, _)| e == "content_block_start")
        .map(|(_, d)| d["content_block"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        starts,
        ["server_tool_use", "web_search_tool_result", "text"]
    );
    let delta = &ev.iter().find(|(e, _)| e == "message_delta").unwrap().1;
    assert_eq!(delta["usage"]["server_tool_use"]["web_search_requests"], 1);
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");

    // One usage row per request, each with its search, priced as configured: $20 per
    // 1000 searches is 20000 micro-USD (tokens cost nothing here).
    let rows = gw.usage_rows(2).await;
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r.status, 200);
        assert_eq!(r.upstream.as_deref(), Some("compat"));
        assert_eq!(r.web_search_requests, 1);
        assert_eq!((r.input_tokens, r.output_tokens), (200, 18));
        assert_eq!(r.cost_micro_usd, 20_000);
        assert!(
            r.route_reason.contains("the gateway ran web_search x1"),
            "{}",
            r.route_reason
        );
    }
}

#[tokio::test]
async fn the_anthropic_sdk_reads_the_gateways_search() {
    assert!(
        e2e_dir().join("node_modules/@anthropic-ai/sdk").exists(),
        "run scripts/test.sh (it installs tests/e2e with npm ci)"
    );
    let (addr, _) = searxng().await;
    let gw = gateway(Some(search_tools(addr))).await;
    let base = gw.handle.base_url();
    let v = gatehouse_tests::node_json(
        "server_tools.mjs",
        &[],
        &[("GATEHOUSE_URL", &base), ("GATEHOUSE_KEY", CLIENT_KEY)],
    )
    .await;
    for form in ["json", "streamed"] {
        let m = &v[form];
        assert_eq!(
            m["types"],
            json!(["server_tool_use", "web_search_tool_result", "text"]),
            "{form}: {m}"
        );
        assert_eq!(
            m["server_tool_use"]["input"]["query"], "gatehouse gateway",
            "{form}"
        );
        assert_eq!(
            m["result_tool_use_id"], m["server_tool_use"]["id"],
            "{form}"
        );
        assert_eq!(m["results"][0]["title"], "Gatehouse on GitHub", "{form}");
        assert_eq!(
            m["usage"]["server_tool_use"]["web_search_requests"], 1,
            "{form}"
        );
        assert_eq!(m["stop_reason"], "end_turn", "{form}");
        assert!(
            m["text"].as_str().unwrap().contains("Gatehouse docs"),
            "{form}: {m}"
        );
    }
    let events: Vec<&str> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(
        events.contains(&"content_block_start:web_search_tool_result"),
        "{events:?}"
    );
    // Sent back as history, the gateway's blocks reach the upstream as text, snippets
    // included (the SDK passes `encrypted_content` back as it got it).
    assert_eq!(
        v["followup"]["usage"]["server_tool_use"]["web_search_requests"],
        1
    );
    let reqs = completions(&gw);
    let history = reqs
        .iter()
        .find(|r| {
            r.body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["role"] == "user" && m["content"] == "Thanks.")
        })
        .expect("the follow-up reached the upstream");
    let assistant = history.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        assistant.contains(r#"[web_search {"query":"gatehouse gateway"}]"#),
        "{assistant}"
    );
    assert!(
        assistant.contains("An LLM gateway for Claude Code."),
        "{assistant}"
    );
}

#[tokio::test]
async fn web_fetch_reads_pages_named_in_the_conversation_under_the_outbound_rules() {
    let (addr, _) = searxng().await;
    let page = format!("http://{addr}/page");
    let gw = gateway(Some(search_tools(addr))).await;
    let ask = |text: String| {
        json!({
            "model": "claude-sonnet-4-6", "max_tokens": 512,
            "tools": [{"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 2}],
            "messages": [{"role": "user", "content": text}],
        })
    };
    let resp = gw
        .messages(ask(format!("Summarise {page} please")))
        .header("anthropic-beta", "web-fetch-2025-09-10")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let m: Value = resp.json().await.unwrap();
    let result = &m["content"][1];
    assert_eq!(result["type"], "web_fetch_tool_result");
    let fetched = &result["content"];
    assert_eq!(fetched["type"], "web_fetch_result");
    assert_eq!(fetched["url"], page);
    assert_eq!(fetched["content"]["type"], "document");
    assert_eq!(fetched["content"]["title"], "A page");
    assert_eq!(fetched["content"]["source"]["data"], "Hello from the page.");
    let text = m["content"][2]["text"].as_str().unwrap();
    assert!(text.contains("Hello from the page."), "{text}");
    assert!(fetched["retrieved_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(m["usage"]["server_tool_use"]["web_fetch_requests"], 1);

    // The cloud metadata address is refused even with loopback allowed.
    let meta = "http://169.254.169.254/latest/meta-data/";
    let resp = gw
        .messages(ask(format!("Read {meta}")))
        .send()
        .await
        .unwrap();
    let m: Value = resp.json().await.unwrap();
    assert_eq!(
        m["content"][1]["content"]["error_code"], "url_not_allowed",
        "{m}"
    );
    // The model was told, and answered.
    let last = completions(&gw).pop().unwrap();
    let tool_msg = last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .contains("url_not_allowed")
    );
}

#[tokio::test]
async fn unconfigured_server_tools_are_refused_naming_the_setting() {
    let gw = gateway(None).await;
    for stream in [false, true] {
        let resp = gw.messages(search_request(stream)).send().await.unwrap();
        assert_eq!(resp.status(), 400);
        let e: Value = resp.json().await.unwrap();
        assert_eq!(e["type"], "error");
        assert_eq!(e["error"]["type"], "invalid_request_error");
        let message = e["error"]["message"].as_str().unwrap();
        for part in [
            "`web_search`",
            "compat",
            "server_tools.web_search.searxng_url",
        ] {
            assert!(message.contains(part), "{part} not in {message}");
        }
    }
    // Nothing reached the upstream: no silent pass-through without the tool.
    assert!(completions(&gw).is_empty());
}

/// Claude Code's own WebSearch on an OpenAI-compatible model: the fake (as the main model)
/// calls WebSearch; Claude Code sends its `web_search` request; the gateway runs the search
/// and answers with Anthropic's blocks; Claude Code hands the results to the main model.
#[tokio::test]
async fn claude_codes_websearch_gets_the_gateways_results() {
    let claude = gatehouse_tests::e2e_bin("claude");
    assert!(
        claude.exists(),
        "run scripts/test.sh (it installs tests/e2e)"
    );
    let (addr, asked) = searxng().await;
    let fake = FakeConfig {
        tool_uses: vec![fake_upstream::ToolUse {
            id: "toolu_websearch_1".into(),
            name: "WebSearch".into(),
            input: json!({"query": "gatehouse gateway"}),
        }],
        tool_uses_every_turn: true,
        reply_text: "Searched.".into(),
        ..FakeConfig::default()
    };
    let tools = search_tools(addr);
    let gw = TestGateway::start_with(fake, |url: &str, db: &Path| {
        yaml(url, db, Some(&tools)).replacen(
            "models:\n",
            "models:\n  - {id: fake-searcher, upstream_model: {compat: fake-searcher}}\n",
            1,
        )
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let base = gw.handle.base_url();
    let out = tokio::process::Command::new(&claude)
        .args([
            "-p",
            "Search the web for gatehouse gateway.",
            "--model",
            "fake-searcher",
            "--allowedTools",
            "WebSearch",
            "--output-format",
            "json",
        ])
        .current_dir(work.path())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home.path())
        .env("TERM", "dumb")
        .env("ANTHROPIC_BASE_URL", &base)
        .env("ANTHROPIC_AUTH_TOKEN", CLIENT_KEY)
        .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", "fake-searcher")
        .env("ANTHROPIC_SMALL_FAST_MODEL", "fake-searcher")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(150), out)
        .await
        .expect("claude -p finished within 150 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "claude failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // SearXNG was asked, and the main model got the results as WebSearch's tool result.
    assert!(
        !asked.lock().unwrap().is_empty(),
        "no search reached SearXNG: {stdout}"
    );
    let reqs = completions(&gw);
    // The main loop's requests (the search's own steps offer `web_search`): Claude Code's
    // WebSearch result, in its own words, lists the gateway's results.
    let handed_back = reqs
        .iter()
        .filter(|r| {
            !r.body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["function"]["name"] == "web_search")
        })
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .find(|t| t.starts_with("Web search results for query"));
    let handed_back = handed_back
        .unwrap_or_else(|| panic!("Claude Code did not hand the results back: {stdout}"));
    assert!(
        handed_back.contains(
            r#"{"title":"Gatehouse on GitHub","url":"https://github.com/example/gatehouse"}"#
        ),
        "{handed_back}"
    );
    assert!(
        handed_back.contains("An LLM gateway for Claude Code."),
        "{handed_back}"
    );
    // Claude Code counted the search from the answer's usage.
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(result["is_error"], false, "{stdout}");
    assert_eq!(
        result["modelUsage"]["fake-searcher"]["webSearchRequests"], 1,
        "{stdout}"
    );
    let rows = gw.usage_rows(1).await;
    assert!(rows.iter().any(|r| r.web_search_requests == 1), "{rows:#?}");
}
