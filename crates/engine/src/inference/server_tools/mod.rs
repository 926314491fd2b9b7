//! Anthropic server tools (`web_search`, `web_fetch`) run by the gateway for upstreams
//! that cannot run them (`server_tools` in the config).
//!
//! [`run`] takes the place of routing for such a request. Each leg's body is rewritten
//! ([`history`]): the server tools become client tools the model can call, the answer is
//! asked for whole. Then, step by step, the request is routed as any other (strategy,
//! health, failover); when the model calls one of those tools the gateway runs it
//! ([`search`]: a SearXNG instance; [`fetch`]: the page, under the outbound address rules),
//! appends the model's turn and a `tool_result` with the results as text, and asks again.
//! When the model answers without calling them (or the caps are reached: each tool's
//! `max_uses`, default 5, and [`MAX_STEPS`]), the caller gets one Anthropic message
//! ([`answer`]) in which each search or fetch appears as Anthropic shows its own, usage
//! summed over the steps with `server_tool_use` counting what ran, as JSON or as an SSE
//! stream as the caller asked. Searches are priced at `server_tools.web_search.price_per_1000_usd`
//! (carried to the recorder by `Routed::Answer::search_price`).
//!
//! A tool the request asks for that `server_tools` does not configure is refused with a
//! 400 naming the tool, the upstreams and the setting ([`not_configured`]), never passed on.

mod answer;
mod fetch;
mod history;
mod html;
mod search;

use std::time::Instant;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderValue, StatusCode, header};
use rand::Rng;
use serde_json::{Value, json};

use crate::config::shaping::ServerTool;
use crate::error::ApiError;
use crate::gateway::Gateway;
use crate::upstream::router::{self, Leg, Request, Routed};
use crate::upstream::strategy::Plan;
use crate::upstream::{Answer, Operation};
use answer::Block;
use history::Asked;

/// The most upstream calls one request makes (each after the previous one's tool calls).
pub const MAX_STEPS: usize = 10;
/// The largest step answer read.
const MAX_STEP_BYTES: usize = 32 << 20;

/// The server tools a Messages body's `tools` asks for, each once, in order.
pub fn requested(bytes: &[u8]) -> Vec<ServerTool> {
    #[derive(serde::Deserialize)]
    struct Body {
        #[serde(default)]
        tools: Vec<Tool>,
    }
    #[derive(serde::Deserialize)]
    struct Tool {
        #[serde(rename = "type")]
        kind: Option<String>,
    }
    let named = |n: &[u8]| memchr::memmem::find(bytes, n).is_some();
    if !named(b"web_search_") && !named(b"web_fetch_") {
        return Vec::new();
    }
    let Ok(body) = serde_json::from_slice::<Body>(bytes) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in body.tools {
        if let Some(tool) = t.kind.as_deref().and_then(ServerTool::of_type)
            && !out.contains(&tool)
        {
            out.push(tool);
        }
    }
    out
}

/// Whether the request `bytes` asks for server tools that none of `legs` runs (the
/// capability table, [`crate::upstream::model_caps`]): then [`run`] serves it.
pub(crate) fn needed(gw: &Gateway, bytes: &[u8], legs: &[Leg]) -> bool {
    // Without `server_tools` shaping has refused such requests: nothing to read.
    let config = &gw.config.server_tools;
    if config.web_search.is_none() && config.web_fetch.is_none() {
        return false;
    }
    let tools = requested(bytes);
    if tools.is_empty() {
        return false;
    }
    !legs.iter().any(|l| {
        let up = &gw.upstreams.list[l.upstream];
        let caps = crate::upstream::model_caps::lookup(
            &gw.config.routing.capabilities,
            &up.name,
            up.provider.as_str(),
            &l.upstream_model,
        );
        tools.iter().all(|t| caps.runs(*t))
    })
}

/// The refusal of `tool` when none of `upstreams` runs it and `server_tools` does not
/// configure it.
pub fn not_configured(tool: &str, upstreams: &[&str]) -> String {
    let setting = match tool {
        "web_search" => "server_tools.web_search.searxng_url (a SearXNG instance)",
        "web_fetch" => "server_tools.web_fetch (enabled: true)",
        _ => "server_tools",
    };
    let on = if upstreams.is_empty() {
        "no upstream".to_owned()
    } else {
        upstreams.join(", ")
    };
    format!(
        "the `{tool}` server tool cannot run on {on}, and the gateway does not run it itself: set {setting} in the gateway's configuration, or route this model to an upstream that runs it"
    )
}

/// Serves a request whose server tools the gateway runs (see the module doc). `legs` keep
/// their positions in every step, so `abandoned` and the answer's `leg` index them as the
/// caller's list.
pub(crate) async fn run(
    gw: &std::sync::Arc<Gateway>,
    request: &Request<'_>,
    plan: &Plan<'_>,
    legs: Vec<Leg>,
    not_configured: &[String],
    abandoned: &mut Vec<usize>,
) -> Routed {
    // `count_tokens` counts; nothing runs.
    if request.op != Operation::Messages {
        return router::route_with(
            &gw.upstreams,
            request,
            plan,
            legs,
            not_configured,
            abandoned,
        )
        .await;
    }
    let started = Instant::now();
    let names: Vec<&str> = legs
        .iter()
        .map(|l| gw.upstreams.list[l.upstream].name.as_str())
        .collect();
    let mut bodies = Vec::with_capacity(legs.len());
    for leg in &legs {
        match serde_json::from_slice::<Value>(&leg.body) {
            Ok(v) if v.is_object() => bodies.push(v),
            _ => return refused("the request body must be a JSON object".into(), "bad body"),
        }
    }
    let Some(first) = bodies.first() else {
        return Routed::Failed {
            error: ApiError::AllUpstreamsFailed { attempted: 0 },
            attempts: 0,
            route_reason: "server tools: no upstream".into(),
        };
    };
    let asked = history::asked(first);
    let config = &gw.config.server_tools;
    if let Some(a) = asked.iter().find(|a| !config.runs(a.tool)) {
        let why = format!("server tool {} not configured", a.tool.as_str());
        return refused(self::not_configured(a.tool.as_str(), &names), &why);
    }
    let mut context = format!("{}{}", first["system"], first["messages"]);
    for b in &mut bodies {
        history::rewrite(b, &asked);
    }
    let mut headers = request.headers.clone();
    // The steps' answers are read here: plain bytes.
    headers.remove(header::ACCEPT_ENCODING);
    let step_request = Request {
        op: request.op,
        query: request.query,
        headers: &headers,
        stream: false,
        caller: request.caller,
        affinity: request.affinity,
    };
    let mut state = State::default();
    let mut uses = vec![0u64; asked.len()];
    for step in 0..MAX_STEPS {
        let step_legs = legs
            .iter()
            .zip(&bodies)
            .map(|(l, b)| Leg {
                upstream: l.upstream,
                upstream_model: l.upstream_model.clone(),
                body: Bytes::from(serde_json::to_vec(b).unwrap_or_default()),
            })
            .collect();
        let routed = router::route_with(
            &gw.upstreams,
            &step_request,
            plan,
            step_legs,
            not_configured,
            abandoned,
        )
        .await;
        let (message, leg) = match step_answer(routed, &mut state).await {
            Ok(m) => m,
            // Nothing ran yet: the caller gets what routing gave, as any request would.
            Err(routed) if step == 0 => return routed,
            Err(_) => {
                state.stop_reason = "pause_turn".into();
                break;
            }
        };
        state.leg = leg;
        state.tokens.add(&message["usage"]);
        let content = message["content"].as_array().cloned().unwrap_or_default();
        let ours = |b: &Value| {
            (b["type"] == "tool_use")
                .then(|| asked.iter().position(|a| b["name"] == a.name.as_str()))
                .flatten()
        };
        let client_calls = content
            .iter()
            .any(|b| b["type"] == "tool_use" && ours(b).is_none());
        let calls: Vec<(usize, &Value)> = content
            .iter()
            .filter_map(|b| ours(b).map(|i| (i, b)))
            .collect();
        state.last = Some(message.clone());
        let now = gw.deps.clock.now();
        let outcomes = futures_util::future::join_all(calls.iter().map(|(i, b)| {
            uses[*i] += 1;
            let over = uses[*i] > asked[*i].max_uses;
            execute(gw, &asked[*i], &b["input"], &context, now, over)
        }))
        .await;
        let mut results = Vec::with_capacity(outcomes.len());
        let mut outcomes = outcomes.into_iter();
        for b in &content {
            if ours(b).is_none() {
                // The model's own blocks; thinking only from the first step, where it
                // leads the message.
                if step == 0
                    || !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking"))
                {
                    state.blocks.push(Block::Model(b.clone()));
                }
                continue;
            }
            let Some((block, text, failed)) = outcomes.next() else {
                continue;
            };
            context.push_str(&mentioned(&block));
            results.push(tool_result(&b["id"], text, failed));
            state.blocks.push(block);
        }
        if calls.is_empty() || client_calls {
            state.stop_reason = if client_calls {
                "tool_use".into()
            } else {
                message["stop_reason"]
                    .as_str()
                    .unwrap_or("end_turn")
                    .to_owned()
            };
            state.stop_sequence = message["stop_sequence"].clone();
            return finish(gw, request.stream, state, started);
        }
        for b in &mut bodies {
            if let Some(messages) = b["messages"].as_array_mut() {
                messages.push(json!({"role": "assistant", "content": content}));
                messages.push(json!({"role": "user", "content": results}));
            }
            history::relax_tool_choice(b);
        }
        // The caps end the loop with the results the model has not read yet.
        state.stop_reason = "pause_turn".into();
    }
    finish(gw, request.stream, state, started)
}

/// What the steps gathered.
#[derive(Default)]
struct State {
    blocks: Vec<Block>,
    tokens: answer::Tokens,
    /// The last step's answer (its id and model name the message).
    last: Option<Value>,
    leg: usize,
    attempts: usize,
    steps: usize,
    route_reason: String,
    stop_reason: String,
    stop_sequence: Value,
}

fn refused(message: String, why: &str) -> Routed {
    Routed::Failed {
        error: ApiError::InvalidRequest(message),
        attempts: 0,
        route_reason: why.to_owned(),
    }
}

/// One step's answer read whole: the message and the leg that gave it, or (as `Err`)
/// what routing gave when it is not a 2xx message.
async fn step_answer(routed: Routed, state: &mut State) -> Result<(Value, usize), Routed> {
    let (response, leg, attempts, route_reason) = match routed {
        Routed::Answer {
            response,
            leg,
            attempts,
            route_reason,
            ..
        } if response.status.is_success() => (response, leg, attempts, route_reason),
        other => {
            let (attempts, what) = match &other {
                Routed::Answer {
                    attempts, response, ..
                } => (*attempts, format!("HTTP {}", response.status.as_u16())),
                Routed::Retained {
                    attempts, status, ..
                } => (*attempts, format!("HTTP {}", status.as_u16())),
                Routed::Failed {
                    attempts, error, ..
                } => (*attempts, error.to_string()),
            };
            state.attempts += attempts;
            state.route_reason = format!(
                "{}; step {} failed: {what}",
                state.route_reason,
                state.steps + 1
            );
            tracing::warn!(step = state.steps + 1, failure = %what, "server tools: a step failed");
            return Err(other);
        }
    };
    state.attempts += attempts;
    state.steps += 1;
    state.route_reason = route_reason;
    let mut body = response.body;
    let mut buf = Vec::new();
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else {
            return Err(unreadable(state, "the upstream's answer broke off"));
        };
        if buf.len() + chunk.len() > MAX_STEP_BYTES {
            return Err(unreadable(state, "the upstream's answer is too large"));
        }
        buf.extend_from_slice(&chunk);
    }
    match serde_json::from_slice::<Value>(&buf) {
        Ok(v) if v["type"] == "message" || v["content"].is_array() => Ok((v, leg)),
        _ => Err(unreadable(state, "the upstream's answer is not a message")),
    }
}

fn unreadable(state: &State, why: &str) -> Routed {
    Routed::Failed {
        error: ApiError::UpstreamUnavailable(format!("server tools: {why}")),
        attempts: state.attempts,
        route_reason: format!("{}; {why}", state.route_reason),
    }
}

/// One call of a tool the gateway runs: the answer's block, the text the model reads, and
/// whether it failed.
async fn execute(
    gw: &Gateway,
    asked: &Asked,
    input: &Value,
    context: &str,
    now: chrono::DateTime<chrono::Utc>,
    over: bool,
) -> (Block, String, bool) {
    let config = &gw.config.server_tools;
    let id = server_tool_id();
    match asked.tool {
        ServerTool::WebSearch => {
            let query = input["query"].as_str().unwrap_or_default().to_owned();
            let outcome = match &config.web_search {
                _ if over => Err("max_uses_exceeded"),
                None => Err("unavailable"),
                Some(c) => search::search(c, config.allow_loopback, asked, &query).await,
            };
            let text = history::search_text(&query, &outcome);
            let failed = outcome.is_err();
            (Block::Search { id, query, outcome }, text, failed)
        }
        ServerTool::WebFetch => {
            let url = input["url"].as_str().unwrap_or_default().trim().to_owned();
            let outcome = match &config.web_fetch {
                _ if over => Err("max_uses_exceeded"),
                None => Err("unavailable"),
                _ if url.is_empty() => Err("invalid_tool_input"),
                _ if !in_context(context, &url) => Err("url_not_in_prior_context"),
                Some(c) => fetch::fetch(c, config.allow_loopback, asked, &url, now).await,
            };
            let text = history::fetch_text(&url, &outcome);
            let failed = outcome.is_err();
            (Block::Fetch { id, url, outcome }, text, failed)
        }
    }
}

/// Whether `url` was given in the conversation or by an earlier result (the model may not
/// make URLs up: they could carry what it read elsewhere).
fn in_context(context: &str, url: &str) -> bool {
    context.contains(url) || context.contains(url.trim_end_matches('/'))
}

/// The URLs a result makes fetchable.
fn mentioned(block: &Block) -> String {
    match block {
        Block::Search {
            outcome: Ok(hits), ..
        } => hits
            .iter()
            .map(|h| format!(" {} {}", h.url, h.snippet))
            .collect(),
        Block::Fetch {
            outcome: Ok(page), ..
        } => format!(" {} {}", page.url, page.text),
        _ => String::new(),
    }
}

fn tool_result(id: &Value, text: String, failed: bool) -> Value {
    let mut r = json!({"type": "tool_result", "tool_use_id": id, "content": text});
    if failed {
        r["is_error"] = json!(true);
    }
    r
}

fn random_suffix() -> String {
    rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(24)
        .map(char::from)
        .collect()
}

fn server_tool_id() -> String {
    format!("srvtoolu_{}", random_suffix())
}

/// The caller's answer: the message as JSON or as SSE.
fn finish(gw: &Gateway, stream: bool, state: State, started: Instant) -> Routed {
    let last = state.last.unwrap_or_default();
    let summary = answer::Summary {
        id: last["id"]
            .as_str()
            .map_or_else(|| format!("msg_{}", random_suffix()), str::to_owned),
        model: last["model"].as_str().unwrap_or_default().to_owned(),
        stop_reason: state.stop_reason,
        stop_sequence: state.stop_sequence,
        tokens: state.tokens,
    };
    let message = answer::message(&summary, &state.blocks);
    let (searches, fetches) = answer::counts(&state.blocks);
    let (body, content_type) = if stream {
        (answer::sse(&message), "text/event-stream")
    } else {
        (message.to_string(), "application/json")
    };
    let mut response = Answer::json(StatusCode::OK, Bytes::from(body));
    response
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if stream {
        response
            .headers
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    Routed::Answer {
        response,
        leg: state.leg,
        // Attempts as one request counts them: the first, plus every failover of a step
        // (`x-gatehouse-failover-count` stays the failovers).
        attempts: state.attempts.saturating_sub(state.steps.saturating_sub(1)),
        ttfb: started.elapsed(),
        route_reason: format!(
            "{}; the gateway ran web_search x{searches}, web_fetch x{fetches} over {} steps",
            state.route_reason, state.steps
        ),
        search_price: gw
            .config
            .server_tools
            .web_search
            .as_ref()
            .map(|s| s.price_per_search_nano),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requested_reads_the_tool_types_once() {
        let body = br#"{"model":"m","tools":[{"type":"web_search_20250305","name":"web_search"},
            {"name":"Bash"},{"type":"web_fetch_20250910","name":"web_fetch"},
            {"type":"web_search_20260209","name":"web_search"}],"messages":[]}"#;
        assert_eq!(
            requested(body),
            [ServerTool::WebSearch, ServerTool::WebFetch]
        );
        assert!(requested(br#"{"tools":[{"name":"web_search_x"}]}"#).is_empty());
        assert!(requested(b"not json web_search_").is_empty());
    }

    #[test]
    fn the_refusal_names_the_tool_the_upstreams_and_the_setting() {
        let m = not_configured("web_search", &["deepseek", "kimi"]);
        assert!(
            m.contains("`web_search`") && m.contains("deepseek, kimi"),
            "{m}"
        );
        assert!(m.contains("server_tools.web_search.searxng_url"), "{m}");
        assert!(not_configured("web_fetch", &[]).contains("server_tools.web_fetch"));
    }

    #[test]
    fn fetchable_urls_come_from_the_conversation_or_results() {
        let ctx = r#"[{"role":"user","content":"read https://example.com/a/ please"}]"#;
        assert!(in_context(ctx, "https://example.com/a/"));
        assert!(in_context(ctx, "https://example.com/a"));
        assert!(!in_context(ctx, "https://example.com/a/secret?data=x"));
        assert!(!in_context(ctx, "https://evil.example/"));
        assert!(server_tool_id().starts_with("srvtoolu_"));
    }
}
